"""wolfpine FPU timing (issue 35 item 1): single compute API calls timed on wolfpine's simulated
Wormhole (ttnn_flashdecode/tools/wolfpine_check/fpu_timing.py) beside the device model's cycles.

The counter parsing is tested on a synthetic counter table (and a one-file parquet dataset); the
probe runs for real when wolfpine and the RISC-V toolchain are installed (skipped with the reason
otherwise; under CI=true that is a failure)."""

from __future__ import annotations

import numpy as np
import pytest

from ttnn_flashdecode.tools.device_model import llk_costs as llk
from ttnn_flashdecode.tools.device_model.report import format_fpu_timing
from ttnn_flashdecode.tools.wolfpine_check import fpu_timing as ft


def _rows(*samples):
    """Counter rows (cycle, unit, counter_name, value) as wolfpine's parquet writer lays them out."""
    import pandas as pd

    return pd.DataFrame([dict(cycle=c, chip=0, kernel_id=0, core_y=1, core_x=1, unit=u, counter_name=n, value=v)
                         for c, u, n, v in samples])


def _program(start: int, calls: int, per_call: int, mvmuls: int, packs: int = 1):
    """One synthetic program: a start-up op at ``start``, DRAM wait, ``calls`` calls each ``per_call``
    cycles with ``mvmuls`` MATRIX ops, then ``packs`` packs 20 cycles apart."""
    rows = [(start, "MATRIX", "compute_ops", 1), (start + 5, "TRISC1", "instr_retired", 40)]
    t = start + 1000
    for _ in range(calls):
        rows += [(t, "UNPACKER", "compute_ops", 2), (t + per_call, "MATRIX", "compute_ops", mvmuls)]
        t += per_call
    for _ in range(packs):
        t += 20
        rows.append((t, "PACKER", "compute_ops", 2))
    rows.append((t + 10, "MATRIX", "compute_ops", 1))  # an op that lands in the next counter row
    return rows, t


def test_program_windows_and_per_call_on_synthetic_counters():
    samples, end = [(300, "MATRIX", "compute_ops", 1)], 0  # device start-up before the warm-up program
    launched = [dict(op="copy_tile", fidelity="HiFi2", fp32_dest=True, n=1, warmup=True, ok=True)]
    warm, end = _program(2000, 1, 10, 8)
    samples += warm
    for n in (8, 16, 24):
        rows, end = _program(end + 5000, n, 34, 32)
        samples += rows
        launched.append(dict(op="matmul_tiles", fidelity="HiFi2", fp32_dest=True, n=n, warmup=False, ok=True))
    samples.append((end + 3000, "TRISC1", "instr_retired", 7))  # firmware idling after the last program
    counters = _rows(*samples)
    windows = ft.program_windows(counters, len(launched))
    assert windows[0]["start"] == 300  # the warm-up window absorbs device start-up
    assert [w["span"] for w in windows[1:]] == [1000 + 34 * n + 20 for n in (8, 16, 24)]
    assert [w["MATRIX"] for w in windows[1:]] == [1 + 32 * n for n in (8, 16, 24)]  # not the previous one's last
    (result,) = ft.per_call(launched, windows)
    assert result["cycles_per_call"] == 34 and result["marginals"] == [34, 34]
    assert result["matrix_ops_per_call"] == 32 and result["unpacker_ops_per_call"] == 2 and result["ok"]
    with pytest.raises(ValueError, match="3 pack bursts"):
        ft.program_windows(counters[counters.cycle < end - 100], len(launched))


def test_a_pack_burst_is_one_program(tmp_path):
    # pack_tile's probe packs N times in a row: one burst, not N programs. Read back through parquet.
    import pyarrow as pa
    import pyarrow.parquet as pq

    warm, end = _program(100, 1, 10, 8)
    rows, end = _program(end + 5000, 4, 1, 0, packs=16)
    pq.write_to_dataset(pa.Table.from_pandas(_rows(*warm, *rows)), root_path=str(tmp_path / "counters"),
                        partition_cols=["chip", "kernel_id"])
    windows = ft.program_windows(ft.read_counters(tmp_path), 2)
    assert windows[1]["PACKER"] == 32


def test_expected_outputs_are_exact_small_integers():
    for op in ft.OPS:
        a, b = ft.make_inputs(op, np.random.default_rng(op.code))
        out, defined = ft.expected(op, a, b, 64)
        assert defined.any() and (out == np.round(out)).all() and np.abs(out).max() <= 256, op.name
    matmul = ft.OPS[0]
    a, b = ft.make_inputs(matmul, np.random.default_rng(0))
    assert sorted(b.sum(axis=0)) == [1.0] * 32 and sorted(b.sum(axis=1)) == [1.0] * 32  # a permutation


