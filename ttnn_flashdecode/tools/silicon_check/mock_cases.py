"""The op's real device path on a MOCK device: ``python -m ttnn_flashdecode.tools.silicon_check.mock_cases``.

Run by :func:`ttnn_flashdecode.tools.silicon_check.run` in a subprocess per architecture (tt-metal can
segfault on some misuse; the mock cluster is fixed once per process), with
``TT_METAL_MOCK_CLUSTER_DESC_PATH``, ``TT_METAL_RUNTIME_ROOT`` (the fake root) and
``TT_METAL_CACHE`` set, from a scratch folder. For every case it allocates real DRAM tensors on the
opened mock device and calls :func:`ttnn_flashdecode.attention`: validation, planning,
``TensorAccessorArgs`` of the real buffers, the descriptor and ``ttnn.generic_op``, whose host
pipeline JIT-builds the kernels and checks CBs against L1, runtime-arg counts, semaphores, cores
and code size. Nothing executes on a mock device (outputs are not checked: reads return zeros).

Prints one line per case, ``CASE {"name": ..., "ok": ..., "seconds": ..., "error": ...}``, then
exits 0 iff every case reached ``generic_op`` and returned.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time

import numpy as np

LINE_PREFIX = "CASE "


@dataclasses.dataclass(frozen=True)
class Case:
    """One call: shapes, then :func:`~ttnn_flashdecode.attention` keywords."""

    name: str
    batch: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    capacity: int
    call: dict
    q_rows_per_user: int = 1  # ROWS: rows; CHUNK: the chunk length
    cache_block_size: int = 0  # paged: positions per cache block (a device page table); 0: contiguous
    kv_dtype: str = "bfloat16"  # the K/V cache's ttnn dtype: bfloat16, bfloat8_b or bfloat4_b
    drop_in: bool = False  # through ttnn_flashdecode.transformer, Q [1, b, nh, dh] height-sharded in L1
    mask: bool = False  # is_causal=False with a device attn_mask [b, 1, nh, capacity] (bfloat16 TILE)
    mesh_shape: tuple[int, int] = (1, 8)  # MESH_CASES: the mock T3K's mesh; rows > 1: the batch split over rows
    context_parallel: bool = False  # MESH_CASES: the cache split by sequence over the chips (needs the fabric)
    values_from_keys: bool = False  # one cache tensor as K and V (MLA's latent: the reader reads no V)
    append: bool = False  # the fused cache append: append_k / append_v (append_latent with values_from_keys)
    sparse_k: int = 0  # sparse decode: a device int32 [b, k] index list per user (unsorted, padded with -1)
    sparse_heads: int = 1  # sparse decode's lists per user: n_kv_heads for [b, n_kv_heads, k] (a list per KV head)


#: Every request kind and both split paths (issue 11's list), at the shapes users run.
CASES = (
    Case("decode seed 8k (8/1 heads, d128, block 16)", 1, 8, 1, 128, 8192, dict(cur_pos=[8191], block_tiles=16)),
    Case("decode MiniCPM5-1B 8k (16/2 heads), scheduler split", 1, 16, 2, 128, 8192, dict(cur_pos=[8191])),
    Case("decode batch 32, GQA 4 (32/8 heads)", 32, 32, 8, 128, 2048, dict(cur_pos=list(range(0, 2048, 64)))),
    Case("decode forced split 7 (slices fit a block: max first)", 1, 8, 1, 128, 8192, dict(cur_pos=[8000], split=7)),
    Case("decode forced split 2 (slices span blocks: rescale)", 1, 8, 1, 128, 8192, dict(cur_pos=[8191], split=2)),
    Case("decode ragged batch, scheduler split", 4, 16, 2, 128, 8192, dict(cur_pos=[5, 70, 3000, 8191])),
    Case("ROWS 4 rows per user", 2, 16, 2, 128, 8192, dict(cur_pos=[4000, 8191], rows=4), q_rows_per_user=4),
    Case("CHUNK 20 positions from mid-tile 45", 1, 16, 2, 128, 8192, dict(chunk_start=45), q_rows_per_user=20),
    Case("decode head_dim 64", 1, 4, 2, 64, 1024, dict(cur_pos=[700])),
    Case("decode head_dim 80 (heads padded to 96 columns)", 1, 4, 2, 80, 1024, dict(cur_pos=[700])),
    Case("decode head_dim 256", 1, 4, 2, 256, 1024, dict(cur_pos=[700])),
    Case("decode head_dim 512", 1, 4, 1, 512, 1024, dict(cur_pos=[1000])),
    Case("decode HiFi2, bf16 DST, approximate exp", 1, 8, 1, 128, 2048, dict(cur_pos=[1500], compute_kernel_config="hifi2")),
    Case("paged decode batch 8, block 64, device page table", 8, 16, 2, 128, 2048,
         dict(cur_pos=list(range(100, 2048, 250))), cache_block_size=64),
    Case("paged decode 1100-entry table (block 32), scheduler split", 1, 16, 2, 64, 1100 * 32,
         dict(cur_pos=[1100 * 32 - 1]), cache_block_size=32),
    Case("paged CHUNK 20 from 45, block 128", 2, 16, 2, 128, 2048, dict(chunk_start=45), q_rows_per_user=20,
         cache_block_size=128),
    Case("decode bfloat8_b cache, scheduler split", 1, 16, 2, 128, 8192, dict(cur_pos=[8191]), kv_dtype="bfloat8_b"),
    Case("decode bfloat4_b cache, batch 32", 32, 32, 8, 128, 2048, dict(cur_pos=list(range(0, 2048, 64))),
         kv_dtype="bfloat4_b"),
    Case("drop-in paged bfloat8_b, Q and output height-sharded in L1", 8, 32, 8, 128, 4096,
         dict(cur_pos=list(range(7, 4096, 512))), cache_block_size=64, kv_dtype="bfloat8_b", drop_in=True),
    Case("drop-in contiguous, Q height-sharded, 40 heads (groups straddle a row tile)", 2, 40, 8, 64, 1024,
         dict(cur_pos=[5, 1000]), drop_in=True),
    Case("paged bfloat8_b cache, block 64, ROWS 3", 4, 16, 2, 128, 4096, dict(cur_pos=[100, 1000, 2500, 4095], rows=3),
         q_rows_per_user=3, cache_block_size=64, kv_dtype="bfloat8_b"),
    # Issue 20: sliding windows, attention sinks, non-causal masks (every score modifier compiled in).
    Case("gpt-oss layer: window 128 + sinks, paged, scheduler split", 4, 16, 2, 64, 4096,
         dict(cur_pos=[5, 300, 2000, 4095], sliding_window_size=128, attention_sink=[0.5 * h for h in range(16)]),
         cache_block_size=64),
    Case("ROWS 4 with window 40 + sinks (window masks on two tiles)", 2, 8, 2, 128, 2048,
         dict(cur_pos=[100, 2047], rows=4, sliding_window_size=40, attention_sink=[1.0] * 8), q_rows_per_user=4),
    Case("drop-in paged, window 512 + sinks, Q height-sharded", 8, 32, 8, 128, 4096,
         dict(cur_pos=list(range(7, 4096, 512)), sliding_window_size=512, attention_sink=[[0.25]] * 32),
         cache_block_size=64, drop_in=True),
    Case("drop-in Gemma sliding layer: circular cache of 1024 slots, window 512, bfloat8_b", 4, 16, 8, 128, 2048,
         dict(cur_pos=[5, 1023, 1024, 50_000], sliding_window_size=512, cache_position_modulo=1024),
         cache_block_size=64, kv_dtype="bfloat8_b", drop_in=True),
    Case("paged blocks of 16 positions (tt-metal #37927's shape), bfloat16", 1, 32, 8, 128, 512, dict(cur_pos=[256]),
         cache_block_size=16),
    Case("64 Q heads on one KV head, scheduler split: one request of two row tiles, combine a round per row tile, "
         "paged", 2, 64, 1, 128, 1024, dict(cur_pos=[5, 1000]), cache_block_size=64),
    # Issue 20 item 6 / issue 22: one request of several Q row tiles per KV group, its K/V read once.
    Case("64 Q heads on one KV head, unsplit: one request of two row tiles, paged", 2, 64, 1, 128, 1024,
         dict(cur_pos=[5, 1000], split=1), cache_block_size=64),
    Case("MLA-like: 128 Q heads on one KV head, d512 (four row tiles), sinks + return_lse, an idle slot, unsplit", 2,
         128, 1, 512, 1024, dict(cur_pos=[-1, 1000], split=1, attention_sink=[0.5] * 128, return_lse=True)),
    Case("MLA-like: 128 Q heads on one KV head, d512 (four row tiles), sinks + return_lse, scheduler split (four "
         "combine rounds)", 1, 128, 1, 512, 4096, dict(cur_pos=[4000], attention_sink=[0.5] * 128, return_lse=True)),
    Case("spec verify (spec_multi_pos_tiles): 2 sequences x 4 candidates of 32 heads on one KV head, one scan per "
         "sequence (row-tile users), paged, sinks + return_lse, an idle candidate, scheduler split", 8, 32, 1, 128, 2048,
         dict(cur_pos=[1000, 1001, 1003, -1, 5, 40, 33, 2047], q_layout="heads", users_per_table_row=4,
              attention_sink=[0.5] * 32, return_lse=True), cache_block_size=64),
    Case("drop-in 64 Q heads on one KV head, Q height-sharded, max_cores_per_head_batch 1 (two row tiles)", 4, 64, 1,
         128, 2048, dict(cur_pos=[5, 100, 1000, 2047], max_cores_per_head_batch=1), drop_in=True),
    Case("non-causal with a device attn_mask (Whisper), scheduler split", 2, 20, 20, 64, 1536, dict(), mask=True),
    Case("non-causal paged with attn_mask and sinks, scheduler split", 2, 16, 2, 128, 2048,
         dict(attention_sink=[0.0] * 16), cache_block_size=64, mask=True),
    # Issue 21: logit softcap (a compute stage) and chunked-local attention (a start like the window's).
    Case("Gemma 2 layer: logit softcap 50 + window 256, paged bfloat8_b, scheduler split", 4, 16, 8, 128, 4096,
         dict(cur_pos=[5, 300, 2000, 4095], sliding_window_size=256, logit_softcap=50.0), cache_block_size=64,
         kv_dtype="bfloat8_b"),
    Case("Llama 4 layer: attention chunk 1024, ROWS 4 across a chunk edge, sinks, paged, scheduler split", 2, 16, 2,
         128, 8192, dict(cur_pos=[1025, 8191], rows=4, attention_chunk_size=1024, attention_sink=[0.5] * 16),
         q_rows_per_user=4, cache_block_size=64),
    Case("drop-in paged: softcap 30 + chunk 2048, bf16 DST, Q height-sharded", 8, 32, 8, 128, 4096,
         dict(cur_pos=list(range(7, 4096, 512)), logit_softcap=30.0, attention_chunk_size=2048,
              compute_kernel_config="hifi2"), cache_block_size=64, drop_in=True),
    # Issue 21 item 3: return_lse (the compute kernel's LSE stage, the writer's LSE operand).
    Case("return_lse: ragged batch with an idle slot, sinks + softcap 50 + window 1024, scheduler split", 4, 16, 2,
         128, 8192, dict(cur_pos=[-1, 70, 3000, 8191], attention_sink=[0.5] * 16, logit_softcap=50.0,
                         sliding_window_size=1024, return_lse=True)),
    Case("drop-in paged return_lse, bfloat8_b, Q height-sharded, scheduler split", 8, 32, 8, 128, 4096,
         dict(cur_pos=list(range(7, 4096, 512)), return_lse=True), cache_block_size=64, kv_dtype="bfloat8_b",
         drop_in=True),
    # Issue 22: MLA's shapes (DeepSeek-V3: 128 Q heads on one 576-wide latent, K = V = the latent; the
    # MLA drop-in cuts the output to 512 columns with ttnn.slice, which the mock cannot build).
    Case("MLA DeepSeek-V3: 128 Q heads on one d576 latent (K = V), paged bfloat8_b, scheduler split", 1, 128, 1, 576,
         4096, dict(cur_pos=[4095]), cache_block_size=64, kv_dtype="bfloat8_b", values_from_keys=True),
    Case("MLA DeepSeek-V3: batch 4, 128 Q heads on one d576 latent, bfloat16", 4, 128, 1, 576, 2048,
         dict(cur_pos=[0, 31, 32, 2047]), values_from_keys=True),
    Case("MLA drop-in: 128 Q heads on one d576 latent (K = V), Q height-sharded, unsplit", 2, 128, 1, 576, 1024,
         dict(cur_pos=[100, 1023], max_cores_per_head_batch=1), drop_in=True, values_from_keys=True),
    # Issue 35 item 4: accurate_scores (a float32 S CB, each score rounded to TF32 in the score stage).
    Case("accurate_scores: ROWS 2 across an attention chunk of 64, sinks + softcap 50 + return_lse, paged, "
         "scheduler split", 4, 8, 2, 64, 2048,
         dict(cur_pos=[63, 64, 130, 2047], rows=2, attention_chunk_size=64, attention_sink=[30.0] * 8,
              logit_softcap=50.0, return_lse=True, accurate_scores=True), q_rows_per_user=2, cache_block_size=64),
    Case("accurate_scores: non-causal with a device attn_mask (S rounded again after it), bfloat8_b, scheduler split",
         2, 16, 2, 128, 2048, dict(accurate_scores=True), kv_dtype="bfloat8_b", mask=True),
    # Issue 37 part 2: the KV-cache append fused into the op (kernels/attention_append.hpp).
    Case("fused append: paged decode, ragged batch with an idle slot, scheduler split", 4, 16, 2, 128, 4096,
         dict(cur_pos=[5, -1, 2000, 4095]), cache_block_size=64, append=True),
    Case("fused append: ROWS 3 per user across a tile edge, forced split 3", 2, 16, 2, 128, 2048,
         dict(cur_pos=[33, 2047], rows=3, split=3), q_rows_per_user=3, append=True),
    Case("fused append: MLA append_latent, 128 Q heads on one d576 latent (K = V), paged, scheduler split", 1, 128, 1,
         576, 4096, dict(cur_pos=[4000]), cache_block_size=64, values_from_keys=True, append=True),
    # Issue 37: DeepSeek-V3.2's sparse decode (the reader gathers the listed rows; a device list is masked on device).
    Case("MLA DeepSeek-V3.2 sparse: top-2048 of a 32k d576 latent (K = V), 128 Q heads, scheduler split", 1, 128, 1,
         576, 32768, dict(cur_pos=[32767]), values_from_keys=True, sparse_k=2048),
    Case("sparse GQA 16/2 heads, d128, paged block 64, k 100 (not a multiple of 32), an idle slot", 4, 16, 2, 128,
         4096, dict(cur_pos=[100, -1, 2500, 4095]), cache_block_size=64, sparse_k=100),
    Case("sparse bfloat8_b MLA: top-512 of an 8k d576 latent (K = V), 128 Q heads, paged, scheduler split", 1, 128, 1,
         576, 8192, dict(cur_pos=[8000]), cache_block_size=64, kv_dtype="bfloat8_b", values_from_keys=True,
         sparse_k=512),
    Case("sparse lists per KV head: GQA 16/2 heads, d128, bfloat8_b, k 100, an idle slot", 3, 16, 2, 128, 2048,
         dict(cur_pos=[90, -1, 2047]), kv_dtype="bfloat8_b", sparse_k=100, sparse_heads=2),
    Case("fused append: bfloat8_b paged ROWS 2 across a tile edge, an idle slot, scheduler split", 3, 16, 2, 128, 2048,
         dict(cur_pos=[32, -1, 2047], rows=2), q_rows_per_user=2, cache_block_size=64, kv_dtype="bfloat8_b",
         append=True),
    Case("fused append: MLA append_latent on a bfloat8_b d576 latent (K = V), 128 Q heads, paged, scheduler split", 1,
         128, 1, 576, 4096, dict(cur_pos=[4000]), cache_block_size=64, kv_dtype="bfloat8_b", values_from_keys=True,
         append=True),
    Case("fused append: bfloat4_b paged ROWS 2 across a tile edge, an idle slot, scheduler split", 3, 16, 2, 128, 2048,
         dict(cur_pos=[32, -1, 2047], rows=2), q_rows_per_user=2, cache_block_size=64, kv_dtype="bfloat4_b",
         append=True),
)


#: ``silicon-check --quick`` (CI's tier): on Blackhole only these cases, which between them build every
#: compile-time feature of the kernels once (split max-first and rescale, CHUNK, HiFi2 / approximate
#: exp / bf16 DST, bfloat4_b, the circular and 16-position paged caches, row tiles with sinks and LSE,
#: the attention mask, chunked-local ROWS, softcap, values from keys, height-sharded drop-ins,
#: accurate_scores);
#: Wormhole, whose NCRISC runs kernels from a 16 KiB IRAM, runs every case in both tiers.
QUICK_CASE_NAMES = (
    "decode forced split 7 (slices fit a block: max first)",
    "decode forced split 2 (slices span blocks: rescale)",
    "CHUNK 20 positions from mid-tile 45",
    "decode HiFi2, bf16 DST, approximate exp",
    "decode bfloat4_b cache, batch 32",
    "drop-in Gemma sliding layer: circular cache of 1024 slots, window 512, bfloat8_b",
    "paged blocks of 16 positions (tt-metal #37927's shape), bfloat16",
    "MLA-like: 128 Q heads on one KV head, d512 (four row tiles), sinks + return_lse, an idle slot, unsplit",
    "non-causal paged with attn_mask and sinks, scheduler split",
    "Llama 4 layer: attention chunk 1024, ROWS 4 across a chunk edge, sinks, paged, scheduler split",
    "drop-in paged: softcap 30 + chunk 2048, bf16 DST, Q height-sharded",
    "MLA DeepSeek-V3: 128 Q heads on one d576 latent (K = V), paged bfloat8_b, scheduler split",
    "MLA DeepSeek-V3.2 sparse: top-2048 of a 32k d576 latent (K = V), 128 Q heads, scheduler split",
    "sparse bfloat8_b MLA: top-512 of an 8k d576 latent (K = V), 128 Q heads, paged, scheduler split",
    "sparse lists per KV head: GQA 16/2 heads, d128, bfloat8_b, k 100, an idle slot",
    "spec verify (spec_multi_pos_tiles): 2 sequences x 4 candidates of 32 heads on one KV head, one scan per "
    "sequence (row-tile users), paged, sinks + return_lse, an idle candidate, scheduler split",
    "accurate_scores: ROWS 2 across an attention chunk of 64, sinks + softcap 50 + return_lse, paged, "
    "scheduler split",
    "fused append: paged decode, ragged batch with an idle slot, scheduler split",
    "fused append: bfloat8_b paged ROWS 2 across a tile edge, an idle slot, scheduler split",
    "fused append: bfloat4_b paged ROWS 2 across a tile edge, an idle slot, scheduler split",
)


def quick_cases() -> tuple[Case, ...]:
    """The cases of :data:`QUICK_CASE_NAMES`, in :data:`CASES` order."""
    return tuple(case for case in CASES if case.name in QUICK_CASE_NAMES)


def _tensor(device, array: np.ndarray, dtype: str = "bfloat16"):
    import ttnn

    return ttnn.Tensor(np.ascontiguousarray(array, dtype=np.float32), getattr(ttnn, dtype), layout=ttnn.TILE_LAYOUT,
                       device=device, mem_config=ttnn.DRAM_MEMORY_CONFIG)


def run_case(device, case: Case, rng: np.random.Generator):
    """Build the case's device tensors and call the op; returns the output tensor."""
    import ttnn

    from ttnn_flashdecode import attention

    padded = -(-case.head_dim // 32) * 32  # a device Q holds whole-tile heads
    q = rng.standard_normal((1, 1, case.batch * case.q_rows_per_user, case.n_q_heads * padded), dtype=np.float32)
    call = dict(case.call)
    if call.get("q_layout") == "heads":  # ttnn's [1, b, nh, dh]
        q = rng.standard_normal((1, case.batch, case.n_q_heads, padded), dtype=np.float32)
    if case.cache_block_size:
        per_user = case.capacity // case.cache_block_size
        table_rows = case.batch // call.get("users_per_table_row", 1)  # spec candidates share their group's row
        blocks = table_rows * per_user
        k = rng.standard_normal((blocks, case.n_kv_heads, case.cache_block_size, case.head_dim), dtype=np.float32)
        table = rng.permutation(blocks).reshape(table_rows, per_user).astype(np.int32)
        call["page_table_tensor"] = ttnn.Tensor(table, ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT, device=device,
                                                mem_config=ttnn.DRAM_MEMORY_CONFIG)
    else:
        k = rng.standard_normal((case.batch, case.n_kv_heads, case.capacity, case.head_dim), dtype=np.float32)
    if call.get("compute_kernel_config") == "hifi2":
        call["compute_kernel_config"] = ttnn.ComputeConfigDescriptor(
            math_fidelity=ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=False, math_approx_mode=True)
    cache = _tensor(device, k, case.kv_dtype)
    values = cache if case.values_from_keys else _tensor(device, k, case.kv_dtype)
    if case.mask:
        mask = np.where(rng.random((case.batch, 1, case.n_q_heads, case.capacity)) < 0.25, -np.inf, 0.0)
        call.update(is_causal=False, attn_mask=_tensor(device, mask))
    if case.append:  # ttnn's update input [P, b, nkv, dh], bfloat16 TILE in DRAM
        rows = _tensor(device, rng.standard_normal((call.get("rows", 1), case.batch, case.n_kv_heads, case.head_dim)))
        call.update(append_latent=rows) if case.values_from_keys else call.update(append_k=rows, append_v=rows)
    if case.sparse_k:  # unsorted positions of each user's 0..cur_pos, the rest -1 (a list per KV head: its own)
        lists = np.full((case.batch, case.sparse_heads, case.sparse_k), -1, np.int32)
        for user, position in enumerate(call["cur_pos"]):
            for head in range(case.sparse_heads):
                live = rng.permutation(position + 1)[:case.sparse_k - 1 - head]
                lists[user, head, :len(live)] = live
        lists = lists if case.sparse_heads > 1 else lists[:, 0]
        call["sparse_indices"] = ttnn.Tensor(lists, ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT, device=device,
                                             mem_config=ttnn.DRAM_MEMORY_CONFIG)
    if case.drop_in:
        return _drop_in(device, case, cache, values, call, rng)
    return attention(_tensor(device, q), cache, values, **call)


def _drop_in(device, case: Case, cache, values, call: dict, rng: np.random.Generator):
    """The tt-transformers call: Q ``[1, b, nh, dh]`` height-sharded in L1 (one user per core, as
    ``nlp_create_qkv_heads_decode`` leaves it), positions as a device tensor, output sharded like Q."""
    import ttnn

    from ttnn_flashdecode.op import transformer

    grid = device.compute_with_storage_grid_size()
    sharded = ttnn.create_sharded_memory_config(
        shape=(-(-case.n_q_heads // 32) * 32, case.head_dim),
        core_grid=ttnn.num_cores_to_corerangeset(case.batch, grid, row_wise=True), strategy=ttnn.ShardStrategy.HEIGHT,
        orientation=ttnn.ShardOrientation.ROW_MAJOR, use_height_and_width_as_shard_shape=True)
    q = rng.standard_normal((1, case.batch, case.n_q_heads, case.head_dim), dtype=np.float32)
    q = ttnn.Tensor(q, ttnn.bfloat16, layout=ttnn.TILE_LAYOUT).to(device, sharded)
    positions = ttnn.Tensor(np.asarray(call.pop("cur_pos"), np.int32), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT,
                            device=device, mem_config=ttnn.DRAM_MEMORY_CONFIG)
    if "max_cores_per_head_batch" in call:  # ttnn's program config, the device's grid
        call["program_config"] = ttnn.SDPAProgramConfig(
            compute_with_storage_grid_size=(grid.x, grid.y), q_chunk_size=0, k_chunk_size=0, exp_approx_mode=False,
            max_cores_per_head_batch=call.pop("max_cores_per_head_batch"))
    table = call.pop("page_table_tensor", None)
    if table is not None:
        return transformer.paged_scaled_dot_product_attention_decode(q, cache, values, table, cur_pos_tensor=positions,
                                                                     memory_config=sharded, **call)
    return transformer.scaled_dot_product_attention_decode(q, cache, values, cur_pos_tensor=positions,
                                                           memory_config=sharded, **call)


#: Issue 23: tensor parallelism on a mock T3K (``mock_clusters/t3k.yaml``), a ``ttnn.MeshDevice`` of
#: 1x8. Each case's shapes are the MODEL's: Q heads and KV heads split evenly over the 8 chips by
#: ``ttnn.shard_tensor_to_mesh_mapper`` (tt-transformers' layout), positions and page tables
#: replicated; one ``ttnn.generic_op`` with a ``ttnn.MeshProgramDescriptor`` launches every chip. A
#: case whose ``mesh_shape`` has several rows also splits the batch over them (data parallel: Q's
#: users, the cache's users and the positions sharded over the rows, heads over the columns).
MESH_CASES = (
    Case("t3k 1x8 mesh: Llama-3.1-70B decode batch 32 (64/8 heads, 8/1 per chip)", 32, 64, 8, 128, 4096,
         dict(cur_pos=list(range(0, 4096, 128)))),
    Case("t3k 1x8 mesh: paged bfloat8_b, block 64, replicated page table (32/8 heads)", 8, 32, 8, 128, 4096,
         dict(cur_pos=list(range(7, 4096, 512))), cache_block_size=64, kv_dtype="bfloat8_b"),
    Case("t3k 1x8 mesh: drop-in paged, Q [1, 8, 8, 128] height-sharded in L1 per chip (64/8 heads)", 8, 64, 8, 128,
         4096, dict(cur_pos=list(range(7, 4096, 512))), cache_block_size=64, drop_in=True),
    Case("t3k 1x8 mesh: ROWS 4, window 512 + per-chip sinks (a [32, 32] sink tensor sharded by heads)", 2, 32, 8, 128,
         4096, dict(cur_pos=[1000, 4095], rows=4, sliding_window_size=512, attention_sink=[0.5 * (h % 5) for h in range(32)]),
         q_rows_per_user=4),
    Case("t3k 2x4 mesh: batch 16 over the rows (data parallel), 32/8 heads over the columns", 16, 32, 8, 128, 2048,
         dict(cur_pos=list(range(0, 2048, 128))), mesh_shape=(2, 4)),
    # Context parallel (FABRIC_1D): the local positions on device, the op with return_lse, the all-gathers.
    # The merge's ttnn ops are not in the case: their kernels do not JIT-build with this check's stand-in
    # compiler (docs/multi_chip.md, "Context parallel on the mock T3K").
    Case("t3k 1x8 mesh: context parallel partials + all_gather, Llama-3.1-70B 64/8 heads, 8 x 4096 positions bfp8",
         8, 64, 8, 128, 4096, dict(cur_pos=[0, 100, 4095, 4096, 9000, 20000, 32767, -1]), kv_dtype="bfloat8_b",
         context_parallel=True),
)


def run_mesh_case(mesh, case: Case, rng: np.random.Generator):
    """The model's tensors sharded over ``mesh`` by heads (Q on its head dim, K/V on dim 1), positions
    and page table replicated; calls the op (or the drop-in) once, then again through the fast path.
    Returns the output, checked to be sharded over every chip with one chip's shape."""
    import ttnn

    from ttnn_flashdecode import attention
    from ttnn_flashdecode.op import transformer

    if case.context_parallel:
        return _context_parallel_case(mesh, case, rng)
    chips = mesh.get_num_devices()
    padded = -(-case.head_dim // 32) * 32
    data_parallel = case.mesh_shape[0] > 1

    def mapper(dim, batch_dim):  # heads (dim) over the columns; with several rows the users (batch_dim) over them
        return ttnn.create_mesh_mapper(mesh, ttnn.MeshMapperConfig(batch_dim if data_parallel else None, dim))

    def sharded(array, dim, dtype="bfloat16", memory=ttnn.DRAM_MEMORY_CONFIG, batch_dim=None):
        host = ttnn.Tensor(np.ascontiguousarray(array, dtype=np.float32), getattr(ttnn, dtype), layout=ttnn.TILE_LAYOUT)
        return ttnn.distribute_tensor(host, mapper(dim, batch_dim), mesh).to(mesh, memory)

    def replicated(array, batch_dim=None):  # over the heads; with several rows, users split over them
        host = ttnn.Tensor(np.asarray(array, np.int32), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)
        return ttnn.distribute_tensor(host, mapper(None, batch_dim), mesh).to(mesh, ttnn.DRAM_MEMORY_CONFIG)

    call = dict(case.call)
    positions = replicated(call.pop("cur_pos"), batch_dim=0)
    if "attention_sink" in call:  # the model's sinks in ttnn's [nh, 32] layout, each chip its heads' rows
        sinks = np.zeros((case.n_q_heads, 32), np.float32)
        sinks[:, 0] = call["attention_sink"]
        call["attention_sink"] = sharded(sinks, 0)
    if case.cache_block_size:
        per_user = case.capacity // case.cache_block_size
        k = rng.standard_normal((case.batch * per_user, case.n_kv_heads, case.cache_block_size, case.head_dim),
                                dtype=np.float32)
        call["page_table_tensor"] = replicated(rng.permutation(case.batch * per_user).reshape(case.batch, per_user))
    else:
        k = rng.standard_normal((case.batch, case.n_kv_heads, case.capacity, case.head_dim), dtype=np.float32)
    cache = sharded(k, 1, case.kv_dtype, batch_dim=None if case.cache_block_size else 0)
    values = cache if case.values_from_keys else sharded(k, 1, case.kv_dtype, batch_dim=None if case.cache_block_size else 0)
    local_heads = case.n_q_heads // chips
    if case.drop_in:
        config = ttnn.create_sharded_memory_config(
            shape=(-(-local_heads // 32) * 32, case.head_dim),
            core_grid=ttnn.num_cores_to_corerangeset(case.batch, mesh.compute_with_storage_grid_size(), row_wise=True),
            strategy=ttnn.ShardStrategy.HEIGHT, orientation=ttnn.ShardOrientation.ROW_MAJOR,
            use_height_and_width_as_shard_shape=True)
        q = sharded(rng.standard_normal((1, case.batch, case.n_q_heads, case.head_dim), dtype=np.float32), 2,
                    memory=config)
        table = call.pop("page_table_tensor")

        def run():
            return transformer.paged_scaled_dot_product_attention_decode(q, cache, values, table, cur_pos_tensor=positions,
                                                                         memory_config=config, **call)
    else:
        q = sharded(rng.standard_normal((1, 1, case.batch * case.q_rows_per_user, case.n_q_heads * padded),
                                        dtype=np.float32), 3, batch_dim=2)

        def run():
            return attention(q, cache, values, cur_pos_tensor=positions, **call)
    out, again = _twice_one_mesh_launch_each(run)  # the second through the fast path (a cached launch)
    shards = ttnn.get_device_tensors(out)
    if len(shards) != chips or [list(s.shape) for s in shards] != [list(q.shape)] * chips:
        raise AssertionError(f"output: expected {chips} shards of {list(q.shape)}, got {[list(s.shape) for s in shards]}")
    if len(ttnn.get_device_tensors(again)) != chips:
        raise AssertionError("the fast path's output is not on every chip")
    return out


def _twice_one_mesh_launch_each(run):
    """``(run(), run())`` (the second through the op's fast path), checking that each call made ONE
    ``ttnn.generic_op`` with a ``MeshProgramDescriptor``."""
    import ttnn

    launched = []
    generic_op = ttnn.generic_op

    def counting(tensors, program):
        launched.append(type(program).__name__)
        return generic_op(tensors, program)

    ttnn.generic_op = counting
    try:
        results = run(), run()
    finally:
        ttnn.generic_op = generic_op
    if launched != ["MeshProgramDescriptor"] * 2:
        raise AssertionError(f"expected one generic_op with a MeshProgramDescriptor per call, got {launched}")
    return results


def _context_parallel_case(mesh, case: Case, rng: np.random.Generator):
    """Each chip ``case.capacity`` positions of every user (the cache sharded by SEQUENCE, dim 2), Q and
    the GLOBAL positions replicated; :func:`~ttnn_flashdecode.context_parallel_attention` with
    ``merge=False`` twice (the second through the op's fast path): local positions in ttnn ops, ONE
    ``generic_op`` per call, ``ttnn.all_gather`` of out and lse. Returns the gathered outputs."""
    import ttnn

    from ttnn_flashdecode import context_parallel_attention

    chips = mesh.get_num_devices()
    padded = -(-case.head_dim // 32) * 32
    k = rng.standard_normal((case.batch, case.n_kv_heads, case.capacity * chips, case.head_dim), dtype=np.float32)
    host = ttnn.Tensor(k, getattr(ttnn, case.kv_dtype), layout=ttnn.TILE_LAYOUT)
    cache = ttnn.distribute_tensor(host, ttnn.shard_tensor_to_mesh_mapper(mesh, 2), mesh).to(mesh, ttnn.DRAM_MEMORY_CONFIG)
    q = ttnn.Tensor(rng.standard_normal((1, 1, case.batch, case.n_q_heads * padded), dtype=np.float32), ttnn.bfloat16,
                    layout=ttnn.TILE_LAYOUT, device=mesh, mem_config=ttnn.DRAM_MEMORY_CONFIG)  # replicated
    positions = ttnn.Tensor(np.asarray(case.call["cur_pos"], np.int32), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT,
                            device=mesh, mem_config=ttnn.DRAM_MEMORY_CONFIG)
    (outs, lses), _ = _twice_one_mesh_launch_each(
        lambda: context_parallel_attention(q, cache, cache, cur_pos_tensor=positions, merge=False))
    for name, tensor, width in (("outs", outs, case.n_q_heads * padded), ("lses", lses, case.n_q_heads)):
        shards = ttnn.get_device_tensors(tensor)
        want = [chips, 1, case.batch, width]
        if len(shards) != chips or any(list(s.shape) != want for s in shards):
            raise AssertionError(f"{name}: expected {chips} shards of {want}, got {[list(s.shape) for s in shards]}")
    return outs, lses


def main(argv: list[str] | None = None) -> int:
    """Run :data:`CASES` on a one-chip mock device, or with ``--mesh`` :data:`MESH_CASES` on a
    mock meshes of their ``mesh_shape`` (1x8, 2x4: the mock T3K, ``t3k.yaml``), one open at a time."""
    import ttnn

    args = sys.argv[1:] if argv is None else argv
    mesh = "--mesh" in args
    if mesh:  # one mesh open at a time, each (shape, fabric) group's cases together, the fabric's last
        groups = list(dict.fromkeys((case.mesh_shape, case.context_parallel) for case in MESH_CASES))
        failed = 0
        for shape, fabric in sorted(groups, key=lambda group: group[1]):
            if fabric:  # ttnn.all_gather needs the fabric, configured before the mesh opens
                ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D)
            failed += _run_cases(ttnn.open_mesh_device(ttnn.MeshShape(*shape)), ttnn.close_mesh_device,
                                 [case for case in MESH_CASES if (case.mesh_shape, case.context_parallel) == (shape, fabric)],
                                 run_mesh_case)
            if fabric:
                ttnn.set_fabric_config(ttnn.FabricConfig.DISABLED)
        return 1 if failed else 0
    cases = quick_cases() if "--quick" in args else CASES
    only = os.environ.get("SILICON_CHECK_ONLY")  # a development aid: only the cases whose name contains it
    cases = [case for case in cases if only in case.name] if only else cases
    return 1 if _run_cases(ttnn.open_device(device_id=0), ttnn.close_device, cases, run_case) else 0


def _run_cases(device, close, cases, runner) -> int:
    """Run ``cases`` on ``device`` (then ``close`` it), printing a CASE line each; returns the failures."""
    rng = np.random.default_rng(0)
    failed = 0
    try:
        for case in cases:
            start = time.perf_counter()
            record = {"name": case.name}
            try:
                out = runner(device, case, rng)
                if isinstance(out, tuple):  # return_lse: (out, lse)
                    out, lse = out
                    record["lse_shape"] = list(lse.shape)
                record.update(ok=True, shape=list(out.shape))
            except Exception as error:  # reported, not raised: the other cases still run
                failed += 1
                lines = [line for line in str(error).splitlines() if line.strip() and not line.startswith(" ---")]
                record.update(ok=False, error=f"{type(error).__name__}: " + " | ".join(lines[:8])[:2000])
            record["seconds"] = round(time.perf_counter() - start, 2)
            print(LINE_PREFIX + json.dumps(record), flush=True)
    finally:
        close(device)
    return failed


if __name__ == "__main__":
    sys.exit(main())
