"""Triton kernels used as test inputs."""
