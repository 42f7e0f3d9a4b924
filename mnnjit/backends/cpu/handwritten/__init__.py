"""Hand-written kernels attached to registry ops (the registry and the per-area modules named *_ops.py)."""