def test_table_prints_both_figures_with_the_legend():
    results = [dict(op="matmul_tiles", fidelity="HiFi2", fp32_dest=True, cycles_per_call=35.0, ok=True, error="",
                    model=llk.call_cost("matmul_tiles", llk.ComputeConfig("HiFi2", True)).math,
                    matrix_ops_per_call=32.0, unpacker_ops_per_call=2.0, provenance="MVMUL 1 x phases (isa_doc_derived)")]
    table = format_fpu_timing(results)
    assert "33.6" in table and "35.0" in table and "1.04" in table  # 32 x 1.049 modelled, 35 simulated
    assert "UNCALIBRATED" in table and "SIMULATED" in table and "MODELLED" in table and "isa_doc_derived" in table


def test_cli_without_wolfpine_is_a_skip_outside_ci_and_a_failure_in_ci(monkeypatch, capsys):
    from ttnn_flashdecode.tools import wolfpine_check

    monkeypatch.setattr("ttnn_flashdecode.tools.wolfpine_check.root.wolfpine_missing", lambda: "wolfpine is not installed")
    monkeypatch.delenv("CI", raising=False)
    assert wolfpine_check.main(["--fpu-timing"]) == 3
    assert "skipped: wolfpine is not installed" in capsys.readouterr().out
    monkeypatch.setenv("CI", "true")
    assert wolfpine_check.main(["--fpu-timing"]) == 1


def _wolfpine_or_skip():
    from ttnn_flashdecode.tools.silicon_check.toolchain import in_ci, missing_toolchain
    from ttnn_flashdecode.tools.wolfpine_check.root import wolfpine_missing

    why = wolfpine_missing() or (f"missing {missing_toolchain()}" if missing_toolchain() else None)
    if why:
        if in_ci():
            pytest.fail(f"wolfpine FPU timing cannot run under CI: {why}")
        pytest.skip(why)


def test_matmul_hifi2_vs_hifi4_and_a_row_max_on_wolfpine():
    """Runs 3 x (matmul at HiFi2 and HiFi4, reduce MAX at HiFi2) with N = 8, 16, 24 calls (~1 min)."""
    _wolfpine_or_skip()
    results, status = ft.run(["matmul", "reduce_tile MAX"], ["HiFi2 fp32", "HiFi4 fp32"], n=8, multiples=(1, 2, 3))
    table = format_fpu_timing(results)
    assert not status, status + "\n" + table
    got = {(r["op"], r["fidelity"]): r for r in results}
    assert len(got) == 4 and all(r["ok"] for r in results), table  # every output value as the model says
    hifi2, hifi4 = got["matmul_tiles", "HiFi2"], got["matmul_tiles", "HiFi4"]
    # MATRIX ops per call: 16 MVMULs per fidelity phase (the device model's MVMULS_PER_TILE_PHASE) and
    # ~2 bookkeeping ops; HiFi4's two extra phases are 32 more (to the counters' one-op resolution).
    extra = hifi4["matrix_ops_per_call"] - hifi2["matrix_ops_per_call"]
    assert abs(extra - 2 * llk.MVMULS_PER_TILE_PHASE) <= 0.5, table
    assert 2 * llk.MVMULS_PER_TILE_PHASE <= hifi2["matrix_ops_per_call"] <= 2 * llk.MVMULS_PER_TILE_PHASE + 3, table
    assert hifi4["cycles_per_call"] > hifi2["cycles_per_call"] + 24, table
    # Linear in the calls: 8 -> 16 and 16 -> 24 agree within the counters' resolution (a span's ends each
    # fall in a counter row of 10 cycles, run()'s interval: 4 x 10 / 8 cycles a call between two marginals).
    for r in results:
        first, second = r["marginals"]
        assert abs(first - second) <= 4 * 10 / 8, (r["op"], r["marginals"])
        assert r["cycles_per_call"] > 0


def test_fpu_timing_help_lists_the_valid_configs(capsys):
    from ttnn_flashdecode.tools import wolfpine_check

    with pytest.raises(SystemExit) as exited:
        wolfpine_check.main(["--fpu-timing", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    for label in ("LoFi fp32 DST", "HiFi2 fp32 DST", "HiFi4 fp32 DST", "LoFi bf16 DST", "HiFi2 bf16 DST",
                  "HiFi4 bf16 DST"):
        assert f"'{label}'" in text
    assert "matmul_tiles" in text  # and the ops --case selects


def test_fpu_timing_refuses_an_unknown_config_by_name(capsys):
    from ttnn_flashdecode.tools import wolfpine_check

    with pytest.raises(SystemExit) as exited:
        wolfpine_check.main(["--fpu-timing", "--config", "HiFi3"])
    assert exited.value.code == 2
    assert "--config: expected a config label or a prefix of one (LoFi fp32 DST, " in capsys.readouterr().err
