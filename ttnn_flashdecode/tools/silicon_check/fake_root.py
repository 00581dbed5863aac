"""A tt-metal runtime root (``TT_METAL_RUNTIME_ROOT``) that ttnn's JIT can build kernels with
where SFPI is not installed.

The root is a symlink farm of the installed ttnn wheel's ``tt_metal/`` (so single headers can be
patched without copying ~170 MB), plus ``runtime/sfpi/``: ``compiler/bin/riscv-tt-elf-g++`` is this
package's wrapper around Debian's ``riscv64-unknown-elf-g++``, ``cxxcfg/bits`` libstdc++'s target
headers made bare-metal, ``include/lltt.h`` a stand-in for SFPI's replay-buffer header. The wheel's
``runtime/hw/lib/<arch>/{substitutes,noc,tdma_xmov}.o`` are SFPI-GCC LTO bytecode that upstream GCC
cannot link, so they are rebuilt from the wheel's own sources with tt-metal's firmware flags
(``tt_metal/hw/CMakeLists.txt``). Building takes about 2 s; the root is cached by the wheel's
version and this module's files.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from ttnn_flashdecode.emulator.arch import ttnn_root

from .toolchain import CXX_CONFIG_BITS

__all__ = ["build_root", "default_root_dir", "wrapper_path"]

HERE = Path(__file__).resolve().parent
WRAPPER = "riscv-tt-elf-g++"
# GCC 12 rejects a bare static_assert(false, ...) even inside an uninstantiated template (P2593 is
# GCC 13; SFPI's GCC 15 accepts it). These NoC-endpoint headers use it in templates on
# `address_type`: make it depend on that parameter (same meaning once instantiated).
_GCC12_STATIC_ASSERT_HEADERS = ("hw/inc/api/core_local_mem.h", "hw/inc/api/scratchpad.h",
                                "hw/inc/api/tensor/local_tensor_accessor.h")
_FIRMWARE_OBJECTS = {  # object -> source under the root
    "substitutes.o": "tt_metal/hw/toolchain/substitutes.cpp",
    "tdma_xmov.o": "tt_metal/hw/firmware/src/tt-1xx/tdma_xmov.c",
    "noc.o": "tt_metal/hw/firmware/src/tt-1xx/{arch}/noc.c",
}
_FIRMWARE_FLAGS = ("-std=c++17 -flto=auto -ffast-math -fno-use-cxa-atexit -fno-exceptions -Wall -Werror "
                   "-Wno-deprecated-declarations -Wno-unknown-pragmas -Wno-error=multistatement-macros "
                   "-Wno-error=parentheses -Wno-error=unused-but-set-variable -Wno-unused-variable "
                   "-Wno-unused-function -Os -fno-tree-loop-distribute-patterns -DTENSIX_FIRMWARE").split()
_ARCH_DIRS = {"wormhole": ("wormhole_b0", "-mcpu=tt-wh"), "blackhole": ("blackhole", "-mcpu=tt-bh")}


def wrapper_path(root: Path) -> Path:
    """The JIT's compiler inside ``root``."""
    return root / "runtime" / "sfpi" / "compiler" / "bin" / WRAPPER


def default_root_dir() -> Path:
    """``~/.cache/ttnn_flashdecode/tools/silicon_check/root-<hash of the wheel and this package>``
    (override the parent folder with ``TTNN_FLASHDECODE_SILICON_CACHE``)."""
    wheel = ttnn_root()
    h = hashlib.sha256(str(wheel.resolve()).encode())
    for name in sorted(os.listdir(wheel.parent)):
        if name.startswith("ttnn-") and name.endswith(".dist-info"):
            h.update(name.encode())
    for path in sorted(HERE.iterdir()):
        if path.is_file() and path.suffix in ("", ".py", ".h", ".cc"):
            h.update(path.name.encode() + path.read_bytes())
    parent = Path(os.environ.get("TTNN_FLASHDECODE_SILICON_CACHE", Path.home() / ".cache" / "ttnn_flashdecode" / "silicon_check"))
    return parent / f"root-{h.hexdigest()[:16]}"


