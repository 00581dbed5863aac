"""The tensors and positions of one :func:`~ttnn_flashdecode.attention` call (:class:`Operands`),
apart from its options (:class:`~ttnn_flashdecode.op.options.AttentionOptions`)."""

from __future__ import annotations

import dataclasses

__all__ = ["Operands", "MESH_OPERANDS"]

MESH_OPERANDS = ("cur_pos_tensor", "page_table_tensor", "attn_mask", "attention_sink")
"""Operands besides Q, K and V that may be host multi-device tensors (one shard per device) on an
emulated mesh; every other one is the same for every device."""


@dataclasses.dataclass(frozen=True, eq=False)
class Operands:
    """What a call reads: Q, the KV cache, the positions and the tensor-valued score modifiers, as
    the caller gave them (numpy arrays, host or device ``ttnn.Tensor``; shapes and rules:
    :func:`~ttnn_flashdecode.attention`). Compared by identity: tensors have no value equality."""

    q: object
    k: object
    v: object
    cur_pos: object = None
    cur_pos_tensor: object = None
    chunk_start: object = None
    page_table_tensor: object = None
    attention_sink: object = None
    attn_mask: object = None
    append_k: object = None  # the fused cache append's new rows (op/append.py)
    append_v: object = None
    append_latent: object = None  # MLA: the latent's new rows (V is K)
    sparse_indices: object = None

    def replace(self, **changes) -> Operands:
        """A copy with ``changes`` (e.g. one device's shards)."""
        return dataclasses.replace(self, **changes)
