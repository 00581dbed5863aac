"""Compute engine tests.

Part 1 (always runs): the engine's C++ unit tests (compute_unit.cpp) against a single-threaded
fake runtime (fake_runtime.cpp), built with g++ for both DST modes. Each C++ case is one pytest
case. Numerics tolerances live next to the cases in compute_unit.cpp, each with its reason.

Part 2: the same kinds of kernels through the real driver (``ttnn_flashdecode.emulator.Emulator``)
with reader/writer kernels, built as a ``ttnn.ProgramDescriptor`` -- see the end of this file.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EMU = ROOT / "ttnn_flashdecode" / "emulator"

UNIT_CASES = re.findall(r'^\s*\{"([a-z0-9_]+)",\s*$', (HERE / "compute_unit.cpp").read_text(), re.M)


@functools.cache
def _unit_results(fp32_dest_acc_en: int, tmp_root: str) -> dict[str, str]:
    """Builds and runs compute_unit.cpp once per DST mode; returns {case: 'PASS' | failure text}."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.fail("g++ is required to build the emulator")
    exe = Path(tmp_root) / f"compute_unit_fp32_{fp32_dest_acc_en}"
    cmd = [
        gxx, "-std=c++20", "-O1", "-Wall", "-Werror", "-Wno-deprecated-declarations",
        "-DCOMPILE_FOR_TRISC=1", f"-DUNIT_DST_ACCUM_MODE={fp32_dest_acc_en}", f"-I{EMU / 'include'}",
        "-include", str(HERE / "compute_unit_prologue.h"),
        str(HERE / "compute_unit.cpp"), str(HERE / "fake_runtime.cpp"), str(EMU / "src" / "compute_engine.cpp"),
        "-o", str(exe),
    ]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, f"build failed:\n{build.stderr}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    results = {}
    for line in run.stdout.splitlines():
        status, _, rest = line.partition(" ")
        name, _, why = rest.partition(": ")
        results[name] = "PASS" if status == "PASS" else why
    return results


@pytest.fixture(scope="module")
def unit_tmp(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("compute_unit"))


def test_unit_case_list_is_parsed():
    assert len(UNIT_CASES) >= 15, UNIT_CASES


@pytest.mark.parametrize("fp32_dest_acc_en", [0, 1], ids=["bf16_dst", "fp32_dst"])
@pytest.mark.parametrize("case", UNIT_CASES)
def test_compute_engine_unit(case: str, fp32_dest_acc_en: int, unit_tmp: str):
    results = _unit_results(fp32_dest_acc_en, unit_tmp)
    assert case in results, f"{case} did not run; ran: {sorted(results)}"
    assert results[case] == "PASS", results[case]


# ================================================================================================
# Part 2: through the driver (reader -> compute -> writer on one emulated core).

ttnn = pytest.importorskip("ttnn")
np = pytest.importorskip("numpy")

from ttnn_flashdecode.emulator import Emulator, EmulatorError, tensor_accessor_compile_time_args  # noqa: E402

KERNELS = HERE / "kernels"
OPS = {name: i for i, name in enumerate(
    ["copy", "matmul", "reduce_max", "reduce_sum", "sub_bcast_cols", "mul_bcast_cols", "mul_bcast_scalar",
     "add", "sub", "mul", "add_reuse", "exp", "recip", "binary_max"])}
BAD_OPS = {"dst_index": 100, "stale_init": 101, "no_reduce_uninit": 102, "pack_outside_wait": 103}

# Tolerances (relative to the magnitude named at each use):
BF16_ULP = 2.0**-7  # one bf16 ulp (7 explicit mantissa bits): SFPU truncation, or two half-ulp FPU roundings
BF16_HALF_ULP = 2.0**-8  # one round-to-nearest-even into a bf16 DST
FP32_REL = 1e-6  # fp32 DST: fp32 rounding (2^-24) accumulated over <= 32 terms, with margin


def _face_index() -> np.ndarray:
    r, c = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    return ((r // 16) * 2 + c // 16) * 256 + (r % 16) * 16 + (c % 16)


FACE = _face_index()  # FACE[r, c] = position of element (r, c) in a tile's face layout


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round to bf16 (nearest even) and return as float64."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def _tile_bytes_bf16(t: np.ndarray) -> np.ndarray:
    flat = np.empty(1024, np.float32)
    flat[FACE.ravel()] = np.asarray(t, np.float32).ravel()
    return (flat.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)


def _tile_from_fp32_bytes(b: np.ndarray) -> np.ndarray:
    flat = np.asarray(b, np.uint8).view(np.float32)
    return flat[FACE].astype(np.float64)


def _scaler(v: float) -> np.ndarray:
    s = np.zeros((32, 32))
    s[0, :] = s[16, :] = v
    return s


@pytest.fixture(scope="module")
def emu():
    return Emulator(arch="wormhole_b0")


def _crs(core=(0, 0)):
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(*core), ttnn.CoreCoord(*core))])


