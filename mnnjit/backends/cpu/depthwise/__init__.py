"""Depthwise convolution kernels and the fused blocks built around them (expand+depthwise, depthwise+pointwise)."""
