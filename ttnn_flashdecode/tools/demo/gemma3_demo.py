"""``python -m ttnn_flashdecode demo --model gemma3-270m``: Gemma 3 270M through the op, windows binding.

Runs :mod:`.gemma3_run`'s three generations (op, float64 reference, float64 without the window)
and prints the tokens step by step with their positions and the local layers' window, the worst
per-layer PCC of every op call against float64, and the decode DRAM bytes the emulator measured
against the minimum (a local layer's window, a global layer's whole history).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

from .gemma3 import Gemma3
from .gemma3_prompt import LONG_PROMPT
from .gemma3_run import OpAttention, ReferenceAttention, first_mismatch, generate, kv_bytes_touched, logit_gap
from .generate import format_bytes, emit_result, round_up

MODEL_NAME = "gemma3-270m"
DEFAULT_TOKENS = 16
PCC_BAR = 0.999

__all__ = ["main", "build_parser", "run_gemma3_demo", "format_gemma3_report", "MODEL_NAME"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m ttnn_flashdecode demo --model {MODEL_NAME}",
        description="Generate text with Gemma 3 270M whose attention runs through the op (prefill in CHUNK mode, "
        "decode through the ttnn drop-ins with the local layers' sliding window), compared with float64 references.",
    )
    p.add_argument("--model", choices=[MODEL_NAME], default=MODEL_NAME, help="the model (this parser serves Gemma 3 270M)")
    p.add_argument("--prompt", default=LONG_PROMPT, help="the prompt (default: a 741-token passage, so the 512 window binds)")
    p.add_argument("--tokens", type=int, default=DEFAULT_TOKENS, metavar="N", help=f"tokens to generate (default {DEFAULT_TOKENS})")
    p.add_argument("--layers", type=int, default=None, metavar="N",
                   help="run only the model's first N layers (a shortened model for quick checks; default all 18)")
    p.add_argument("--paged", action="store_true",
                   help="decode through paged_scaled_dot_product_attention_decode on a paged cache (blocks scattered by a random page table)")
    p.add_argument("--block-size", type=int, default=64, metavar="N", help="positions per cache block with --paged (default 64)")
    p.add_argument("--json", metavar="PATH", help="also write the result as JSON to PATH ('-' for stdout, replacing the report)")
    p.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    p.add_argument("--strict", action="store_true", help=f"exit 1 unless tokens match the reference and every PCC >= {PCC_BAR}")
    return p


def _decode_call(paged: bool, block_size: int):
    """The drop-in the decode steps call, and how the op reads the cache."""
    from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode, scaled_dot_product_attention_decode

    if not paged:
        return scaled_dot_product_attention_decode, "scaled_dot_product_attention_decode, contiguous bfloat16 cache"
    from .serving_cache import ServingCache

    serving = ServingCache(paged_scaled_dot_product_attention_decode, block_size)
    return serving, f"paged_scaled_dot_product_attention_decode, {serving.label} cache"


def _bytes_summary(model: Gemma3, op_attention: OpAttention, start: int) -> dict:
    """Measured decode DRAM bytes per token against the minimum, split local / global."""
    cfg = model.config
    steps = op_attention.decode_bytes
    known = all(b is not None for step in steps for b in step)

    def minimum(step: int, window_on: bool) -> tuple[int, int]:
        local = sum(kv_bytes_touched(start + step, cfg.window(li) if window_on else None, cfg.n_kv_heads, cfg.head_dim)
                    for li in range(cfg.n_layers) if not cfg.is_global(li))
        glob = sum(kv_bytes_touched(start + step, None, cfg.n_kv_heads, cfg.head_dim)
                   for li in range(cfg.n_layers) if cfg.is_global(li))
        return local, glob

    mins = [minimum(s, True) for s in range(len(steps))]
    whole = [sum(minimum(s, False)) for s in range(len(steps))]
    out = {"min_local": sum(m[0] for m in mins) / len(steps), "min_global": sum(m[1] for m in mins) / len(steps),
           "min_without_window": sum(whole) / len(steps), "measured_local": None, "measured_global": None}
    if known:
        out["measured_local"] = sum(sum(b for li, b in enumerate(step) if not cfg.is_global(li)) for step in steps) / len(steps)
        out["measured_global"] = sum(sum(b for li, b in enumerate(step) if cfg.is_global(li)) for step in steps) / len(steps)
    return out


def run_gemma3_demo(model: Gemma3, prompt: str, n_tokens: int, *, paged: bool = False, block_size: int = 64,
                    progress=None) -> dict:
    """The three generations and their comparison, as a JSON-serialisable dict (see :mod:`.gemma3_run`)."""
    import ttnn_flashdecode

    cfg = model.config
    ids = model.encode(prompt)
    if len(ids) < 2:
        raise ValueError(f"prompt: expected at least 2 tokens (<bos> and text), got {len(ids)}")
    capacity = round_up(len(ids) + n_tokens, max(64, block_size if paged else 64))
    if capacity > cfg.context_length:
        raise ValueError(f"prompt + tokens: expected at most {cfg.context_length} positions, got {len(ids) + n_tokens}")
    decode_call, decode_label = _decode_call(paged, block_size)
    if progress:
        progress(f"prompt: {len(ids)} tokens; prefill of positions 0..{len(ids) - 2} through the op in CHUNK mode "
                 f"({cfg.n_layers} layers x {-(-(len(ids) - 1) // 32)} calls), then {n_tokens} decode steps through {decode_label}")
    runs = {}
    runs["op"] = generate(model, ids, n_tokens, capacity,
                          lambda cache: OpAttention(model, cache, decode_call, ttnn_flashdecode.last_report, progress), "op", progress)
    runs["reference"] = generate(model, ids, n_tokens, capacity, lambda cache: ReferenceAttention(model, cache), "reference", progress)
    runs["no_window"] = generate(model, ids, n_tokens, capacity, lambda cache: ReferenceAttention(model, cache, with_window=False),
                                 "reference without the window", progress)
    return _assemble(model, ids, runs, capacity, decode_label, paged)


def _assemble(model: Gemma3, ids: list[int], runs: dict, capacity: int, decode_label: str, paged: bool) -> dict:
    cfg = model.config
    op, ref, nowin = runs["op"], runs["reference"], runs["no_window"]
    attention: OpAttention = op["attention"]
    start = len(ids) - 1
    layers = []
    for li in range(cfg.n_layers):
        pre, dec = attention.prefill_figures.summary(li), attention.decode_figures.summary(li)
        layers.append({"layer": li, "kind": "global" if cfg.is_global(li) else "local", "window": cfg.window(li),
                       "rope_base": cfg.rope_base(li), "prefill_pcc_min": pre["pcc_min"], "decode_pcc_min": dec["pcc_min"],
                       "max_abs_max": max(pre["max_abs_max"], dec["max_abs_max"]), "calls": pre["calls"] + dec["calls"]})
    steps = [{"step": s, "position": start + s, "window_first": max(0, start + s + 1 - cfg.sliding_window),
              "op_token": op["tokens"][s], "op_text": model.decode([op["tokens"][s]]), "ref_token": ref["tokens"][s],
              "ref_text": model.decode([ref["tokens"][s]]), "no_window_text": model.decode([nowin["tokens"][s]]),
              "match": op["tokens"][s] == ref["tokens"][s], "op_margin": op["margins"][s], "ref_margin": ref["margins"][s]}
             for s in range(len(op["tokens"]))]
    return {
        "model": {"name": "Gemma 3 270M (google/gemma-3-270m, Q4_K_M GGUF dequantised to float32)", "gguf": str(model.path),
                  "n_layers": cfg.n_layers, "global_layers": [li for li in range(cfg.n_layers) if cfg.is_global(li)],
                  "n_q_heads": cfg.n_heads, "n_kv_heads": cfg.n_kv_heads, "head_dim": cfg.head_dim, "hidden": cfg.hidden,
                  "sliding_window": cfg.sliding_window, "scale": cfg.scale, "rope_base_global": cfg.rope_theta,
                  "rope_base_local": cfg.rope_base_local},
        "prompt": model.decode(ids), "prompt_tokens": len(ids), "n_tokens": len(steps), "capacity": capacity,
        "decode_call": decode_label, "paged": paged,
        "generated_text": model.decode(op["tokens"]), "reference_text": model.decode(ref["tokens"]),
        "no_window_text": model.decode(nowin["tokens"]), "steps": steps,
        "tokens_match": op["tokens"] == ref["tokens"], "first_mismatch": first_mismatch(op["tokens"], ref["tokens"]),
        "no_window_first_mismatch": first_mismatch(nowin["tokens"], ref["tokens"]),
        "logit_gap_op": logit_gap(op, ref), "logit_gap_no_window": logit_gap(nowin, ref),
        "layers": layers, "pcc_min": min(min(x["prefill_pcc_min"], x["decode_pcc_min"]) for x in layers),
        "kv_bytes": _bytes_summary(model, attention, start),
        "timing_s": {"op_prefill": op["prefill_s"], "op_decode": op["decode_s"], "reference": ref["prefill_s"] + ref["decode_s"],
                     "no_window": nowin["prefill_s"] + nowin["decode_s"]},
    }


def format_gemma3_report(r: dict) -> str:
    """The human-readable report of a :func:`run_gemma3_demo` result."""
    m, lines = r["model"], []
    add = lines.append
    add("=" * 78)
    add("ttnn-flashdecode demo: Gemma 3 270M, every layer's attention through the op")
    add("=" * 78)
    add(f"model: {m['n_layers']} layers (global {m['global_layers']}, the rest local with window {m['sliding_window']}), "
        f"{m['n_q_heads']} Q heads / {m['n_kv_heads']} KV head, head_dim {m['head_dim']}, scale {m['scale']:g}, "
        f"RoPE base {m['rope_base_global']:g} global / {m['rope_base_local']:g} local")
    add(f"prompt: {r['prompt_tokens']} tokens (> window {m['sliding_window']}: the local layers drop the prompt's start); "
        f"prefill through attention(..., chunk_start=) in CHUNK mode; decode through {r['decode_call']}")
    add("")
    add("--- generated (op):")
    add(r["generated_text"])
    if r["tokens_match"]:
        add(f"--- float64 reference (window applied): identical, {r['n_tokens']}/{r['n_tokens']} tokens")
    else:
        add(f"--- float64 reference (window applied) DIFFERS from step {r['first_mismatch']}:")
        add(r["reference_text"])
    add(f"--- float64 reference WITHOUT the window (what ignoring it computes): "
        + ("same tokens" if r["no_window_first_mismatch"] is None else f"differs from step {r['no_window_first_mismatch']}") + ":")
    add(r["no_window_text"])
    add("")
    add(f"  {'step':>4} {'pos':>5} {'local window':>12}  {'op token':<16} {'reference':<16} {'equal':<5} {'margin':>7}  {'no window':<16}")
    for s in r["steps"]:
        add(f"  {s['step']:>4} {s['position']:>5} {s['window_first']:>5}..{s['position']:<5}  {repr(s['op_text'])[:16]:<16} "
            f"{repr(s['ref_text'])[:16]:<16} {'yes' if s['match'] else 'NO':<5} {s['op_margin']:>7.3f}  {repr(s['no_window_text'])[:16]:<16}")
    add("  (margin: the op run's top-1 minus top-2 logit; local window: the positions a local layer attends)")
    add(f"logits vs the float64 reference: max |diff| {r['logit_gap_op']:.3g} (op run), {r['logit_gap_no_window']:.3g} (no window)")
    add("")
    add("per-layer attention vs float64 on the same bf16 Q/K/V (worst over calls):")
    add(f"  {'layer':>5} {'kind':<7} {'window':>6} {'calls':>5} {'prefill PCC':>12} {'decode PCC':>11} {'max-abs':>9}")
    for x in r["layers"]:
        add(f"  {x['layer']:>5} {x['kind']:<7} {str(x['window'] or '-'):>6} {x['calls']:>5} {x['prefill_pcc_min']:>12.6f} "
            f"{x['decode_pcc_min']:>11.6f} {x['max_abs_max']:>9.2e}")
    add(f"  worst layer PCC: {r['pcc_min']:.6f}")
    add("")
    add(_format_bytes(r["kv_bytes"]))
    t = r["timing_s"]
    add(f"time: op prefill {t['op_prefill']:.1f}s, op decode {t['op_decode']:.1f}s ({t['op_decode'] / r['n_tokens']:.2f} s/token), "
        f"float64 reference {t['reference']:.1f}s, no-window reference {t['no_window']:.1f}s")
    ok = r["tokens_match"] and r["pcc_min"] >= PCC_BAR
    add(f"RESULT: generated tokens {'EQUAL' if r['tokens_match'] else 'DIFFER FROM'} the float64 reference's; worst layer PCC "
        f"{r['pcc_min']:.6f} {'>=' if r['pcc_min'] >= PCC_BAR else '<'} {PCC_BAR} -> {'PASS' if ok else 'FAIL'}")
    return "\n".join(lines)


def _format_bytes(b: dict) -> str:
    """The decode DRAM-bytes lines."""
    lines = [f"KV bytes read per decode token (emulator's DRAM counters): minimum {format_bytes(b['min_local'])} local "
             f"(each layer's 512-position window) + {format_bytes(b['min_global'])} global; "
             f"without the window the local layers' minimum would be {format_bytes(b['min_without_window'] - b['min_global'])}"]
    if b["measured_local"] is None:
        lines.append("  measured: not reported")
    else:
        lines.append(f"  measured: local {format_bytes(b['measured_local'])} ({b['measured_local'] / b['min_local']:.3f}x their minimum), "
                     f"global {format_bytes(b['measured_global'])} ({b['measured_global'] / b['min_global']:.3f}x); "
                     f"the rest is each call's Q rows, constants and tail mask")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.tokens < 1:
        raise SystemExit("--tokens: expected >= 1")
    if args.block_size < 32 or args.block_size % 32:
        raise SystemExit(f"--block-size: expected a positive multiple of 32 positions, got {args.block_size}")
    if not args.prompt.strip():
        raise SystemExit("--prompt: expected non-empty text")
    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    try:
        model = Gemma3.load(n_layers=args.layers)
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(str(exc)) from exc
    load_s = time.perf_counter() - t0
    if progress:
        progress(f"loaded {model.path.name} ({model.config.n_layers} layers) in {load_s:.1f}s")
    result = run_gemma3_demo(model, args.prompt, args.tokens, paged=args.paged, block_size=args.block_size, progress=progress)
    result["timing_s"]["load"] = load_s
    emit_result(result, args.json, format_gemma3_report)
    ok = result["tokens_match"] and result["pcc_min"] >= PCC_BAR
    return 0 if ok or not args.strict else 1
