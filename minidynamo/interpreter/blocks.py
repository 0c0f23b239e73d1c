"""3.10's block stack, as the translator keeps it (3.11+ has an exception table instead):
one class per kind of block, each with its handler's index and the stack depth it
restores. Layer: interpreter (imports nothing of the package)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    target: int | None  # the handler's instruction index
    depth: int  # the value stack's depth when the block was entered


class TryBlock(Block):
    """SETUP_FINALLY: a try statement's handler."""


class WithBlock(Block):
    """SETUP_WITH: a with statement's exit (an exception reaching it is not modelled)."""


class HandlerBlock(Block):
    """An except handler entered in the trace: leaving it restores the saved exception."""
