"""The compute kernel, thread by thread: replay the JIT's logged TRISC compile lines with
``-fsyntax-only`` against the wheel's real LLK headers and SFPI's headers (a real install, or the
package's stand-in: :func:`.toolchain.sfpi_include_dir`).

tt-metal builds a compute kernel three times, once per TRISC thread (UNPACK, MATH, PACK), each with
its own generated declarations (``chlkc_descriptors.h``: ``APPROX`` and ``MATH_FIDELITY`` exist for
MATH and PACK only). SFPI's compiler is not available here, so the wrapper links a stub for the
kernel object; this module re-runs each logged compile line (every compile-time-arg variant) with
SFPI's header folder first on the include path and ``-include tensix_builtins.h``, as SFPI's GCC
predefines its builtins. All three threads need SFPI's headers (the UNPACK LLK includes sfpi.h too).

``kernel_copy`` replays the same lines against an edited copy of the kernel: tt-metal's generated
``chlkc_<thread>.cpp`` files include the kernel source by absolute path, so the variant's
generated files are copied to a scratch folder with that include pointed at the copy (how the
tests plant errors and check they are reported at the copy's line, on the right threads).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .jit_log import TRISC_OF_THREAD, CompileLine, without_outputs

__all__ = ["ThreadResult", "check_compute_threads", "with_kernel_copy"]


@dataclasses.dataclass(frozen=True)
class ThreadResult:
    thread: str  #: UNPACK / MATH / PACK
    variants: int  #: compile-time-arg variants checked
    errors: tuple[str, ...]  #: the first diagnostics, located (file:line:column: error: ...)
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


def with_kernel_copy(line: CompileLine, kernel_copy: Path, scratch: Path) -> CompileLine:
    """``line`` replayed against ``kernel_copy`` instead of the kernel the JIT compiled.

    The variant folder's generated files (``chlkc_*.cpp``, descriptors, named args) are copied to
    ``scratch/<kernel>/<variant>/`` (once per variant), each ``#include "<kernel>.cpp"`` line in them
    pointing at the copy; the returned line runs there, with the copy's folder first on the include
    path. The logged line itself is untouched.
    """
    variant_dir = line.cwd.parent
    target = Path(scratch) / line.kernel / line.variant
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".staging-"))
        pattern = re.compile(r'#include "([^"]*/' + re.escape(line.kernel) + r'\.[^"/]+)"')
        for source in variant_dir.iterdir():
            if source.is_file():
                text = source.read_text()
                if source.name.startswith("chlkc_"):
                    text = pattern.sub(f'#include "{Path(kernel_copy).resolve()}"', text)
                (staging / source.name).write_text(text)
        for sub in variant_dir.iterdir():
            if sub.is_dir():
                (staging / sub.name).mkdir()
        try:
            staging.rename(target)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.is_dir():  # not an earlier call's copy: a real failure
                raise
    return CompileLine(target / line.processor, (f"-I{Path(kernel_copy).resolve().parent}", *line.args))


def check_compute_threads(lines: list[CompileLine], kernel: str, compiler: Path, sfpi_include: Path | None,
                          workers: int = 2, kernel_copy: Path | None = None, scratch: Path | None = None,
                          first_variant_only: bool = False, max_errors: int = 8) -> list[ThreadResult]:
    """One :class:`ThreadResult` per TRISC thread over every logged compile of ``kernel``; all three
    are skipped (with the reason) when ``sfpi_include`` is None.

    Args:
        kernel_copy: replay against this edited copy of the kernel instead (see
            :func:`with_kernel_copy`); ``scratch`` is then the folder for the copied generated files.
        first_variant_only: replay only the first logged compile-time-arg variant per thread.
        max_errors: diagnostics kept per thread (the first ones, duplicates dropped).
    """
    jobs = [line for line in lines if line.kernel == kernel and line.compiles and line.trisc_thread]
    if first_variant_only:
        firsts: dict[str, CompileLine] = {}
        for line in jobs:
            firsts.setdefault(line.trisc_thread, line)
        jobs = list(firsts.values())
    if sfpi_include is None:
        return [ThreadResult(thread, 0, (), skipped="no SFPI headers") for thread in TRISC_OF_THREAD]
    if kernel_copy is not None:
        if scratch is None:
            raise ValueError("kernel_copy needs a scratch folder for the copied generated files")
        Path(scratch).mkdir(parents=True, exist_ok=True)
        replayed = {line: with_kernel_copy(line, kernel_copy, scratch) for line in jobs}
    else:
        replayed = {line: line for line in jobs}
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        errors_of = dict(zip(jobs, pool.map(lambda line: _replay(replayed[line], compiler, sfpi_include), jobs)))
    results = []
    for thread in TRISC_OF_THREAD:
        mine = [line for line in jobs if line.trisc_thread == thread]
        if not mine:
            results.append(ThreadResult(thread, 0, (), skipped=f"the JIT logged no {thread} compile of {kernel}"))
            continue
        errors = [error for line in mine for error in errors_of[line]]
        results.append(ThreadResult(thread, len(mine), tuple(dict.fromkeys(errors))[:max_errors]))
    return results
