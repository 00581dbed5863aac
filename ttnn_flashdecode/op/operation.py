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

import inspect

from collections.abc import Sequence

import ttnn

from ttnn_flashdecode.op import fast_path, latent, mesh
from ttnn_flashdecode.op.emulator_backend import run_on_emulator
from ttnn_flashdecode.op.launch import last_report, run_on_device, to_numpy
from ttnn_flashdecode.op.operands import Operands
from ttnn_flashdecode.op.options import AttentionOptions, options_for
from ttnn_flashdecode.op.plan import DEFAULT_ARCH, DEFAULT_BLOCK_TILES, plan_program, program_for
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
    accurate_scores: bool | None = None,
    append_k=None,
    append_v=None,
    append_latent=None,
    sparse_indices=None,
):
    """Flash-decode GQA attention against a KV cache: decode, several rows per user, or a causal chunk.

    Q head ``h`` uses KV head ``h // (n_q_heads // n_kv_heads)``; every query row attends positions
    ``0..p`` of its user's K/V (``p`` its own position), with an online softmax per request (one
    core, or split-K slices over several). Request kinds (``docs/request_kinds.md``): **decode**
    (``cur_pos=``), **ROWS** (``cur_pos=`` and ``rows=P``: P consecutive rows per user, the last at
    ``cur_pos[b]``) and **CHUNK** (``chunk_start=``: a causal chunk of 1..32 positions per
    sequence, its K/V already in the cache). Device tensors run through ``ttnn.generic_op``
    (one ``ttnn.MeshProgramDescriptor`` on a ``ttnn.MeshDevice``, ``docs/multi_chip.md``); numpy
    arrays and host tensors run the same program on the host emulator. Every keyword in full:
    ``docs/options.md``.

    Parameters:
        q: ``[1, 1, batch * R, n_q_heads * head_dim]`` (R rows per user), or with
            ``q_layout="heads"`` ttnn's decode ``[1, batch, n_q_heads, head_dim]``. Device: bfloat16
            (or bfloat8_b / bfloat4_b, converted exactly) TILE, DRAM (heads layout: or L1
            height-sharded), heads padded to whole tiles. Host: numpy float32 / bfloat16 or ttnn.Tensor.
        k, v: KV cache ``[batch, n_kv_heads, capacity, head_dim]``, or paged ``[cache_blocks,
            n_kv_heads, block_size, head_dim]`` with ``page_table_tensor``; bfloat16, bfloat8_b or
            bfloat4_b (TILE). ``v is k``: each block is read once (MLA's latent).
        cur_pos: decode / ROWS: per user the last row's position, or -1 for an idle slot.
        cur_pos_tensor: the positions as an int32 ``[batch]`` tensor the kernels read at run
            time (ttnn's; trace-safe). Instead of ``cur_pos``.
        page_table_tensor: int32 ``[batch, blocks_per_user]``: a paged cache's block table.
        chunk_start: CHUNK: per sequence (or one int for all) its chunk's first position.
        rows: ROWS: query rows per user (``rows * gqa_ratio <= 32``).
        scale: the query scale (default ``1 / sqrt(head_dim)``).
        block_tiles: the K/V block in position tiles (default: the planner's).
        q_layout: ``"rows"`` (default) or ``"heads"`` (decode only).
        compute_kernel_config: a ttnn compute config (default HiFi4, fp32 DST accumulation).
        memory_config: the output's (device: DRAM interleaved, or heads layout L1 height-sharded).
        split: split-K slices per request (default: balanced by the scheduler; 1: never split).
        max_split: most slices per request (ttnn's ``max_cores_per_head_batch``).
        grid: the cores: ``(x, y)`` from core (0, 0), a ``ttnn.CoreRangeSet`` or a list of cores.
        backend: ``"auto"`` (default: by the tensors' kind), ``"device"`` or ``"emulator"``.
        sliding_window_size: ``W``: the row at ``p`` attends ``max(0, p + 1 - W) .. p``.
        attention_sink: per Q head a logit in SCORE units (not scaled: the drop-ins scale it, as ttnn).
        is_causal: False: decode every row against the whole cache (with ``attn_mask``).
        attn_mask: ``[B_m, 1, n_q_heads, capacity]`` additive mask, with ``is_causal=False``.
        cache_position_modulo: ``M``: a circular paged cache, position ``L`` in slot ``L % M``.
        users_per_table_row: consecutive users sharing one page-table row (spec candidates).
        batch_invariant: a request's bits never depend on the batch it shares.
        logit_softcap: ``c``: scores become ``c * tanh(s / c)`` before every mask.
        attention_chunk_size: ``C``: the row at ``p`` attends ``floor(p / C) * C .. p``.
        return_lse: also return each row's log-sum-exp (float32; needs fp32 DST).
        head_dim_v: MLA: V's head_dim; ``v`` None means V is ``k``'s first ``head_dim_v`` columns.
        accurate_scores: True: the scores stay float32 (TF32 to nearest) from QS . K^T to exp, not
            bfloat16 (needs fp32 DST; the S CB's L1 doubles). None: the compute config's (off).
        append_k, append_v: new K / V rows ``[batch, n_kv_heads, P, head_dim]`` (decode also
            ``[1, batch, n_kv_heads, head_dim]``) written into the cache (in place) at each user's
            ``cur_pos - P + 1 .. cur_pos`` before it is attended (``docs/options.md#append_k-append_v-append_latent``).
        append_latent: MLA (V is K's columns): the latent's new rows, as ``append_k``.
        sparse_indices: sparse decode (DeepSeek-V3.2): int32 ``[batch, k]`` (or ``[batch, 1, k]``),
            each user attends exactly the listed positions (a multiset, any order; ``-1`` padding;
            past ``cur_pos``: refused on the host, dropped on device); ``[batch, n_kv_heads, k]``: a
            list per KV head. A bfloat16 or bfloat8_b cache. ``docs/options.md#sparse_indices``.

    Returns:
        The shape and kind of ``q`` (a device tensor in ``memory_config``, a host ``ttnn.Tensor`` in
        Q's layout, or a numpy array of Q's dtype); MLA ``head_dim_v`` wide per head. With
        ``return_lse`` ``(out, lse)``: ``lse`` float32 ``[1, 1, batch * R, n_q_heads]`` (heads layout
        ``[1, batch, n_q_heads]``), ``-inf`` for idle slots.

    Raises:
        TypeError: an input of the wrong kind; no positions (``cur_pos``, ``cur_pos_tensor`` or
            ``chunk_start``); a keyword of the wrong type (each names itself).
        ValueError: shapes that disagree (Q rows vs batch x rows, K vs V, GQA ratio).
        ValueError: positions outside the cache, or a page-table entry the call reads that is
            not a block of the cache.
        ValueError: device tensors of the wrong dtype, layout, memory or device.
        ValueError: a keyword out of range or a combination refused by name (``docs/options.md``).
        ValueError: a call that does not fit the grid or L1 (head_dim, block_tiles, split, requests).
        All are raised before anything reaches a device.

    Example:
        >>> import numpy as np
        >>> from ttnn_flashdecode import attention
        >>> rng = np.random.default_rng(0)
        >>> q = rng.standard_normal((1, 1, 2, 4 * 64), dtype=np.float32)   # 2 users, 4 Q heads
        >>> k = rng.standard_normal((2, 2, 128, 64), dtype=np.float32)     # 2 KV heads
        >>> v = rng.standard_normal((2, 2, 128, 64), dtype=np.float32)
        >>> attention(q, k, v, cur_pos=[5, 100]).shape                      # runs on the emulator
        (1, 1, 2, 256)
        >>> attention(np.repeat(q, 3, axis=2), k, v, cur_pos=[5, 100], rows=3).shape  # 3 rows per user
        (1, 1, 6, 256)
        >>> attention(q[:, :, :1].repeat(7, axis=2), k[:1], v[:1], chunk_start=40).shape  # positions 40..46
        (1, 1, 7, 256)
    """
    options = options_for(rows=rows, scale=scale, block_tiles=block_tiles, q_layout=q_layout,
                          compute_kernel_config=compute_kernel_config, memory_config=memory_config, split=split,
                          max_split=max_split, grid=grid, backend=backend, sliding_window_size=sliding_window_size,
                          is_causal=is_causal, cache_position_modulo=cache_position_modulo,
                          users_per_table_row=users_per_table_row, batch_invariant=batch_invariant,
                          logit_softcap=logit_softcap, attention_chunk_size=attention_chunk_size,
                          return_lse=return_lse, head_dim_v=head_dim_v, accurate_scores=accurate_scores)
    operands = Operands(q, k, v, cur_pos=cur_pos, cur_pos_tensor=cur_pos_tensor, chunk_start=chunk_start,
                        page_table_tensor=page_table_tensor, attention_sink=attention_sink, attn_mask=attn_mask,
                        append_k=append_k, append_v=append_v, append_latent=append_latent,
                        sparse_indices=sparse_indices)
    return run_call(operands, options)


