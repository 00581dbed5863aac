"""``attention_sink`` (gpt-oss): per Q head ``h`` a logit ``s_h`` that joins each of its rows'
softmax denominators and has no value, ``out = sum_j e^(S_j) V_j / (sum_j e^(S_j) + e^(s_h))``, in
score units. The logits ride in the constants operand; the normalising core folds them in once
before ``O / L`` (the compute kernel's ``fold_sink``)."""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np
import ttnn

from ttnn_flashdecode.op.constants import SCALE_MAX
from ttnn_flashdecode.op.modifiers.base import ScoreModifier

__all__ = ["sink_logits", "MODIFIER"]


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



class AttentionSink(ScoreModifier):
    KEYWORD = "attention_sink"
    FIELD = "sink"

    def named_args(self, modifiers) -> list[tuple[str, int]]:
        return [("sink", int(modifiers.sink))]


MODIFIER = AttentionSink()
