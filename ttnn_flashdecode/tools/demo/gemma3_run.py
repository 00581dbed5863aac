"""Gemma 3 270M's greedy generation with its attention through the op, against float64 references.

Three generations of the same model on the same weights and prompt, each with its own prefill
and bfloat16 KV cache (``[1, 1, capacity, 256]`` per layer):

1. **op run** - the prompt (all but its last token) is prefilled with every layer's attention
   through ``ttnn_flashdecode.attention`` in CHUNK mode (``chunk_start=s``, 32 positions a call,
   Q rows ``[1, 1, C, 4*256]``), then every generated token's attention goes through the drop-in
   as tt-transformers' decode attention calls it (``forward_decode``), with ttnn's sliding window
   added for the local layers: ``scaled_dot_product_attention_decode(q, k, v, cur_pos_tensor=...,
   scale=..., sliding_window_size=...)`` with Q in the heads layout ``[1, b, nh, dh]``
   (``paged_scaled_dot_product_attention_decode`` with a page table when paged).
   Local layers pass ``sliding_window_size=512``, global ones ``None``; the scale is
   ``query_pre_attn_scalar ** -0.5``. Every call is also evaluated by the float64
   ``attention_reference`` on the same bfloat16 inputs with the same window: per-layer PCC.
2. **reference run** - the same generation with the float64 reference as every attention (window
   included). Its tokens are "the reference's tokens".
3. **no-window reference** - the float64 reference with every layer global: what a run that
   ignored the window computes. Its tokens and logits differ from the reference's once the
   prompt is longer than the window, which shows the window binds.

DRAM bytes: after every decode call the emulator's ``last_report().totals.dram_read_bytes``;
the minimum per layer is the K and V tiles the row's live positions touch once (a local layer's
window ``p - 511 .. p``, a global layer's ``0 .. p``).
"""

from __future__ import annotations

import math
import time
from typing import Callable, Sequence

import numpy as np

from ttnn_flashdecode.op.reference import attention_reference
from .gemma3 import Gemma3
from .generate import TILE, TILE_BYTES_BF16, LayerFigures, top_two, round_up
from .model import BF16, PREFILL_CHUNK, KVCache

Progress = Callable[[str], None] | None


def kv_bytes_touched(position: int, window: int | None, n_kv_heads: int, head_dim: int,
                     tile_bytes: int = TILE_BYTES_BF16) -> int:
    """Least DRAM bytes one decode row at ``position`` reads: each K and V tile holding a position it
    attends (``max(0, position + 1 - window) .. position``, all of ``0 .. position`` without a
    window) once, for every KV head. Units: bytes; ``tile_bytes`` a 32x32 tile's (2048 bfloat16)."""
    first = 0 if window is None else max(0, position + 1 - window)
    position_tiles = position // TILE - first // TILE + 1
    return n_kv_heads * position_tiles * math.ceil(head_dim / TILE) * tile_bytes * 2


def _rows(q: np.ndarray) -> np.ndarray:
    """``[n, H, D]`` float32 -> the op's row layout ``[1, 1, n, H*D]`` bfloat16."""
    n, heads, dim = q.shape
    return q.reshape(1, 1, n, heads * dim).astype(BF16)


