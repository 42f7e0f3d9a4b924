"""Backends: the numpy reference evaluator, the Numba CPU backend, OpenCL and NPU delegates."""
