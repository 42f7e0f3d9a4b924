"""Models: a .mnn ``Net`` translated into registry-op graph nodes (the same nodes the front ends build)."""
