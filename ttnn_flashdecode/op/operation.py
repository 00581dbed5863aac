"""``attention()``: flash-decode GQA attention against a KV cache, on a card or the host emulator.

Three request kinds (DESIGN.md §3, §5; ``docs/request_kinds.md``): decode (``cur_pos=``, one
query row per user), ROWS (``cur_pos=`` and ``rows=P``, P consecutive query rows per user, e.g.
draft tokens to verify) and CHUNK (``chunk_start=``, a causal chunk of up to 32 consecutive
positions per sequence: prefill).

Lifecycle (FlashInfer's plan/run split): the first call for a given (shapes, block size, compute
config, grid) builds a :class:`~ttnn_flashdecode.op.program_factory.Plan`, its
``ttnn.ProgramDescriptor`` and its WORK table (each core's requests; uploaded once per device);
all are cached. A call writes only its tensors' addresses into the descriptor's common runtime args
and launches -- through ``ttnn.generic_op`` on a device, through :mod:`ttnn_flashdecode.emulator`
otherwise. On a device, a call whose tensor specs and options match an earlier validated one (and
whose positions and page table are device tensors) skips validation and planning altogether
(:mod:`ttnn_flashdecode.op.fast_path`).

Trace-safe: positions are not in the program. The kernels read them at run time from the
POSITIONS operand (``cur_pos_tensor``, one int32 per user, as ttnn's own decode op), and the plan
assumes every request at full capacity, so cores, CBs, compile-time and runtime args and
``custom_program_hash`` depend on shapes, dtypes, compute config, grid and addresses only: a
program captured with ``ttnn.begin_trace_capture`` replays correctly for any positions written to
the same tensor.
"""


from __future__ import annotations

import dataclasses
import inspect

from collections.abc import Sequence

import ttnn

from ttnn_flashdecode.op import fast_path, latent, mesh
from ttnn_flashdecode.op.launch import last_report, run_on_device, run_on_emulator, to_numpy
from ttnn_flashdecode.op.plan import DEFAULT_ARCH, DEFAULT_BLOCK_TILES, plan_program, program_for
from ttnn_flashdecode.op.score_inputs import lse_option, score_options
from ttnn_flashdecode.op.shape import ComputeOptions
from ttnn_flashdecode.op.options import as_bool, validate_options
from ttnn_flashdecode.op.validate import IDLE, validate_inputs

__all__ = ["attention", "cached_launch", "last_report", "to_numpy", "plan_program", "program_for", "DEFAULT_BLOCK_TILES",
           "DEFAULT_ARCH", "IDLE"]


