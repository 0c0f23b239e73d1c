"""The symbolic interpreter: the translator's run loop (translator.py), the opcode handlers
by family (opcodes/), the operators on trackers (operators.py) and what the translator
offers the trackers (tracker_services.py)."""
