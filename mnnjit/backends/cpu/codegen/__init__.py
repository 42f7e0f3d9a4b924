"""Kernel source generation: fusion groups, groups with a fused resize producer, whole tiny plans."""
