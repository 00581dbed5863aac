"""Host compilation of the emulator runtime and of kernels, with an on-disk cache.

Kernels are compiled the way tt-metal's JIT passes their parameters (``-DKERNEL_COMPILE_TIME_ARGS=
v0,v1,...``, a force-included generated header with ``KERNEL_COMPILE_TIME_ARG_MAP``, the
descriptor's defines as ``-D``, role and arch defines), by the host ``g++`` into one shared object
per (source, arguments, defines, flags), with the kernel API's prelude and standard headers read
from a precompiled header (:func:`precompiled_header_dir`). Objects are cached under ``~/.cache/ttnn_flashdecode/
emulator/`` (override: env ``TTNN_FLASHDECODE_EMU_CACHE``), keyed by a hash of the kernel source and
every non-system header it includes (found with ``g++ -MM``), the arguments, defines and flags.
Within a process, a compiled kernel is reused while none of its dependency files changed (stat).

Kernels compile as C++17, the JIT's ``-std=c++17``. A compute kernel is built twice over: once as
the runnable object (all three TRISC threads' code in one, so ``MATH(...)``, ``PACK(...)`` and
``UNPACK(...)`` all expand), and once per thread (UNPACK, MATH, PACK) with ``-fsyntax-only`` and
exactly the declarations tt-metal 0.81's generated ``chlkc_descriptors.h`` gives that thread:
``MATH_FIDELITY`` and ``APPROX`` for MATH and PACK only, ``DST_ACCUM_MODE`` and ``DST_SYNC_MODE``
for all three. A kernel that, say, names ``APPROX`` outside ``MATH(...)`` is refused with a
:class:`BuildError` naming the thread, as the JIT would refuse it for TRISC0. The per-thread checks
run once per source, defines, compute config and named-arg names, not per arg values
(:func:`_check_trisc_threads_once` says why that is enough).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import dataclasses
import hashlib
import os
import shlex
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .arch import ArchSpec

CXX = os.environ.get("CXX", "g++")
CXX_FLAGS = ("-std=c++20", "-O2", "-fPIC", "-shared")  # the runtime library
# tt-metal's JIT compiles kernels as C++17 (jit_build's -std=c++17); so does the emulator. -O1: a
# kernel is control flow and API calls (no floating point: the tile math runs in the runtime library,
# built -O2), so its behaviour is the same at any level, and a test run builds hundreds of kernel
# variants, each ~28% cheaper than at -O2.
KERNEL_CXX_FLAGS = ("-std=c++17", "-O1", "-fPIC", "-shared")
# The compute threads tt-metal compiles a compute kernel for, by their UCK_CHLKC_* / TRISC_* names.
TRISC_THREADS = ("UNPACK", "MATH", "PACK")
KERNEL_FLAGS = ("-fvisibility=hidden", "-fvisibility-inlines-hidden", "-w")
PKG_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = PKG_DIR / "include"
SRC_DIR = PKG_DIR / "src"
COMPILE_WORKERS = 2


class BuildError(RuntimeError):
    """A kernel or the runtime failed to compile; the message holds the command and g++ output."""


def cache_dir() -> Path:
    d = Path(os.environ.get("TTNN_FLASHDECODE_EMU_CACHE", Path.home() / ".cache" / "ttnn_flashdecode" / "emulator"))
    d.mkdir(parents=True, exist_ok=True)
    return d


_compiler_id: str | None = None


def _compiler_id_text() -> str:
    global _compiler_id
    if _compiler_id is None:
        out = subprocess.run([CXX, "--version"], capture_output=True, text=True, check=True).stdout
        _compiler_id = out.splitlines()[0] if out else CXX
    return _compiler_id


BUILD_LOG_ENV = "TTNN_FLASHDECODE_EMU_BUILD_LOG"
"""Environment variable naming a file that every compile appends one tab-separated line to: its CPU
seconds (the compiler's user + system time, which a busy machine inflates less than wall time), its
wall seconds and what it built. How a test run's build cost is measured: run it with a cold
``TTNN_FLASHDECODE_EMU_CACHE`` and sum the lines."""


def _run_cc(cmd: list[str], what: str) -> str:
    """Run one compiler command; returns its standard output."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # wait4: the compiler's own CPU time
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    log = os.environ.get(BUILD_LOG_ENV)
    if log:
        with open(log, "a") as f:  # one short write per line: concurrent builders do not interleave
            f.write(f"{usage.ru_utime + usage.ru_stime:.3f}\t{wall:.3f}\t{what}\n")
    if proc.returncode != 0:
        raise BuildError(f"{what} failed to compile:\n$ {shlex.join(cmd)}\n{stdout}{stderr}")
    return stdout


def _atomic_build(out: Path, cmd_for: "callable", what: str) -> None:
    """Compile into a temporary file beside `out`, then rename (safe against concurrent builders)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=out.suffix, dir=out.parent)
    os.close(fd)
    try:
        _run_cc(cmd_for(tmp), what)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# ----------------------------------------------------------------------------- runtime library
_runtime_lib: ctypes.CDLL | None = None
_runtime_lock = threading.Lock()


def runtime_sources() -> list[Path]:
    """src/*.cpp (the compute engine's compute_engine*.cpp included when present), unless env
    ``TTNN_FLASHDECODE_EMU_NO_COMPUTE=1`` leaves the compute engine out."""
    srcs = sorted(SRC_DIR.glob("*.cpp"))
    if os.environ.get("TTNN_FLASHDECODE_EMU_NO_COMPUTE") == "1":
        srcs = [s for s in srcs if not s.name.startswith("compute_engine")]
    return srcs


def _tree_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".h", ".hpp", ".cpp", ".inl", ".cc"))


def load_runtime() -> ctypes.CDLL:
    """Build (if needed) and load libttemu.so with RTLD_GLOBAL, once per process."""
    global _runtime_lib
    with _runtime_lock:
        if _runtime_lib is not None:
            return _runtime_lib
        srcs = runtime_sources()
        h = hashlib.sha256()
        h.update(_compiler_id_text().encode())
        h.update(repr(CXX_FLAGS).encode())
        for f in srcs + _tree_files(INCLUDE_DIR):
            h.update(str(f.relative_to(PKG_DIR)).encode() + b"\0" + f.read_bytes() + b"\0")
        out = cache_dir() / "runtime" / h.hexdigest()[:24] / "libttemu.so"
        if not out.exists():
            objs_dir = out.parent
            objs_dir.mkdir(parents=True, exist_ok=True)

            def compile_obj(src: Path) -> Path:
                obj = objs_dir / (src.stem + ".o")
                cmd = [CXX, *CXX_FLAGS[:3], "-c", f"-I{INCLUDE_DIR}", str(src), "-o", str(obj)]
                _run_cc(cmd, f"emulator runtime source {src.name}")
                return obj

            with concurrent.futures.ThreadPoolExecutor(COMPILE_WORKERS) as ex:
                objs = list(ex.map(compile_obj, srcs))
            _atomic_build(
                out,
                lambda tmp: [CXX, "-shared", "-fPIC", *map(str, objs), "-o", tmp, "-lpthread", "-ldl"],
                "libttemu.so (link)",
            )
        lib = ctypes.CDLL(str(out), mode=ctypes.RTLD_GLOBAL)
        _declare(lib)
        _runtime_lib = lib
        return lib


def _declare(lib: ctypes.CDLL) -> None:
    u32p = ctypes.POINTER(ctypes.c_uint32)
    lib.emu_configure.argtypes = [u32p, ctypes.c_int]
    lib.emu_configure.restype = ctypes.c_int
    lib.emu_config_error.restype = ctypes.c_char_p
    lib.emu_destroy.argtypes = [ctypes.c_int]
    lib.emu_dram_alloc.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_uint32]
    lib.emu_dram_free.argtypes = [ctypes.c_int, ctypes.c_uint32]
    lib.emu_dram_write_pages.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p]
    lib.emu_dram_read_pages.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p]
    lib.emu_dram_peek.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p]
    lib.emu_l1_peek.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                ctypes.c_void_p]
    lib.emu_poison_half.argtypes = [ctypes.c_int]
    lib.emu_poison_half.restype = ctypes.c_uint32
    lib.emu_last_error.argtypes = [ctypes.c_int]
    lib.emu_last_error.restype = ctypes.c_char_p
    lib.emu_last_report.argtypes = [ctypes.c_int]
    lib.emu_last_report.restype = ctypes.c_char_p
    lib.emu_run.argtypes = [ctypes.c_int, u32p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_double]
    lib.emu_run.restype = ctypes.c_int


# ----------------------------------------------------------------------------- kernels
ROLE_READER, ROLE_WRITER, ROLE_COMPUTE = 0, 1, 2
_ROLE_DEFINE = {ROLE_READER: "COMPILE_FOR_NCRISC", ROLE_WRITER: "COMPILE_FOR_BRISC", ROLE_COMPUTE: "COMPILE_FOR_TRISC"}


@dataclasses.dataclass(frozen=True)
class KernelBuild:
    """Everything that determines one kernel object."""

    source_path: str | None  # FILE_PATH kernels
    source_text: str | None  # SOURCE_CODE kernels
    role: int
    compile_time_args: tuple[int, ...]
    named_args: tuple[tuple[str, int], ...]
    defines: tuple[tuple[str, str], ...]
    include_paths: tuple[str, ...]
    compute: tuple[int, bool, bool, bool] | None  # (math_fidelity, fp32_dest_acc_en, dst_full_sync_en, approx)
    arch: str
    noc: tuple[int, int] = (0, 0)  # a data-movement kernel's (NOC_INDEX, NOC_MODE), from its config


def _jit_header(kb: KernelBuild, spec: ArchSpec) -> str:
    lines = ["// Generated by ttnn_flashdecode.emulator.build (the JIT's generated prologue).", "#pragma once"]
    if kb.named_args:
        pairs = ",".join('{"%s",%d}' % (n, v) for n, v in kb.named_args)
        lines.append(f"#define KERNEL_COMPILE_TIME_ARG_MAP {pairs}")
    lines += [
        f"#define NOC_MAX_BURST_SIZE {spec.noc_max_burst}",
        f"#define L1_ALIGNMENT {spec.l1_alignment}u",
        f"#define DRAM_ALIGNMENT {spec.dram_alignment}u",
    ]
    if kb.compute is not None:
        # As tt-metal 0.81's generated chlkc_descriptors.h: fidelity and APPROX for MATH and PACK
        # only. EMU_ALL_TRISC_THREADS is the runnable object, which holds every thread's code.
        fid, fp32, full, approx = kb.compute
        lines += [
            '#include "llk_defs.h"',
            "#if defined(UCK_CHLKC_MATH) || defined(UCK_CHLKC_PACK) || defined(EMU_ALL_TRISC_THREADS)",
            f"constexpr ckernel::MathFidelity MATH_FIDELITY = static_cast<ckernel::MathFidelity>({fid});",
            f"constexpr bool APPROX = {'true' if approx else 'false'};",
            "#endif",
            f"constexpr bool DST_ACCUM_MODE = {'true' if fp32 else 'false'};",
            f"#define DST_SYNC_MODE DstSync::{'SyncFull' if full else 'SyncHalf'}",
        ]
    return "\n".join(lines) + "\n"


def _flags(kb: KernelBuild, spec: ArchSpec, build_dir: Path, src: Path, trisc_thread: str | None = None) -> list[str]:
    """g++ flags for `kb`; a compute kernel's runnable object unless `trisc_thread` names one thread."""
    nb = spec.dram_banks
    flags = [*KERNEL_CXX_FLAGS, *KERNEL_FLAGS, f"-I{INCLUDE_DIR}", f"-I{src.parent}"]
    flags += [f"-I{p}" for p in kb.include_paths]
    flags += ["-include", PRECOMPILED_HEADER, "-include", str(build_dir / "emu_jit.h")]
    flags.append("-DKERNEL_COMPILE_TIME_ARGS=" + ",".join(str(int(v)) for v in kb.compile_time_args))
    flags += [f"-D{_ROLE_DEFINE[kb.role]}=1" if kb.role == ROLE_COMPUTE else f"-D{_ROLE_DEFINE[kb.role]}"]
    flags += [f"-DNUM_DRAM_BANKS={nb}", "-DTENSIX_FIRMWARE", "-DKERNEL_BUILD", "-DTT_EMULATOR"]
    if nb & (nb - 1):
        flags.append("-DIS_NOT_POW2_NUM_DRAM_BANKS=1")
    else:
        flags.append(f"-DLOG_BASE_2_OF_NUM_DRAM_BANKS={nb.bit_length() - 1}")
    flags.append("-DARCH_WORMHOLE" if spec.name == "wormhole_b0" else "-DARCH_BLACKHOLE")
    if kb.compute is None:  # as tt-metal's JIT, from the kernel's DataMovementConfig
        flags += [f"-DNOC_INDEX={kb.noc[0]}", f"-DNOC_MODE={kb.noc[1]}"]
    if kb.compute is not None:
        fid, fp32, full, approx = kb.compute
        flags += [f"-DEMU_MATH_FIDELITY={fid}", f"-DEMU_DST_ACCUM_MODE={int(fp32)}",
                  f"-DEMU_DST_FULL_SYNC={int(full)}", f"-DEMU_APPROX={int(approx)}"]
        flags += [f"-DUCK_CHLKC_{trisc_thread}", f"-DTRISC_{trisc_thread}"] if trisc_thread else ["-DEMU_ALL_TRISC_THREADS"]
    flags += [f"-D{k}={v}" if v != "" else f"-D{k}" for k, v in kb.defines]
    return flags


# ----------------------------------------------------------------------------- precompiled header
PRECOMPILED_HEADER = "emu/precompiled.h"
"""Force-included first into every kernel: the prelude and the standard headers of the kernel API,
precompiled once (:func:`precompiled_header_dir`). Without a usable ``.gch`` g++ reads the text."""

_pch_dirs: dict[tuple[str, ...], Path] = {}
_pch_lock = threading.Lock()


def _object_flags(flags: list[str]) -> list[str]:
    """The flags a precompiled header must share with the objects that use it: the compile flags,
    not the include paths, force-includes and defines (the header depends on none of them)."""
    return [f for f in flags if f.startswith(("-std", "-O", "-f", "-w"))]


def precompiled_header_dir(flags: list[str]) -> Path:
    """A folder holding ``emu/precompiled.h.gch`` for kernel objects compiled with ``flags``, built
    once per compiler, flags and emulator headers (a cold kernel object then costs ~25% less g++
    time, the standard library's parsing done once). Put first on the include path, g++ takes the
    ``.gch`` for the force-included ``emu/precompiled.h``; the object is the same as without it."""
    key = tuple(_object_flags(flags))
    with _pch_lock:
        if key in _pch_dirs:
            return _pch_dirs[key]
        h = hashlib.sha256()
        h.update(_compiler_id_text().encode() + repr(key).encode())
        for f in _tree_files(INCLUDE_DIR):
            h.update(str(f.relative_to(INCLUDE_DIR)).encode() + b"\0" + f.read_bytes() + b"\0")
        folder = cache_dir() / "pch" / h.hexdigest()[:24]
        gch = folder / (PRECOMPILED_HEADER + ".gch")
        if not gch.exists():
            gch.parent.mkdir(parents=True, exist_ok=True)
            _atomic_build(gch, lambda tmp: [CXX, *key, f"-I{INCLUDE_DIR}", "-x", "c++-header",
                                            str(INCLUDE_DIR / PRECOMPILED_HEADER), "-o", tmp],
                          f"the precompiled header {PRECOMPILED_HEADER}")
        _pch_dirs[key] = folder
        return folder


@dataclasses.dataclass
class _Memo:
    so_path: str
    deps: list[tuple[str, int, int]]  # (path, mtime_ns, size)


_memo: dict[KernelBuild, _Memo] = {}
_memo_lock = threading.Lock()


def _stat_sig(paths: list[str]) -> list[tuple[str, int, int]] | None:
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            return None
        out.append((p, st.st_mtime_ns, st.st_size))
    return out


def _deps_valid(m: _Memo) -> bool:
    return _stat_sig([d[0] for d in m.deps]) == m.deps and os.path.exists(m.so_path)


def _source_file(kb: KernelBuild) -> Path:
    if kb.source_path is not None:
        p = Path(kb.source_path)
        if not p.is_file():
            raise BuildError(f"kernel source {kb.source_path!r} does not exist")
        return p.resolve()
    d = cache_dir() / "inline" / hashlib.sha256(kb.source_text.encode()).hexdigest()[:24]
    d.mkdir(parents=True, exist_ok=True)
    p = d / "kernel.cpp"
    if not p.exists():
        p.write_text(kb.source_text)
    return p


def _build_one(kb: KernelBuild) -> _Memo:
    spec = ArchSpec.for_name(kb.arch)
    src = _source_file(kb)
    jit = _jit_header(kb, spec)
    # 1) find the headers it includes, with the real flags but a provisional jit header
    key0 = hashlib.sha256(repr((kb, str(src), jit)).encode()).hexdigest()[:24]
    pre_dir = cache_dir() / "jit" / key0
    pre_dir.mkdir(parents=True, exist_ok=True)
    (pre_dir / "emu_jit.h").write_text(jit)
    flags = _flags(kb, spec, pre_dir, src)
    dep_cmd = [CXX, *[f for f in flags if f != "-shared"], "-MM", str(src)]
    text = _run_cc(dep_cmd, f"kernel {src.name}'s includes (g++ -MM)").replace("\\\n", " ")
    deps = sorted({os.path.abspath(t) for t in text.split(":", 1)[1].split()} | {str(src)})
    # 2) hash sources + flags
    h = hashlib.sha256()
    h.update(_compiler_id_text().encode())
    h.update(repr((kb.role, kb.compile_time_args, kb.named_args, kb.defines, kb.compute, kb.arch)).encode())
    h.update(jit.encode())
    h.update(repr(TRISC_THREADS if kb.compute is not None else ()).encode())  # which checks a cached object passed
    h.update(repr([f.replace(str(src.parent), "<src>") for f in flags if not f.startswith(str(pre_dir))]).encode())
    _hash_files(h, deps, src)
    out_dir = cache_dir() / "kernels" / h.hexdigest()[:32]
    out = out_dir / "kernel.so"
    if not out.exists():
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "emu_jit.h").write_text(jit)
        if kb.compute is not None:  # before the object exists: a cached object means all threads built
            _check_trisc_threads_once(kb, spec, out_dir, src, deps)
        flags = _flags(kb, spec, out_dir, src)
        pch = precompiled_header_dir(flags)
        _atomic_build(out, lambda tmp: [CXX, f"-I{pch}", *flags, str(src), "-o", tmp], f"kernel {src.name}")
    sig = _stat_sig(deps)
    if sig is None:
        raise BuildError(f"kernel {src.name}: a dependency vanished while building")
    return _Memo(str(out), sig)


def _hash_files(h, paths: list[str], src: Path) -> None:
    """Feed each file's path and contents to ``h``, the kernel's own folder as a placeholder: a copy of
    the kernels elsewhere (the mutation check's) shares the objects of every file it did not change."""
    home = str(src.parent)
    for d in paths:
        h.update(d.replace(home, "<src>").encode() + b"\0" + Path(d).read_bytes() + b"\0")


def _check_trisc_threads_once(kb: KernelBuild, spec: ArchSpec, out_dir: Path, src: Path, deps: list[str]) -> None:
    """:func:`_check_trisc_threads`, once per kernel source (with its headers), defines, compute config,
    arch and the NAMES of its named compile-time args: which names each TRISC thread sees does not
    depend on the args' values (every branch of a non-template kernel is type-checked whatever a
    ``constexpr`` condition holds), and the runnable object, built for every variant, checks what
    the values decide (static_asserts, array sizes). A variant's syntax checks cost more CPU than its
    object (three compiles), so a test run with hundreds of variants pays them once per source."""
    h = hashlib.sha256()
    h.update(_compiler_id_text().encode())
    h.update(repr((kb.role, tuple(name for name, _ in kb.named_args), len(kb.compile_time_args), kb.defines,
                   kb.compute, kb.arch, kb.include_paths)).encode())
    jit_headers = str(cache_dir() / "jit")  # the generated header: the arg values, and a per-variant path
    _hash_files(h, [d for d in deps if not d.startswith(jit_headers)], src)
    stamp = cache_dir() / "thread_checks" / (h.hexdigest()[:32] + ".ok")
    if stamp.exists():
        return
    _check_trisc_threads(kb, spec, out_dir, src)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.touch()


def _check_trisc_threads(kb: KernelBuild, spec: ArchSpec, out_dir: Path, src: Path) -> None:
    """Syntax-check a compute kernel as each TRISC thread with that thread's declarations only."""
    for thread in TRISC_THREADS:
        flags = [f for f in _flags(kb, spec, out_dir, src, trisc_thread=thread) if f not in ("-shared", "-fPIC")]
        _run_cc([CXX, f"-I{precompiled_header_dir(flags)}", *flags, "-fsyntax-only", str(src)],
                f"kernel {src.name} for the {thread} thread (tt-metal builds a compute kernel once per TRISC thread)")


def build_kernels(builds: list[KernelBuild]) -> list[str]:
    """Shared-object paths for `builds` (same order); compiles what is missing, 2 at a time."""
    result: dict[KernelBuild, str] = {}
    todo = []
    with _memo_lock:
        for kb in dict.fromkeys(builds):
            m = _memo.get(kb)
            if m is not None and _deps_valid(m):
                result[kb] = m.so_path
            else:
                todo.append(kb)
    if todo:
        with concurrent.futures.ThreadPoolExecutor(COMPILE_WORKERS) as ex:
            memos = list(ex.map(_build_one, todo))
        with _memo_lock:
            for kb, m in zip(todo, memos):
                _memo[kb] = m
                result[kb] = m.so_path
    return [result[kb] for kb in builds]
