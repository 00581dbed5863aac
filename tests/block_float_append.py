"""What the block-float fused-append tests share (tests/test_fused_append_bfp8.py and _bfp4.py): a
cache packed by ttnn's host packer, ttnn's update of it on the host (the values with the new rows
set, packed again), and the pin of a fused call against update-then-attend, bit for bit on the
output and byte for byte on the caches."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np

from bars import run_quiet
from ttnn_flashdecode import attention
from ttnn_flashdecode.op import tiles
from ttnn_flashdecode.op.append import reference_update
from ttnn_flashdecode.op.operation import to_numpy


@dataclasses.dataclass(frozen=True)
class BlockFloatAppend:
    """The helpers for one block-float cache dtype (``"bfloat8_b"`` or ``"bfloat4_b"``)."""

    dtype: str

    def cache(self, values):
        """``values`` packed by ttnn's host packer into a TILE host tensor of this dtype."""
        import ttnn

        return ttnn.Tensor(np.ascontiguousarray(values, np.float32), getattr(ttnn, self.dtype), layout=ttnn.TILE_LAYOUT)

    @staticmethod
    def q(rng, shape):
        """A bfloat16 ROW_MAJOR host Q of ``shape``."""
        import ttnn

        q = rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
        return ttnn.Tensor(q, ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)

    def bytes(self, tensor) -> np.ndarray:
        """The cache's tile bytes (exponent sections and data)."""
        return tiles.to_block_float_tile_bytes(tensor, self.dtype)

    def updated(self, cache, rows, positions, table=None, block_size=0):
        """ttnn's update of ``cache``, on the host: its values with the rows set, packed again."""
        values = tiles.block_float_values(cache, self.dtype)
        reference_update(values, rows, positions, table, block_size)
        return self.cache(values)

    def assert_fused_equals_update_then_attend(self, q, k, v, new_k, new_v, positions, *, table=None, block_size=0,
                                               **call):
        """The fused call's output bit for bit update-then-attend's, and the caller's caches, updated in
        place, byte for byte ttnn's update."""
        paged = {} if table is None else {"page_table_tensor": table}
        k_ref = self.updated(k, new_k, positions, table, block_size)
        v_ref = self.updated(v, new_v, positions, table, block_size)
        expected = run_quiet(attention, q, k_ref, v_ref, cur_pos=positions, **paged, **call)
        out = run_quiet(attention, q, k, v, cur_pos=positions, append_k=new_k, append_v=new_v, **paged, **call)
        np.testing.assert_array_equal(to_numpy(out), to_numpy(expected))  # bit for bit
        np.testing.assert_array_equal(self.bytes(k), self.bytes(k_ref))
        np.testing.assert_array_equal(self.bytes(v), self.bytes(v_ref))

    def case(self, seed, *, rows=1, batch=3, n_kv=2, n_q=8, head_dim=64, capacity=256):
        """Q, K and V caches of this dtype, and new K rows (3x larger) and V rows ``[rows, batch, n_kv, head_dim]``."""
        rng = np.random.default_rng(seed)
        q = self.q(rng, (1, 1, batch * rows, n_q * head_dim))
        k = self.cache(rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32))
        v = self.cache(rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32))
        new_k = rng.standard_normal((rows, batch, n_kv, head_dim), dtype=np.float32) * 3
        new_v = rng.standard_normal((rows, batch, n_kv, head_dim), dtype=np.float32)
        return q, k, v, new_k, new_v

    def assert_mla_append_latent_equals_update_then_attend(self, rng, new_rows, positions, head_dim=96, head_dim_v=64):
        """MLA on a latent of this dtype (V is K, one cache; ``new_rows(rng)`` the rows ``[1, 2, 1, head_dim]``,
        drawn after Q and the latent): the fused ``append_latent`` call bit for bit update-then-attend, the
        latent byte for byte ttnn's update."""
        import ttnn

        batch, n_q = 2, 16
        q = ttnn.Tensor(rng.standard_normal((1, batch, n_q, head_dim), dtype=np.float32).astype(ml_dtypes.bfloat16)
                        .astype(np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)
        latent = self.cache(rng.standard_normal((batch, 1, 128, head_dim), dtype=np.float32))
        new = new_rows(rng)
        updated = self.updated(latent, new, positions)
        call = dict(cur_pos=positions, q_layout="heads", head_dim_v=head_dim_v, split=2)
        expected = run_quiet(attention, q, updated, None, **call)
        out = run_quiet(attention, q, latent, None, append_latent=new, **call)
        np.testing.assert_array_equal(to_numpy(out), to_numpy(expected))
        np.testing.assert_array_equal(self.bytes(latent), self.bytes(updated))

    def assert_paged_append_through_a_shuffled_page_table(self, seed, edge_rows):
        """A paged cache of this dtype behind a shuffled page table (blocks of 64, split 2, an idle
        slot): the fused call against update-then-attend, K's new rows ``edge_rows(rng, shape)``."""
        rng = np.random.default_rng(seed)
        batch, n_kv, block_size, head_dim = 3, 2, 64, 64
        table = rng.permutation(batch * 4).reshape(batch, 4).astype(np.int32)
        q = self.q(rng, (1, 1, batch, 8 * head_dim))
        k = self.cache(rng.standard_normal((batch * 4, n_kv, block_size, head_dim), dtype=np.float32))
        v = self.cache(rng.standard_normal((batch * 4, n_kv, block_size, head_dim), dtype=np.float32))
        new_k = edge_rows(rng, (1, batch, n_kv, head_dim))
        new_v = rng.standard_normal((1, batch, n_kv, head_dim), dtype=np.float32)
        self.assert_fused_equals_update_then_attend(q, k, v, new_k, new_v, [70, -1, 191], table=table,
                                                    block_size=block_size, split=2)

    def assert_paged_dropin_append_equals_update_then_attend(self, seed):
        """The paged GQA drop-in (ttnn's call) with append_k / append_v on caches of this dtype."""
        import ttnn

        from ttnn_flashdecode.op import transformer

        rng = np.random.default_rng(seed)
        batch, n_kv, block_size, head_dim = 2, 2, 64, 64
        table = rng.permutation(batch * 2).reshape(batch, 2).astype(np.int32)
        q = ttnn.Tensor(rng.standard_normal((1, batch, 8, head_dim), dtype=np.float32).astype(ml_dtypes.bfloat16)
                        .astype(np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)
        k = self.cache(rng.standard_normal((batch * 2, n_kv, block_size, head_dim), dtype=np.float32))
        v = self.cache(rng.standard_normal((batch * 2, n_kv, block_size, head_dim), dtype=np.float32))
        new_k, new_v = (rng.standard_normal((1, batch, n_kv, head_dim), dtype=np.float32) for _ in range(2))
        positions = np.asarray([63, 100], np.int32)
        k_ref = self.updated(k, new_k, positions, table, block_size)
        v_ref = self.updated(v, new_v, positions, table, block_size)
        call = transformer.paged_scaled_dot_product_attention_decode
        expected = run_quiet(call, q, k_ref, v_ref, table, cur_pos_tensor=positions)
        out = run_quiet(call, q, k, v, table, cur_pos_tensor=positions, append_k=new_k, append_v=new_v)
        np.testing.assert_array_equal(to_numpy(out), to_numpy(expected))
        np.testing.assert_array_equal(self.bytes(k), self.bytes(k_ref))
        np.testing.assert_array_equal(self.bytes(v), self.bytes(v_ref))
