"""CPU backend: Numba kernels (imported lazily)."""
