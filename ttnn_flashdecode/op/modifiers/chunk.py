"""``attention_chunk_size``: chunked-local attention (Llama 4's, FA3's ``attention_chunk``): the row
at position ``p`` attends ``floor(p / C) * C .. p``; with a sliding window, the later of the two
starts. The chunk's start is folded into the window's on device (``attention_protocol.hpp``
"Chunked-local attention"); ``C`` is part of the program."""

from __future__ import annotations

from ttnn_flashdecode.op.modifiers.base import ScoreModifier, is_int

__all__ = ["MODIFIER"]


class AttentionChunk(ScoreModifier):
    KEYWORD = "attention_chunk_size"
    FIELD = "attention_chunk"
    REFUSED_BY = {"context_parallel": "the chunk's start would need each device's window to depend on the position"}

    def validate(self, value) -> int:
        """``None`` -> 0 (none); ``C`` an int > 0, a multiple of 32 (whole position tiles), below 2**31.

        Raises:
            TypeError: not an int (bools neither). ValueError: <= 0, not a multiple of 32, >= 2**31.
        """
        if value is None:
            return 0
        if not is_int(value):
            raise TypeError(f"attention_chunk_size: expected None or an int (positions), got {type(value).__name__}")
        if not 32 <= value < 2**31 or value % 32:
            raise ValueError(f"attention_chunk_size: expected a positive multiple of 32 positions (whole tiles), "
                             f"below 2**31, got {value!r}")
        return int(value)

    def check_field(self, modifiers) -> None:
        chunk = modifiers.attention_chunk
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 0 or chunk % 32:
            raise ValueError(f"attention_chunk: expected an int >= 0 that is a multiple of 32 (0: none), got {chunk!r}")

    def check_call(self, modifiers, *, rows: int, kind: str, cache_wrap: int) -> None:
        """With a chunk C > 32, a sliding window W and several query rows per user, rows straddling a
        chunk edge can need three window-mask tiles; the kernels hold two (CONST pages 4 and 5), which
        suffice when ``W >= C + 31`` (the window never cuts into a chunk there).

        Raises:
            ValueError: ``32 < C``, ``W > 0``, ``rows > 1`` and ``W < C + 31``.
        """
        chunk, window = modifiers.attention_chunk, modifiers.window
        if chunk > 32 and window and rows > 1 and window < chunk + 31:
            raise ValueError(f"attention_chunk_size: expected 32, or a sliding_window_size of at least chunk + 31 = "
                             f"{chunk + 31}, with a window and {rows} rows per user (rows straddling a chunk edge "
                             f"would need a third mask tile), got chunk {chunk} with window {window}")

    def named_args(self, modifiers) -> list[tuple[str, int]]:
        return [("attention_chunk", modifiers.attention_chunk)]

    def first_position(self, modifiers, position: int) -> int:
        chunk = modifiers.attention_chunk
        return position // chunk * chunk if chunk else 0


MODIFIER = AttentionChunk()
