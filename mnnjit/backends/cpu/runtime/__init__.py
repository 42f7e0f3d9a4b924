"""The CPU runtime: Numba setup, OpenMP waiting policy, kernel cache and compile lock, bound launches, BLAS."""