def attention(
    q,
    k,
    v,
    *,
    cur_pos: Sequence[int] | None = None,
    cur_pos_tensor=None,
    page_table_tensor=None,
    chunk_start: int | Sequence[int] | None = None,
    rows: int | None = None,
    scale: float | None = None,
    block_tiles: int | None = None,
    q_layout: str = "rows",
    compute_kernel_config=None,
    memory_config=None,
    split: int | None = None,
    max_split: int | None = None,
    grid=None,
    backend: str = "auto",
    sliding_window_size: int | None = None,
    attention_sink=None,
    is_causal: bool = True,
    attn_mask=None,
    cache_position_modulo: int | None = None,
    users_per_table_row: int = 1,
    batch_invariant: bool = False,
    logit_softcap: float | None = None,
    attention_chunk_size: int | None = None,
    return_lse: bool = False,
    head_dim_v: int | None = None,
):
    """Flash-decode GQA attention against a KV cache: decode, several rows per user, or a causal chunk.

    Q head ``h`` uses KV head ``h // (n_q_heads // n_kv_heads)``; every query row attends to
    positions ``0..p`` of its user's K/V, ``p`` its own position. Three request kinds:

    * **decode** (``cur_pos=``): one query row per user, at position ``cur_pos[b]``. One request
      per (user, KV group); the KV cache is read once per group.
    * **ROWS** (``cur_pos=`` and ``rows=P``): ``P`` consecutive query rows per user, the last at
      ``cur_pos[b]`` (row ``j`` of user ``b`` is position ``cur_pos[b] - P + 1 + j``), e.g. draft
      tokens to verify or several new tokens of one user. One request per (user, KV group) serves
      all ``P`` rows of all its Q heads: K/V read once.
    * **CHUNK** (``chunk_start=``): prefill of a chunk of ``C`` (1..32) consecutive positions per
      sequence, causal: row ``r`` (position ``chunk_start[b] + r``) attends to ``0..chunk_start[b]
      + r``. The chunk's own K/V must already be in the cache at ``chunk_start .. chunk_start +
      C - 1``. One request per (sequence, Q head).

    Each request runs on one core (or is cut into split-K slices over several) with an online
    softmax.

    **Multi-chip** (``docs/multi_chip.md``): device tensors on a multi-chip ``ttnn.MeshDevice`` run
    SPMD, each device the single-device call on its shards (ttnn gives a mesh tensor one shard's
    shape; every shape below is per device), launched by ONE ``ttnn.generic_op`` with a
    ``ttnn.MeshProgramDescriptor``; the output is a mesh tensor distributed like ``q``. Tensor
    parallel as tt-transformers shards it: Q heads and KV heads split evenly over the devices,
    positions and page tables replicated; users may also be split over mesh rows. A sink tensor
    sharded over the mesh gives each device its heads' sinks. Host multi-device tensors
    (``ttnn.from_host_shards``) run device by device on the emulator
    (:func:`~ttnn_flashdecode.op.mesh.run_host_mesh`): ``k`` and ``v`` must then be host mesh
    tensors of as many shards as ``q``; ``cur_pos_tensor``, ``page_table_tensor``, ``attn_mask`` and
    ``attention_sink`` may be (one shard per device) or not (the same for every device).

    Parameters:
        q: ``[1, 1, batch * R, n_q_heads * head_dim]``, activation layout, ``R`` query rows per
            user (1 for decode, ``rows`` for ROWS, the chunk length ``C`` for CHUNK); rows ``b * R
            .. b * R + R - 1`` are user ``b``'s, in position order. On a device: bfloat16, TILE
            layout, DRAM interleaved, whole-tile heads (``n_q_heads * ceil(head_dim / 32) * 32``
            columns, each head zero-padded to whole tiles; the output likewise). On the host: a numpy array (float32 or
            ``ml_dtypes.bfloat16``) or a host ``ttnn.Tensor``. With ``q_layout="heads"`` (decode
            only): ``[1, batch, n_q_heads, head_dim]``, ttnn's decode layout (on a device also L1
            height-sharded, as ``nlp_create_qkv_heads_decode`` leaves it). A ``ttnn.bfloat8_b`` /
            ``ttnn.bfloat4_b`` Q (TILE) is accepted as ttnn's decode op accepts it: converted to
            bfloat16 first (``ttnn.typecast`` on a device, ``ttnn.to_dtype`` on the host; exact,
            every block-float value is a bfloat16 value), and the output comes back in Q's dtype.
        k, v: KV cache ``[batch, n_kv_heads, capacity, head_dim]``, same kind as ``q`` (numpy
            arrays and host tensors mix); with ``page_table_tensor``, a paged cache
            ``[cache_blocks, n_kv_heads, block_size, head_dim]`` (ttnn's paged layout, ``block_size``
            a multiple of 32, or 16 with a bfloat16 cache). ttnn tensors may be bfloat16, ``ttnn.bfloat8_b`` or
            ``ttnn.bfloat4_b`` (TILE; block-float tiles of 1088 / 576 bytes, unpacked on the fly;
            numpy arrays are read as bfloat16); on a device DRAM interleaved. Tiles past the last live one are never
            read, and the slots past a request's position in its last live tile are zeroed in L1
            before compute, so anything there (NaN, inf: a recycled cache) never reaches the
            output; the positions a row attends must hold finite values.
        cur_pos: decode and ROWS: one int per user, the position of the user's last query row,
            ``0 <= cur_pos[b] < capacity`` (ROWS: ``>= rows - 1``), or -1 for an idle batch slot
            (no K/V read; its output rows are zero). Uploaded as a POSITIONS tensor: the same
            path as ``cur_pos_tensor``. ``None`` for CHUNK.
        cur_pos_tensor: decode and ROWS, instead of ``cur_pos``: the positions as a tensor the
            kernels read at run time, as ttnn's own op takes them -- trace-safe: one captured
            program serves every position written to it. On a device: int32, ROW_MAJOR, DRAM
            interleaved, ``batch`` entries (ttnn's ``cur_pos_tensor``); the host never reads it,
            so the kernels clamp an entry outside ``-1 .. capacity - 1`` into the cache (below -1:
            idle) rather than read outside it. On the emulator: a numpy int32 array or a host
            int32 ``ttnn.Tensor``, shape ``[batch]``, validated like ``cur_pos``.
        page_table_tensor: a paged cache's page table, int32 ``[batch, blocks_per_user]``:
            user ``b``'s positions ``i * block_size .. (i + 1) * block_size - 1`` live in cache
            block ``page_table_tensor[b][i]`` (``capacity = blocks_per_user * block_size``). The
            reader maps each position tile through it on device, a 256-entry chunk at a time
            (any table length), so a captured trace replays with new tables too. On a device:
            int32, ROW_MAJOR, DRAM interleaved (ttnn's ``page_table_tensor``); the host never reads
            it, and an entry outside ``0 .. cache_blocks - 1`` is never read (its tiles read as
            zeros; the reader reports it). On the emulator: a numpy int32 array or a host int32
            ``ttnn.Tensor``; the entries a call reads (a user's blocks up to its position) must be
            blocks of the cache; later entries may hold anything (e.g. -1). Blocks may be shared.
        chunk_start: CHUNK: the chunk's first position, one int for every sequence or one per
            sequence; ``0 <= chunk_start[b] <= capacity - C``. ``None`` (default) otherwise.
        rows: ROWS: query rows per user ``P``, ``1 <= P`` and ``P * (n_q_heads // n_kv_heads)
            <= 32``. ``None`` (default) for decode and CHUNK.
        scale: query scale, a finite positive number; default ``1/sqrt(head_dim)`` of the real head_dim.
        block_tiles: position tiles per K/V block (residency); default: the largest <= 16 that
            fits L1 and whose double block divides the cache's tiles.
        compute_kernel_config: ``ttnn.ComputeConfigDescriptor`` / ttnn compute config /
            :class:`~ttnn_flashdecode.op.shape.ComputeOptions`; default HiFi4 with fp32
            DST accumulation.
        memory_config: the output's memory config: DRAM interleaved (default) or, with
            ``q_layout="heads"``, L1 height-sharded (whole tile rows a shard, no more shards than
            cores), on a device and on the emulator alike (there the shards sit in the emulated
            cores' L1); anything else raises ValueError.
        split: split-K slices per request. ``None`` (default): the scheduler cuts long requests
            so every core of the grid gets about the same live tiles (short requests stay whole);
            ``1``: never split; ``k``: cut every request into ``k`` slices (some may be empty).
        max_split: most split-K slices (cores) per request, ``1..255`` (ttnn's
            ``max_cores_per_head_batch``); ``None`` (default): as many as the grid and L1 allow.
        grid: the cores the program may use. ``None`` (default): the device's whole compute grid
            (on the emulator the emulated device's, 8x8 on Wormhole); ``(x, y)`` or a
            ``ttnn.CoreCoord``: cores ``(0, 0) .. (x - 1, y - 1)`` (ttnn's
            ``compute_with_storage_grid_size``); a ``ttnn.CoreRangeSet`` or a sequence of logical
            ``(x, y)`` cores: exactly those (ttnn's ``sub_core_grids``). Must lie within the
            device's grid.
        backend: ``"auto"`` (device tensors -> device, otherwise emulator), ``"device"`` or
            ``"emulator"``.
        q_layout: ``"rows"`` (default, the activation layout above) or ``"heads"`` (decode: Q and
            the output ``[1, batch, n_q_heads, head_dim]``, read and written in place).
        sliding_window_size: ``W``, a positive int, or ``None`` (default: no window). The query row
            at position ``p`` attends only ``max(0, p + 1 - W) .. p`` (every kind, paged or not;
            Gemma's and gpt-oss's sliding-window layers). Only the window's position tiles are read
            (DRAM bytes follow ``W``, not ``p``), split-K slices cover only them, and the window's
            start is derived on device from the positions, so a captured trace stays valid; ``W``
            is part of the program. Cache slots before a row's window never reach its output
            (NaN there is fine); a paged table's entries before the window are never read.
        attention_sink: per Q head ``h`` a logit ``s_h`` (gpt-oss's sinks) that joins every row's
            softmax denominator and has no value: ``out = sum_j e^(S_j) V_j / (sum_j e^(S_j) +
            e^(s_h))``, ``S_j`` the scaled scores. In score units, as the model holds them (not
            divided by ``scale``: ttnn's drop-ins take ttnn's scaled form). A numpy array or
            sequence ``[n_q_heads]`` / ``[n_q_heads, 1]``, or ttnn's ``[n_q_heads, 32]`` layout
            (column 0), or a ttnn.Tensor of those (read back once per call: sinks are weights);
            rounded to bfloat16. The running max includes the sink, so a sink far above (or below)
            every score stays finite.
        is_causal: ``False``: decode in which every query row attends every position of the cache
            (ttnn's non-causal decode, e.g. Whisper's cross-attention); no ``cur_pos``,
            ``cur_pos_tensor``, ``chunk_start``, ``rows`` or window.
        attn_mask: with ``is_causal=False``, an additive mask in score units, ``[B, 1, n_q_heads,
            capacity]`` or ``[1, B, n_q_heads, capacity]`` (``B`` 1: one mask for every user, or the
            batch): a numpy array, a host tensor or (on a card) a bfloat16 TILE DRAM tensor. Any
            values: entries below -1e30 (``-inf`` included) and NaN count as -1e30, above 1e30 as
            1e30, so a row with any position left attends only those, and a fully masked row
            weighs every position alike (the mean of V; never NaN). Read once per K block, only the
            rows of the request's heads.
        cache_position_modulo: ``M``, with ``page_table_tensor``: a circular cache (ttnn's, for
            a sliding-window layer that keeps only its last ``M`` positions; Gemma's bounded
            sliding cache). Positions stay logical (any ``p`` below 2**29); position ``L`` lives in
            slot ``L % M`` of the user's page-table row. ``M`` is a positive multiple of the block
            size, at most the page table's capacity; the window defaults to ``M`` and may be
            smaller. Only the page-table lookup wraps (in the reader, per position tile), so the
            window's start, masks and trace safety are the sliding window's.
        users_per_table_row: ``g``, with ``page_table_tensor``: consecutive users share one
            page-table row (user ``b`` reads row ``b // g``; the table has ``batch / g`` rows), e.g.
            the candidates of one speculative group (the drop-in's ``spec_multi_pos_tiles``). With
            ``q_layout="heads"``, 32 Q heads (one row tile) on one KV head and no window, chunk or
            mask, a group's ``g`` users are one request that reads the group's cache ONCE, each
            user keeping its own position (docs/design.md "Row-tile users"); otherwise each user
            reads the K/V its own position needs.
        batch_invariant: ``True``: a request's output bits depend only on its own Q, K/V,
            position and options, never on the batch size, its slot, the other users or their
            positions: every request runs unsplit (or at the caller's ``split``) with the block a
            lone request of its shape would get, its blocks in position order on one core. A
            split slice needs a core of its own, so any fixed split > 1 stops fitting the grid at
            some batch; unsplit always fits. Cost (modelled, n150, MiniCPM5-1B, bench): nothing
            once batch x KV heads fills the grid (batch 32: 1110 us at 8k either way); at batch 1
            a 13x longer call (1110 us against the scheduler's 85 us at 8k, 2 of 64 cores busy).
            No extra DRAM bytes. Default False (the scheduler balances the batch over the grid).
        logit_softcap: ``c``, a number > 0 (float or int) in ``[2**-64, 2**64]``, or ``None``
            (default: no cap). Every score becomes ``c * tanh(s / c)``, ``s = scale * q . k`` (score
            units, unitless), BEFORE the causal, window, chunk and attention masks and the sinks (FA3's
            ``softcap``, FlashInfer's ``logits_soft_cap``, Gemma 2's 50, Grok's 30); a sink logit is
            not capped. On device a stage of the compute kernel: times ``1 / c``, the LLK's tanh
            (``tanh_tile``), times ``c``, in DST (fp32 with the default ``fp32_dest_acc_en``), so a
            score far past the cap saturates at ``+-c``. Part of the program (a compile-time arg).
        attention_chunk_size: ``C`` positions, a positive multiple of 32, or ``None`` (default):
            chunked-local attention (Llama 4's, FA3's ``attention_chunk``): the row at position ``p``
            attends only ``floor(p / C) * C .. p`` (every kind, paged or not; ROWS and CHUNK rows
            each from their own chunk). With ``sliding_window_size`` the later of the two starts.
            Only the chunk's position tiles are read (DRAM bytes follow ``C``, not ``p``; a paged
            table's entries before the chunk are never read, and NaN there never reaches the
            output); the start is derived on device from the positions (trace-safe); ``C`` is part
            of the program. With a window and several rows per user, ``C`` must be 32 or the window
            at least ``C + 31``.
        return_lse: ``True``: also return each row's log-sum-exp (FlashInfer's ``return_lse``; FA3's
            and FlashMLA's ``softmax_lse``): ``lse = log(sum_j e^(S_j) [+ e^(s_h)])``, natural log, over
            the positions the row attends, ``S_j`` its FINAL scores (scale applied, then the logit cap,
            then the causal / window / chunk / attention masks), plus the sink ``s_h`` when given, so
            ``out = sum_j e^(S_j - lse) V_j``. Computed on the normalising core from the float32
            running max and sum (``M + log L``; no bfloat16 step after the scores), so its error is the
            bfloat16 scores' (``q``, ``k`` and ``scale * q`` rounded as the output sees them), not a
            bfloat16 round-off of the LSE. Needs ``fp32_dest_acc_en`` (the default). Merge partial
            results with :func:`~ttnn_flashdecode.merge_attention_states`. Default False.
        head_dim_v: multi-head latent attention (MLA, DeepSeek-V3): V's head_dim, ``1..head_dim``.
            ``v`` None: V is ``k``'s first ``head_dim_v`` columns (the latent cache, K ``[b, 1, s,
            576]``, V its first 512); else ``v`` ``[..., head_dim_v]`` like ``k``. Each head's output
            is then ``head_dim_v`` wide (:mod:`~ttnn_flashdecode.op.latent`: how it runs and what it
            reads). ``None`` (default): V is ``v``, as wide as K.

    Returns:
        The shape of ``q`` (``[1, 1, batch * R, n_q_heads * head_dim]``, row for row; with
        ``q_layout="heads"`` ``[1, batch, n_q_heads, head_dim]``) and of its kind: a device tensor
        (bfloat16 TILE, in ``memory_config``), a host ``ttnn.Tensor`` (bfloat16 ROW_MAJOR), or a
        numpy array of ``q``'s dtype. With ``return_lse=True`` a pair ``(out, lse)``: ``lse`` float32,
        ``[1, 1, batch * R, n_q_heads]`` (row ``b * R + j``, Q head ``h``: the output row's) or, with
        ``q_layout="heads"``, ``[1, batch, n_q_heads]``; a numpy float32 array for numpy inputs, a host
        float32 ROW_MAJOR ``ttnn.Tensor`` for host ones, a device float32 ROW_MAJOR DRAM tensor on a
        device. An idle slot's (position -1) rows are ``-inf`` (an empty softmax; its output rows are 0).

    Raises:
        TypeError: an input is neither a ttnn.Tensor nor a numpy array; none of ``cur_pos``,
            ``cur_pos_tensor`` and ``chunk_start`` is given; ``cur_pos_tensor`` is not int32; ``cur_pos`` is not a sequence of ints; ``chunk_start`` is
            not an int or a sequence of ints.
        ValueError: shapes disagree (``q`` rows vs batch x rows per user, ``k`` vs ``v``, width
            not a multiple of head_dim, on a device of the tile-padded head), the GQA ratio is not an integer or exceeds 32 (decode: is not a multiple of 32), both
            ``cur_pos`` and ``chunk_start`` (or ``cur_pos`` and ``cur_pos_tensor``, or ``rows``
            or ``cur_pos_tensor`` with ``chunk_start``) are given, ``cur_pos_tensor`` or
            ``page_table_tensor`` has the wrong length, shape, layout, memory or storage (device vs
            host), a paged block size that is neither 16 nor a multiple of 32 (16 with a block-float cache), a page-table entry the call
            reads that is not a block of the cache, K and V of different dtypes,
            ``q_layout="heads"`` with ``rows`` or ``chunk_start`` or a Q that is not
            ``[1, batch, n_q_heads, head_dim]``,
            ``rows`` x GQA ratio exceeds 32, a chunk longer than 32, a position is negative or
            past capacity (ROWS: below ``rows - 1``; CHUNK: the chunk runs past capacity), a cache
            whose capacity is not a whole number of double blocks (its last positions' padded
            window would leave it; any position), head_dim or block_tiles does not fit L1 (on a
            device: what its L1 allocator leaves beside L1 tensors and ``l1_small_size``), a split
            larger than the grid or the reducer's L1 inbox allows, more requests than the grid's
            work-row capacity (21 requests a core), a ``grid`` outside the device's grid or ``max_split``
            outside 1..255, device tensors that are not bfloat16 (K/V: or block-float) / TILE /
            DRAM interleaved (Q and output of the heads layout: or L1 height-sharded) or live on
            different devices (on a mesh: an operand on another mesh or not on all its devices; on an
            emulated mesh: ``k``/``v`` not host mesh tensors of ``q``'s shard count, or a device's
            call refused, named ``mesh device i of D``), a bad backend or memory_config. All raised
            before anything reaches a device. ``logit_softcap`` outside ``[2**-64, 2**64]`` (0,
            negative, NaN, inf); ``attention_chunk_size`` <= 0 or not a multiple of 32, with ``is_causal=False``, or
            (several rows per user, a window) above 32 with a window below ``C + 31``; a
            ``logit_softcap`` that is not a number or an ``attention_chunk_size`` that is not an
            int (bools neither) is a TypeError. ``return_lse`` not a bool (TypeError), or True with
            ``fp32_dest_acc_en=False``.

    Example:
        >>> import numpy as np
        >>> from ttnn_flashdecode import attention
        >>> rng = np.random.default_rng(0)
        >>> q = rng.standard_normal((1, 1, 2, 4 * 64), dtype=np.float32)   # 2 users, 4 Q heads
        >>> k = rng.standard_normal((2, 2, 128, 64), dtype=np.float32)     # 2 KV heads
        >>> v = rng.standard_normal((2, 2, 128, 64), dtype=np.float32)
        >>> out = attention(q, k, v, cur_pos=[5, 100])                      # runs on the emulator
        >>> out.shape
        (1, 1, 2, 256)
        >>> rows = attention(np.repeat(q, 3, axis=2), k, v, cur_pos=[5, 100], rows=3)  # 3 rows per user
        >>> rows.shape
        (1, 1, 6, 256)
        >>> chunk = attention(q[:, :, :1].repeat(7, axis=2), k[:1], v[:1], chunk_start=40)  # positions 40..46
        >>> chunk.shape
        (1, 1, 7, 256)
    """
    call = locals()  # every argument by name, in signature order (nothing else is bound yet)
    key = fast_path.options_key(call)  # first: a hit is only ever a single-device call like one validated
    launch = None if key is None else fast_path.lookup(key, q, k, v, cur_pos_tensor, page_table_tensor)
    if launch is not None:  # a device call like one already validated and planned: launch only
        return launch(q, k, v, cur_pos_tensor, page_table_tensor)
    if head_dim_v is not None:  # MLA: V = the latent's first head_dim_v columns (op/latent.py)
        out = attention(q, k, latent.values_for(k, v, head_dim_v, "v"),
                        **{name: call[name] for name in call if name not in ("q", "k", "v", "head_dim_v")})
        heads = None if q_layout == "heads" else int(q.shape[-1]) // int(k.shape[-1])
        return latent.keep_value_columns(out, int(head_dim_v), heads=heads)
    if mesh.is_host_mesh(q):  # an emulated mesh: every device's shards through the emulator (op/mesh.py)
        return mesh.run_host_mesh(attention, q, k, v, {name: call[name] for name in call if name not in ("q", "k", "v")})
    window = validate_options(backend=backend, split=split, scale=scale, max_split=max_split,
                              sliding_window_size=sliding_window_size, block_tiles=block_tiles,
                              memory_config=memory_config)
    score = score_options(logit_softcap, attention_chunk_size)
    is_causal, batch_invariant, return_lse = (as_bool(name, value) for name, value in (
        ("is_causal", is_causal), ("batch_invariant", batch_invariant), ("return_lse", return_lse)))
    q, q_dtype = _bfloat16_q(q)
    inputs = validate_inputs(q, k, v, cur_pos, chunk_start, rows, cur_pos_tensor, page_table_tensor, q_layout, window,
                             attention_sink, is_causal, attn_mask, cache_position_modulo, users_per_table_row, score)
    if batch_invariant is not False:
        inputs = dataclasses.replace(inputs, shape=dataclasses.replace(inputs.shape, batch_invariant=True))
    compute = ComputeOptions.from_config(compute_kernel_config)
    if lse_option(return_lse, compute.fp32_dest_acc_en):
        inputs = dataclasses.replace(inputs, shape=dataclasses.replace(inputs.shape, lse=True))
    if backend == "device" or (backend == "auto" and inputs.kind == "device"):
        if inputs.kind != "device":
            raise ValueError(f"backend: 'device' expects device tensors, got {inputs.kind} inputs")
        mesh.check_device_operands(q, {"k": k, "v": v, "cur_pos_tensor": cur_pos_tensor,
                                       "page_table_tensor": page_table_tensor, "attn_mask": attn_mask})
        out, launch = run_on_device(q, k, v, inputs, scale, block_tiles, split, compute, memory_config, grid=grid,
                                    max_split=max_split)
        if key is not None:
            fast_path.remember(key, q, k, v, cur_pos_tensor, page_table_tensor, launch)
        return _with_q_dtype(out, q_dtype, lambda o: ttnn.typecast(o, q_dtype))
    out = run_on_emulator(q, k, v, inputs, scale, block_tiles, split, compute, grid=grid, max_split=max_split,
                          memory_config=memory_config)
    return _with_q_dtype(out, q_dtype, lambda o: ttnn.Tensor(to_numpy(o), q_dtype, layout=ttnn.TILE_LAYOUT))


