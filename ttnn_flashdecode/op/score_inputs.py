"""Host validation of the score modifiers: those that arrive as tensors, ``attn_mask`` (ttnn's
shapes, values kept as float32) and ``attention_sink`` (one bfloat16 logit per Q head), and the
scalar ones, ``logit_softcap`` and ``attention_chunk_size`` (:func:`score_options`). The kernels'
twins are the compute kernel's mask, sink and softcap stages (kernels/attention_compute.cpp) and
the protocol's window start (kernels/attention_protocol.hpp "Chunked-local attention")."""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
import ttnn

__all__ = ["mask_values", "mask_users", "device_mask", "DEVICE_MASK_DTYPES", "sink_logits", "score_options", "check_chunk_rows", "SCALE_MAX",
           "SOFTCAP_MIN", "SOFTCAP_MAX", "lse_option"]

DEVICE_MASK_DTYPES = (ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b)
"""A device ``attn_mask``'s dtypes (ttnn's tests pass bfloat4_b masks); the kernels read bfloat16."""


def device_mask(attn_mask):
    """A device ``attn_mask`` as the kernels read it: bfloat16 TILE DRAM, a block-float one typecast
    on device (exact: every block-float value is a bfloat16 value)."""
    return attn_mask if attn_mask.dtype == ttnn.bfloat16 else ttnn.typecast(attn_mask, ttnn.bfloat16)

SCALE_MAX = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
"""The largest finite bfloat16: the constants tile holds scale and sink logits in bfloat16."""


def mask_values(attn_mask) -> np.ndarray:
    """A host mask's values as float32 (NaN and inf kept: the kernels clamp them)."""
    if isinstance(attn_mask, ttnn.Tensor):
        if attn_mask.dtype == ttnn.float32:
            return np.asarray(attn_mask.to_numpy(), dtype=np.float32)
        return np.asarray(attn_mask.to_list(), dtype=np.float32)  # any layout and dtype, at its logical shape
    return np.asarray(attn_mask, dtype=np.float32)


def mask_users(attn_mask, batch: int, n_q_heads: int, capacity: int, kind: str) -> int:
    """Users of ``attn_mask`` (1: one mask for every user, else ``batch``), checking ttnn's
    shapes: ``[B_m, 1, n_q_heads, capacity]`` (what tt-metal's tests build) or ``[1, B_m,
    n_q_heads, capacity]`` (ttnn's docstring), ``B_m`` 1 or ``batch``; a device tensor bfloat16,
    TILE, DRAM interleaved, like Q's kind.

    Raises:
        TypeError: not a tensor or array.
        ValueError: another shape, dtype, layout or memory.
    """
    if isinstance(attn_mask, ttnn.Tensor):
        on_device = attn_mask.storage_type() == ttnn.StorageType.DEVICE
        if on_device != (kind == "device"):
            raise ValueError(f"attn_mask: expected a {'device' if kind == 'device' else 'host'} tensor like q, got a "
                             f"{'device' if on_device else 'host'} tensor")
        if on_device:
            if attn_mask.dtype not in DEVICE_MASK_DTYPES or attn_mask.layout != ttnn.TILE_LAYOUT:
                raise ValueError(f"attn_mask: expected a bfloat16, bfloat8_b or bfloat4_b TILE device tensor, got "
                                 f"{attn_mask.dtype} {attn_mask.layout}")
            config = attn_mask.memory_config()
            if config.buffer_type != ttnn.BufferType.DRAM or config.is_sharded():
                raise ValueError(f"attn_mask: expected a DRAM-interleaved tensor, got {config}")
    elif not isinstance(attn_mask, np.ndarray):
        raise TypeError(f"attn_mask: expected a ttnn.Tensor or a numpy array, got {type(attn_mask).__name__}")
    elif kind == "device":
        raise ValueError("attn_mask: expected a device tensor with device q, k, v, got a numpy array")
    shape = tuple(int(d) for d in attn_mask.shape)
    users = shape[0] * shape[1] if len(shape) == 4 and 1 in shape[:2] else 0
    if users not in (1, batch) or shape[2:] != (n_q_heads, capacity):
        raise ValueError(f"attn_mask: expected [B, 1, {n_q_heads}, {capacity}] or [1, B, {n_q_heads}, {capacity}] "
                         f"(B = 1 or the batch {batch}; n_q_heads, the cache's capacity), got {list(shape)}")
    return users


