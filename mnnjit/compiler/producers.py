"""Producer fusion: an opaque op computed row by row inside the elementwise group that consumes it.

The image preprocessing of the quick start, ``(cv.resize(img, (224, 224))[..., ::-1].astype(float32) - mean)
* scale``, is a uint8 bilinear resize followed by a channel flip and a fused elementwise group. When the
resize (and the flip) feed only that group, the plan drops their steps and the group reads the resize's
*input* instead: the backend computes one resized row at a time into a small buffer and runs the group's
elementwise body on it while it is in cache (``backends/cpu/codegen/resize_groups.py``), so the 224x224 uint8
intermediate and its channel-flipped view never exist. A backend that cannot run such a group (or a
layout it does not cover) computes the producer chain first and runs the group as usual.

Recognised producers: ``resize_image`` with linear interpolation, uint8, HWC with 3 channels, optionally
followed by a ``slice`` that reverses the channel axis (and keeps everything else).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ops.image_geometry import INTER_LINEAR, INTER_LINEAR_EXACT
from ..ops.registry import get as get_op


@dataclass(frozen=True)
class Producer:
    """A group leaf computed by a fused producer: leaf ``leaf`` of the group is the resize of the group's
    leaf value at that index (the resize input), channel-flipped when ``flip``."""

    leaf: int
    chain: tuple[int, ...]  # traced positions of the fused nodes (resize first, then the flip if any)
    size: tuple[int, int]
    scale: tuple[float, float]
    interp: int
    flip: bool


def _is_channel_flip(node) -> bool:
    """Whether a ``slice`` node reverses the last axis of a 3-D input and keeps the rest (checked by running
    its reference on an index array of the input's shape)."""
    shape = node.inputs[0].shape
    if len(shape) != 3 or node.shape != shape:
        return False
    idx = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    got = get_op("slice").ref([idx], node.attrs)
    return got.shape == shape and np.array_equal(got, idx[..., ::-1])


def _resize_ok(node) -> bool:
    x = node.inputs[0]
    return (node.attrs.get("interp") in (INTER_LINEAR, INTER_LINEAR_EXACT) and node.dtype == np.uint8
            and x.dtype == np.uint8 and len(x.shape) == 3 and x.shape[2] == 3 and x.shape[1] >= 2
            and len(node.shape) == 3 and node.shape[2] == 3 and x.size + 8 < 1 << 31)


def find_producer(group, order: list, cin: list, consumers: list, roots: set, leafish: list) -> Producer | None:
    """The fusable producer feeding ``group`` (a fusion group of the plan), or None."""
    if group.spec.reduce is not None or len(group.shape) != 3:
        return None
    inside = set(group.members) | {group.root}
    for k, q in enumerate(group.leaves):
        chain = [q]
        flip = False
        node = order[q]
        if node.op == "slice":
            if leafish[q] or q in roots or not set(consumers[q]) <= inside or not _is_channel_flip(node):
                continue
            flip = True
            q = cin[q][0]
            chain.insert(0, q)
            node = order[q]
            ok_consumers = set(consumers[q]) <= {chain[1]}
        else:
            ok_consumers = set(consumers[q]) <= inside
        if node.op != "resize_image" or leafish[q] or q in roots or not ok_consumers or not _resize_ok(node):
            continue
        if tuple(node.shape) != tuple(group.shape):
            continue
        return Producer(k, tuple(chain), tuple(node.attrs["size"]), tuple(node.attrs["scale"]),
                        int(node.attrs["interp"]), flip)
    return None
