"""The silicon check: the device path through tt-metal's own JIT on mock Wormhole and Blackhole
devices (``python -m ttnn_flashdecode silicon-check``), its pure pieces, the SFPI stand-in it
type-checks the compute kernel against (planted errors still reported), and the device-side L1
budget on a mock device. Nothing executes on a mock device: no numeric assertions here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import types
from pathlib import Path

import numpy as np
import pytest

from ttnn_flashdecode.tools import silicon_check
from ttnn_flashdecode.emulator.arch import ArchSpec
from ttnn_flashdecode.tools.silicon_check import ARCHS, Row, format_table, mock_cluster_descriptor
from ttnn_flashdecode.tools.silicon_check.compute_syntax import check_compute_threads
from ttnn_flashdecode.tools.silicon_check.fake_root import build_root, wrapper_path
from ttnn_flashdecode.tools.silicon_check.jit_log import TRISC_OF_THREAD, read_jit_log, without_outputs
from ttnn_flashdecode.tools.silicon_check.mock_cases import CASES
from ttnn_flashdecode.tools.silicon_check.toolchain import (
    INSTALL_HINT, SFPI_INCLUDE_ENV, SFPI_STANDIN_DIR, in_ci, missing_toolchain, sfpi_include_dir,
)

REPO = Path(__file__).resolve().parents[1]


# --- pure pieces ----------------------------------------------------------------------------

def test_jit_log_reads_kernel_lines_and_their_thread(tmp_path):
    variant = tmp_path / "cache" / "kernels" / "attention_compute" / "123"
    log = tmp_path / "jit.log"
    log.write_text(
        f"CWD={tmp_path}/cache/firmware/brisc :: -O2 -c -o fw.o fw.cc\n"  # firmware: not a kernel line
        f"CWD={variant}/trisc1 :: -O3 -DUCK_CHLKC_MATH -DKERNEL_BUILD -c -o {variant}/trisc1/t.o trisck.cc -MMD -MF t.d\n"
        f"CWD={variant}/trisc1 :: -O3 -o {variant}/trisc1/trisc1.elf {variant}/trisc1/t.o\n"
    )
    lines = read_jit_log(log)
    assert [(l.kernel, l.variant, l.processor, l.compiles, l.trisc_thread) for l in lines] == [
        ("attention_compute", "123", "trisc1", True, "MATH"), ("attention_compute", "123", "trisc1", False, None)]
    assert without_outputs(lines[0].args) == ["-O3", "-DUCK_CHLKC_MATH", "-DKERNEL_BUILD", "trisck.cc"]


def test_kernel_size_limits_come_from_the_wheel():
    # Wormhole's NCRISC runs kernels from its 16 KiB IRAM (dev_mem_map.h MEM_NCRISC_IRAM_SIZE).
    assert ArchSpec.for_name("wormhole_b0").kernel_size_limit("ncrisc") == 16 * 1024
    assert ArchSpec.for_name("blackhole").kernel_size_limit("NCRISC") > 1024 * 1024


def test_mock_cluster_descriptor_names_the_arch():
    for arch in ARCHS:
        assert f"0: {arch}" in mock_cluster_descriptor(arch).read_text()
    with pytest.raises(ValueError, match="expected one of"):
        mock_cluster_descriptor("grayskull")


def test_missing_toolchain_is_a_skip_outside_ci_and_a_failure_in_ci(monkeypatch):
    monkeypatch.setattr("ttnn_flashdecode.tools.silicon_check.toolchain.missing_toolchain", lambda: ["gcc-riscv64-unknown-elf"])
    monkeypatch.setenv("CI", "false")
    rows = silicon_check.run()
    assert [(r.arch, r.result) for r in rows] == [(arch, "skipped") for arch in ARCHS]
    assert INSTALL_HINT in rows[0].figure and "gcc-riscv64-unknown-elf" in rows[0].figure
    monkeypatch.setenv("CI", "true")
    assert all(r.failed for r in silicon_check.run())


def test_sfpi_headers_from_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setattr("ttnn_flashdecode.tools.silicon_check.toolchain._real_sfpi_include_dirs", lambda: [tmp_path / "none"])
    monkeypatch.setenv(SFPI_INCLUDE_ENV, str(tmp_path))
    folder, why = sfpi_include_dir()
    assert folder is None and SFPI_INCLUDE_ENV in why  # no sfpi.h there: an error, not the stand-in
    (tmp_path / "sfpi.h").write_text("")
    (tmp_path / "tensix_builtins.h").write_text("")
    assert sfpi_include_dir()[0] == tmp_path


def test_sfpi_headers_are_the_stand_in_by_default(monkeypatch, tmp_path):
    """No SFPI install and no TTNN_FLASHDECODE_SFPI_INCLUDE: the package's own stand-in."""
    monkeypatch.setattr("ttnn_flashdecode.tools.silicon_check.toolchain._real_sfpi_include_dirs", lambda: [tmp_path / "none"])
    monkeypatch.delenv(SFPI_INCLUDE_ENV, raising=False)
    folder, why = sfpi_include_dir()
    assert folder == SFPI_STANDIN_DIR == REPO / "ttnn_flashdecode" / "tools" / "silicon_check" / "sfpi_standin"
    assert "stand-in" in why
    assert {"sfpi.h", "tensix_builtins.h"} <= {path.name for path in folder.iterdir()}


