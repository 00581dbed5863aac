"""Greedy generation with an injected decode-attention op, checked against a float64 reference.

Two generations run from the same host prefill (same bfloat16 KV cache contents):

1. **op run** - every layer's decode attention is the injected op. At every layer of every step the
   float64 :func:`~ttnn_flashdecode.op.reference.attention_reference` is also evaluated on the *same*
   bfloat16 Q/K/V the op saw, giving the per-layer PCC / max-abs / relative-L2 figures.
2. **reference run** - an independent greedy generation whose decode attention is the float64
   reference (result fed on in float32). Its tokens are what "the reference's tokens" means.

Why a full second generation rather than a teacher-forced top-1 check on the op run's hidden
states: the issue asks that the *generated tokens equal the reference's*, i.e. that two complete
greedy trajectories agree; only a second generation answers that literally (a teacher-forced check
would keep comparing even after the sequences have diverged). The extra cost is one more host
forward per token plus 30 tiny float64 attentions - small next to the emulated op. Both runs also
record each step's top-1/top-2 logit margin, so a mismatch on a near-tie is visible as such.

Every generated token passes through the op: the prefill covers the prompt minus its last token,
and decode step 0 feeds that last prompt token. The prefill runs on the host, except that the
attention of its first ``prefill_layers`` layers goes through the op in CHUNK mode (causal chunks of
up to 32 positions, ``attention(q, k, v, chunk_start=s)``); each of those calls is compared with the
float64 reference on the same bfloat16 inputs, like the decode calls. Both generations start from
that one prefill's KV cache.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from ttnn_flashdecode.op.reference import attention_reference, max_abs, pcc, relative_l2
from .model import KVCache, SmolLM

TILE = 32
TILE_BYTES_BF16 = TILE * TILE * 2  # one 32x32 bfloat16 tile in DRAM
# KV-cache capacity is rounded up to whole double blocks of 1 tile (64 positions): the op reads
# whole double blocks, and needs a capacity whose tile count a double block divides.
CAPACITY_MULTIPLE = 2 * TILE


def round_up(n: int, m: int) -> int:
    return ((n + m - 1) // m) * m


def min_kv_bytes(cur_pos: Sequence[int], n_layers: int, n_kv_heads: int, head_dim: int,
                 tile_bytes: int = TILE_BYTES_BF16) -> int:
    """Minimum DRAM bytes one decode step must read from the KV cache.

    Every live K and V tile of every layer, user and KV head read exactly once:
    ``sum_layers sum_users n_kv * ceil((cur_pos+1)/32) * ceil(head_dim/32) * tile_bytes * 2 (K and V)``
    (``tile_bytes``: 2048 for bfloat16, 1088 bfloat8_b, 576 bfloat4_b).
    """
    dim_tiles = math.ceil(head_dim / TILE)
    per_layer = sum(n_kv_heads * math.ceil((p + 1) / TILE) * dim_tiles * tile_bytes * 2 for p in cur_pos)
    return n_layers * per_layer


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _dram_bytes_read(report_fn: Callable[[], Any] | None) -> int | None:
    """DRAM bytes the op's last call read, from the emulator's counters
    (``ttnn_flashdecode.last_report().totals.dram_read_bytes``); None after a device run."""
    report = report_fn() if report_fn is not None else None
    return None if report is None else int(report.totals.dram_read_bytes)


def top_two(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: argmax token and the top-1 minus top-2 logit margin."""
    top = np.argmax(logits, axis=-1)
    part = np.partition(logits, -2, axis=-1)
    return top, (part[:, -1] - part[:, -2]).astype(np.float64)


