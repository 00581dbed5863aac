"""The split-K combine's share of the kernel contract (``kernels/attention_protocol.hpp``
"Split-K semaphores", docs/design.md "Split-K"): its semaphore ids, its partials and its tree. A
split request's slices send their partials up a binary tree to slice 0, which normalises.
Re-exported by :mod:`ttnn_flashdecode.op.protocol`, the host half of the contract."""

from __future__ import annotations

import enum

__all__ = ["Semaphore", "SEMAPHORES_PER_CORE", "semaphore_ids", "partial_pages", "tree_levels", "tree_children",
           "tree_parent"]


class Semaphore(enum.IntEnum):
    """Split-K semaphore ids, on every core of a split program (``attention_protocol.hpp``)."""

    QUERY_READY = 0  # on slices 1..: the parent (combine tree) staged Q and CONST
    FETCHED = 1  # on a parent: children that copied its Q and CONST pages
    INBOX_READY = 2  # on a child: its parent reserved both its inboxes
    MAX_READY = 3  # on slices 1..: the parent (combine tree) holds the request's max
    MAX_FETCHED = 4  # on a parent: children that copied the request's max
    ARRIVED = 5  # on a parent, + inbox slot (5 .. 5 + tree_levels - 1): 1 = the child's max landed, 2 = its partial


SEMAPHORES_PER_CORE = 16
"""Program semaphores a core can hold in tt-metal 0.81 (the installed libtt_metal's "No free L1
semaphore slot (per-core 16 limit)"); ``semaphore_ids(protocol.MAX_SPLIT)`` stays within it."""


def semaphore_ids(max_split: int) -> list[int]:
    """Semaphore ids a split program needs: five handshakes and one arrival per inbox slot (at most
    ``5 + 8 = 13`` for :data:`~ttnn_flashdecode.op.protocol.MAX_SPLIT`, within :data:`SEMAPHORES_PER_CORE`)."""
    return list(range(Semaphore.ARRIVED + tree_levels(max_split)))


def partial_pages(dim_tiles: int) -> int:
    """Pages of one split-K partial: O (dim_tiles), L (both relative to the request's max)."""
    return dim_tiles + 1


def tree_levels(count: int) -> int:
    """Depth of the split-K combine tree over ``count`` slices, ``ceil(log2(count))``; also the
    inbox slots a core needs (0 when not split)."""
    return max(count - 1, 0).bit_length()


def tree_children(index: int, count: int) -> list[int]:
    """Slices whose partials slice ``index`` of ``count`` combines, in inbox-slot order.

    Slice ``i`` receives from ``i + 2**k`` for every level ``k`` below ``log2(lowbit(i))`` (every
    level for slice 0) with ``i + 2**k < count``; the child at level ``k`` lands in slot ``k``.
    """
    limit = tree_levels(count) if index == 0 else (index & -index).bit_length() - 1
    return [index + (1 << level) for level in range(limit) if index + (1 << level) < count]


def tree_parent(index: int) -> tuple[int, int]:
    """``(parent, slot)`` that slice ``index`` > 0 sends its partial to.

    Raises:
        ValueError: ``index`` is 0 (the root sends nowhere) or negative.
    """
    if index <= 0:
        raise ValueError(f"index: expected a slice > 0 (slice 0 is the root), got {index}")
    low = index & -index
    return index - low, low.bit_length() - 1