def run_call(operands: Operands, options: AttentionOptions):
    """One call of validated options on its operands. MLA (``head_dim_v``) runs as the GQA call with
    the latent as V, its output cut to ``head_dim_v`` columns per head (:mod:`~ttnn_flashdecode.op.latent`)."""
    if options.head_dim_v is None:
        return _run(operands, options)
    q, k = operands.q, operands.k
    if operands.v is not None and (operands.append_k is not None or operands.append_v is not None):
        raise ValueError("append_v: not supported with a separate V of head_dim_v columns (its rows would go to a padded "
                         "copy); MLA's latent cache takes append_latent")
    out = _run(operands.replace(v=latent.values_for(k, operands.v, options.head_dim_v, "v")), options.single_call)
    heads = None if options.q_layout == "heads" else int(q.shape[-1]) // int(k.shape[-1])
    return latent.keep_value_columns(out, int(options.head_dim_v), heads=heads)


def _run(operands: Operands, options: AttentionOptions):
    """The device fast path when it holds the call; else an emulated mesh's devices one by one, or
    the one device's call."""
    launch = fast_path.lookup(operands, options)  # first: a hit is only ever a single-device call like one validated
    if launch is not None:
        return launch(operands.q, operands.k, operands.v, operands.cur_pos_tensor, operands.page_table_tensor)
    if not mesh.is_host_mesh(operands.q):
        return _run_one_device(operands, options)
    per_device = mesh.device_operands(operands)  # an emulated mesh: every device's shards through the emulator
    outputs = []
    for index, device in enumerate(per_device):
        with mesh.naming_device(index, len(per_device)):
            outputs.append(_run_one_device(device, options))
    return mesh.gather_like_q(outputs, operands.q)