def _include_flags(root: Path, hw: str, alias: str) -> list[str]:
    tt = root / "tt_metal"
    dirs = [root, tt, tt / "api", tt / "api/tt-metalium", tt / "hw/inc", tt / "hw/inc/debug",
            tt / "hw/firmware/src/tt-1xx", tt / f"hw/inc/internal/tt-1xx/{hw}", tt / f"hw/inc/internal/tt-1xx/{hw}/{alias}_defines",
            tt / f"hw/inc/internal/tt-1xx/{hw}/noc", tt / f"hw/inc/internal/tt-1xx/{hw}/overlay",
            tt / f"hw/ckernels/{alias}/metal/common", tt / f"hw/ckernels/{alias}/metal/llk_io",
            tt / f"tt-llk/tt_llk_{alias}/common/inc", tt / f"tt-llk/tt_llk_{alias}/llk_lib", tt / f"tt-llk/tt_llk_{alias}/llk_lib/hal"]
    return [f"-I{d}" for d in dirs]


def build_root(root: Path | None = None) -> Path:
    """Build the runtime root at ``root`` (default :func:`default_root_dir`) unless it is complete.

    Raises:
        subprocess.CalledProcessError: a firmware object failed to compile (the message has g++'s output).
    """
    root = Path(root or default_root_dir())
    done = root / ".complete"
    if done.exists():
        return root
    wheel = ttnn_root().resolve()  # the path the root's hash names: symlinks through another venv link would dangle
    if root.exists():
        shutil.rmtree(root)
    sfpi = root / "runtime" / "sfpi"
    for folder in ("compiler/bin", "include", "cxxcfg/bits"):
        (sfpi / folder).mkdir(parents=True)
    shutil.copytree(wheel / "tt_metal", root / "tt_metal", symlinks=True, copy_function=os.symlink)
    for header in _GCC12_STATIC_ASSERT_HEADERS:
        target = root / "tt_metal" / header
        text = (wheel / "tt_metal" / header).read_text()
        target.unlink()
        target.write_text(text.replace("static_assert(false, ", "static_assert(address_type != address_type, "))
    (root / "ttnn").symlink_to(wheel / "ttnn")
    (root / "runtime" / "hw" / "lib").mkdir(parents=True)
    (root / "runtime" / "hw" / "toolchain").symlink_to(wheel / "runtime" / "hw" / "toolchain")
    shutil.copy(HERE / WRAPPER, wrapper_path(root))
    wrapper_path(root).chmod(0o755)
    for path in CXX_CONFIG_BITS.iterdir():
        shutil.copy(path, sfpi / "cxxcfg" / "bits" / path.name)
    (sfpi / "cxxcfg/bits/os_defines.h").write_text("#ifndef _GLIBCXX_OS_DEFINES\n#define _GLIBCXX_OS_DEFINES 1\n#endif\n")
    shutil.copy(sfpi / "cxxcfg/bits/gthr-single.h", sfpi / "cxxcfg/bits/gthr-default.h")  # no threads
    shutil.copy(HERE / "lltt.h", sfpi / "include" / "lltt.h")
    shutil.copy(HERE / "stub_trisck.cc", sfpi / "stub_trisck.cc")
    for lib in (wheel / "runtime" / "hw" / "lib").iterdir():
        if lib.name not in _ARCH_DIRS:
            shutil.copytree(lib, root / "runtime" / "hw" / "lib" / lib.name)
    for hw, (alias, cpu) in _ARCH_DIRS.items():
        out = root / "runtime" / "hw" / "lib" / hw
        shutil.copytree(wheel / "runtime" / "hw" / "lib" / hw, out)
        for obj, source in _FIRMWARE_OBJECTS.items():
            (out / obj).unlink(missing_ok=True)
            cmd = [str(wrapper_path(root)), cpu, *_FIRMWARE_FLAGS, *_include_flags(root, hw, alias), "-c", "-o", str(out / obj),
                   str(root / source.format(arch=hw))]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode:
                raise subprocess.CalledProcessError(result.returncode, cmd, result.stdout, result.stderr)
    done.write_text("ok\n")
    return root