def sink_logits(attention_sink, n_q_heads: int) -> tuple[float, ...]:
    """``attention_sink`` as one float logit per Q head: a numpy array / sequence ``[n_q_heads]``,
    ``[n_q_heads, 1]`` or ttnn's ``[n_q_heads, 32]`` layout (column 0; the rest padding), or a
    ttnn.Tensor of those shapes (host or device; a device tensor is read back once per call --
    sinks are weights). Each is rounded to bfloat16 (the constants operand's format). A multi-device
    tensor (on a ``ttnn.MeshDevice`` or a host mesh) gives one list when every device holds the same
    sinks, else a :class:`~ttnn_flashdecode.op.mesh.PerDeviceSinks` (each device's shard, checked
    as above; so is a ``PerDeviceSinks`` given back).

    Raises:
        TypeError: not a tensor, array or sequence of numbers.
        ValueError: another shape, or a value that is not finite.
    """
    from ttnn_flashdecode.op.mesh import PerDeviceSinks, shards_of

    if isinstance(attention_sink, PerDeviceSinks):
        return PerDeviceSinks(sink_logits(list(device), n_q_heads) for device in attention_sink)
    shards = shards_of(attention_sink)
    if shards is not None:  # a mesh tensor: each device's heads (one list when every device holds the same)
        per_device = [sink_logits(shard, n_q_heads) for shard in shards]
        return per_device[0] if len(set(per_device)) == 1 else PerDeviceSinks(per_device)
    if isinstance(attention_sink, ttnn.Tensor):
        host = attention_sink.cpu() if attention_sink.storage_type() == ttnn.StorageType.DEVICE else attention_sink
        if host.layout != ttnn.ROW_MAJOR_LAYOUT:
            host = host.to(ttnn.ROW_MAJOR_LAYOUT)
        values = np.asarray(host.to_list(), dtype=np.float64)
        values = values.reshape([d for d in values.shape if d != 1] or [1]) if values.ndim > 2 else values
    elif isinstance(attention_sink, (np.ndarray, Sequence)) and not isinstance(attention_sink, (str, bytes)):
        try:
            values = np.asarray(attention_sink, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise TypeError(f"attention_sink: expected numbers, got {attention_sink!r}") from error
    else:
        raise TypeError(f"attention_sink: expected a ttnn.Tensor, numpy array or sequence, got {type(attention_sink).__name__}")
    if values.ndim == 2 and values.shape[0] == n_q_heads and values.shape[1] in (1, 32):
        values = values[:, 0]
    if values.shape != (n_q_heads,):
        raise ValueError(f"attention_sink: expected one logit per Q head, [{n_q_heads}], [{n_q_heads}, 1] or ttnn's "
                         f"[{n_q_heads}, 32] (column 0), got shape {list(values.shape)}")
    # The kernels hold the logits in bfloat16: past its range a finite logit would become inf.
    bad = ~(np.isfinite(values) & (np.abs(values) <= SCALE_MAX))
    if bad.any():
        raise ValueError(f"attention_sink: expected finite logits, at most {SCALE_MAX:.6g} in magnitude (the kernels hold "
                         f"them in bfloat16), got {values[bad][:4].tolist()}")
    return tuple(float(x) for x in values.astype(ml_dtypes.bfloat16).astype(np.float64))


SOFTCAP_MIN = 2.0**-64
SOFTCAP_MAX = 2.0**64
"""The caps the kernel takes: ``c`` and ``1 / c`` are fp32 scalars of the compute kernel's SFPU
passes, and ``s / c`` must stay a normal fp32 number for any score that matters (the SFPU reads
denormals as zero): within ``2**+-64`` both hold with room to spare (a cap that small makes every
score ``+-c``, one that large leaves every score as it is)."""


def score_options(logit_softcap=None, attention_chunk_size=None) -> dict:
    """The scalar score modifiers as :class:`~ttnn_flashdecode.op.shape.DecodeShape` fields:
    ``{"softcap": c or 0.0, "attention_chunk": C or 0}``.

    Args:
        logit_softcap: ``None``, or ``c``: a number (an int or float, not a bool) in
            ``[2**-64, 2**64]`` (:data:`SOFTCAP_MIN`, :data:`SOFTCAP_MAX`); scores become ``c *
            tanh(s / c)``.
        attention_chunk_size: ``None``, or ``C``: an int > 0, a multiple of 32 (whole position
            tiles), below 2**31; the row at ``p`` attends ``floor(p / C) * C .. p``.

    Raises:
        TypeError: ``logit_softcap`` not a real number, ``attention_chunk_size`` not an int (bools
            are neither).
        ValueError: ``c`` outside ``[2**-64, 2**64]`` (0, negative, NaN, inf); ``C`` <= 0, not a
            multiple of 32 or >= 2**31.
    """
    options = {"softcap": 0.0, "attention_chunk": 0}
    if logit_softcap is not None:
        if isinstance(logit_softcap, bool) or not isinstance(logit_softcap, (int, float, np.integer, np.floating)):
            raise TypeError(f"logit_softcap: expected None or a number c > 0, got {type(logit_softcap).__name__}")
        cap = float(logit_softcap)
        if not SOFTCAP_MIN <= cap <= SOFTCAP_MAX:
            raise ValueError(f"logit_softcap: expected a number c > 0 with 2**-64 <= c <= 2**64 (scores become "
                             f"c * tanh(s / c); the kernel holds c and 1 / c as fp32 scalars), got {logit_softcap!r}")
        options["softcap"] = cap
    if attention_chunk_size is not None:
        if isinstance(attention_chunk_size, bool) or not isinstance(attention_chunk_size, (int, np.integer)):
            raise TypeError(f"attention_chunk_size: expected None or an int (positions), got "
                            f"{type(attention_chunk_size).__name__}")
        chunk = int(attention_chunk_size)
        if not 32 <= chunk < 2**31 or chunk % 32:
            raise ValueError(f"attention_chunk_size: expected a positive multiple of 32 positions (whole tiles), "
                             f"below 2**31, got {attention_chunk_size!r}")
        options["attention_chunk"] = chunk
    return options


def check_chunk_rows(chunk: int, window: int, rows: int) -> None:
    """With an attention chunk C > 32, a sliding window W and several query rows per user, rows
    straddling a chunk edge can need three window-mask tiles; the kernels hold two (CONST pages 4
    and 5), which suffice when ``W >= C + 31`` (the window never cuts into a chunk there).

    Raises:
        ValueError: ``32 < C``, ``W > 0``, ``rows > 1`` and ``W < C + 31``.
    """
    if chunk > 32 and window and rows > 1 and window < chunk + 31:
        raise ValueError(f"attention_chunk_size: expected 32, or a sliding_window_size of at least chunk + 31 = "
                         f"{chunk + 31}, with a window and {rows} rows per user (rows straddling a chunk edge would "
                         f"need a third mask tile), got chunk {chunk} with window {window}")


def lse_option(return_lse, fp32_dest_acc_en: bool) -> bool:
    """``return_lse`` checked: a bool, and True only with fp32 DST accumulation (the compute config's
    ``fp32_dest_acc_en``, the default), which keeps the softmax statistics the LSE is made of (the
    running max and sum, :data:`~ttnn_flashdecode.op.residency.STATS_CBS`) in float32.

    Raises:
        TypeError: ``return_lse`` is not a bool.
        ValueError: ``return_lse=True`` with ``fp32_dest_acc_en=False`` (bfloat16 statistics).
    """
    if not isinstance(return_lse, (bool, np.bool_)):
        raise TypeError(f"return_lse: expected a bool, got {type(return_lse).__name__}")
    return_lse = bool(return_lse)
    if return_lse and not fp32_dest_acc_en:
        raise ValueError("return_lse: expected a compute config with fp32_dest_acc_en=True (the LSE is made of the "
                         "softmax statistics, which are float32 only then), got fp32_dest_acc_en=False")
    return return_lse
