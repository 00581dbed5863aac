"""``sliding_window_size``: the row at position ``p`` attends ``max(0, p + 1 - W) .. p`` (Gemma's
512 / 1024, gpt-oss's 128). Only the window's position tiles are read; the window's start is
derived on device from the positions (``attention_protocol.hpp`` "Sliding window"), ``W`` is part
of the program. Kernel stage: the window mask of ``apply_score_modifiers``."""

from __future__ import annotations

from ttnn_flashdecode.op.modifiers.base import ScoreModifier, is_int

__all__ = ["MODIFIER"]


class SlidingWindow(ScoreModifier):
    KEYWORD = "sliding_window_size"
    FIELD = "window"
    REFUSED_BY = {"context_parallel": "a device whose shard ends before the position would need a window that "
                                      "depends on the position"}

    def validate(self, value) -> int:
        """``None`` -> 0 (no window); ``W`` an int in ``1 .. 2**31 - 1``.

        Raises:
            TypeError: not an int (bools neither). ValueError: below 1 or past 2**31 - 1.
        """
        if value is None:
            return 0
        if not is_int(value):
            raise TypeError(f"sliding_window_size: expected None or an int, got {type(value).__name__} {value!r}")
        if not 1 <= value < 2**31:
            raise ValueError(f"sliding_window_size: expected None or a positive int (positions each row attends, "
                             f"its own included), got {value!r}")
        return int(value)

    def check_field(self, modifiers) -> None:
        window = modifiers.window
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise ValueError(f"window: expected an int >= 0 (0: no sliding window), got {window!r}")

    def check_call(self, modifiers, *, rows: int, kind: str, cache_wrap: int) -> None:
        """A circular cache holds only its last ``cache_wrap`` positions: the window fits in them.

        Raises:
            ValueError: ``W > cache_wrap``.
        """
        if cache_wrap and modifiers.window > cache_wrap:
            raise ValueError(f"sliding_window_size: expected at most cache_position_modulo {cache_wrap} (a circular "
                             f"cache holds only its last {cache_wrap} positions), got {modifiers.window}")

    def named_args(self, modifiers) -> list[tuple[str, int]]:
        return [("window", modifiers.window)]

    def first_position(self, modifiers, position: int) -> int:
        return max(0, position + 1 - modifiers.window) if modifiers.window else 0


MODIFIER = SlidingWindow()
