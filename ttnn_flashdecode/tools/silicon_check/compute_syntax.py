"""The compute kernel, thread by thread: replay the JIT's logged TRISC compile lines with
``-fsyntax-only`` against the wheel's real LLK headers and SFPI's headers.

tt-metal builds a compute kernel three times, once per TRISC thread (UNPACK, MATH, PACK), each with
its own generated declarations (``chlkc_descriptors.h``: ``APPROX`` and ``MATH_FIDELITY`` exist for
MATH and PACK only). SFPI's compiler is not available here, so the wrapper links a stub for the
kernel object; this module re-runs each logged compile line (every compile-time-arg variant) with
SFPI's header folder first on the include path and ``-include tensix_builtins.h``, as SFPI's GCC
predefines its builtins. All three threads need SFPI's headers (the UNPACK LLK includes sfpi.h too).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
import subprocess
from pathlib import Path

from .jit_log import TRISC_OF_THREAD, CompileLine, without_outputs

__all__ = ["ThreadResult", "check_compute_threads"]


@dataclasses.dataclass(frozen=True)
class ThreadResult:
    thread: str  #: UNPACK / MATH / PACK
    variants: int  #: compile-time-arg variants checked
    errors: tuple[str, ...]  #: the first diagnostics, located (file:line: error: ...)
    skipped: str | None = None  #: why it was not checked

    @property
    def ok(self) -> bool:
        return self.skipped is None and not self.errors


def _replay(line: CompileLine, compiler: Path, sfpi_include: Path) -> list[str]:
    extra = [f"-I{sfpi_include}", "-include", str(sfpi_include / "tensix_builtins.h")]
    cmd = [str(compiler), "-fsyntax-only", *extra, *without_outputs(line.args)]
    env = dict(os.environ, SILICON_CHECK_TRISC="syntax", SILICON_CHECK_JIT_LOG=os.devnull)
    result = subprocess.run(cmd, cwd=line.cwd, capture_output=True, text=True, env=env)
    if result.returncode == 0:
        return []
    errors = [text for text in result.stderr.splitlines() if re.search(r"(error|fatal error):", text)]
    return errors or [result.stderr.strip()[-500:] or f"exit status {result.returncode}"]


def check_compute_threads(lines: list[CompileLine], kernel: str, compiler: Path, sfpi_include: Path | None,
                          workers: int = 2) -> list[ThreadResult]:
    """One :class:`ThreadResult` per TRISC thread over every logged compile of ``kernel``; all three
    are skipped (with the reason) when ``sfpi_include`` is None."""
    jobs = [line for line in lines if line.kernel == kernel and line.compiles and line.trisc_thread]
    if sfpi_include is None:
        return [ThreadResult(thread, 0, (), skipped="no SFPI headers") for thread in TRISC_OF_THREAD]
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        errors_of = dict(zip(jobs, pool.map(lambda line: _replay(line, compiler, sfpi_include), jobs)))
    results = []
    for thread in TRISC_OF_THREAD:
        mine = [line for line in jobs if line.trisc_thread == thread]
        if not mine:
            results.append(ThreadResult(thread, 0, (), skipped=f"the JIT logged no {thread} compile of {kernel}"))
            continue
        errors = [error for line in mine for error in errors_of[line]]
        results.append(ThreadResult(thread, len(mine), tuple(dict.fromkeys(errors))[:8]))
    return results
