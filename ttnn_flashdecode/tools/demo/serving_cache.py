"""The demo's KV cache as a serving stack holds it: paged and/or block-float (``--paged``, ``--kv-dtype``).

The model keeps a contiguous bfloat16 cache ``[batch, n_kv_heads, capacity, head_dim]`` (the
float64 reference reads that one). :class:`ServingCache` wraps the attention callable so that
every call hands the op the same history the way tt-transformers / vLLM keep it: cut into
``block_size``-position blocks scattered over a block pool through a fresh random permutation
(ttnn's paged layout ``[blocks, n_kv_heads, block_size, head_dim]`` plus an int32 page table;
the pool's unowned blocks hold NaN, so a wrong page-table walk cannot go unnoticed), and/or
packed by ttnn into ``bfloat8_b`` / ``bfloat4_b`` host tensors.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ttnn_flashdecode.op.residency import KV_FORMATS, KV_TILE_BYTES

__all__ = ["ServingCache", "KV_DTYPES"]

KV_DTYPES = tuple(KV_FORMATS)
"""K/V cache dtypes the op reads: bfloat16, bfloat8_b, bfloat4_b."""

SPARE_BLOCKS = 2
"""Blocks of the pool nobody owns (NaN-filled)."""


class ServingCache:
    """``attention(q, k, v, **kw)`` with ``k``/``v`` re-laid-out on every call.

    Args:
        attention: the op (or the device adapter), called with the re-laid-out cache and, when
            paged, ``page_table_tensor=``.
        block_size: positions per cache block (a multiple of 32), or None for a contiguous cache.
        kv_dtype: one of :data:`KV_DTYPES`; block-float caches are packed by ttnn (host tensors).
        seed: seeds the block permutations.

    Raises:
        ValueError: an unknown ``kv_dtype`` or a block size that is not a positive multiple of 32.
    """

    def __init__(self, attention: Callable, block_size: int | None, kv_dtype: str = "bfloat16", seed: int = 0):
        if kv_dtype not in KV_DTYPES:
            raise ValueError(f"kv_dtype: expected one of {KV_DTYPES}, got {kv_dtype!r}")
        if block_size is not None and (block_size < 32 or block_size % 32):
            raise ValueError(f"block_size: expected a positive multiple of 32 positions, got {block_size}")
        self.attention = attention
        self.block_size = block_size
        self.kv_dtype = kv_dtype
        self._rng = np.random.default_rng(seed)

    @property
    def label(self) -> str:
        """What the op reads, e.g. ``"paged (block 64, random permutation) bfloat8_b"``."""
        layout = f"paged (block {self.block_size}, a random block permutation per call)" if self.block_size else "contiguous"
        return f"{layout} {self.kv_dtype}"

    @property
    def tile_bytes(self) -> int:
        """Bytes of one K/V tile in the cache's format."""
        return KV_TILE_BYTES[KV_FORMATS[self.kv_dtype]]

    @property
    def capacity_multiple(self) -> int:
        """The cache's capacity must be a multiple of this (whole blocks)."""
        return self.block_size or 32

    def __call__(self, q, k, v, **kwargs):
        k, v = np.asarray(k), np.asarray(v)
        if self.block_size:
            k, v, kwargs["page_table_tensor"] = self._paged(k, v)
        if self.kv_dtype != "bfloat16":
            import ttnn

            dtype = getattr(ttnn, self.kv_dtype)
            k, v = (ttnn.Tensor(np.ascontiguousarray(a, np.float32), dtype, layout=ttnn.TILE_LAYOUT) for a in (k, v))
        return self.attention(q, k, v, **kwargs)

    def _paged(self, k: np.ndarray, v: np.ndarray):
        batch, n_kv, capacity, head_dim = k.shape
        if capacity % self.block_size:
            raise ValueError(f"k: expected a capacity that is a multiple of the block size {self.block_size}, got {capacity}")
        per_user = capacity // self.block_size
        blocks = batch * per_user + SPARE_BLOCKS
        table = self._rng.permutation(blocks)[: batch * per_user].reshape(batch, per_user).astype(np.int32)
        paged = []
        for cache in (k, v):
            pool = np.full((blocks, n_kv, self.block_size, head_dim), np.nan, dtype=np.float32)
            blocked = np.asarray(cache, np.float32).reshape(batch, n_kv, per_user, self.block_size, head_dim)
            pool[table.reshape(-1)] = blocked.transpose(0, 2, 1, 3, 4).reshape(-1, n_kv, self.block_size, head_dim)
            paged.append(pool.astype(cache.dtype) if self.kv_dtype == "bfloat16" else pool)
        return paged[0], paged[1], table
