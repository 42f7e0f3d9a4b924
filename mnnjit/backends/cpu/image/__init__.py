"""Numba kernels of the image ops (resize, warps, color conversion, separable filters)."""
