"""GEMM-based kernels: the register-blocked micro-kernel, convolutions as GEMMs, Winograd, classifier GEMVs."""
