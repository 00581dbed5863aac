"""Where the demo's attention runs: a Tenstorrent device when one is present, else the emulator.

The model keeps its KV cache as host numpy (bfloat16). With numpy inputs
``ttnn_flashdecode.attention`` runs on the host emulator. To run on a card, :class:`DeviceAttention`
uploads ``q``/``k``/``v`` as bfloat16 TILE DRAM-interleaved device tensors for every call (a
block-float host tensor as it is; a page table as int32 ROW_MAJOR), runs the
op with ``backend="device"``, and brings the output back. The per-call upload is simple and right,
not fast: the caches here are tiny (3 KV heads x capacity x 64 per layer). ``last_op_s`` is the time
of the op alone (device-synchronised), which is what the demo reports per call.

Without a card this path cannot run: it is untested here, and written the same way the op uploads
its own constants (``launch._device_constants``).
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np


def _upload(arr: np.ndarray, device):
    import ttnn

    host = ttnn.Tensor(
        np.asarray(arr, dtype=np.float32).ravel().tolist(), list(arr.shape), ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT
    ).to(ttnn.TILE_LAYOUT)
    return ttnn.to_device(host, device, memory_config=ttnn.DRAM_MEMORY_CONFIG)


def _download(tensor, shape: tuple[int, ...]) -> np.ndarray:
    import ttnn

    host = tensor.cpu().to(ttnn.ROW_MAJOR_LAYOUT)
    return np.asarray(host.to_list(), dtype=np.float32).reshape(shape)


class DeviceAttention:
    """``attention(q, k, v, *, cur_pos=... or chunk_start=..., **kw)`` on numpy inputs, executed on ``device``."""

    def __init__(self, attention: Callable, device):
        self.attention = attention
        self.device = device
        self.last_op_s: float | None = None

    def __call__(self, q, k, v, **kwargs):
        import ttnn

        # numpy arrays as bfloat16 tiles; host ttnn tensors (a block-float cache) as they are
        qd, kd, vd = (a.to(self.device, ttnn.DRAM_MEMORY_CONFIG) if isinstance(a, ttnn.Tensor) else _upload(a, self.device)
                      for a in (q, k, v))
        uploaded = [qd, kd, vd]
        if kwargs.get("page_table_tensor") is not None:
            table = ttnn.Tensor(np.asarray(kwargs["page_table_tensor"], np.int32), ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)
            kwargs["page_table_tensor"] = table.to(self.device, ttnn.DRAM_MEMORY_CONFIG)
            uploaded.append(kwargs["page_table_tensor"])
        kwargs.pop("backend", None)
        t0 = time.perf_counter()
        out = self.attention(qd, kd, vd, backend="device", **kwargs)
        ttnn.synchronize_device(self.device)
        self.last_op_s = time.perf_counter() - t0
        result = _download(out, tuple(q.shape)).astype(q.dtype)
        for t in (*uploaded, out):
            ttnn.deallocate(t)
        return result


def open_device_if_present(backend: str):
    """``(device or None, reason)``: open device 0 for ``backend`` 'device'/'auto' when a card is present.

    ``backend='device'`` without a card raises SystemExit with the detection's reason.
    """
    if backend not in ("auto", "device"):
        return None, f"--backend {backend}"
    from ttnn_flashdecode.op.devices import detect_devices

    det = detect_devices()
    if det.count == 0:
        if backend == "device":
            raise SystemExit(f"--backend device: no Tenstorrent device ({det.reason})")
        return None, f"no Tenstorrent device: {det.reason}"
    import ttnn

    return ttnn.open_device(device_id=0), det.reason


def close_device(device) -> None:
    if device is not None:
        import ttnn

        ttnn.close_device(device)