def test_a_real_sfpi_install_comes_before_the_stand_in(monkeypatch, tmp_path):
    (tmp_path / "sfpi.h").write_text("")
    monkeypatch.setattr("ttnn_flashdecode.tools.silicon_check.toolchain._real_sfpi_include_dirs", lambda: [tmp_path])
    monkeypatch.delenv(SFPI_INCLUDE_ENV, raising=False)
    assert sfpi_include_dir() == (tmp_path, f"SFPI install {tmp_path}")


def test_the_sfpi_stand_in_ships_in_the_wheel():
    """pyproject's package-data names every header of the stand-in (tests/test_packaging.py builds
    the wheel; this checks the globs without a build)."""
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    globs = package_data["ttnn_flashdecode.tools.silicon_check.sfpi_standin"]
    shipped = {path for pattern in globs for path in SFPI_STANDIN_DIR.glob(pattern)}
    headers = set(SFPI_STANDIN_DIR.glob("*.h"))
    assert headers and headers <= shipped
    assert not any(line.lstrip().startswith(("// SPDX", "/* SPDX")) or "Copyright" in line
                   for path in headers for line in path.read_text().splitlines()), "the stand-in is this project's own"


def test_format_table_aligns_columns():
    rows = [Row("wormhole_b0", "a", "NCRISC", "ok", "1 B"), Row("blackhole", "longer check", "MATH", "FAIL", "why")]
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["arch", "check", "on", "result", "figure"]
    assert len({line.index(row.where) for line, row in zip(lines[1:], rows)}) == 1


# --- the whole check ---------------------------------------------------------------------------

def _skip_or_fail(why: str):
    if in_ci():
        pytest.fail(f"silicon check cannot run under CI=true: {why}")
    pytest.skip(f"silicon check skipped: {why}")


def _run_silicon_check(base, *options):
    report, work = base / "rows.json", base / "work"
    env = {k: v for k, v in os.environ.items() if k not in ("TT_METAL_RUNTIME_ROOT", "TT_METAL_CACHE", "TT_METAL_MOCK_CLUSTER_DESC_PATH")}
    result = subprocess.run([sys.executable, "-m", "ttnn_flashdecode", "silicon-check", "--work", str(work), "--json", str(report),
                             *options], cwd=base, env=env, capture_output=True, text=True, timeout=1800)
    rows = [Row(**r) for r in json.loads(report.read_text())] if report.exists() else []
    return types.SimpleNamespace(result=result, rows=rows, work=work)


def _check_prerequisites():
    missing = missing_toolchain()
    if missing:
        _skip_or_fail(f"missing {', '.join(missing)}; install with: {INSTALL_HINT}")
    if sfpi_include_dir()[0] is None:
        _skip_or_fail(sfpi_include_dir()[1])


