"""The Numba CPU backend (kernels are imported lazily: importing this package never imports numba)."""
