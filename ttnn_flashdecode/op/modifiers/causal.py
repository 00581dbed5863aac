"""``is_causal``: True (default), every query row attends positions up to its own; False (decode
only, ttnn's ``is_causal=False``), every row attends the whole cache, with no positions, window or
chunk (an ``attn_mask`` may then shape it)."""

from __future__ import annotations

from ttnn_flashdecode.op.modifiers.base import ScoreModifier, as_bool

__all__ = ["MODIFIER"]


class Causality(ScoreModifier):
    KEYWORD = "is_causal"
    FIELD = "causal"

    def validate(self, value) -> bool:
        """A Python or numpy bool. Raises TypeError for anything else (0 and 1 included)."""
        return as_bool(self.KEYWORD, value)

    def active(self, modifiers) -> bool:
        return not modifiers.causal  # the default is causal: non-causal is the modification

    def check_field(self, modifiers) -> None:
        if not modifiers.causal and (modifiers.window or modifiers.attention_chunk):
            given = ["sliding_window_size"] * bool(modifiers.window) + ["attention_chunk_size"] * bool(modifiers.attention_chunk)
            raise ValueError(f"is_causal: non-causal attention takes no window or chunk (every position of the cache is "
                             f"attended), got {', '.join(given)}")

    def check_call(self, modifiers, *, rows: int, kind: str, cache_wrap: int) -> None:
        if not modifiers.causal and kind != "decode":
            raise ValueError(f"causal: non-causal attention is decode only, got kind {kind!r}")


MODIFIER = Causality()
