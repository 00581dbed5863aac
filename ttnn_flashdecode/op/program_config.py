"""The drop-ins' ``program_config`` (a ``ttnn.SDPAProgramConfig``) as
:func:`ttnn_flashdecode.attention` keywords (:func:`program_config_keywords`), moved out of
:mod:`ttnn_flashdecode.op.transformer` (the module size limit)."""

from __future__ import annotations

import dataclasses

import ttnn

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op.operation import DEFAULT_ARCH
from ttnn_flashdecode.op.options import resolve_grid
from ttnn_flashdecode.op.compute_options import ComputeOptions

__all__ = ["program_config_keywords"]


def _device_grid(q) -> tuple[int, int]:
    """The compute grid the op runs on: ``q``'s device's, else the emulated device's."""
    if isinstance(q, ttnn.Tensor) and q.storage_type() == ttnn.StorageType.DEVICE:
        full = q.device().compute_with_storage_grid_size()
        return (full.x, full.y)
    from ttnn_flashdecode.emulator.arch import ArchSpec

    return tuple(ArchSpec.for_name(DEFAULT_ARCH).default_grid)


def program_config_keywords(program_config, q, compute_kernel_config) -> dict:
    """``program_config`` (a ``ttnn.SDPAProgramConfig`` or None) as :func:`ttnn_flashdecode.attention`
    keywords, every field with ttnn 0.81's decode meaning:

    * ``compute_with_storage_grid_size`` ``(x, y)``: the program runs on cores ``(0, 0) .. (x - 1,
      y - 1)``; any grid within the device's (the emulated device's on the emulator).
    * ``sub_core_grids`` (a ``ttnn.CoreRangeSet``): exactly those cores, as many as the grid above
      names (ttnn refuses a mismatch too).
    * ``k_chunk_size`` (positions): the K/V block, a positive multiple of 32; 0 lets the op choose.
    * ``max_cores_per_head_batch``: most cores (split-K slices) per (user, KV head) request; 0
      means 1, as in ttnn.
    * ``exp_approx_mode``: True the LLK's approximate exp in the softmax, False the accurate one,
      None: ``compute_kernel_config.math_approx_mode`` decides (ttnn's op takes None as True; this
      op keeps its accurate default).
    * ``q_chunk_size``, ``max_k_splits``, ``matmul_math_fidelity``, ``segmented_accumulation``:
      not used by decode, in ttnn either (the last three are ring-joint prefill fields).

    Without a config: the device's whole grid, no per-request cap, the op's block.

    Raises:
        TypeError: ``program_config`` is neither None nor a ``ttnn.SDPAProgramConfig``.
        ValueError: a grid beyond the device's, a ``sub_core_grids`` of another size or with cores
            beyond it, a ``k_chunk_size`` that is not a multiple of 32.
    """
    compute = ComputeOptions.from_config(compute_kernel_config)
    if program_config is None:
        return dict(compute_kernel_config=compute)
    if not isinstance(program_config, ttnn.SDPAProgramConfig):
        raise TypeError(f"program_config: expected a ttnn.SDPAProgramConfig or None, got {type(program_config).__name__}")
    full = _device_grid(q)
    size = program_config.compute_with_storage_grid_size
    sub = program_config.sub_core_grids
    if sub is None:
        grid = resolve_grid((size.x, size.y), full, "program_config.compute_with_storage_grid_size")
    else:  # the grid only counts the cores (ttnn: sub_core_grids.num_cores() == x * y)
        if sub.num_cores() != size.x * size.y:
            raise ValueError(f"program_config.sub_core_grids: expected {size.x * size.y} cores (compute_with_storage_"
                             f"grid_size {size.x}x{size.y}), got {sub.num_cores()}")
        grid = resolve_grid(sub, full, "program_config.sub_core_grids")
    chunk = program_config.k_chunk_size
    if chunk % 32:
        raise ValueError(f"program_config.k_chunk_size: expected 0 (the op chooses) or a positive multiple of 32 "
                         f"positions, got {chunk}")
    if program_config.exp_approx_mode is not None:
        compute = dataclasses.replace(compute, exp_approx=bool(program_config.exp_approx_mode))
    max_split = min(max(1, int(program_config.max_cores_per_head_batch)), protocol.MAX_SPLIT)
    return dict(grid=grid, block_tiles=chunk // 32 or None, max_split=max_split, compute_kernel_config=compute)
