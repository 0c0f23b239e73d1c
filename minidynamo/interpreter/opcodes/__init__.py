"""The opcode handlers, one mixin per family of instructions; each family's `AT_BREAK`
renders the instructions a graph can break at natively (at_break.py)."""
