"""The JIT's compile lines, as the wrapper logged them (``CWD=<dir> :: <args>`` per call)."""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

__all__ = ["CompileLine", "read_jit_log", "without_outputs"]

#: tt-metal's TRISC thread of each UCK_CHLKC_* define.
TRISC_OF_THREAD = {"UNPACK": "TRISC0", "MATH": "TRISC1", "PACK": "TRISC2"}


@dataclasses.dataclass(frozen=True)
class CompileLine:
    """One logged compiler call of a kernel build (``.../kernels/<kernel>/<variant>/<processor>``)."""

    cwd: Path
    args: tuple[str, ...]

    @property
    def kernel(self) -> str:
        return self.cwd.parent.parent.name

    @property
    def variant(self) -> str:
        """The JIT's hash folder: one per compile-time-arg / define / config variant."""
        return self.cwd.parent.name

    @property
    def processor(self) -> str:
        """``brisc``, ``ncrisc``, ``trisc0``..``trisc2`` (the JIT's folder name)."""
        return self.cwd.name

    @property
    def compiles(self) -> bool:
        """A compile (``-c``) rather than a link."""
        return "-c" in self.args

    @property
    def trisc_thread(self) -> str | None:
        """``UNPACK`` / ``MATH`` / ``PACK`` for a compute kernel compile, else None."""
        for arg in self.args:
            match = re.fullmatch(r"-DUCK_CHLKC_(UNPACK|MATH|PACK)", arg)
            if match:
                return match.group(1)
        return None

    def output(self) -> str:
        return self.args[self.args.index("-o") + 1]


def read_jit_log(path: Path) -> list[CompileLine]:
    """Kernel compile and link lines of a wrapper log (firmware builds are left out)."""
    lines = []
    for text in Path(path).read_text().splitlines():
        if " :: " not in text or not text.startswith("CWD="):
            continue
        cwd, args = text[4:].split(" :: ", 1)
        line = CompileLine(Path(cwd), tuple(shlex.split(args)))
        if line.cwd.parent.parent.parent.name == "kernels":
            lines.append(line)
    return lines


def without_outputs(args: tuple[str, ...]) -> list[str]:
    """``args`` without ``-c``, ``-o X``, ``-MMD`` and ``-MF X``: for a ``-fsyntax-only`` replay."""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-o", "-MF"):
            skip = True
        elif arg not in ("-c", "-MMD"):
            kept.append(arg)
    return kept