def cached_launch(q, k, v, **keywords):
    """The :class:`~ttnn_flashdecode.op.launch.DeviceLaunch` that ``attention(q, k, v, **keywords)``
    would take from the fast path (:mod:`~ttnn_flashdecode.op.fast_path`), or None: for tests and
    the host bench. Keywords not given take attention()'s defaults."""
    call = _ARGUMENT_DEFAULTS | keywords | {"q": q, "k": k, "v": v}  # attention()'s order: the key's
    key = fast_path.options_key(call)
    return None if key is None else fast_path.lookup(key, q, k, v, call["cur_pos_tensor"], call["page_table_tensor"])


_ARGUMENT_DEFAULTS = {name: None if parameter.default is inspect.Parameter.empty else parameter.default
                      for name, parameter in inspect.signature(attention).parameters.items()}


def _with_q_dtype(result, q_dtype, convert):
    """``result`` (an output, or ``(output, lse)``) with the output converted back to a block-float
    Q's dtype by ``convert`` (the LSE stays float32)."""
    if q_dtype is None:
        return result
    if isinstance(result, tuple):
        return convert(result[0]), result[1]
    return convert(result)


_BLOCK_FLOAT_Q = (ttnn.bfloat8_b, ttnn.bfloat4_b)


def _bfloat16_q(q):
    """``(q, None)``, or for a block-float ttnn Q (which ttnn's decode op accepts) ``(q as bfloat16, its
    dtype)``: every bfp8 / bfp4 value is a bfloat16 value, so the conversion is exact; on a device
    ``ttnn.typecast`` keeps Q's memory config (DRAM or L1 height-sharded)."""
    if not isinstance(q, ttnn.Tensor) or q.dtype not in _BLOCK_FLOAT_Q:
        return q, None
    if q.storage_type() == ttnn.StorageType.DEVICE:
        return ttnn.typecast(q, ttnn.bfloat16), q.dtype
    return ttnn.to_dtype(q, ttnn.bfloat16), q.dtype