@pytest.fixture(scope="module")
def silicon_check_run(tmp_path_factory):
    """``python -m ttnn_flashdecode silicon-check --quick --work WORK --json ROWS`` (CI's tier: Wormhole
    and the mesh every case, Blackhole the cases that build every compile-time feature once), once for
    this module: the process, its rows and WORK (each arch's JIT log, which the planted-error test
    replays). The whole check on both archs is :func:`test_silicon_check_every_case_on_both_archs`
    (``-m long_sweep``)."""
    _check_prerequisites()
    return _run_silicon_check(tmp_path_factory.mktemp("silicon-check"), "--quick")


def _assert_all_ok(run, cases_of):
    """Every case through generic_op, all three compute threads clean, sizes under the limits."""
    result, rows = run.result, run.rows
    table = result.stdout
    assert result.returncode == 0, f"silicon check failed (exit {result.returncode}):\n{table}\n{result.stderr[-3000:]}"
    for arch in ARCHS:
        mine = [r for r in rows if r.arch == arch]
        assert {r.check for r in mine if r.where == "generic_op"} == {case.name for case in cases_of(arch)}
        assert {r.where for r in mine if "attention_compute" in r.check} == {"UNPACK", "MATH", "PACK"}
        assert {(r.check.split()[0], r.check.split()[1]) for r in mine if r.where in ("NCRISC", "BRISC")} == {
            ("attention_reader", "JIT"), ("attention_reader", "watcher"), ("attention_writer", "JIT"), ("attention_writer", "watcher")}
        assert all(r.result == "ok" for r in mine), table
    # Under Wormhole NCRISC's 16 KiB instruction RAM every reader variant's watcher build is measured
    # (the watcher grows some variants more than the largest JIT one: code_size.IRAM_LIMIT_BYTES).
    variants = {r.check.split()[1]: r.check for r in rows if r.arch == "wormhole_b0" and r.check.startswith("attention_reader")}
    assert variants["JIT"].split("(")[1] == variants["watcher"].split("(")[1], variants
    from ttnn_flashdecode.tools.silicon_check.mock_cases import MESH_CASES

    assert [(r.check, r.result) for r in rows if r.arch == "t3k"] == [(c.name, "ok") for c in MESH_CASES], table


@pytest.mark.long_sweep
def test_silicon_check_every_case_on_both_archs(tmp_path):
    """The whole check (what ``python -m ttnn_flashdecode silicon-check`` runs): every case on both
    archs and the mesh cases on the mock T3K; about 9 minutes on 2 cores."""
    _check_prerequisites()
    _assert_all_ok(_run_silicon_check(tmp_path), lambda arch: CASES)