class LayerFigures:
    """Per layer, every op call's PCC, max-abs and relative L2 error against the float64 reference."""

    def __init__(self, layers: int):
        self.pcc: list[list[float]] = [[] for _ in range(layers)]
        self.max_abs: list[list[float]] = [[] for _ in range(layers)]
        self.relative_l2: list[list[float]] = [[] for _ in range(layers)]

    def record(self, layer: int, out, ref: np.ndarray, what: str) -> None:
        """Adds one call's figures; ``what`` names the output in the shape error.

        Raises:
            ValueError: ``out`` does not have the reference's shape.
        """
        got = np.asarray(out)
        if got.shape != ref.shape:
            raise ValueError(f"{what}: expected shape {list(ref.shape)}, got {list(got.shape)}")
        self.pcc[layer].append(pcc(got, ref))
        self.max_abs[layer].append(max_abs(got, ref))
        self.relative_l2[layer].append(relative_l2(got, ref))

    def summary(self, layer: int) -> dict:
        """The layer's calls, lowest PCC and largest errors."""
        return {"layer": layer, "calls": len(self.pcc[layer]), "pcc_min": min(self.pcc[layer]),
                "max_abs_max": max(self.max_abs[layer]), "relative_l2_max": max(self.relative_l2[layer])}


def _generate(
    model: SmolLM,
    first_tokens: list[int],
    start_pos: list[int],
    n_tokens: int,
    cache: KVCache,
    attention: Callable[..., np.ndarray],
    *,
    attn_kwargs: dict | None,
    observer=None,
    label: str,
    progress: Callable[[str], None] | None,
) -> tuple[list[list[int]], list[list[float]], float]:
    """Greedy decode ``n_tokens`` steps for all users; returns (tokens[step][user], margins, seconds)."""
    tokens = list(first_tokens)
    out_tokens, margins = [], []
    t0 = time.perf_counter()
    for step in range(n_tokens):
        positions = [p + step for p in start_pos]
        logits = model.decode_step(tokens, positions, cache, attention, observer=observer, attn_kwargs=attn_kwargs)
        top, margin = top_two(logits)
        tokens = [int(t) for t in top]
        out_tokens.append(tokens)
        margins.append([float(m) for m in margin])
        if progress is not None:
            el = time.perf_counter() - t0
            eta = el / (step + 1) * (n_tokens - step - 1)
            shown = " | ".join(repr(model.decode([t])) for t in tokens)
            progress(f"[{label}] token {step + 1}/{n_tokens}: {shown}   ({el:.1f}s elapsed, ~{eta:.0f}s left)")
    return out_tokens, margins, time.perf_counter() - t0


