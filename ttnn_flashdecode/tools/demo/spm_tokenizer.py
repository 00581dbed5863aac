"""A SentencePiece-BPE tokenizer built from a GGUF file's own vocabulary (``tokenizer.ggml.model == 'llama'``).

Gemma 3's GGUF carries its tokenizer as three parallel arrays: ``tokenizer.ggml.tokens`` (the
pieces, a space written as U+2581 "▁"), ``tokenizer.ggml.scores`` (float32, one per piece: the
higher, the earlier a merge producing that piece applies) and ``tokenizer.ggml.token_type``
(gguf's ``TokenType``: 1 normal, 3 control, 4 user-defined, 6 byte). There is no merge list: a
SentencePiece BPE model merges, at every step, the adjacent pair whose concatenation is a piece
of the highest score (leftmost first on a tie), until no adjacent pair forms a piece. A symbol
that is not a piece falls back to its UTF-8 bytes, each the byte piece ``<0xXX>``.

That is the algorithm of llama.cpp's SPM tokenizer (``llm_tokenizer_spm`` in
``src/llama-vocab.cpp``) and of SentencePiece's BPE model; this is an independent implementation
of it. User-defined pieces (e.g. runs of spaces or newlines) are matched whole before the merges,
as llama.cpp does; control pieces (``<bos>``, ``<start_of_turn>``, ...) only by id, never from
text. ``add_space_prefix`` is False for Gemma 3 (``tokenizer.ggml.add_space_prefix``).
"""

from __future__ import annotations

import heapq
import re
from typing import Sequence

import numpy as np

__all__ = ["SentencePieceBPE"]

SPACE_MARK = "\u2581"
NORMAL, CONTROL, USER_DEFINED, BYTE = 1, 3, 4, 6  # gguf.TokenType values


class SentencePieceBPE:
    """Encode / decode text with a SentencePiece-BPE vocabulary.

    Args:
        pieces: ``V`` strings, piece ``i`` is token id ``i``.
        scores: ``V`` merge priorities (float; larger merges first).
        types: ``V`` gguf ``TokenType`` ints.
        bos_id: the id :meth:`encode` prepends when ``add_bos``.
    """

    def __init__(self, pieces: Sequence[str], scores: Sequence[float], types: Sequence[int], bos_id: int):
        if not len(pieces) == len(scores) == len(types):
            raise ValueError(f"pieces, scores, types: expected equal lengths, got {len(pieces)}, {len(scores)}, {len(types)}")
        self.pieces = list(pieces)
        self.scores = np.asarray(scores, dtype=np.float32)
        self.types = np.asarray(types, dtype=np.int32)
        self.bos_id = int(bos_id)
        self.ids = {p: i for i, p in enumerate(self.pieces) if self.types[i] in (NORMAL, USER_DEFINED)}
        self.byte_ids = {int(self.pieces[i][3:5], 16): i for i in np.flatnonzero(self.types == BYTE)}
        if len(self.byte_ids) != 256:
            raise ValueError(f"token_type: expected 256 byte pieces <0x00>..<0xFF>, got {len(self.byte_ids)}")
        user = sorted((self.pieces[i] for i in np.flatnonzero(self.types == USER_DEFINED)), key=len, reverse=True)
        # the longest user-defined piece wins where several match (regex alternation is ordered)
        self._user_split = re.compile("(" + "|".join(re.escape(p) for p in user) + ")") if user else None

    @classmethod
    def from_gguf(cls, reader) -> "SentencePieceBPE":
        """From a ``gguf.GGUFReader`` whose ``tokenizer.ggml.model`` is ``'llama'`` (SentencePiece)."""
        from .model import gguf_field

        kind = gguf_field(reader, "tokenizer.ggml.model")
        if kind != "llama":
            raise ValueError(f"tokenizer.ggml.model: expected 'llama' (SentencePiece), got {kind!r}")
        if gguf_field(reader, "tokenizer.ggml.add_space_prefix", False):
            raise ValueError("tokenizer.ggml.add_space_prefix: expected False (Gemma 3), got True")
        return cls(gguf_field(reader, "tokenizer.ggml.tokens"), gguf_field(reader, "tokenizer.ggml.scores"),
                   gguf_field(reader, "tokenizer.ggml.token_type"), int(gguf_field(reader, "tokenizer.ggml.bos_token_id")))

    # ------------------------------------------------------------------------------ encode

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of ``text`` (``[bos] + ...`` when ``add_bos``)."""
        out = [self.bos_id] if add_bos else []
        escaped = text.replace(" ", SPACE_MARK)
        parts = self._user_split.split(escaped) if self._user_split else [escaped]
        for i, part in enumerate(parts):
            if not part:
                continue
            if i % 2:  # a user-defined piece, matched whole
                out.append(self.ids[part])
            else:
                out.extend(self._merge(part))
        return out

    def _merge(self, text: str) -> list[int]:
        """BPE over the characters of ``text``: highest-scoring adjacent merge first, leftmost on ties."""
        symbols = list(text)
        left = list(range(-1, len(symbols) - 1))
        right = list(range(1, len(symbols) + 1))
        right[-1] = -1
        heap: list[tuple[float, int, int, str]] = []

        def push(a: int, b: int) -> None:
            if a < 0 or b < 0:
                return
            piece = symbols[a] + symbols[b]
            tid = self.ids.get(piece)
            if tid is not None:
                heapq.heappush(heap, (-float(self.scores[tid]), a, b, piece))

        for a in range(len(symbols) - 1):
            push(a, a + 1)
        while heap:
            _, a, b, piece = heapq.heappop(heap)
            if right[a] != b or symbols[a] + symbols[b] != piece:  # stale: a side has merged since
                continue
            symbols[a], symbols[b] = piece, ""
            right[a] = right[b]
            if right[b] >= 0:
                left[right[b]] = a
            push(left[a], a)
            push(a, right[a])
        out: list[int] = []
        for s in symbols:
            if not s:
                continue
            tid = self.ids.get(s)
            if tid is not None:
                out.append(tid)
            else:
                out.extend(self.byte_ids[byte] for byte in s.encode("utf-8"))
        return out

    # ------------------------------------------------------------------------------ decode

    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str:
        """Text of ``ids``: byte pieces joined into UTF-8, ``▁`` back to spaces, control pieces
        dropped when ``skip_special`` (else shown as their piece, e.g. ``<eos>``)."""
        chunks: list[bytes] = []
        for i in map(int, ids):
            kind = self.types[i]
            if kind == BYTE:
                chunks.append(bytes([int(self.pieces[i][3:5], 16)]))
            elif kind == CONTROL and skip_special:
                continue
            else:
                chunks.append(self.pieces[i].replace(SPACE_MARK, " ").encode("utf-8"))
        return b"".join(chunks).decode("utf-8", errors="replace")
