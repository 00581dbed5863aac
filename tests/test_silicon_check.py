"""The silicon check: the device path through tt-metal's own JIT on mock Wormhole and Blackhole
devices (``python -m ttnn_flashdecode silicon-check``), its pure pieces, and the device-side L1
budget on a mock device. Nothing executes on a mock device: no numeric assertions here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ttnn_flashdecode.tools import silicon_check
from ttnn_flashdecode.emulator.arch import ArchSpec
from ttnn_flashdecode.tools.silicon_check import ARCHS, Row, format_table, mock_cluster_descriptor
from ttnn_flashdecode.tools.silicon_check.jit_log import read_jit_log, without_outputs
from ttnn_flashdecode.tools.silicon_check.mock_cases import CASES
from ttnn_flashdecode.tools.silicon_check.toolchain import (
    INSTALL_HINT, SFPI_INCLUDE_ENV, in_ci, missing_toolchain, sfpi_include_dir,
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
    monkeypatch.delenv(SFPI_INCLUDE_ENV, raising=False)
    folder, why = sfpi_include_dir()
    assert folder is None and SFPI_INCLUDE_ENV in why
    monkeypatch.setenv(SFPI_INCLUDE_ENV, str(tmp_path))
    assert sfpi_include_dir()[0] is None  # no sfpi.h there
    (tmp_path / "sfpi.h").write_text("")
    (tmp_path / "tensix_builtins.h").write_text("")
    assert sfpi_include_dir()[0] == tmp_path


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


def test_silicon_check_passes_on_mock_wormhole_and_blackhole(tmp_path, record_property):
    """Every case through generic_op, all three compute threads clean, sizes under the limits."""
    missing = missing_toolchain()
    if missing:
        _skip_or_fail(f"missing {', '.join(missing)}; install with: {INSTALL_HINT}")
    if sfpi_include_dir()[0] is None:
        _skip_or_fail(sfpi_include_dir()[1])
    report = tmp_path / "rows.json"
    env = {k: v for k, v in os.environ.items() if k not in ("TT_METAL_RUNTIME_ROOT", "TT_METAL_CACHE", "TT_METAL_MOCK_CLUSTER_DESC_PATH")}
    result = subprocess.run([sys.executable, "-m", "ttnn_flashdecode", "silicon-check", "--json", str(report)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    table = result.stdout
    rows = [Row(**r) for r in json.loads(report.read_text())] if report.exists() else []
    for row in rows:
        if row.where in ("NCRISC", "BRISC") or row.where == "MATH":
            record_property("figure", f"silicon check {row.arch} {row.check} on {row.where}: {row.result}, {row.figure}")
    assert result.returncode == 0, f"silicon check failed (exit {result.returncode}):\n{table}\n{result.stderr[-3000:]}"
    for arch in ARCHS:
        mine = [r for r in rows if r.arch == arch]
        assert {r.check for r in mine if r.where == "generic_op"} == {case.name for case in CASES}
        assert {r.where for r in mine if "attention_compute" in r.check} == {"UNPACK", "MATH", "PACK"}
        assert {(r.check.split()[0], r.check.split()[1]) for r in mine if r.where in ("NCRISC", "BRISC")} == {
            ("attention_reader", "JIT"), ("attention_reader", "watcher"), ("attention_writer", "JIT"), ("attention_writer", "watcher")}
        assert all(r.result == "ok" for r in mine), table


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
    from ttnn_flashdecode.op.shape import ComputeOptions, DecodeShape
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
    unaware = plan_program(shape, None, 2, ComputeOptions(), "wormhole_b0", (grid.x, grid.y), accessor, lambda x, y: (x, y))
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


def test_host_bench_measures_four_paths_on_a_mock_device():
    """The host-path benchmark runs end to end (no timing is asserted: it prints what it measured)."""
    from ttnn_flashdecode.tools import host_bench
    from ttnn_flashdecode.tools.silicon_check.toolchain import INSTALL_HINT, in_ci, missing_toolchain

    if missing_toolchain() and not in_ci():
        pytest.skip(f"the mock device needs the RISC-V toolchain: {INSTALL_HINT}")
    rows = host_bench.run(batches=(2,), calls=3, warmup=1)
    assert {row["path"] for row in rows} == {"ours, before generic_op", "ours, with generic_op",
                                              "generic_op alone, our descriptor", "ttnn sdpa_decode, with launch"}
    assert all(len(row["seconds"]) == 3 and min(row["seconds"]) > 0 for row in rows)
    assert "median us" in host_bench.format_table(rows)
