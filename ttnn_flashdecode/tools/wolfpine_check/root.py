"""The tt-metal runtime root and environment the wolfpine check opens its simulated device with.

The root is the silicon check's (:func:`ttnn_flashdecode.tools.silicon_check.fake_root.build_root`:
the wheel's files as a symlink farm, Debian's RISC-V GCC behind SFPI's compiler name, the firmware
objects rebuilt), built into its own folder and then changed in three ways so that compute kernels
are compiled for real (the silicon check only links stubs in their place):

* ``tt-llk/tt_llk_wormhole_b0/common/inc/ckernel_ops.h``: ``TTI_INSN`` emits the ``.ttinsn``
  directive, which only SFPI's binutils assembles. On TRISC code built without SFPI it emits the
  same 32-bit word rotated left by 2 bits with ``.4byte`` -- what ``.ttinsn`` assembles to, and the
  form the header itself uses under ``LLK_BOOT_BRISC``.
* ``runtime/sfpi/include`` gets the silicon check's SFPI stand-in (``sfpi.h``, ``tensix_builtins.h``):
  the LLK headers include ``sfpi.h`` even on FPU-only paths. Its bodies are empty, so **SFPU code
  compiles to nothing**: only FPU-only compute kernels (unpack, FPU math, pack) run right. (A
  separate root: the silicon check takes an ``sfpi.h`` in its root for a real SFPI install.)
* ``build -> <wheel>/build`` (``libtt_metal.so``), which ``wolfpine doctor`` looks for.

The wrapper compiles TRISC kernels for real when ``SILICON_CHECK_TRISC=compile``
(:func:`environment` sets it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

from ttnn_flashdecode.emulator.arch import ttnn_root
from ttnn_flashdecode.tools.silicon_check.fake_root import build_root, default_root_dir
from ttnn_flashdecode.tools.silicon_check.toolchain import SFPI_STANDIN_DIR

__all__ = ["RUN_TAG_PREFIX", "build_wolfpine_root", "environment", "wolfpine_missing", "simulator_dir"]

HERE = Path(__file__).resolve().parent
CKERNEL_OPS = "tt_metal/tt-llk/tt_llk_wormhole_b0/common/inc/ckernel_ops.h"
_TTINSN_IF = "#if __riscv_xtttensixwh || (__clang__ && defined(ARCH_WORMHOLE) && defined(COMPILE_FOR_TRISC))"
_TTINSN_PATCH = """#if !__riscv_xtttensixwh && !__clang__ && defined(ARCH_WORMHOLE) && defined(COMPILE_FOR_TRISC)
// ttnn-flashdecode wolfpine check: no SFPI binutils, so no .ttinsn; the word it assembles to.
#define TTI_INSN(ENCODING) ({ __asm__ __volatile__(".4byte %0" ::"n"(unsigned((((ENCODING) >> 30) & 3) | (((ENCODING) & 0x3fffffff) << 2)))); })
#define TT_INSN(ENCODING)  void(::ckernel::instrn_buffer[0] = unsigned(ENCODING))
#elif """
#: Every simulator server this check starts carries ``--run-tag <prefix><pid>-<n>`` on its command line.
RUN_TAG_PREFIX = "ttnn-flashdecode-wolfpine-"


def wolfpine_missing() -> str | None:
    """Why the wolfpine check cannot run here (None: it can)."""
    try:
        import framework.sim  # noqa: F401  (wolfpine's package)
        import pyarrow
    except ImportError as error:
        return f"wolfpine is not installed ({error}); pip install -e '.[test]' installs it"
    major = int(pyarrow.__version__.split(".")[0])
    if major >= 21:
        return (f"pyarrow {pyarrow.__version__} needs numpy >= 2 (ttnn pins numpy < 2): the simulator server "
                f"crashes at start-up; install 'pyarrow<21'")
    return None


def simulator_dir(arch: str = "wormhole") -> Path:
    from framework.sim import simulator_dir as where

    return where(arch)


def _root_dir() -> Path:
    silicon = default_root_dir()
    h = hashlib.sha256(silicon.name.encode())
    h.update(Path(__file__).read_bytes())
    for path in sorted(SFPI_STANDIN_DIR.glob("*.h")):
        h.update(path.read_bytes())
    return silicon.parent / f"wolfpine-{h.hexdigest()[:16]}"


def build_wolfpine_root(root: Path | None = None) -> Path:
    """Build (once; cached like the silicon check's root) and return the wolfpine check's root."""
    root = Path(root or _root_dir())
    if (root / ".wolfpine-complete").exists():
        return root
    build_root(root)  # the silicon check's root, in this folder
    target = root / CKERNEL_OPS
    text = target.read_text()
    if _TTINSN_IF not in text:
        raise RuntimeError(f"{CKERNEL_OPS}: the TTI_INSN guard changed in this ttnn wheel; cannot patch it")
    target.unlink()
    target.write_text(text.replace(_TTINSN_IF, _TTINSN_PATCH + _TTINSN_IF[len("#if "):], 1))
    include = root / "runtime" / "sfpi" / "include"
    for header in SFPI_STANDIN_DIR.glob("*.h"):
        shutil.copy(header, include / header.name)
    build = root / "build"
    if not build.exists():
        build.symlink_to(ttnn_root() / "build")
    (root / ".wolfpine-complete").write_text("ok\n")
    return root


def environment(root: Path, work: Path, run_tag: str, cost_model: bool, arch: str = "wormhole") -> dict[str, str]:
    """The environment of the process that opens the simulated device (``../shared`` recipe)."""
    from ttnn_flashdecode.tools.silicon_check import this_package_first

    env = this_package_first({k: v for k, v in os.environ.items() if k != "TT_METAL_MOCK_CLUSTER_DESC_PATH"})
    env.update(
        TT_METAL_SIMULATOR=str(simulator_dir(arch)), TT_METAL_SLOW_DISPATCH_MODE="1",
        TT_METAL_RUNTIME_ROOT=f"{root}/", TT_METAL_CACHE=f"{work / 'jit-cache'}/", TT_SIM_RUN_TAG=run_tag,
        WOLFPINE_PYTHON=sys.executable, SILICON_CHECK_TRISC="compile", TT_METAL_LOGGER_LEVEL="ERROR",
        LOGURU_LEVEL="WARNING",
    )
    if cost_model:
        env["TT_SIM_COST_MODEL"] = "1"
    else:
        env.pop("TT_SIM_COST_MODEL", None)
    # The process runs in the scratch folder: make it import this very tree (a worktree's, not the
    # one the venv's editable install points at).
    package_parent = str(HERE.parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    return env
