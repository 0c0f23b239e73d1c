"""Triton kernels launched in a trace: the launch node and side table (capture.py), which
arguments a kernel writes (mutation.py), the fast replay of a launch (launcher.py,
resolve.py) and the launch program (program.py)."""