def test_quick_cases_build_every_compile_time_feature():
    """The quick tier's Blackhole cases exist and between them set every feature a compile-time arg
    switches: a case renamed out of the list, or a feature no quick case has, fails here."""
    from ttnn_flashdecode.tools.silicon_check.mock_cases import QUICK_CASE_NAMES, quick_cases

    quick = quick_cases()
    assert [c.name for c in quick] == [n for n in (c.name for c in CASES) if n in QUICK_CASE_NAMES]
    assert len(quick) == len(QUICK_CASE_NAMES)
    calls = [c.call for c in quick]
    features = {
        "split": any(c.get("split", 0) > 1 for c in calls), "rows": any("rows" in c for c in calls),
        "chunk": any("chunk_start" in c for c in calls), "window": any("sliding_window_size" in c for c in calls),
        "sink": any("attention_sink" in c for c in calls), "lse": any(c.get("return_lse") for c in calls),
        "softcap": any("logit_softcap" in c for c in calls), "attention_chunk": any("attention_chunk_size" in c for c in calls),
        "hifi2": any(c.get("compute_kernel_config") == "hifi2" for c in calls), "mask": any(c.mask for c in quick),
        "paged": any(c.cache_block_size for c in quick), "blocks_of_16": any(c.cache_block_size == 16 for c in quick),
        "bfloat8_b": any(c.kv_dtype == "bfloat8_b" for c in quick), "bfloat4_b": any(c.kv_dtype == "bfloat4_b" for c in quick),
        "row_tiles": any(c.n_q_heads // c.n_kv_heads > 32 for c in quick), "drop_in": any(c.drop_in for c in quick),
        "values_from_keys": any(c.values_from_keys for c in quick), "circular": any("cache_position_modulo" in c for c in calls),
        "accurate_scores": any(c.get("accurate_scores") for c in calls),
        "append": any(c.append for c in quick),
        "sparse": any(c.sparse_k for c in quick),
        "sparse_bfloat8_b": any(c.sparse_k and c.kv_dtype == "bfloat8_b" for c in quick),
        "sparse_per_kv_head": any(c.sparse_heads > 1 for c in quick),
        "append_bfloat8_b": any(c.append and c.kv_dtype == "bfloat8_b" for c in quick),
        "append_bfloat4_b": any(c.append and c.kv_dtype == "bfloat4_b" for c in quick),
    }
    assert all(features.values()), [name for name, present in features.items() if not present]


def test_silicon_check_passes_on_mock_wormhole_and_blackhole(silicon_check_run, record_property):
    """CI's tier: every case on Wormhole and the mesh, the quick cases on Blackhole; generic_op, all
    three compute threads clean, sizes under the limits."""
    from ttnn_flashdecode.tools.silicon_check import QUICK_ARCH
    from ttnn_flashdecode.tools.silicon_check.mock_cases import quick_cases

    for row in silicon_check_run.rows:
        if row.where in ("NCRISC", "BRISC") or row.where == "MATH":
            record_property("figure", f"silicon check {row.arch} {row.check} on {row.where}: {row.result}, {row.figure}")
    _assert_all_ok(silicon_check_run, lambda arch: quick_cases() if arch == QUICK_ARCH else CASES)


#: The compute kernel's file the errors are planted in (its softmax stages), in a copy of kernels/.
PLANTED_FILE = "attention_softmax.hpp"
# Errors planted in a copy of the compute kernel: (statement in PLANTED_FILE, which occurrence of it,
# what replaces it, the threads that must report an error at that line). The kernel is compiled
# once per TRISC thread; MATH(...) keeps its argument on the MATH thread only, and tt-metal
# declares APPROX for MATH and PACK only. The SFPI ones check the stand-in refuses what SFPI does.
PLANTED_ERRORS = (
    ("recip_tile(0);", 0, "recip_tlie(0);", {"UNPACK", "MATH", "PACK"}),  # misspelled LLK call
    ("exp_tile_init<kExpApprox>();", 0, "exp_tile_init<APPROX>();", {"UNPACK"}),  # MATH/PACK-only name
    ("live_exp_tile(0);", 0, "MATH((exp_tile<kExpApprox, 7>(0)));", {"MATH"}),  # 7 is no bool
    ("live_exp_tile(0);", 1, "MATH((sfpi::dst_reg[0] = sfpi::vFloat(1.0f) / sfpi::vFloat(2.0f)));",
     {"MATH"}),  # the SFPU has no vector division
    ("exp_tile_init<kExpApprox>();", 1, "MATH((sfpi::dst_reg[0] = sfpi::vFloat(1.0f) + sfpi::vInt(1)));",
     {"MATH"}),  # SFPI vector types do not mix without as<>() / convert<>()
)
#: Blackhole-only SFPI: an error on Wormhole's MATH thread, none on Blackhole's.
PLANTED_WORMHOLE_ERROR = ("live_max_tile(0, 1, 0);", 0,
                          "MATH((sfpi::dst_reg[0] = sfpi::approx_recip(sfpi::vFloat(sfpi::dst_reg[0]))));")


def _plant(kernel: Path, copy: Path, plants) -> dict[int, tuple]:
    """Writes ``kernel`` with each plant's statement replaced to ``copy``; {1-based line: plant}."""
    original = kernel.read_text().splitlines(keepends=True)
    edited, planted = list(original), {}
    for plant in plants:
        statement, occurrence, replacement = plant[:3]
        index = [i for i, line in enumerate(original) if statement in line][occurrence]
        assert index + 1 not in planted, f"two plants on line {index + 1}"
        edited[index] = original[index].replace(statement, replacement)
        planted[index + 1] = plant
    copy.write_text("".join(edited))
    return planted


def test_planted_kernel_errors_are_reported_at_their_line_on_their_thread(silicon_check_run, tmp_path, record_property):
    """Replays the logged compute compiles (first variant, both archs, against the SFPI headers in
    use: the stand-in here) with an edited copy of the kernels: each planted error is an ``error:``
    at the edited file's line on exactly the threads that compile it, and the unedited lines stay clean."""
    assert silicon_check_run.result.returncode in (0, 1), silicon_check_run.result.stderr[-3000:]
    include, source = sfpi_include_dir()
    kernels = tmp_path / "kernels"  # the kernel's own folder copied: its headers come from the copy
    shutil.copytree(REPO / "kernels", kernels)
    edited = kernels / PLANTED_FILE
    planted = _plant(REPO / "kernels" / PLANTED_FILE, edited, (*PLANTED_ERRORS, PLANTED_WORMHOLE_ERROR))
    copy = kernels / "attention_compute.cpp"
    compiler = wrapper_path(build_root())
    start = time.perf_counter()
    for arch in ARCHS:
        lines = read_jit_log(silicon_check_run.work / arch / "jit.log")
        results = check_compute_threads(lines, silicon_check.COMPUTE_KERNEL, compiler, include, kernel_copy=copy,
                                        scratch=tmp_path / "scratch" / arch, first_variant_only=True, max_errors=100)
        assert [r.thread for r in results] == list(TRISC_OF_THREAD)
        for result in results:
            assert result.skipped is None and result.variants == 1, result
            located = {}
            for error in result.errors:
                assert error.startswith(f"{edited}:"), f"{arch} {result.thread}: an error outside the planted lines: {error}"
                located.setdefault(int(error.split(":")[1]), []).append(error)
            expected = {line for line, plant in planted.items()
                        if (result.thread in plant[3] if len(plant) > 3 else (arch == "wormhole_b0" and result.thread == "MATH"))}
            assert set(located) == expected, (f"{arch} {result.thread} ({source}): errors at lines {sorted(located)}, "
                                              f"planted for this thread at {sorted(expected)}:\n" + "\n".join(result.errors))
    record_property("figure", f"planted-error replay: 12 compiles in {time.perf_counter() - start:.1f} s")


# --- the device's L1 budget, on a mock device ---------------------------------------------------

def _device_inputs(device, batch=1, n_q=16, n_kv=2, head_dim=128, capacity=8192):
    import ttnn

    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, batch, n_q * head_dim), dtype=np.float32)
    k = rng.standard_normal((batch, n_kv, capacity, head_dim), dtype=np.float32)
    make = lambda a: ttnn.Tensor(a, ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=device,  # noqa: E731
                                 mem_config=ttnn.DRAM_MEMORY_CONFIG)
    return make(q), make(k), make(k)


