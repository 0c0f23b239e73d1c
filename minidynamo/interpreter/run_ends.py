"""How an opcode handler ends the run loop of a frame: a return, or a generator's yield.
Below the opcode families and the generator trackers, which raise or catch them."""


class _Return(Exception):
    """Internal: RETURN_VALUE ends the run loop."""

    def __init__(self, value):
        self.value = value


class _Yield(Exception):
    """Internal: YIELD_VALUE suspends a generator's run loop (its stack and ip are kept)."""

    def __init__(self, value):
        self.value = value