def run_demo(
    model: SmolLM,
    prompts: Sequence[str],
    n_tokens: int,
    attention: Callable[..., np.ndarray],
    *,
    attn_kwargs: dict | None = None,
    backend_label: str = "unknown",
    report_fn: Callable[[], Any] | None = None,
    chat: bool = False,
    prefill_layers: int = 0,
    progress: Callable[[str], None] | None = _stderr,
    cache_label: str = "contiguous bfloat16",
    kv_tile_bytes: int = TILE_BYTES_BF16,
    capacity_multiple: int = CAPACITY_MULTIPLE,
) -> dict:
    """Run the op generation and the reference generation; return a JSON-serialisable result dict.

    ``attention`` follows the ``ttnn_flashdecode.attention`` contract (numpy in, numpy out) and is
    called as ``attention(q, k, v, cur_pos=..., **attn_kwargs)``. ``prompts``: one string per user
    (different lengths allowed). ``chat=True`` wraps each prompt in the model's ChatML template.
    ``prefill_layers``: the first this many layers of the prompt prefill attend through
    ``attention`` in CHUNK mode (``attention(q, k, v, chunk_start=s, **attn_kwargs)``, chunks of
    up to 32 positions); 0 (default) prefills on the host only. ``cache_label``: how the op sees
    the cache (e.g. ``demo.serving_cache.ServingCache.label``: paged, block-float), whose tiles take
    ``kv_tile_bytes``; the reference always reads the model's contiguous bfloat16 cache.
    ``capacity_multiple``: the cache's capacity is rounded up to it (whole double tiles, whole blocks).
    """
    if n_tokens < 1:
        raise ValueError(f"n_tokens: expected >= 1, got {n_tokens}")
    if not prompts:
        raise ValueError("prompts: expected at least one prompt, got none")
    cfg = model.config
    rendered = [model.chat_prompt(p) if chat else p for p in prompts]
    ids = [model.encode(p) for p in rendered]
    for b, x in enumerate(ids):
        if not x:
            raise ValueError(f"prompt {b}: expected at least one token, got an empty prompt")
    lens = [len(x) for x in ids]
    capacity = round_up(max(lens) + n_tokens, capacity_multiple)
    if capacity > cfg.context_length:
        raise ValueError(f"prompt + tokens: expected at most {cfg.context_length} positions, got {max(lens) + n_tokens}")
    batch = len(prompts)
    if not 0 <= prefill_layers <= cfg.n_layers:
        raise ValueError(f"prefill_layers: expected 0..{cfg.n_layers}, got {prefill_layers}")
    kw = dict(attn_kwargs or {})

    # ---- prefill of every prompt but its last token (shared by both runs); the first
    # prefill_layers layers attend through the op in CHUNK mode, compared with float64 per call
    prefill_figures = LayerFigures(prefill_layers)

    def compare_chunk(layer, start, q, k, v, out):
        prefill_figures.record(layer, out, attention_reference(q, k, v, chunk_start=start), "prefill attention output")

    t0 = time.perf_counter()
    cache = KVCache(cfg.n_layers, batch, cfg.n_kv_heads, capacity, cfg.head_dim)
    for b, x in enumerate(ids):
        if len(x) > 1:
            model.prefill(x[:-1], cache, user=b, attention=attention if prefill_layers else None,
                          attention_layers=prefill_layers, observer=compare_chunk, attn_kwargs=kw)
    prefill_s = time.perf_counter() - t0
    prefill_calls = sum(len(x) for x in prefill_figures.pcc)
    if progress:
        how = (f"layers 0..{prefill_layers - 1} attend through the op in CHUNK mode ({prefill_calls} calls), the rest "
               "on the host" if prefill_layers else "on the host")
        progress(f"prefill: {batch} prompt(s) of {lens} tokens in {prefill_s:.2f}s ({how}); KV cache capacity {capacity}")
    first = [x[-1] for x in ids]
    start = [n - 1 for n in lens]

    # ---- op run, with the per-layer float64 comparison on the op's own inputs
    layer_figures = LayerFigures(cfg.n_layers)
    call_s: list[float] = []
    ref_call_s: list[float] = []
    measured_bytes: list[int | None] = []
    reported_backends: set[str] = set()

    def timed_op(q, k, v, *, cur_pos, **kwargs):
        t = time.perf_counter()
        out = attention(q, k, v, cur_pos=cur_pos, **kwargs)
        elapsed = time.perf_counter() - t
        # a device adapter times the op alone (without its host<->device copies)
        op_only = getattr(attention, "last_op_s", None)
        call_s.append(op_only if op_only is not None else elapsed)
        nbytes = _dram_bytes_read(report_fn)
        measured_bytes.append(nbytes)
        if nbytes is not None:
            reported_backends.add("emulator")
        return out

    def compare(layer, q, k, v, cur_pos, out):
        t = time.perf_counter()
        ref = attention_reference(q, k, v, cur_pos=cur_pos)
        ref_call_s.append(time.perf_counter() - t)
        layer_figures.record(layer, out, ref, "attention output")

    op_tokens, op_margin, op_s = _generate(
        model, first, start, n_tokens, cache.copy(), timed_op, attn_kwargs=kw, observer=compare, label="op", progress=progress
    )
    ref_tokens, ref_margin, ref_s = _generate(
        model, first, start, n_tokens, cache.copy(), attention_reference, attn_kwargs=None, label="reference", progress=progress
    )

    # ---- assemble
    stop_ids = {cfg.eos_id, 0}  # <|im_end|>, <|endoftext|>
    users = []
    for b in range(batch):
        op_ids = [op_tokens[s][b] for s in range(n_tokens)]
        ref_ids = [ref_tokens[s][b] for s in range(n_tokens)]
        steps = []
        for s in range(n_tokens):
            steps.append(
                {
                    "step": s,
                    "position": start[b] + s,
                    "op_token": op_ids[s],
                    "op_text": model.decode([op_ids[s]]),
                    "ref_token": ref_ids[s],
                    "ref_text": model.decode([ref_ids[s]]),
                    "match": op_ids[s] == ref_ids[s],
                    "op_margin": op_margin[s][b],
                    "ref_margin": ref_margin[s][b],
                }
            )
        first_mismatch = next((s for s in range(n_tokens) if op_ids[s] != ref_ids[s]), None)
        stop = next((s + 1 for s, t in enumerate(op_ids) if t in stop_ids), None)
        users.append(
            {
                "user": b,
                "prompt": prompts[b],
                "prompt_tokens": lens[b],
                "generated_tokens": op_ids,
                "generated_text": model.decode(op_ids),
                # the text up to and including the first end-of-turn/end-of-text token (generation
                # itself always runs n_tokens steps so the batch stays in lockstep)
                "generated_text_until_stop": model.decode(op_ids[:stop]) if stop else model.decode(op_ids),
                "stopped_at_step": None if stop is None else stop - 1,
                "reference_tokens": ref_ids,
                "reference_text": model.decode(ref_ids),
                "tokens_match": first_mismatch is None,
                "first_mismatch_step": first_mismatch,
                "steps": steps,
            }
        )
    layers = [{k: v for k, v in layer_figures.summary(i).items() if k != "calls"} for i in range(cfg.n_layers)]
    prefill_layer_figures = [prefill_figures.summary(i) for i in range(prefill_layers) if prefill_figures.pcc[i]]
    min_bytes = [min_kv_bytes([p + s for p in start], cfg.n_layers, cfg.n_kv_heads, cfg.head_dim, kv_tile_bytes)
                 for s in range(n_tokens)]
    whole_cache = cfg.n_layers * batch * cfg.n_kv_heads * (capacity // TILE) * math.ceil(cfg.head_dim / TILE) * TILE_BYTES_BF16 * 2
    calls_per_step = cfg.n_layers
    measured_per_step = None
    if measured_bytes and all(x is not None for x in measured_bytes):
        measured_per_step = [sum(measured_bytes[s * calls_per_step : (s + 1) * calls_per_step]) for s in range(n_tokens)]
    att_total = sum(call_s)
    where = backend_label
    if reported_backends and not any(b in backend_label for b in reported_backends):
        where = f"{', '.join(sorted(reported_backends))} (per the op's report); requested: {backend_label}"
    return {
        "model": {
            "name": "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32)",
            "gguf": str(model.path),
            "n_layers": cfg.n_layers,
            "n_q_heads": cfg.n_heads,
            "n_kv_heads": cfg.n_kv_heads,
            "q_rows": cfg.q_rows,
            "head_dim": cfg.head_dim,
            "hidden": cfg.hidden,
            "rope_theta": cfg.rope_theta,
            "rms_eps": cfg.rms_eps,
            "rope_layout": model.rope_layout,
        },
        "chat_template": chat,
        "n_tokens": n_tokens,
        "batch": batch,
        "kv_cache": {"capacity": capacity, "dtype": "bfloat16", "shape_per_layer": [batch, cfg.n_kv_heads, capacity, cfg.head_dim],
                     "op_reads": cache_label, "op_tile_bytes": kv_tile_bytes},
        "users": users,
        "all_tokens_match": all(u["tokens_match"] for u in users),
        "layers": layers,
        "pcc_min": min(x["pcc_min"] for x in layers),
        "max_abs_max": max(x["max_abs_max"] for x in layers),
        "prefill": {
            "attention_layers": prefill_layers,
            "chunk_positions": 32,
            "calls": prefill_calls,
            "layers": prefill_layer_figures,
            "pcc_min": min((x["pcc_min"] for x in prefill_layer_figures), default=None),
            "max_abs_max": max((x["max_abs_max"] for x in prefill_layer_figures), default=None),
        },
        "attention": {
            "ran_on": where,
            "requested_backend": backend_label,
            "calls": len(call_s),
            "ms_per_call_mean": 1e3 * att_total / max(len(call_s), 1),
            "ms_per_call_median": 1e3 * statistics.median(call_s) if call_s else 0.0,
            "reference_ms_per_call_mean": 1e3 * sum(ref_call_s) / max(len(ref_call_s), 1),
        },
        "kv_bytes": {
            "min_per_token": min_bytes,
            "min_per_token_mean": sum(min_bytes) / n_tokens,
            "measured_per_token": measured_per_step,  # None after a device run (no emulator counters)
            "whole_cache_per_token": whole_cache,
        },
        "timing_s": {
            "prefill": prefill_s,
            "op_run": op_s,
            "op_run_attention": att_total,
            "op_run_host_and_check": op_s - att_total,
            "op_run_per_token": op_s / n_tokens,
            "reference_run": ref_s,
            "reference_run_per_token": ref_s / n_tokens,
        },
    }


def format_bytes(n: float) -> str:
    """``n`` bytes for a report: ``"512 B"``, ``"8.1 MiB"`` (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n}"


def emit_result(result: dict, json_path: str | None, format_fn: Callable[[dict], str]) -> None:
    """A demo's output: ``format_fn(result)`` on stdout, and the result as JSON to ``json_path``
    (``'-'``: the JSON on stdout instead of the report; None: no JSON)."""
    if json_path == "-":
        json.dump(result, sys.stdout, indent=2)
        print()
        return
    print(format_fn(result))
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        print(f"JSON written to {json_path}")


def worst_pcc(r: dict) -> float:
    """The worst per-layer PCC of a :func:`run_demo` result: decode calls and CHUNK prefill calls."""
    prefill = (r.get("prefill") or {}).get("pcc_min")
    return r["pcc_min"] if prefill is None else min(r["pcc_min"], prefill)


def format_report(r: dict) -> str:
    """Human-readable report of a :func:`run_demo` result."""
    m = r["model"]
    lines = []
    add = lines.append
    add("=" * 78)
    add("ttnn-flashdecode demo: SmolLM2-135M-Instruct, decode attention through the op")
    add("=" * 78)
    add(
        f"model: {m['n_layers']} layers, {m['n_q_heads']} Q heads / {m['n_kv_heads']} KV heads (q_rows {m['q_rows']}), "
        f"head_dim {m['head_dim']}, hidden {m['hidden']}, RoPE theta {m['rope_theta']:g}, {m['rope_layout']}"
    )
    kv = r["kv_cache"]
    add(f"KV cache: {kv['dtype']} {kv['shape_per_layer']} per layer (K and V); batch {r['batch']}, {r['n_tokens']} new tokens per user")
    add(f"  the op reads it as: {kv.get('op_reads', 'contiguous bfloat16')}; the float64 reference reads the bfloat16 cache")
    a = r["attention"]
    add(
        f"attention ran on: {a['ran_on']}   ({a['calls']} calls, {a['ms_per_call_mean']:.2f} ms/call mean, "
        f"{a['ms_per_call_median']:.2f} ms median; float64 reference {a['reference_ms_per_call_mean']:.2f} ms/call)"
    )
    add("")
    for u in r["users"]:
        tag = f"user {u['user']}" if r["batch"] > 1 else "prompt"
        add(f"--- {tag} ({u['prompt_tokens']} tokens{', chat template' if r['chat_template'] else ''}):")
        add(u["prompt"])
        add("--- generated (op):")
        add(u["generated_text_until_stop"])
        if u["stopped_at_step"] is not None and u["stopped_at_step"] < len(u["generated_tokens"]) - 1:
            add(f"    (end of turn at step {u['stopped_at_step']}; the remaining steps are still generated and compared below)")
        if u["tokens_match"]:
            add(f"--- reference (float64 attention): identical, {len(u['generated_tokens'])}/{len(u['generated_tokens'])} tokens")
        else:
            add(f"--- reference (float64 attention) DIFFERS from step {u['first_mismatch_step']}:")
            add(u["reference_text"])
        add("")
        add(f"  {'step':>4} {'pos':>5}  {'op token':<18} {'reference token':<18} {'top-1 equal':<11} {'margin':>7}   (top-1 minus top-2 logit, op run)")
        for s in u["steps"]:
            add(
                f"  {s['step']:>4} {s['position']:>5}  {repr(s['op_text'])[:18]:<18} {repr(s['ref_text'])[:18]:<18} "
                f"{'yes' if s['match'] else 'NO':<11} {s['op_margin']:>7.3f}"
            )
        add("")
    op_reads = kv.get("op_reads", "contiguous bfloat16")
    if op_reads == "contiguous bfloat16":
        add("per-layer attention vs float64 reference on the same bf16 Q/K/V (worst over tokens):")
    else:
        add(f"per-layer attention vs float64 reference on the model's bf16 Q/K/V, which the op read as {op_reads}")
        add("(worst over tokens; a block-float cache's own quantisation is part of the difference):")
    add(f"  {'layer':>5} {'PCC min':>10} {'max-abs':>10} {'rel-L2':>10}")
    for x in r["layers"]:
        add(f"  {x['layer']:>5} {x['pcc_min']:>10.6f} {x['max_abs_max']:>10.2e} {x['relative_l2_max']:>10.2e}")
    add(f"  worst: PCC {r['pcc_min']:.6f}, max-abs {r['max_abs_max']:.2e}")
    add("")
    pre = r.get("prefill") or {}
    if pre.get("calls"):
        add(
            f"prompt prefill: layers 0..{pre['attention_layers'] - 1} attend through the op in CHUNK mode "
            f"(chunk_start=, up to {pre['chunk_positions']} positions per call, {pre['calls']} calls); vs float64 on "
            f"the same bf16 Q/K/V: worst PCC {pre['pcc_min']:.6f}, max-abs {pre['max_abs_max']:.2e}"
        )
    else:
        add("prompt prefill: on the host (no CHUNK-mode op calls)")
    add("")
    b = r["kv_bytes"]
    meas = b["measured_per_token"]
    add(
        f"KV bytes read per token (all layers/users): minimum {format_bytes(b['min_per_token_mean'])} "
        f"(each live K and V tile once), "
        + (f"measured {format_bytes(sum(meas) / len(meas))} ({sum(meas) / sum(b['min_per_token']):.2f}x minimum; the rest is "
           f"each call's query rows, the scaler's and scale's three constant rows (384 B) and a partial last tile's "
           f"2 KiB mask per (layer, user, KV group), as much as a short request's own K/V, and each core's 128-byte "
           f"work row)" if meas
           else "measured: not reported (device run)")
    )
    t = r["timing_s"]
    add(
        f"time: prefill {t['prefill']:.2f}s; op run {t['op_run']:.1f}s ({t['op_run_per_token']:.2f} s/token, of which attention "
        f"{t['op_run_attention']:.1f}s); reference run {t['reference_run']:.1f}s ({t['reference_run_per_token']:.2f} s/token)"
    )
    worst = worst_pcc(r)
    ok = r["all_tokens_match"] and worst >= 0.999
    add(
        f"RESULT: generated tokens {'EQUAL' if r['all_tokens_match'] else 'DIFFER FROM'} the float64 reference's; "
        f"worst layer PCC {worst:.6f} {'>=' if worst >= 0.999 else '<'} 0.999 -> {'PASS' if ok else 'FAIL'}"
    )
    return "\n".join(lines)
