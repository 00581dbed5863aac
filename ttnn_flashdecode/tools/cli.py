"""Command line of ttnn-flashdecode: ``python -m ttnn_flashdecode <command> [args...]``.

Each subcommand lives in its own module, ``ttnn_flashdecode.tools.<command>`` (hyphens in the command
become underscores: ``profile-report`` is ``ttnn_flashdecode.tools.profile_report``), which provides
``main(argv: list[str]) -> int`` and parses its own arguments (so ``demo --help`` is the
demo's help). This module only picks the subcommand and hands over the rest of argv.

Commands:
    demo            run the main job (``./run.sh demo`` runs this).
    bench           work balance, DRAM bytes and MODELLED device time per call (no card needed).
    profile-report  per-call duration and achieved GB/s from a Tracy ops_perf_results CSV.
    silicon-check   the device path through tt-metal's JIT on mock Wormhole/Blackhole devices.
    host-bench      MEASURED host CPU time per call, ours vs ttnn's decode op (a mock device without a card).
    wolfpine-check  the real reader and writer (probe compute kernel) on wolfpine's simulated Wormhole.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["COMMANDS", "main"]

# name -> one-line help. The implementation is ttnn_flashdecode.<name with - as _>.main(argv).
COMMANDS: dict[str, str] = {
    "demo": "run the flash-decode demo (the main job)",
    "bench": "work balance, DRAM bytes and modelled (not measured) device time per call",
    "profile-report": "per-call duration and achieved GB/s from tt-metal's ops_perf_results CSV",
    "silicon-check": "compile the kernels with tt-metal's JIT on mock devices (no card; nothing executes)",
    "host-bench": "measured host CPU time per call before / with generic_op, and ttnn's own decode op",
    "wolfpine-check": "run the real reader and writer (a probe compute kernel) on wolfpine's simulated Wormhole",
}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ttnn_flashdecode",
        description="Flash-decode grouped-query attention for TT-NN.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        # add_help=False: `COMMAND --help` is passed on to the command's own parser.
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _command(name: str):
    """Return ``ttnn_flashdecode.tools.<name>.main`` (``-`` read as ``_``)."""
    return importlib.import_module(f"ttnn_flashdecode.tools.{name.replace('-', '_')}").main


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand.

    Parameters:
        argv: command-line words after the program name; default ``sys.argv[1:]``.

    Returns:
        The process exit status: the subcommand's return value (0 on success).
        argparse exits with status 2 on an unknown command.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    # Only the first word is ours (the command, or -h); the rest belongs to the command.
    args = parser.parse_args(argv[:1])
    status = _command(args.command)(argv[1:])
    return int(status or 0)