def _l1_tensor(device, rows: int):
    """An L1-interleaved bfloat16 tensor of ``rows`` x 2048 (rows / 32 * 64 tiles spread over the banks)."""
    import ttnn

    return ttnn.allocate_tensor_on_device(ttnn.Shape([1, 1, rows, 2048]), ttnn.bfloat16, ttnn.TILE_LAYOUT, device,
                                          ttnn.L1_MEMORY_CONFIG)


@pytest.mark.parametrize("device_params", [{"l1_small_size": 32768}], indirect=True)
def test_device_plan_fits_beside_l1_small_and_a_live_l1_tensor(mock_device):
    """A 2-way split of MiniCPM5-1B at 8k sizes its block to what L1 holds (128-tile slices): planned
    against an empty L1 its CBs would reach into the L1 tensor and tt-metal would refuse the program
    at launch; planned against the allocator it goes through generic_op."""
    from ttnn_flashdecode import attention
    from ttnn_flashdecode.op.operation import plan_program
    from ttnn_flashdecode.op.plan import Target
    from ttnn_flashdecode.op.compute_options import ComputeOptions
    from ttnn_flashdecode.op.shape import DecodeShape
    from ttnn_flashdecode.op.residency import (
        DEVICE_L1_MARGIN_BYTES, available_l1_bytes, device_cb_budget_bytes, l1_bytes,
    )

    empty = device_cb_budget_bytes(mock_device)
    assert empty == available_l1_bytes("wormhole_b0") - 32768 - DEVICE_L1_MARGIN_BYTES  # l1_small off the top
    hog = _l1_tensor(mock_device, 1024)  # 2048 tiles over 64 banks: 32 tiles (64 KiB) per bank
    budget = device_cb_budget_bytes(mock_device)
    assert budget == empty - 32 * 2048
    shape = DecodeShape(1, 16, 2, 128, 8192)
    grid = mock_device.compute_with_storage_grid_size()
    accessor = tuple((2, 2048) for _ in range(8))  # program_factory.OPERANDS
    unaware = plan_program(shape, Target("wormhole_b0", (grid.x, grid.y), accessor, lambda x, y: (x, y)), split=2)
    assert l1_bytes(unaware.residency) > budget, "the case must need the allocator-aware budget"
    out = attention(*_device_inputs(mock_device), cur_pos=[8191], split=2)
    assert tuple(out.shape) == (1, 1, 1, 16 * 128)
    hog.deallocate()


