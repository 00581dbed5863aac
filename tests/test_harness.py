"""The scaffolding around the op: device detection and the device fixture, the mock cluster
descriptors, source paths, the CLI dispatch, run.sh's argument handling, and the emulator launch's
wall-clock backstop."""

from __future__ import annotations

import glob
import os
import pathlib
import subprocess
import sys

import pytest

from ttnn_flashdecode.op import devices, paths
from ttnn_flashdecode.tools import cli
from ttnn_flashdecode.op.devices import mock_cluster_descriptor

REPO = pathlib.Path(__file__).resolve().parents[1]
HAS_DEVICE_NODE = bool(glob.glob(devices.DEVICE_NODE_GLOB))


# --- device detection and the `device` fixture -----------------------------------------


def test_detect_devices_agrees_with_device_nodes():
    """Here (no card) detection must say 0 without raising; on a card machine, more than 0."""
    detection = devices.detect_devices()
    assert isinstance(detection.reason, str) and detection.reason
    if HAS_DEVICE_NODE and not os.environ.get(devices.MOCK_CLUSTER_ENV):
        assert detection.count > 0, detection.reason
    else:
        assert detection.count == 0, f"expected no device, got {detection}"
        assert devices.available_device_count() == 0


def test_detect_devices_reports_mock_cluster_as_no_device(monkeypatch):
    monkeypatch.setenv(devices.MOCK_CLUSTER_ENV, str(mock_cluster_descriptor("wormhole_b0")))
    detection = devices.detect_devices()
    assert detection.count == 0
    assert devices.MOCK_CLUSTER_ENV in detection.reason


def test_detect_devices_without_device_node_does_not_touch_ttnn(monkeypatch):
    monkeypatch.delenv(devices.MOCK_CLUSTER_ENV, raising=False)
    monkeypatch.delenv(devices.SIMULATOR_ENV, raising=False)
    monkeypatch.setattr(devices, "DEVICE_NODE_GLOB", "/nonexistent/tenstorrent/*")
    monkeypatch.setitem(sys.modules, "ttnn", None)  # importing ttnn would now raise
    assert devices.detect_devices() == (0, "no /nonexistent/tenstorrent/* device node (tt-kmd not loaded or no card)")


def test_detect_devices_turns_ttnn_errors_into_zero(monkeypatch):
    class FailingTtnn:
        @staticmethod
        def GetNumAvailableDevices():
            raise RuntimeError("TT_FATAL @ tt_cluster.cpp:129: num_chips > 0\ninfo:\nNo chips detected")

    monkeypatch.delenv(devices.MOCK_CLUSTER_ENV, raising=False)
    monkeypatch.setenv(devices.SIMULATOR_ENV, "/nonexistent/sim")
    monkeypatch.setitem(sys.modules, "ttnn", FailingTtnn)
    detection = devices.detect_devices()
    assert detection.count == 0
    assert "num_chips > 0" in detection.reason


def test_device_fixture_skips_without_card(pytester):
    """Run a tiny suite under this conftest: without a card `device` skips, saying why."""
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    pytester.makepyfile(
        """
        import pytest

        def test_uses_device(device):
            assert device is not None

        @pytest.mark.parametrize("device_params", [{"l1_small_size": 1024}], indirect=True)
        def test_uses_device_params(device, device_params):
            assert device_params == {"l1_small_size": 1024}

        @pytest.mark.requires_device
        def test_marked():
            pass

        def test_device_params_default(device_params):
            assert device_params == {}
        """
    )
    pytester.makeini("[pytest]\nmarkers =\n    requires_device: needs a card\n")
    result = pytester.runpytest("-rs", "-p", "no:cacheprovider")
    if devices.available_device_count() == 0:
        result.assert_outcomes(passed=1, skipped=3)
        result.stdout.fnmatch_lines(["*SKIPPED*no Tenstorrent device: *"])
    else:
        result.assert_outcomes(passed=4)


# --- mock cluster descriptors -----------------------------------------------------------


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_mock_cluster_descriptor_loads_in_ttnn(arch):
    """ttnn accepts the descriptor and reports its architecture (own process: tt-metal's
    cluster is created once per process)."""
    env = dict(os.environ, **{devices.MOCK_CLUSTER_ENV: str(mock_cluster_descriptor(arch))})
    code = "import ttnn; print('ARCH=' + ttnn.get_arch_name())"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"ARCH={arch}" in result.stdout.split(), result.stdout


# --- paths --------------------------------------------------------------------------------


def test_kernel_dir_holds_the_kernel_sources():
    kernel_dir = paths.kernel_dir()
    assert kernel_dir.is_dir()
    assert sorted(p.name for p in kernel_dir.glob("*.hpp")) == sorted(p.name for p in (REPO / "kernels").glob("*.hpp"))
    assert any(kernel_dir.glob("*.hpp")), "expected at least the protocol header in the kernel folder"


def test_emulator_dir_holds_the_include_tree():
    emulator_dir = paths.emulator_dir()
    assert emulator_dir == paths.package_dir() / "emulator"
    assert (emulator_dir / "include").is_dir()


# --- CLI ----------------------------------------------------------------------------------


def test_cli_dispatches_to_the_command_module(monkeypatch):
    seen = []
    module = type(sys)("ttnn_flashdecode.tools.fake_command")
    module.main = lambda argv: seen.append(argv) or 3
    monkeypatch.setitem(sys.modules, "ttnn_flashdecode.tools.fake_command", module)
    monkeypatch.setitem(cli.COMMANDS, "fake_command", "test only")
    assert cli.main(["fake_command", "--flag", "value"]) == 3
    assert seen == [["--flag", "value"]]


def test_every_listed_command_has_its_module():
    for name in cli.COMMANDS:
        assert callable(cli._command(name)), name


def test_cli_rejects_unknown_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["no_such_command"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_python_dash_m_runs_the_cli():
    result = subprocess.run(
        [sys.executable, "-m", "ttnn_flashdecode", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "demo" in result.stdout


# --- run.sh -------------------------------------------------------------------------------


def test_run_sh_rejects_unknown_command_before_touching_the_venv():
    result = subprocess.run([str(REPO / "run.sh"), "bogus"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unknown command 'bogus'" in result.stderr
    assert "usage: ./run.sh demo" in result.stderr


def test_run_sh_is_valid_bash():
    result = subprocess.run(["bash", "-n", str(REPO / "run.sh")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_emulators_deadline_grows_with_the_kv_tiles_a_program_may_read():
    """The wall-clock backstop: 60 s, plus 2 ms per K/V tile x dim tile x row tile at the planned
    positions (a window caps them), so a large case that still makes progress is not cut short."""
    from ttnn_flashdecode.op.launch import emulator_deadline
    from ttnn_flashdecode.op.modifiers import ScoreModifiers
    from ttnn_flashdecode.op.shape import DecodeShape

    vision = DecodeShape(batch=32, n_q_heads=32, n_kv_heads=8, head_dim=128, capacity=4224)
    assert emulator_deadline(vision) == pytest.approx(60 + 2e-3 * 256 * 132 * 4)
    small = DecodeShape(batch=1, n_q_heads=8, n_kv_heads=1, head_dim=64, capacity=64)
    assert emulator_deadline(small) == pytest.approx(60 + 2e-3 * 2 * 2)
    windowed = DecodeShape(batch=32, n_q_heads=32, n_kv_heads=8, head_dim=128, capacity=4224,
                           scores=ScoreModifiers(window=256))
    assert emulator_deadline(windowed) < emulator_deadline(vision)
