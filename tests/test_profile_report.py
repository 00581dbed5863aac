"""``profile-report``: this op's rows in a Tracy ops_perf_results CSV, per-call duration and GB/s.

``tests/data/ops_perf_results_flashdecode.csv`` is written in the real column format: its header
is the one the ``tracy`` package of the installed ttnn 0.81 wheel writes
(``tracy/process_ops_logs.py``, tt-metal ``tools/tracy/process_ops_logs.py``): ``OPS_CSV_HEADER``
with ``INPUTS``/``OUTPUTS`` replaced by the per-tensor ``INPUT_<i>_{W,Z,Y,X}_PAD[LOGICAL]``,
``_LAYOUT``, ``_DATATYPE``, ``_MEMORY`` columns (five io tensors of generic_op, one output) and
the ``... MAX KERNEL SIZE [B]`` columns inserted after ``PROGRAM CACHE HIT``. Cells follow the
writer's conventions (``padded[logical]`` shapes, lists with ``;`` for commas, ``signpost`` rows
with the message in OP CODE), as in the TT-NN sample report in tenstorrent/tt-perf-report's tests.
Its rows: the op's Tracy signpost and call (MiniCPM5-1B, batch 1, 8k cache), another generic_op
program with other kernels, a BinaryNg op, and a second signposted call (Llama-3.1-8B, batch
32) inside a trace.
"""

from __future__ import annotations

import csv
import pathlib
import re

import pytest

from ttnn_flashdecode.tools import cli, profile_report

CSV_PATH = pathlib.Path(__file__).resolve().parent / "data" / "ops_perf_results_flashdecode.csv"


def _rows():
    with open(CSV_PATH, newline="") as handle:
        return list(csv.DictReader(handle))


def test_profile_report_csv_has_the_real_columns():
    header = next(csv.reader(open(CSV_PATH, newline="")))
    for column in ("OP CODE", "OP TYPE", "GLOBAL CALL COUNT", "DEVICE ID", "CORE COUNT", "DEVICE FW DURATION [ns]",
                   "DEVICE KERNEL DURATION [ns]", "COMPUTE KERNEL SOURCE", "DATA MOVEMENT KERNEL SOURCE",
                   "INPUT_1_Y_PAD[LOGICAL]", "METAL TRACE ID"):
        assert column in header


def test_profile_report_csv_header_matches_installed_tracy():
    tracy_logs = pytest.importorskip("tracy.process_ops_logs")
    header = next(csv.reader(open(CSV_PATH, newline="")))
    fixed = [h for h in tracy_logs.OPS_CSV_HEADER if h not in ("INPUTS", "OUTPUTS")]
    assert [h for h in header if h in fixed] == fixed
    extra = [h for h in header if h not in fixed]
    assert all(re.fullmatch(r"(INPUT|OUTPUT)_\d_\w+(\[LOGICAL\])?|.* MAX KERNEL SIZE \[B\]", h) for h in extra), extra


def test_profile_report_finds_only_this_ops_rows():
    calls = profile_report.read_calls(_rows(), device="p150")
    assert [c.call for c in calls] == [1024, 4096]
    assert [profile_report.is_attention_row(r) for r in _rows()] == [False, True, False, False, False, True]


def test_profile_report_bytes_and_bandwidth_from_shapes():
    first, second = profile_report.read_calls(_rows(), device="p150")
    # K [1, 2, 8192, 128]: 2 groups x 256 tiles x (K + V) x 4 dim tiles x 2048 bytes.
    assert (first.batch, first.n_kv_heads, first.capacity, first.head_dim) == (1, 2, 8192, 128)
    assert first.min_bytes == 2 * 256 * 2 * 4 * 2048
    assert first.kernel_ns == 187_500 and first.fw_ns == 190_000 and first.cores == 32
    assert first.achieved_gbps == pytest.approx(first.min_bytes / 187_500)
    assert first.roofline_ns == pytest.approx(first.min_bytes / 512)
    assert first.roofline_fraction == pytest.approx(first.roofline_ns / 187_500)
    assert (second.batch, second.n_kv_heads, second.trace_id) == (32, 8, 1)
    assert second.roofline_fraction == pytest.approx(0.9986, abs=1e-3)


def test_profile_report_context_overrides_capacity():
    first, _ = profile_report.read_calls(_rows(), context=4096)
    assert first.context == 4096 and first.min_bytes == 2 * 128 * 2 * 4 * 2048
    assert first.roofline_ns == pytest.approx(first.min_bytes / 512)


def test_profile_report_without_shapes_uses_model_and_signpost():
    rows = [{k: v for k, v in r.items() if "_PAD[LOGICAL]" not in k} for r in _rows()]
    first, second = profile_report.read_calls(rows, model="minicpm5-1b", device="p150", context=8192)
    assert (first.batch, first.n_kv_heads, first.head_dim) == (1, 2, 128)
    assert second.batch == 32  # from the signpost "batch=32" before it
    with pytest.raises(ValueError, match="expected INPUT_1_\\*_PAD\\[LOGICAL\\] shape columns or --model"):
        profile_report.read_calls(rows, device="p150")
    with pytest.raises(ValueError, match="expected --context"):
        profile_report.read_calls(rows, model="minicpm5-1b", device="p150")