def test_device_refuses_before_launch_when_l1_is_nearly_full(mock_device):
    from ttnn_flashdecode import attention

    inputs = _device_inputs(mock_device, capacity=1024)
    hog = _l1_tensor(mock_device, 20480)  # 640 tiles (1.25 MiB) per bank
    with pytest.raises(ValueError, match="allocator leaves"):
        attention(*inputs, cur_pos=[100])
    hog.deallocate()
    assert tuple(attention(*inputs, cur_pos=[100]).shape) == (1, 1, 1, 16 * 128)


def test_host_bench_measures_five_paths_on_a_mock_device():
    """The host-path benchmark runs end to end (no timing is asserted: it prints what it measured),
    with generic_op's floor on the smallest descriptor the op produces."""
    from ttnn_flashdecode.tools import host_bench
    from ttnn_flashdecode.tools.silicon_check.toolchain import INSTALL_HINT, in_ci, missing_toolchain

    if missing_toolchain() and not in_ci():
        pytest.skip(f"the mock device needs the RISC-V toolchain: {INSTALL_HINT}")
    rows = host_bench.run(batches=(2,), calls=3, warmup=1, floor=True)
    assert {row["path"] for row in rows} == {"ours, before generic_op", "ours, with generic_op",
                                              "generic_op alone, our descriptor", "generic_op alone, smallest (1 core)",
                                              "ttnn sdpa_decode, with launch", "floor: 1 empty kernel", "floor: + 20 CBs",
                                              "floor: 2 kernels x 21 named args"}
    assert all(len(row["seconds"]) == 3 and min(row["seconds"]) > 0 for row in rows)
    assert "median us" in host_bench.format_table(rows)


@pytest.mark.long_sweep
def test_silicon_check_mesh_cases_open_a_1x8_mesh_on_the_mock_t3k(tmp_path, record_property):
    """Issue 23: the mesh cases alone (CI runs them inside the check above, whose rows assert the same;
    this standalone run is for working on them, ``-m long_sweep``): a
    ``ttnn.MeshDevice`` of 1x8 opened on ``mock_clusters/t3k.yaml``, the op's tensor-parallel calls
    through ONE ``generic_op`` with a ``MeshProgramDescriptor`` each (JIT-built and dispatched to the
    8 mock chips; nothing executes), the output sharded over every chip."""
    from ttnn_flashdecode.tools.silicon_check import MESH_ARCH, MESH_CLUSTER, _case_rows, _start_mock_cases
    from ttnn_flashdecode.tools.silicon_check.fake_root import build_root
    from ttnn_flashdecode.tools.silicon_check.mock_cases import MESH_CASES

    missing = missing_toolchain()
    if missing:
        _skip_or_fail(f"missing {', '.join(missing)}; install with: {INSTALL_HINT}")
    rows = _case_rows(MESH_CLUSTER, _start_mock_cases(MESH_ARCH, build_root(), tmp_path / "t3k", mesh=True), mesh=True)
    for row in rows:
        record_property("figure", f"silicon check {row.arch} {row.check}: {row.result}, {row.figure}")
    assert [(r.check, r.result) for r in rows] == [(c.name, "ok") for c in MESH_CASES], rows
    assert all("t3k" in r.check and "mesh" in r.check for r in rows)
