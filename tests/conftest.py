"""Shared pytest fixtures: tt-metal-style ``device``/``device_params``, a mock cluster, a mock device.

Device tests are written the tt-metal way, so the same test runs under tt-metal's own
conftest and here::

    @pytest.mark.requires_device
    @pytest.mark.parametrize("device_params", [{"l1_small_size": 0}], indirect=True)
    def test_on_card(device):
        ...

Without a card the ``device`` fixture skips with ``"no Tenstorrent device: <why>"``, and
so does any test marked ``requires_device``. Nothing here opens a device or calls into
ttnn at import time; detection is :func:`ttnn_flashdecode.op.devices.detect_devices`.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

import pytest

from ttnn_flashdecode.op.devices import MOCK_CLUSTER_ENV, detect_devices, ensure_host_context
from ttnn_flashdecode.op.devices import mock_cluster_descriptor

pytest_plugins = ["pytester"]

#: One-chip Wormhole B0 descriptor used when there is no card (see the file's comment).
MOCK_CLUSTER_DESC = mock_cluster_descriptor("wormhole_b0")
NO_DEVICE_PREFIX = "no Tenstorrent device"


#: Why ``mock_device`` cannot run in this session (None: it can); set by pytest_configure.
_MOCK_DEVICE_UNAVAILABLE: str | None = "not configured"


def pytest_configure(config):
    """Without a card, and with the silicon check's RISC-V toolchain installed, point tt-metal at the
    silicon check's runtime root and a mock Wormhole for the whole session, before anything creates
    tt-metal's context (it reads these once per process): ``mock_device`` can then open a mock
    device, and host-only ttnn calls use the same mock cluster as the ``mock_cluster`` fixture."""
    global _MOCK_DEVICE_UNAVAILABLE
    from ttnn_flashdecode.tools.silicon_check.toolchain import INSTALL_HINT, missing_toolchain

    if detect_devices().count > 0:
        _MOCK_DEVICE_UNAVAILABLE = "a real Tenstorrent card is present (use the device fixture)"
        return
    missing = missing_toolchain()
    if missing:
        _MOCK_DEVICE_UNAVAILABLE = f"missing {', '.join(missing)} (install with: {INSTALL_HINT})"
        return
    if os.environ.get(MOCK_CLUSTER_ENV, str(MOCK_CLUSTER_DESC)) != str(MOCK_CLUSTER_DESC):
        _MOCK_DEVICE_UNAVAILABLE = f"{MOCK_CLUSTER_ENV} names another cluster: {os.environ[MOCK_CLUSTER_ENV]}"
        return
    from ttnn_flashdecode.tools.silicon_check.fake_root import build_root

    os.environ[MOCK_CLUSTER_ENV] = str(MOCK_CLUSTER_DESC)
    os.environ["TT_METAL_RUNTIME_ROOT"] = f"{build_root()}/"
    os.environ.setdefault("TT_METAL_CACHE", tempfile.mkdtemp(prefix="ttnn-flashdecode-jit-") + "/")
    _MOCK_DEVICE_UNAVAILABLE = None


def pytest_addoption(parser):
    # Same option name as tt-metal's conftest.
    parser.addoption("--device-id", type=int, default=0, help="id of the Tenstorrent device to open (default 0)")


#: The longest test files, run first: under ``./run.sh test`` (pytest-xdist, whole files per worker)
#: a long file scheduled last would leave one core working alone at the end.
LONGEST_FIRST = ("test_silicon_check.py", "test_mutations.py", "test_wolfpine_check.py")


def pytest_collection_modifyitems(config, items):
    """Run :data:`LONGEST_FIRST` first (a stable sort: the rest keep their order); skip
    ``requires_device`` tests up front when there is no card."""
    items.sort(key=lambda item: 0 if item.path.name in LONGEST_FIRST else 1)
    marked = [item for item in items if item.get_closest_marker("requires_device")]
    if not marked:
        return
    detection = detect_devices()
    if detection.count > 0:
        return
    skip = pytest.mark.skip(reason=f"{NO_DEVICE_PREFIX}: {detection.reason}")
    for item in marked:
        item.add_marker(skip)


@pytest.fixture(scope="function")
def device_params(request):
    """Keyword arguments for ``ttnn.open_device``; parametrize it with ``indirect=True``."""
    return getattr(request, "param", {})


@pytest.fixture(scope="function")
def device(request, device_params):
    """An open ttnn device (``ttnn.open_device(device_id=..., **device_params)``), closed after.

    Skips the test with ``"no Tenstorrent device: <reason>"`` when there is no card.
    """
    detection = detect_devices()
    if detection.count == 0:
        pytest.skip(f"{NO_DEVICE_PREFIX}: {detection.reason}")
    import ttnn

    device_id = request.config.getoption("device_id")
    opened = ttnn.open_device(device_id=device_id, **device_params)
    try:
        yield opened
    finally:
        ttnn.close_device(opened)


@pytest.fixture(scope="function")
def mock_device(device_params, tmp_path, monkeypatch):
    """A MOCK Wormhole device (``ttnn.open_device(device_id=0, **device_params)``), closed after.

    tt-metal's JIT really builds firmware and kernels for it (through the silicon check's runtime
    root) and ``ttnn.generic_op`` runs its host pipeline, but NOTHING EXECUTES: tensors read back as
    zeros, so tests with this fixture assert on plans, errors and tt-metal's checks, never on values.
    Skips (fails under ``CI=true``) when the RISC-V toolchain is missing; skips beside a real card.
    """
    from ttnn_flashdecode.tools.silicon_check.toolchain import in_ci

    if _MOCK_DEVICE_UNAVAILABLE is not None:
        if in_ci() and "real Tenstorrent card" not in _MOCK_DEVICE_UNAVAILABLE:
            pytest.fail(f"mock device: {_MOCK_DEVICE_UNAVAILABLE}")
        pytest.skip(f"no mock device: {_MOCK_DEVICE_UNAVAILABLE}")
    import ttnn

    monkeypatch.chdir(tmp_path)  # ttnn may write ./generated and ./build
    opened = ttnn.open_device(device_id=0, **device_params)
    try:
        yield opened
    finally:
        ttnn.close_device(opened)


@pytest.fixture(scope="session")
def mock_cluster():
    """Let ttnn's host-side code run without a card, through a mock cluster descriptor.

    Some host-only ttnn calls still need tt-metal's context, which looks for chips the
    first time it is needed: without a card e.g. ``Tensor.to(ttnn.TILE_LAYOUT)`` raises
    ``RuntimeError: TT_FATAL ... No chips detected in the cluster``. With
    ``TT_METAL_MOCK_CLUSTER_DESC_PATH`` naming a cluster descriptor YAML, tt-metal mocks
    that cluster instead. The variable is read when the context is first created, which is
    once per process, so this fixture is session-scoped and is a no-op on a machine with a
    card (the real cluster serves the same calls) or when the variable is already set.

    Yields:
        The descriptor path in use, or None when a real card is used.
    """
    # Left set after the session: tt-metal keeps the mocked context for the rest of the
    # process anyway, and detect_devices() keeps reporting that no real device is in use.
    path = ensure_host_context()
    yield pathlib.Path(path) if path else None


def pytest_terminal_summary(terminalreporter):
    """Print the figures passing tests recorded (``record_property("figure", line)``), so a CI log
    shows the issue's numbers, not just dots."""
    lines = [value for report in terminalreporter.stats.get("passed", [])
             for name, value in report.user_properties if name == "figure"]
    if lines:
        terminalreporter.section("figures (emulator counts and accuracy; device times MODELLED, not measured)")
        for line in lines:
            terminalreporter.write_line(line)