def _run_one_device(operands: Operands, options: AttentionOptions):
    """Validate, plan and launch one device's call (on a card, or on the emulator)."""
    q, q_dtype = _bfloat16_q(operands.q)
    operands = operands.replace(q=q)
    inputs = validate_inputs(operands, options)
    if options.backend == "device" or (options.backend == "auto" and inputs.kind == "device"):
        if inputs.kind != "device":
            raise ValueError(f"backend: 'device' expects device tensors, got {inputs.kind} inputs")
        mesh.check_device_operands(q, {"k": operands.k, "v": operands.v, "cur_pos_tensor": operands.cur_pos_tensor,
                                       "page_table_tensor": operands.page_table_tensor, "attn_mask": operands.attn_mask})
        out, launch = run_on_device(operands, inputs, options)
        fast_path.remember(operands, options, launch)
        return _with_q_dtype(out, q_dtype, lambda o: ttnn.typecast(o, q_dtype))
    out = run_on_emulator(operands, inputs, options)
    return _with_q_dtype(out, q_dtype, lambda o: ttnn.Tensor(to_numpy(o), q_dtype, layout=ttnn.TILE_LAYOUT))


def cached_launch(q, k, v, **keywords):
    """The :class:`~ttnn_flashdecode.op.launch.DeviceLaunch` that ``attention(q, k, v, **keywords)``
    would take from the fast path (:mod:`~ttnn_flashdecode.op.fast_path`), or None: for tests and
    the host bench. Keywords not given take attention()'s defaults."""
    tensors = {name: keywords.pop(name, None) for name in _OPERAND_KEYWORDS}
    return fast_path.lookup(Operands(q, k, v, **tensors), options_for(**_option_defaults(keywords)))


_OPERAND_KEYWORDS = ("cur_pos", "cur_pos_tensor", "chunk_start", "page_table_tensor", "attention_sink", "attn_mask",
                     "append_k", "append_v", "append_latent",
                     "sparse_indices")


def _option_defaults(keywords: dict) -> dict:
    """``keywords`` completed with attention()'s defaults for its option keywords."""
    defaults = {name: parameter.default for name, parameter in inspect.signature(attention).parameters.items()
                if parameter.default is not inspect.Parameter.empty and name not in _OPERAND_KEYWORDS}
    return defaults | keywords


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

