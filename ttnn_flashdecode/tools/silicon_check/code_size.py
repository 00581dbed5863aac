"""Kernel code size against the limits in the wheel's ``dev_mem_map.h``.

tt-metal's ELF loader refuses a kernel image over ``MEM_<PROCESSOR>_KERNEL_SIZE`` (Wormhole's
NCRISC runs from a 16 KiB IRAM, so the reader is the kernel that can outgrow it). Two builds are
measured: the JIT's own ELFs (every variant), and a watcher build (``-DWATCHER_ENABLED``, what
``TT_METAL_WATCHER=1`` adds: asserts, NoC sanitizing, waypoints) of every variant where the limit is
an instruction RAM and of the largest elsewhere, made by replaying the logged compile and link lines
of the kernel with the define added (linked with the watcher firmware's data symbols left
unresolved, since the mock built a non-watcher firmware; code size does not depend on them). Sizes
are ``.text`` bytes (``riscv64-unknown-elf-size``).
Upstream GCC 12 is not SFPI's GCC 15: firmware text sizes differ by -4%..+7% between them.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import subprocess
from pathlib import Path

from ttnn_flashdecode.emulator.arch import ArchSpec

from .jit_log import CompileLine
from .toolchain import RISCV_SIZE

__all__ = ["SizeResult", "text_bytes", "kernel_sizes"]


@dataclasses.dataclass(frozen=True)
class SizeResult:
    kernel: str
    processor: str  #: BRISC / NCRISC
    build: str  #: "JIT" or "watcher"
    variants: int
    largest_text_bytes: int | None
    limit_bytes: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.largest_text_bytes is not None and self.largest_text_bytes <= self.limit_bytes


def text_bytes(elf: Path) -> int:
    """``.text`` bytes of an ELF (the first column of Berkeley-format ``size``)."""
    out = subprocess.run([RISCV_SIZE, str(elf)], capture_output=True, text=True, check=True).stdout
    return int(out.splitlines()[1].split()[0])


def _watcher_elf(compile_line: CompileLine, link_line: CompileLine, scratch: Path, compiler: Path) -> Path:
    """Rebuild one kernel variant with ``-DWATCHER_ENABLED``; returns the ELF."""
    scratch.mkdir(parents=True, exist_ok=True)
    obj, elf = scratch / "kernel.o", scratch / "kernel.elf"
    old_obj = compile_line.output()
    args = list(compile_line.args)
    args[args.index("-o") + 1] = str(obj)
    if "-MF" in args:
        del args[args.index("-MF"):args.index("-MF") + 2]
    subprocess.run([str(compiler), "-DWATCHER_ENABLED", *args], cwd=compile_line.cwd, check=True, capture_output=True, text=True)
    link = [str(obj) if arg == old_obj else arg for arg in link_line.args]
    link[link.index("-o") + 1] = str(elf)
    # The watcher kernel refers to data the watcher FIRMWARE defines (rta_count, crta_count, ...);
    # the JIT linked against a non-watcher firmware, so leave those unresolved: sizes are unaffected.
    link.append("-Wl,--unresolved-symbols=ignore-all")
    subprocess.run([str(compiler), *link], cwd=link_line.cwd, check=True, capture_output=True, text=True)
    return elf


#: A kernel limit at or under this many bytes is an instruction RAM (Wormhole's NCRISC: 16 KiB), where
#: the watcher build of EVERY variant is measured: the watcher's instrumentation grows with the NoC
#: calls a variant compiles in (the fused append's: +2.2 KiB where others take +2.0), so the largest
#: JIT variant does not stand for the largest watcher one. Larger limits (L1-sized) take the
#: ``watcher_variants`` largest.
IRAM_LIMIT_BYTES = 64 * 1024


def kernel_sizes(lines: list[CompileLine], arch: str, kernels: dict[str, str], compiler: Path, scratch: Path,
                 watcher_variants: int = 2) -> list[SizeResult]:
    """Largest ``.text`` over every variant of each ``kernels`` entry (name -> processor folder,
    e.g. ``{"attention_reader": "ncrisc"}``) as the JIT built it, and of a watcher build of its
    variants: every one where the limit is an instruction RAM (:data:`IRAM_LIMIT_BYTES`), else the
    ``watcher_variants`` largest (0: no watcher build). Watcher builds run a thread per CPU."""
    spec = ArchSpec.for_name(arch)
    results = []
    for kernel, processor in kernels.items():
        mine = [line for line in lines if line.kernel == kernel and line.processor == processor]
        compiles = {line.variant: line for line in mine if line.compiles}
        links = {line.variant: line for line in mine if not line.compiles}
        limit = spec.kernel_size_limit(processor)
        sizes = {}
        for variant, link in links.items():
            elf = next(iter(sorted(link.cwd.glob(f"{processor}*.elf"))), None)
            if elf is not None:
                sizes[variant] = text_bytes(elf)
        missing = None if len(sizes) == len(links) and sizes else f"{len(links) - len(sizes)} of {len(links)} ELFs missing"
        results.append(SizeResult(kernel, processor.upper(), "JIT", len(links), max(sizes.values(), default=None), limit, missing))
        if not watcher_variants:
            continue
        ranked = sorted(sizes, key=sizes.get, reverse=True)
        chosen = ranked if limit <= IRAM_LIMIT_BYTES else ranked[:watcher_variants]
        results.append(_watcher_sizes(kernel, processor, chosen, compiles, links, limit, compiler, scratch))
    return results


def _watcher_sizes(kernel: str, processor: str, variants: list[str], compiles, links, limit: int, compiler: Path,
                   scratch: Path) -> SizeResult:
    def build(variant: str) -> int:
        return text_bytes(_watcher_elf(compiles[variant], links[variant], scratch / kernel / variant, compiler))

    error = None
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {variant: pool.submit(build, variant) for variant in variants}
        watcher_sizes = []
        for variant, future in futures.items():
            try:
                watcher_sizes.append(future.result())
            except (subprocess.CalledProcessError, KeyError) as failure:
                error = error or f"watcher build of {variant} failed: {getattr(failure, 'stderr', '') or failure}"[:1500]
    return SizeResult(kernel, processor.upper(), "watcher", len(variants), max(watcher_sizes, default=None), limit, error)