def _run(emu, op: int, inputs: list[np.ndarray | None], *, fp32: bool, transpose: int = 0):
    """Runs compute_ops.cpp with `op` on one core; inputs go to c_0, c_1, c_2 (bf16); returns c_16 (fp32)."""
    cores, core = _crs(), (0, 0)
    bufs, rt = [], []
    for t in inputs + [None] * (3 - len(inputs)):
        buf = emu.allocate_dram(num_pages=1, page_bytes=2048)
        if t is not None:
            emu.write_pages(buf, _tile_bytes_bf16(t))
        bufs.append(buf)
        rt += [buf.address, 0 if t is None else 1]
    out = emu.allocate_dram(num_pages=1, page_bytes=4096)
    ct = [v for b in bufs for v in tensor_accessor_compile_time_args(b)]
    reader = ttnn.KernelDescriptor(
        kernel_source=str(KERNELS / "reader_three.cpp"), core_ranges=cores, compile_time_args=ct,
        runtime_args=[(core, rt)], config=ttnn.ReaderConfigDescriptor())
    writer = ttnn.KernelDescriptor(
        kernel_source=str(KERNELS / "writer_copy.cpp"), core_ranges=cores,
        compile_time_args=tensor_accessor_compile_time_args(out), named_compile_time_args=[("cb", 16), ("block", 1)],
        runtime_args=[(core, [out.address, 1])], config=ttnn.WriterConfigDescriptor())
    cc = ttnn.ComputeConfigDescriptor()
    cc.fp32_dest_acc_en = fp32
    cc.math_fidelity = ttnn.MathFidelity.HiFi4
    compute = ttnn.KernelDescriptor(
        kernel_source=str(KERNELS / "compute_ops.cpp"), core_ranges=cores,
        named_compile_time_args=[("op", op), ("transpose", transpose)], config=cc)

    def cb(i, fmt, size):
        f = ttnn.CBFormatDescriptor(buffer_index=i, data_format=fmt, page_size=size)
        return ttnn.CBDescriptor(total_size=size, core_ranges=cores, format_descriptors=[f])

    cbs = [cb(0, ttnn.bfloat16, 2048), cb(1, ttnn.bfloat16, 2048), cb(2, ttnn.bfloat16, 2048),
           cb(16, ttnn.float32, 4096)]
    try:
        report = emu.run(ttnn.ProgramDescriptor(kernels=[reader, compute, writer], cbs=cbs, semaphores=[]))
        return _tile_from_fp32_bytes(emu.read_pages(out)), report
    finally:
        for b in bufs + [out]:
            emu.free(b)


def _rand(rng, lo, hi):
    return _bf16(rng.uniform(lo, hi, (32, 32)))


def _close(got, want, scale, rel, what):
    err = np.abs(got - want)
    bad = err > rel * scale
    assert not bad.any(), f"{what}: {bad.sum()} elements off, worst at {np.unravel_index(np.argmax(err - rel * scale), err.shape)}: got {got[bad][:4]} want {want[bad][:4]}"


@pytest.mark.parametrize("fp32", [False, True], ids=["bf16_dst", "fp32_dst"])
@pytest.mark.parametrize("transpose", [0, 1])
def test_driver_matmul(emu, fp32, transpose):
    rng = np.random.default_rng(1)
    a, b = _rand(rng, -1, 1), _rand(rng, -1, 1)
    got, report = _run(emu, OPS["matmul"], [a, b], fp32=fp32, transpose=transpose)
    bt = b.T if transpose else b
    # bf16 DST: one RNE per 16-wide K half -> 2 half-ulps of the partial-sum magnitude |a|@|b|.
    _close(got, a @ bt, np.abs(a) @ np.abs(bt), FP32_REL if fp32 else BF16_ULP, "matmul")
    assert report.cores[(0, 0)].calls.get("matmul_tiles") == 1


