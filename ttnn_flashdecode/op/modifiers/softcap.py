"""``logit_softcap``: every scaled score ``s`` becomes ``c * tanh(s / c)`` before the masks and the
sinks (FA3's ``softcap``, FlashInfer's ``logits_soft_cap``; Gemma 2's 50, Grok's 30). A sink logit
is not capped. Kernel stage: ``cap_scores`` (times ``1 / c``, the LLK's tanh, times ``c``, in DST)."""

from __future__ import annotations

import numpy as np

from ttnn_flashdecode.op.modifiers.base import ScoreModifier

__all__ = ["SOFTCAP_MIN", "SOFTCAP_MAX", "MODIFIER"]

SOFTCAP_MIN = 2.0**-64
SOFTCAP_MAX = 2.0**64
"""The caps the kernel takes: ``c`` and ``1 / c`` are fp32 scalars of the compute kernel's SFPU
passes, and ``s / c`` must stay a normal fp32 number for any score that matters (the SFPU reads
denormals as zero): within ``2**+-64`` both hold with room to spare (a cap that small makes every
score ``+-c``, one that large leaves every score as it is)."""


class LogitSoftcap(ScoreModifier):
    KEYWORD = "logit_softcap"
    FIELD = "softcap"

    def validate(self, value) -> float:
        """``None`` -> 0.0 (no cap); ``c`` a number (int or float, not a bool) in ``[2**-64, 2**64]``.

        Raises:
            TypeError: not a real number. ValueError: outside ``[2**-64, 2**64]`` (0, negative, NaN, inf).
        """
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"logit_softcap: expected None or a number c > 0, got {type(value).__name__}")
        cap = float(value)
        if not SOFTCAP_MIN <= cap <= SOFTCAP_MAX:
            raise ValueError(f"logit_softcap: expected a number c > 0 with 2**-64 <= c <= 2**64 (scores become "
                             f"c * tanh(s / c); the kernel holds c and 1 / c as fp32 scalars), got {value!r}")
        return cap

    def check_field(self, modifiers) -> None:
        cap = modifiers.softcap
        if isinstance(cap, bool) or not isinstance(cap, float) or not 0.0 <= cap < float("inf"):
            raise ValueError(f"softcap: expected a finite float >= 0.0 (0.0: none), got {cap!r}")

    def named_args(self, modifiers) -> list[tuple[str, int]]:
        """``softcap`` and ``softcap_recip``: ``c`` and ``1 / c`` as fp32 bits (the compute kernel's
        scalars for ``mul_unary_tile``), both 0 without a cap."""
        if not modifiers.softcap:
            return [("softcap", 0), ("softcap_recip", 0)]
        bits = np.array([modifiers.softcap, 1.0 / modifiers.softcap], dtype=np.float32).view(np.uint32)
        return [("softcap", int(bits[0])), ("softcap_recip", int(bits[1]))]

    def reference_scores(self, modifiers, scores):
        cap = modifiers.softcap
        return cap * np.tanh(scores / cap) if cap else scores


MODIFIER = LogitSoftcap()
