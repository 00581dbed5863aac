"""Is there a Tenstorrent card to run on? Detection that never fails and never opens one.

ttnn cannot answer this question safely by itself when no card is present: its device
queries (``ttnn.GetNumAvailableDevices()``, ``ttnn.get_num_devices()``) raise
``RuntimeError: TT_FATAL ... No chips detected in the cluster``, and with
``TT_METAL_MOCK_CLUSTER_DESC_PATH`` set they report the *mocked* chips (1 for a one-chip
descriptor), which cannot run kernels. So :func:`detect_devices` decides in this order:

1. ``TT_METAL_MOCK_CLUSTER_DESC_PATH`` is set: ttnn is (or will be) running on a mock
   cluster in this process, so there is no usable device, whatever is plugged in.
2. Neither ``TT_METAL_SIMULATOR`` is set nor any ``/dev/tenstorrent/*`` device node
   (created by the tt-kmd driver for each card) exists: no device; ttnn is not touched.
3. Otherwise ask ``ttnn.GetNumAvailableDevices()``, treating any exception as no device.

Nothing here opens or resets a device.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "DeviceDetection",
    "detect_devices",
    "available_device_count",
    "ensure_host_context",
    "MOCK_CLUSTER_ENV",
    "MOCK_CLUSTER_ARCHS",
    "MOCK_MESH_CLUSTERS",
    "mock_cluster_descriptor",
    "SIMULATOR_ENV",
    "DEVICE_NODE_GLOB",
]

#: ttnn/tt-metal's variable naming a cluster descriptor YAML to mock instead of real chips.
MOCK_CLUSTER_ENV = "TT_METAL_MOCK_CLUSTER_DESC_PATH"

MOCK_CLUSTER_ARCHS = ("wormhole_b0", "blackhole")
_MOCK_CLUSTERS = Path(__file__).resolve().parent / "mock_clusters"


#: Multi-chip mock clusters: ``"t3k"``, 8 Wormhole n300 chips (4 boards) ethernet-linked in a 2x4 grid
#: (a ``ttnn.MeshDevice`` of 1x8, 2x4, 1x2, ... opens on it; each chip 8x8 workers).
MOCK_MESH_CLUSTERS = ("t3k",)


def mock_cluster_descriptor(arch: str) -> Path:
    """This package's cluster descriptor for ``arch`` (a value for ``MOCK_CLUSTER_ENV``), in tt-umd's
    cluster-descriptor format: one chip, a Wormhole B0 (8x8 workers) or Blackhole (13x10); or
    ``"t3k"`` (:data:`MOCK_MESH_CLUSTERS`), eight Wormhole chips.

    Raises:
        ValueError: ``arch`` is not one of :data:`MOCK_CLUSTER_ARCHS` or :data:`MOCK_MESH_CLUSTERS`.
    """
    if arch not in MOCK_CLUSTER_ARCHS + MOCK_MESH_CLUSTERS:
        raise ValueError(f"arch: expected one of {MOCK_CLUSTER_ARCHS + MOCK_MESH_CLUSTERS}, got {arch!r}")
    return _MOCK_CLUSTERS / f"{arch}.yaml"
#: tt-metal's variable selecting a simulator (ttsim) in place of a card.
SIMULATOR_ENV = "TT_METAL_SIMULATOR"
#: Device nodes the tt-kmd kernel driver creates, one per card.
DEVICE_NODE_GLOB = "/dev/tenstorrent/*"


class DeviceDetection(NamedTuple):
    """Result of :func:`detect_devices`.

    Attributes:
        count: usable Tenstorrent devices (0 when there is none).
        reason: one line saying how ``count`` was decided, e.g.
            ``"no /dev/tenstorrent/* device node (tt-kmd not loaded or no card)"``.
    """

    count: int
    reason: str


def detect_devices() -> DeviceDetection:
    """Count the Tenstorrent devices this process can run kernels on.

    Returns:
        A :class:`DeviceDetection`; ``count`` is 0 when there is no usable device.

    Raises:
        Nothing: every failure of the ttnn query is reported as ``count == 0`` with the
        error in ``reason``.
    """
    mock = os.environ.get(MOCK_CLUSTER_ENV)
    if mock:
        return DeviceDetection(0, f"{MOCK_CLUSTER_ENV}={mock} makes ttnn use a mock cluster")
    simulator = os.environ.get(SIMULATOR_ENV)
    nodes = sorted(glob.glob(DEVICE_NODE_GLOB))
    if not nodes and not simulator:
        return DeviceDetection(0, f"no {DEVICE_NODE_GLOB} device node (tt-kmd not loaded or no card)")
    source = f"{SIMULATOR_ENV}={simulator}" if simulator else ", ".join(nodes)
    try:
        import ttnn

        count = int(ttnn.GetNumAvailableDevices())
    except Exception as error:  # ttnn raises RuntimeError (TT_FATAL) and others
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return DeviceDetection(0, f"{source} present but ttnn.GetNumAvailableDevices() failed: {first_line}")
    return DeviceDetection(count, f"ttnn.GetNumAvailableDevices() = {count} ({source})")


def ensure_host_context() -> str | None:
    """Let ttnn's host-only code that needs tt-metal's context run without a card.

    Some host calls look for chips when tt-metal's context is first created: ttnn's
    block-float packing (``ttnn.Tensor(x, ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT)``) raises
    ``TT_FATAL ... No chips detected`` without one. With no card and ``MOCK_CLUSTER_ENV``
    unset, this sets it to the silicon check's one-chip Wormhole descriptor, which tt-metal reads
    once per process: call it before the first such call (a context created earlier keeps its
    cluster). It also sets ``TT_METAL_LOGGER_LEVEL`` to ``ERROR`` unless set, so the mock
    cluster's start-up and tear-down INFO lines do not interleave with the caller's output. A
    no-op with a card or when the variable is already set.

    Returns:
        The descriptor path in use, or None when a real card serves.
    """
    if os.environ.get(MOCK_CLUSTER_ENV):
        return os.environ[MOCK_CLUSTER_ENV]
    if detect_devices().count > 0:
        return None
    os.environ[MOCK_CLUSTER_ENV] = str(mock_cluster_descriptor("wormhole_b0"))
    os.environ.setdefault("TT_METAL_LOGGER_LEVEL", "ERROR")
    return os.environ[MOCK_CLUSTER_ENV]


def available_device_count() -> int:
    """Return how many Tenstorrent devices are usable here (0 without a card).

    Shorthand for ``detect_devices().count``; see :func:`detect_devices`.
    """
    return detect_devices().count