@pytest.mark.parametrize("fp32", [False, True], ids=["bf16_dst", "fp32_dst"])
@pytest.mark.parametrize("pool,scale", [("reduce_max", 1.0), ("reduce_sum", 1.0), ("reduce_sum", 0.25)])
def test_driver_reduce_row(emu, fp32, pool, scale):
    rng = np.random.default_rng(2)
    a = _rand(rng, -4, 4)
    got, _ = _run(emu, OPS[pool], [a, None, _scaler(scale)], fp32=fp32)
    want = np.zeros((32, 32))
    if pool == "reduce_max":
        want[:, 0] = a.max(axis=1)  # max of bf16 values is exact
        _close(got, want, np.zeros_like(want), 0.0, pool)
    else:
        want[:, 0] = (a * scale).sum(axis=1)
        mag = np.zeros((32, 32))
        mag[:, 0] = np.abs(a * scale).sum(axis=1)  # two RNEs (one per 16-column half)
        _close(got, want, mag, FP32_REL if fp32 else BF16_ULP, pool)


@pytest.mark.parametrize("fp32", [False, True], ids=["bf16_dst", "fp32_dst"])
@pytest.mark.parametrize("name", ["sub_bcast_cols", "mul_bcast_cols", "mul_bcast_scalar", "add", "sub", "mul",
                                  "add_reuse", "binary_max"])
def test_driver_binary(emu, fp32, name):
    rng = np.random.default_rng(3)
    a, b = _rand(rng, -2, 2), _rand(rng, -2, 2)
    got, _ = _run(emu, OPS[name], [a, b], fp32=fp32)
    bcol = np.repeat(b[:, :1], 32, axis=1)
    want = {
        "sub_bcast_cols": a - bcol, "mul_bcast_cols": a * bcol, "mul_bcast_scalar": a * b[0, 0],
        "add": a + b, "sub": a - b, "mul": a * b, "add_reuse": a + b, "binary_max": np.maximum(a, b),
    }[name]
    # One RNE into the DST (bf16: half an ulp of the result; fp32: exact products/sums of bf16 inputs).
    _close(got, want, np.abs(want), FP32_REL if fp32 else BF16_HALF_ULP, name)


@pytest.mark.parametrize("fp32", [False, True], ids=["bf16_dst", "fp32_dst"])
def test_driver_copy_exp_recip(emu, fp32):
    rng = np.random.default_rng(4)
    a = _rand(rng, -3, 3)
    got, _ = _run(emu, OPS["copy"], [a], fp32=fp32)
    _close(got, a, np.zeros_like(a), 0.0, "copy")
    x = _rand(rng, -4, 1)
    got, _ = _run(emu, OPS["exp"], [x], fp32=fp32)
    # bf16 DST: SFPSTORE truncates toward zero -> under one ulp, never above the exact value.
    _close(got, np.exp(x), np.exp(x), FP32_REL if fp32 else BF16_ULP, "exp")
    if not fp32:
        assert (got <= np.exp(x)).all()
    y = _rand(rng, 0.5, 4) * np.where(rng.random((32, 32)) < 0.5, -1, 1)
    got, _ = _run(emu, OPS["recip"], [y], fp32=fp32)
    _close(got, 1 / y, np.abs(1 / y), FP32_REL if fp32 else BF16_ULP, "recip")


@pytest.mark.parametrize("fp32", [False, True], ids=["bf16_dst", "fp32_dst"])
@pytest.mark.parametrize("bad,needles", [
    ("dst_index", ["copy_tile", "out of range", "tiles per acquire"]),
    ("stale_init", ["matmul_tiles", "configured for add_init(c_0, c_1", "matmul_init(c_0, c_1"]),
    ("no_reduce_uninit", ["copy_init", "reduce_uninit() was not called"]),
    ("pack_outside_wait", ["pack_tile", "outside tile_regs_wait()..tile_regs_release()"]),
])
def test_driver_refuses_misuse(emu, fp32, bad, needles):
    rng = np.random.default_rng(5)
    a, b = _rand(rng, -1, 1), _rand(rng, -1, 1)
    inputs = [a, b, _scaler(1.0)] if bad == "no_reduce_uninit" else [a, b] if bad == "stale_init" else [a]
    if bad == "no_reduce_uninit":
        inputs = [a, None, _scaler(1.0)]
    with pytest.raises(EmulatorError) as ei:
        _run(emu, BAD_OPS[bad], inputs, fp32=fp32)
    msg = str(ei.value)
    assert "core (0,0)" in msg
    for n in needles:
        assert n in msg, msg
