"""What the silicon check needs on this machine, and where it finds it.

* Debian's upstream RISC-V toolchain stands in for SFPI's compiler (which is not published on any
  registry this project can reach): ``gcc-riscv64-unknown-elf`` (GCC 12), ``picolibc-riscv64-
  unknown-elf`` (its C library) and ``libstdc++-12-dev-riscv64-cross`` (C++ headers only; installed
  with ``--no-install-recommends``). ``./run.sh test`` installs them when it runs as root with
  ``apt-get`` (as CI does).
* SFPI's headers (``sfpi.h``, ``tensix_builtins.h``), for the compute kernel's per-thread syntax
  check, from the first of: a real SFPI install (every Tenstorrent machine has one); the folder
  named by ``TTNN_FLASHDECODE_SFPI_INCLUDE``; this package's own stand-in, ``sfpi_standin/``
  (the default here: SFPI is not published anywhere this project can install from). The stand-in
  is written for this project from how the wheel's LLK headers call SFPI, not copied from SFPI: it
  type-checks those calls against declarations guessed from the call sites, so a wrong guess can
  give a false error or a false pass, and it has no SFPI back end (``sfpi_standin/sfpi.h`` says
  what it checks and what it cannot see).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .sfpi_standin import INCLUDE_DIR as STANDIN_INCLUDE_DIR

__all__ = ["DEBIAN_PACKAGES", "INSTALL_HINT", "SFPI_INCLUDE_ENV", "SFPI_STANDIN_DIR", "missing_toolchain",
           "sfpi_include_dir", "in_ci"]

DEBIAN_PACKAGES = ("gcc-riscv64-unknown-elf", "picolibc-riscv64-unknown-elf", "libstdc++-12-dev-riscv64-cross")
INSTALL_HINT = ("apt-get install -y gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf && "
                "apt-get install -y --no-install-recommends libstdc++-12-dev-riscv64-cross")
SFPI_INCLUDE_ENV = "TTNN_FLASHDECODE_SFPI_INCLUDE"
#: The SFPI stand-in this package carries (used when there is no SFPI install and no override).
SFPI_STANDIN_DIR = STANDIN_INCLUDE_DIR

RISCV_GXX = "riscv64-unknown-elf-g++"
RISCV_SIZE = "riscv64-unknown-elf-size"
#: What each package provides that the check uses (package -> a path or a program on PATH).
_PROVIDES = {
    "gcc-riscv64-unknown-elf": RISCV_GXX,
    "picolibc-riscv64-unknown-elf": "/usr/lib/picolibc/riscv64-unknown-elf/lib/rv32im/ilp32/libc.a",
    "libstdc++-12-dev-riscv64-cross": "/usr/riscv64-linux-gnu/include/c++/12/riscv64-linux-gnu/bits/c++config.h",
}
#: libstdc++'s target configuration headers (copied, with a bare-metal os_defines.h, into the root).
CXX_CONFIG_BITS = Path("/usr/riscv64-linux-gnu/include/c++/12/riscv64-linux-gnu/bits")


def in_ci() -> bool:
    """``CI=true`` (or 1): a missing prerequisite then fails the check instead of skipping it."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing_toolchain() -> list[str]:
    """The Debian packages of :data:`DEBIAN_PACKAGES` whose files are absent (empty: all there)."""
    missing = []
    for package, provided in _PROVIDES.items():
        present = Path(provided).exists() if provided.startswith("/") else shutil.which(provided) is not None
        if not present:
            missing.append(package)
    return missing


def _real_sfpi_include_dirs() -> list[Path]:
    """Where an SFPI install puts ``sfpi.h``: tt-metal's runtime root, the ttnn wheel's own
    ``runtime/sfpi`` (``ttnn/download_sfpi.py`` fills it on a Tenstorrent machine), /opt/tenstorrent."""
    roots = []
    if os.environ.get("TT_METAL_RUNTIME_ROOT"):  # the silicon check's own root holds no sfpi.h
        roots.append(Path(os.environ["TT_METAL_RUNTIME_ROOT"]) / "runtime" / "sfpi")
    try:
        from ttnn_flashdecode.emulator.arch import ttnn_root

        roots.append(ttnn_root() / "runtime" / "sfpi")
    except RuntimeError:
        pass
    roots.append(Path("/opt/tenstorrent/sfpi"))
    return [root / "include" for root in roots]


def _is_sfpi_include_dir(folder: Path) -> bool:
    return (folder / "sfpi.h").is_file() and (folder / "tensix_builtins.h").is_file()


def sfpi_include_dir() -> tuple[Path | None, str]:
    """The folder of SFPI headers the compute check uses (holding ``sfpi.h`` and
    ``tensix_builtins.h``) and a sentence saying which it is, or ``(None, why not)``.

    In order: a real SFPI install (:func:`_real_sfpi_include_dirs`); the folder named by
    ``TTNN_FLASHDECODE_SFPI_INCLUDE`` (None when it lacks the two headers: a wrong override is an
    error, not a reason to fall back); :data:`SFPI_STANDIN_DIR`, this package's stand-in.
    """
    for folder in _real_sfpi_include_dirs():
        if (folder / "sfpi.h").is_file():
            return folder, f"SFPI install {folder}"
    named = os.environ.get(SFPI_INCLUDE_ENV)
    if named:
        folder = Path(named).resolve()
        if _is_sfpi_include_dir(folder):
            return folder, f"{SFPI_INCLUDE_ENV}={named}"
        return None, f"{SFPI_INCLUDE_ENV}={named} holds no sfpi.h and tensix_builtins.h"
    if _is_sfpi_include_dir(SFPI_STANDIN_DIR):
        return SFPI_STANDIN_DIR, f"the package's SFPI stand-in {SFPI_STANDIN_DIR} (no SFPI install found)"
    return None, f"no SFPI install and the package's SFPI stand-in is missing from {SFPI_STANDIN_DIR}"
