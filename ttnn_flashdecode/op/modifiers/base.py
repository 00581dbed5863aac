"""What every score modifier provides (:class:`ScoreModifier`): no-op defaults a modifier overrides."""

from __future__ import annotations

import numpy as np

__all__ = ["ScoreModifier", "is_int", "as_bool"]


def is_int(value) -> bool:
    """An int (Python or numpy), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def as_bool(name: str, value) -> bool:
    """``value`` as a bool: a Python or numpy bool.

    Raises:
        TypeError: anything else (0 and 1 included), naming ``name``.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__} {value!r}")
    return bool(value)


class ScoreModifier:
    """One score modifier: its public keyword, its :class:`~ttnn_flashdecode.op.modifiers.ScoreModifiers`
    field, and hooks that do nothing unless the modifier overrides them.

    Attributes:
        KEYWORD: the keyword of :func:`~ttnn_flashdecode.attention` that sets it.
        FIELD: its field of ``ScoreModifiers``.
        REFUSED_BY: features that cannot serve it, each with the reason (e.g. ``{"context_parallel": ...}``).
    """

    KEYWORD = ""
    FIELD = ""
    REFUSED_BY: dict[str, str] = {}

    def validate(self, value):
        """The keyword's value (type and range) as the field's value; raises TypeError / ValueError."""
        return value

    def check_field(self, modifiers) -> None:
        """Raise ValueError when the field, or its combination with the other fields, is invalid."""

    def check_call(self, modifiers, *, rows: int, kind: str, cache_wrap: int) -> None:
        """Raise ValueError when the call's request ``kind``, ``rows`` per user or circular cache of
        ``cache_wrap`` slots (0: none) cannot take the modifier."""

    def active(self, modifiers) -> bool:
        """Whether the call uses the modifier (its field is not the default)."""
        return bool(getattr(modifiers, self.FIELD))

    def named_args(self, modifiers) -> list[tuple[str, int]]:
        """Its named compile-time args (the kernels' ``get_named_compile_time_arg_val``)."""
        return []

    def first_position(self, modifiers, position: int) -> int:
        """The first position the row at ``position`` may attend under this modifier (0: no bound)."""
        return 0

    def reference_scores(self, modifiers, scores: np.ndarray) -> np.ndarray:
        """float64 scaled scores as this modifier changes them (the reference's hook)."""
        return scores
