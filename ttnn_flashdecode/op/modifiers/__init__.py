"""The score modifiers: what changes a row's scores or the positions it attends, each one module.

A modifier owns its keyword, its one validation, its field of :class:`ScoreModifiers`, its named
compile-time args and its float64 reference hook; the compute kernel applies them in one ordered
stage (``apply_score_modifiers`` in ``kernels/``: cap -> tail mask -> window / chunk -> attention
mask), and the normalising core folds the sink. Adding one is its module here, its line in
:data:`REGISTRY`, its keyword in the public signatures (passed on as ``x=x``), one kernel stage,
one test file and a row of the README's keyword table.

=====================  ===========================  ==========================================
module                 keyword                      field (:class:`ScoreModifiers`)
=====================  ===========================  ==========================================
:mod:`.softcap`        ``logit_softcap``            ``softcap`` (float, 0.0: none)
:mod:`.window`         ``sliding_window_size``      ``window`` (positions, 0: none)
:mod:`.chunk`          ``attention_chunk_size``     ``attention_chunk`` (positions, 0: none)
:mod:`.mask`           ``attn_mask``                ``mask_users`` (0: none)
:mod:`.sink`           ``attention_sink``           ``sink`` (bool)
:mod:`.causal`         ``is_causal``                ``causal`` (bool)
=====================  ===========================  ==========================================
"""

from __future__ import annotations

import dataclasses

from ttnn_flashdecode.op.modifiers import causal, chunk, mask, sink, softcap, window

__all__ = ["ScoreModifiers", "REGISTRY", "MODIFIER_KEYWORDS", "scalar_modifiers"]

REGISTRY = tuple(module.MODIFIER for module in (softcap, window, chunk, mask, sink, causal))
"""Every score modifier, in the order the kernel applies them (the sink last: it joins the
normalisation, not the scores)."""

MODIFIER_KEYWORDS = tuple(modifier.KEYWORD for modifier in REGISTRY)
"""The modifiers' keywords of :func:`~ttnn_flashdecode.attention`, in :data:`REGISTRY` order."""


@dataclasses.dataclass(frozen=True)
class ScoreModifiers:
    """The score modifiers of one call, as the program sees them (frozen, hashable: part of the
    plan's key). Each field belongs to the module :data:`REGISTRY` names for it.

    Attributes:
        softcap: logit softcap ``c`` (0.0: none): scores become ``c * tanh(s / c)`` before every mask.
        window: sliding window in positions (0: none): the row at ``p`` attends ``max(0, p + 1 - W) .. p``.
        attention_chunk: chunked-local attention in positions (0: none; a multiple of 32): the row at
            ``p`` attends ``floor(p / C) * C .. p`` (with a window, the later of the two starts).
        mask_users: with ``causal=False``, users of an additive attention mask (1: one for every
            user); 0: none.
        sink: the call has attention sinks (one logit per Q head, folded in by the normalising core).
        causal: False: every query row attends the whole cache (decode only, no window or chunk).

    Raises:
        ValueError: a field out of its range, or a combination the modifiers refuse
            (:meth:`check`).
    """

    softcap: float = 0.0
    window: int = 0
    attention_chunk: int = 0
    mask_users: int = 0
    sink: bool = False
    causal: bool = True

    def __post_init__(self):
        for modifier in REGISTRY:
            modifier.check_field(self)

    def check(self, *, rows: int, kind: str, cache_wrap: int = 0) -> None:
        """Refuse a combination with the call's request ``kind``, ``rows`` per user and circular
        cache (``cache_wrap`` slots, 0: none) that some modifier cannot serve (each modifier's
        ``check_call``).

        Raises:
            ValueError: naming the modifier's keyword.
        """
        for modifier in REGISTRY:
            modifier.check_call(self, rows=rows, kind=kind, cache_wrap=cache_wrap)

    @property
    def windowed(self) -> bool:
        """A window or a chunk: the program derives a first attended position on device (two more
        CONST pages, the window masks)."""
        return self.window > 0 or self.attention_chunk > 0

    @property
    def named_args(self) -> list[tuple[str, int]]:
        """The modifiers' named compile-time args, in :data:`REGISTRY` order."""
        return [arg for modifier in REGISTRY for arg in modifier.named_args(self)]

    def first_position(self, position: int) -> int:
        """The first position the row at ``position`` attends (float64 reference and host checks):
        the latest start any modifier imposes."""
        return max([0] + [modifier.first_position(self, position) for modifier in REGISTRY])

    def reference_scores(self, scores):
        """A row's float64 scaled scores with the score-changing modifiers applied (the reference's twin
        of the kernel's ``apply_score_modifiers`` before the masks)."""
        for modifier in REGISTRY:
            scores = modifier.reference_scores(self, scores)
        return scores

    def unsupported(self, feature: str) -> list[tuple[str, str, object]]:
        """``(keyword, reason, value)`` of each active modifier that ``feature`` (e.g.
        ``"context_parallel"``) cannot serve."""
        return [(modifier.KEYWORD, modifier.REFUSED_BY[feature], getattr(self, modifier.FIELD)) for modifier in REGISTRY
                if modifier.active(self) and feature in modifier.REFUSED_BY]


def scalar_modifiers(**keywords) -> ScoreModifiers:
    """The scalar modifiers' keywords (``logit_softcap``, ``sliding_window_size``,
    ``attention_chunk_size``, ``is_causal``) validated into :class:`ScoreModifiers` fields (the
    tensor ones, sink and mask, are set once their tensors are checked).

    Raises:
        TypeError, ValueError: as each modifier's ``validate``, naming its keyword.
    """
    fields = {}
    for modifier in REGISTRY:
        if modifier.KEYWORD in keywords:
            fields[modifier.FIELD] = modifier.validate(keywords.pop(modifier.KEYWORD))
    if keywords:
        raise TypeError(f"unexpected keywords {sorted(keywords)}")
    return ScoreModifiers(**fields)