def test_profile_report_device_from_arch_column_or_option():
    assert {c.device for c in profile_report.read_calls(_rows())} == {"p150"}  # DEVICE ARCH "blackhole"
    no_arch = [{k: v for k, v in r.items() if k != "DEVICE ARCH"} for r in _rows()]
    with pytest.raises(ValueError, match="expected DEVICE ARCH"):
        profile_report.read_calls(no_arch)
    assert {c.device for c in profile_report.read_calls(no_arch, device="n150")} == {"n150"}
    wormhole = [dict(r, **{"DEVICE ARCH": "WORMHOLE_B0"}) for r in _rows()]
    assert {c.device for c in profile_report.read_calls(wormhole)} == {"n150"}


def test_profile_report_rejects_missing_duration():
    rows = [dict(r, **{"DEVICE KERNEL DURATION [ns]": ""}) for r in _rows()]
    with pytest.raises(ValueError, match="expected a DEVICE KERNEL DURATION"):
        profile_report.read_calls(rows, device="p150")


def test_profile_report_cli(capsys):
    assert cli.main(["profile-report", str(CSV_PATH), "--device", "p150"]) == 0
    out = capsys.readouterr().out
    assert "2 calls" in out and "GB/s" in out and "upper bound" in out
    assert "1024" in out and "4096" in out


def test_profile_report_cli_no_rows(tmp_path, capsys):
    path = tmp_path / "empty.csv"
    rows = _rows()
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerow(rows[3])
    assert profile_report.main([str(path)]) == 1
    assert "no ttnn_flashdecode.attention rows" in capsys.readouterr().out


def test_profile_report_cli_reports_unreadable_files_and_bad_numbers(tmp_path, capsys):
    from ttnn_flashdecode.tools import profile_report

    assert profile_report.main([str(tmp_path / "missing.csv")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert profile_report.main([str(tmp_path)]) == 2  # a directory
    with pytest.raises(SystemExit):
        profile_report.main([str(CSV_PATH), "--context", "-5"])
    assert profile_report.main([str(CSV_PATH), "--context", "100000"]) == 2
    assert "expected --context <= the cache's capacity" in capsys.readouterr().err


def test_profile_report_reads_rows_with_tt_perf_report():
    pytest.importorskip("tt_perf_report")
    rows = profile_report.perf_rows(str(CSV_PATH))
    assert len(rows) == len(_rows())
    ours = [r for r in rows if r.ours]
    assert [r.index for r in ours] == [1, 5] and {r.op_code for r in ours} == {"ttnn_flashdecode.attention"}
    for r in ours:
        assert r.plan_bytes > 0 and r.bound in {"dram", "request rate", "FPU", "SFPU", "pack", "combine"}
        assert r.dram_gbps == pytest.approx(r.plan_bytes / (r.device_us * 1e3))
        assert r.dram_percent == pytest.approx(100 * r.dram_gbps / 512)  # DEVICE ARCH blackhole: p150's peak
        assert r.modelled_us > 0
    others = {r.index: r for r in rows if not r.ours}
    assert others[2].op_code == "GenericOpDeviceOperation" and others[2].device_us == pytest.approx(4.0)
    assert others[3].op_code == "BinaryNgDeviceOperation" and others[3].device_us == pytest.approx(1200.734)
    assert others[0].op_code.endswith("(signpost)")
    # The K cache of call 4096 is [32, 8, 8192, 128] bfloat16: the plan reads at least every K/V tile once.
    assert ours[1].plan_bytes >= 2 * 32 * 8 * 256 * 4 * 2048


def test_profile_report_cache_dtype_and_card_from_the_report(tmp_path, capsys):
    rows = [dict(r, **{"INPUT_1_DATATYPE": "DataType::BFLOAT8_B"}) if profile_report.is_attention_row(r) else r
            for r in _rows()]
    first, _ = profile_report.read_calls(rows)
    assert first.kv_dtype == "bfloat8_b" and first.min_bytes == 2 * 256 * 2 * 4 * 1088
    assert first.q_heads == 16 and first.fidelity == "HiFi4"
    (p100a, _) = profile_report.read_calls(_rows(), device="p100a")
    assert p100a.device == "p100a" and p100a.roofline_ns == pytest.approx(p100a.min_bytes / 448)
    assert cli.main(["profile-report", str(CSV_PATH), "--device", "p100a"]) == 0
    out = capsys.readouterr().out
    assert "ttnn_flashdecode.attention" in out and "DRAM %" in out and "MODELLED" in out
