"""The Numba CPU backend: fused kernels generated from fusion groups, hand-written kernels, kernel cache.

Importing this package does not import numba; :mod:`.jit` does, on the first compiled kernel.
"""