class ReferenceAttention:
    """The float64 reference as the model's attention, on one user's bfloat16 cache.

    ``with_window=False`` gives every layer full attention (the no-window run). Prefill: one
    ``attention_reference(..., chunk_start=first)`` per layer over all of the prompt's rows.
    """

    def __init__(self, model: Gemma3, cache: KVCache, with_window: bool = True):
        self.model, self.cache, self.with_window = model, cache, with_window

    def window(self, layer: int) -> int | None:
        return self.model.config.window(layer) if self.with_window else None

    def _call(self, layer: int, q: np.ndarray, **position) -> np.ndarray:
        k, v = self.cache.k[layer][:1], self.cache.v[layer][:1]
        out = attention_reference(_rows(q), k, v, scale=self.model.config.scale, sliding_window_size=self.window(layer), **position)
        return np.asarray(out, np.float32).reshape(q.shape[0], -1)

    def prefill(self, layer: int, q: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return self._call(layer, q, chunk_start=int(positions[0]))

    def decode(self, layer: int, q: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return self._call(layer, q, cur_pos=[int(p) for p in positions])


class OpAttention:
    """The op as the model's attention, every call checked against float64 on the same inputs.

    Args:
        model, cache: the model and its one-user bfloat16 cache.
        decode_call: the drop-in (or a :class:`.serving_cache.ServingCache` around the paged
            one), called as tt-transformers' decode does: ``decode_call(q [1, 1, 4, 256], k, v,
            cur_pos_tensor=int32 [1], scale=1/16, sliding_window_size=512 or None)``.
        report_fn: ``ttnn_flashdecode.last_report`` (emulator counters), or None.
        progress: prints each prefilled layer.
    """

    def __init__(self, model: Gemma3, cache: KVCache, decode_call: Callable, report_fn, progress: Progress):
        from ttnn_flashdecode import attention

        self.model, self.cache, self.attention, self.decode_call = model, cache, attention, decode_call
        self.report_fn, self.progress = report_fn, progress
        n = model.config.n_layers
        self.prefill_figures, self.decode_figures = LayerFigures(n), LayerFigures(n)
        self.decode_bytes: list[list[int | None]] = []  # [step][layer]
        self.started = time.perf_counter()

    def _reference(self, layer: int, q_rows: np.ndarray, **position) -> np.ndarray:
        cfg = self.model.config
        return attention_reference(q_rows, self.cache.k[layer][:1], self.cache.v[layer][:1], scale=cfg.scale,
                                   sliding_window_size=cfg.window(layer), **position)

    def prefill(self, layer: int, q: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """CHUNK mode: ``attention(q_rows, k, v, chunk_start=s, scale, sliding_window_size)`` per 32 rows."""
        cfg = self.model.config
        k, v = self.cache.k[layer][:1], self.cache.v[layer][:1]
        out = np.empty((q.shape[0], cfg.n_heads * cfg.head_dim), np.float32)
        first = int(positions[0])
        for start in range(0, q.shape[0], PREFILL_CHUNK):
            q_rows = _rows(q[start : start + PREFILL_CHUNK])
            result = self.attention(q_rows, k, v, chunk_start=first + start, scale=cfg.scale,
                                    sliding_window_size=cfg.window(layer), backend="emulator")
            self.prefill_figures.record(layer, result, self._reference(layer, q_rows, chunk_start=first + start),
                                        "CHUNK attention output")
            out[start : start + q_rows.shape[2]] = np.asarray(result, np.float32).reshape(q_rows.shape[2], -1)
        if self.progress:
            self._report_prefill(layer, q.shape[0], first)
        return out

    def _report_prefill(self, layer: int, rows: int, first: int) -> None:
        cfg = self.model.config
        done = time.perf_counter() - self.started
        kind = "global, no window" if cfg.is_global(layer) else f"local, window {cfg.window(layer)}"
        left = done / (layer + 1) * (cfg.n_layers - layer - 1)
        self.progress(f"[op prefill] layer {layer + 1:>2}/{cfg.n_layers} ({kind}): positions {first}..{first + rows - 1} in "
                      f"{math.ceil(rows / PREFILL_CHUNK)} CHUNK calls, worst PCC {min(self.prefill_figures.pcc[layer]):.6f}"
                      f"   ({done:.0f}s elapsed, ~{left:.0f}s left)")

    def decode(self, layer: int, q: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The drop-in on Q ``[1, b, nh, dh]`` with ``cur_pos_tensor``."""
        cfg = self.model.config
        if layer == 0:
            self.decode_bytes.append([])
        q_heads = q.reshape(1, q.shape[0], cfg.n_heads, cfg.head_dim).astype(BF16)
        result = self.decode_call(q_heads, self.cache.k[layer][:1], self.cache.v[layer][:1],
                                  cur_pos_tensor=np.asarray(positions, np.int32), scale=cfg.scale,
                                  sliding_window_size=cfg.window(layer))
        report = self.report_fn() if self.report_fn is not None else None
        self.decode_bytes[-1].append(None if report is None else int(report.totals.dram_read_bytes))
        reference = self._reference(layer, _rows(q), cur_pos=[int(p) for p in positions])
        got = np.asarray(result).reshape(reference.shape)
        self.decode_figures.record(layer, got, reference, "decode attention output")
        return got.astype(np.float32).reshape(q.shape[0], -1)


def generate(model: Gemma3, prompt_ids: Sequence[int], n_tokens: int, capacity: int, make_attention: Callable,
             label: str, progress: Progress) -> dict:
    """Prefill ``prompt_ids[:-1]``, then ``n_tokens`` greedy decode steps from the prompt's last token.

    ``make_attention(cache)`` gives an object with ``prefill`` / ``decode`` attends. Returns
    ``tokens``, ``margins`` (top-1 minus top-2 logit per step), ``logits`` ``[n_tokens, vocab]``
    float32, ``attention`` (the object), ``prefill_s`` and ``decode_s``.
    """
    cfg = model.config
    cache = KVCache(cfg.n_layers, 1, cfg.n_kv_heads, capacity, cfg.head_dim)
    attention = make_attention(cache)
    t0 = time.perf_counter()
    n = len(prompt_ids) - 1
    if n:
        model.forward(prompt_ids[:-1], range(n), cache, [0] * n, attention.prefill)
    prefill_s = time.perf_counter() - t0
    token, tokens, margins, logits_rows = prompt_ids[-1], [], [], []
    for step in range(n_tokens):
        logits = model.forward([token], [n + step], cache, [0], attention.decode)
        top, margin = top_two(logits)
        token = int(top[0])
        tokens.append(token)
        margins.append(float(margin[0]))
        logits_rows.append(logits[0])
        if progress:
            progress(f"[{label}] token {step + 1}/{n_tokens} at position {n + step}: {model.decode([token])!r}")
    return {"tokens": tokens, "margins": margins, "logits": np.stack(logits_rows), "attention": attention,
            "prefill_s": prefill_s, "decode_s": time.perf_counter() - t0 - prefill_s}


def first_mismatch(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first step where the two token lists differ, or None."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def logit_gap(a: dict, b: dict) -> float:
    """Largest ``|logit_a - logit_b|`` over the steps both runs took from the same tokens (up to and
    including the first step whose tokens differ, since logits at step s depend on tokens < s)."""
    mismatch = first_mismatch(a["tokens"], b["tokens"])
    steps = len(a["tokens"]) if mismatch is None else mismatch + 1
    return float(np.max(np.abs(a["logits"][:steps].astype(np.float64) - b["logits"][:steps])))
