"""Launching a planned call (FlashInfer's *run*): on a card through ``ttnn.generic_op``, on the host
through :mod:`ttnn_flashdecode.emulator`, with the operands each needs (tile pages, the constants
operand, the POSITIONS and PAGE_TABLE operands)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

import numpy as np
import ttnn

from ttnn_flashdecode.op import constants, protocol, tiles
from ttnn_flashdecode.op.plan import DEFAULT_ARCH, check_windows, plan_program, program_for
from ttnn_flashdecode.op.program_factory import Addresses, operand_accessor_args
from ttnn_flashdecode.op.shape import ComputeOptions, DecodeShape
from ttnn_flashdecode.op.residency import device_cb_budget_bytes
from ttnn_flashdecode.op.validate import Inputs, height_sharded_l1

__all__ = ["last_report", "to_numpy", "run_on_emulator", "run_on_device"]

_last_report = threading.local()


def last_report():
    """The emulator's :class:`~ttnn_flashdecode.emulator.RunReport` of this thread's last
    emulated :func:`~ttnn_flashdecode.attention` call (DRAM/NoC bytes per core, API call counts,
    cores, time), or ``None`` if the last call ran on a device or none ran yet."""
    return getattr(_last_report, "value", None)


# ---------------------------------------------------------------- host arrays <-> tile pages

def to_numpy(tensor) -> np.ndarray:
    """``tensor`` as a numpy array: itself if it is one, else a ttnn.Tensor's values (float32 for
    bfloat16; read back from a device first), row-major."""
    if isinstance(tensor, np.ndarray):
        return tensor
    host = tensor.cpu() if tensor.storage_type() == ttnn.StorageType.DEVICE else tensor
    if host.layout != ttnn.ROW_MAJOR_LAYOUT:
        host = host.to(ttnn.ROW_MAJOR_LAYOUT)
    if host.dtype == ttnn.float32:
        return host.to_numpy()
    return np.asarray(host.to_list(), dtype=np.float32)


def _heads_padded(q: np.ndarray, shape: DecodeShape) -> np.ndarray:
    """``[1, 1, batch, n_q_heads*head_dim]`` -> ``[1, 1, batch, n_q_heads*dim_tiles*32]``: each head
    starts on a tile column (DESIGN.md §5)."""
    padded_dim = shape.dim_tiles * 32
    if padded_dim == shape.head_dim:
        return q
    heads = q.reshape(*q.shape[:3], shape.n_q_heads, shape.head_dim)
    out = np.zeros((*q.shape[:3], shape.n_q_heads, padded_dim), dtype=q.dtype)
    out[..., : shape.head_dim] = heads
    return out.reshape(*q.shape[:3], shape.n_q_heads * padded_dim)


def _heads_unpadded(out: np.ndarray, shape: DecodeShape) -> np.ndarray:
    padded_dim = shape.dim_tiles * 32
    heads = out.reshape(*out.shape[:3], shape.n_q_heads, padded_dim)[..., : shape.head_dim]
    return heads.reshape(*out.shape[:3], shape.n_q_heads * shape.head_dim)


def _positions_page(positions: Sequence[int], mask_address: int | None = None) -> np.ndarray:
    """The POSITIONS operand's one page: ``positions`` (per user: cur_pos, or the chunk start) as
    little-endian int32, ``4 * batch`` bytes; with an attention mask, its buffer address as one more
    word (``attention_protocol.hpp`` "Attention mask")."""
    words = list(positions) + ([] if mask_address is None else [np.uint32(mask_address).view(np.int32)])
    return np.asarray(words, dtype="<i4")


def _mask_operands(operands: list, mask, shape: DecodeShape) -> Addresses:
    """Appends an attention mask to ``operands`` (POSITIONS' args standing in for a contiguous
    cache's PAGE_TABLE) and returns the call's addresses; without a mask, the operands' own."""
    address = (lambda o: o.address) if hasattr(operands[0], "address") else (lambda o: o.buffer_address())
    base = [address(o) for o in operands]
    if mask is None:
        return Addresses(*base)
    if not shape.paged:
        operands.append(operands[5])
        base.append(0)
    operands.append(mask)
    return Addresses(*base, address(mask))


# ---------------------------------------------------------------- emulator backend


@functools.lru_cache(maxsize=4)
def _emulator(arch: str):
    from ttnn_flashdecode.emulator import Emulator

    return Emulator(arch=arch)



@functools.lru_cache(maxsize=16)
def _constant_pages(head_dim: int, scale: float | None, sink: tuple[float, ...] | None = None) -> np.ndarray:
    """The constants operand's pages, built once per (head_dim, scale, sinks): a model reuses them every call."""
    pages = constants.build_constants(head_dim, scale, sink=sink)
    pages.flags.writeable = False
    return pages


def run_on_emulator(q, k, v, inputs: Inputs, scale, block_tiles, split, compute: ComputeOptions):
    _last_report.value = None
    from ttnn_flashdecode.emulator import tensor_accessor_compile_time_args

    shape = inputs.shape
    emu = _emulator(DEFAULT_ARCH)
    q_np = to_numpy(q)
    q_pages = tiles.to_tile_bytes(_heads_padded(q_np, shape) if shape.q_layout == "rows" else q_np)
    if shape.kv_dtype == "bfloat16":
        kv_pages = [tiles.to_tile_bytes(to_numpy(t)) for t in (k, v)]
    else:  # the tensors' own packed pages (ttnn's host packing)
        kv_pages = [tiles.to_block_float_tile_bytes(t, shape.kv_dtype) for t in (k, v)]
    const_pages = _constant_pages(shape.head_dim, scale, inputs.sink)
    buffers = []
    try:
        for pages in (q_pages, *kv_pages, const_pages):
            buffer = emu.allocate_dram(len(pages), pages.shape[1])
            buffers.append(buffer)
            emu.write_pages(buffer, pages)
        out_buffer = emu.allocate_dram(len(q_pages), q_pages.shape[1])
        buffers.append(out_buffer)
        emu.write_pages(out_buffer, np.zeros_like(q_pages))
        mask_buffer = None
        if inputs.mask is not None:  # [mask_users, 1, n_q_heads, capacity] in tiles; its address rides in POSITIONS
            mask_pages = tiles.to_tile_bytes(inputs.mask[:, None])
            mask_buffer = emu.allocate_dram(len(mask_pages), mask_pages.shape[1])
            emu.write_pages(mask_buffer, mask_pages)
        positions = _positions_page(inputs.positions, None if mask_buffer is None else mask_buffer.address)
        buffers.append(emu.allocate_dram(1, positions.nbytes))  # one page: the whole vector
        emu.write_pages(buffers[-1], positions)
        operands = list(buffers)
        if mask_buffer is not None:
            buffers.append(mask_buffer)
        if shape.paged:  # one page per user: its row
            table = inputs.page_table.astype("<i4")
            buffers.append(emu.allocate_dram(table.shape[0], table.shape[1] * 4))
            emu.write_pages(buffers[-1], table)
            operands.append(buffers[-1])
        addresses = _mask_operands(operands, mask_buffer, shape)
        accessor_args = operand_accessor_args([tensor_accessor_compile_time_args(b) for b in operands])
        plan = plan_program(shape, block_tiles, split, compute, DEFAULT_ARCH, tuple(emu.grid), accessor_args,
                            emu.worker_core_from_logical_core)
        check_windows(plan)
        program = program_for(plan, addresses)
        report = emu.run(program)
        result = tiles.from_tile_bytes(emu.read_pages(out_buffer), shape.q_tiled_shape)
    finally:
        for buffer in buffers:
            emu.free(buffer)
    _last_report.value = report
    if shape.q_layout == "rows":
        result = _heads_unpadded(result[:, :, :shape.q_height], shape)
    else:
        result = result[:, :, :shape.n_q_heads, :shape.head_dim]
    if inputs.kind == "host":
        return ttnn.Tensor(np.ascontiguousarray(result, dtype=np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)
    return result.astype(q_np.dtype)


# ---------------------------------------------------------------- device backend

def run_on_device(q, k, v, inputs: Inputs, scale, block_tiles, split, compute: ComputeOptions, memory_config):
    _last_report.value = None
    shape = inputs.shape
    sharded_ok = shape.q_layout == "heads" and memory_config is not None and height_sharded_l1(memory_config)
    if memory_config is not None and not sharded_ok and (
            memory_config.buffer_type != ttnn.BufferType.DRAM or memory_config.is_sharded()):
        also = " or (q_layout 'heads') L1 height-sharded" if shape.q_layout == "heads" else ""
        raise ValueError(f"memory_config: expected DRAM interleaved{also}, got {memory_config}")
    device = q.device()
    arch = "blackhole" if "BLACKHOLE" in str(device.arch()).upper() else "wormhole_b0"
    grid = device.compute_with_storage_grid_size()
    out = ttnn.allocate_tensor_on_device(
        q.shape, ttnn.bfloat16, ttnn.TILE_LAYOUT, device, memory_config or ttnn.DRAM_MEMORY_CONFIG
    )
    # The POSITIONS operand: the caller's cur_pos_tensor, or cur_pos uploaded as one (int32 [batch],
    # ROW_MAJOR, DRAM: one page). Under trace capture only the former works (no host writes).
    positions = inputs.positions_tensor
    if positions is None and inputs.mask_tensor is not None:  # non-causal: fixed positions + the mask's address
        positions = _device_mask_positions(device, inputs.positions, inputs.mask_tensor.buffer_address())
    elif positions is None:
        positions = ttnn.Tensor(_positions_page(inputs.positions), ttnn.int32, device=device,
                                layout=ttnn.ROW_MAJOR_LAYOUT, mem_config=ttnn.DRAM_MEMORY_CONFIG)
    operands = [q, k, v, _device_constants(device, shape.head_dim, scale, inputs.sink), out, positions]
    if shape.paged:  # with device inputs the page table is a device tensor (_int32_operand refuses others)
        operands.append(inputs.page_table_tensor)
    addresses = _mask_operands(operands, inputs.mask_tensor, shape)
    accessor_args = operand_accessor_args([ttnn.TensorAccessorArgs(t).get_compile_time_args() for t in operands])
    plan = plan_program(shape, block_tiles, split, compute, arch, (grid.x, grid.y), accessor_args,
                        _device_noc_xy(device), device_cb_budget_bytes(device))
    check_windows(plan)
    program = program_for(plan, addresses)
    # A Tracy signpost names the call in ops_perf_results (profile-report reads it). ttnn.tracy_message
    # is what tracy.signpost sends, without its loguru INFO line on every call of a per-layer op.
    ttnn.tracy_message(f"`TT_SIGNPOST: ttnn_flashdecode.attention {shape.kind} batch={shape.batch} rows={shape.rows} "
                       f"heads={shape.n_q_heads}/{shape.n_kv_heads}`")
    # generic_op's last tensor is its output; the rest are inputs kept alive for the launch.
    kept = [t for i, t in enumerate(operands[5:]) if all(t is not u for u in operands[5:5 + i])]  # no stand-ins twice
    return ttnn.generic_op([q, k, v, operands[3], *kept, out], program)


@functools.lru_cache(maxsize=8)
def _device_noc_xy(device):
    """Logical worker core -> NoC coordinate on ``device`` (cached so plans cache per device)."""

    def noc_xy(x: int, y: int) -> tuple[int, int]:
        core = device.worker_core_from_logical_core(ttnn.CoreCoord(x, y))
        return core.x, core.y

    return noc_xy


_device_constants_cache: dict = {}
_device_mask_positions_cache: dict = {}


def _device_mask_positions(device, positions, mask_address: int):
    """A non-causal call's POSITIONS operand on ``device`` (every user at the cache's last
    position, then the mask's address), uploaded once per (device, positions, mask address): a
    traced decode loop that keeps its mask tensor replays without host writes."""
    key = (device.id(), tuple(positions), mask_address)
    if key not in _device_mask_positions_cache:
        _device_mask_positions_cache[key] = ttnn.Tensor(
            _positions_page(positions, mask_address), ttnn.int32, device=device, layout=ttnn.ROW_MAJOR_LAYOUT,
            mem_config=ttnn.DRAM_MEMORY_CONFIG)
    return _device_mask_positions_cache[key]


def _device_constants(device, head_dim: int, scale: float | None, sink: tuple[float, ...] | None = None):
    """The constants operand on ``device``, uploaded once per (device id, head_dim, scale, sinks)
    and kept for the process's life (66 tiles, 132 KiB of DRAM; + a tile per 32 Q heads with sinks)."""
    key = (device.id(), head_dim, scale, sink)
    if key not in _device_constants_cache:
        tiles_rows = constants.constant_tiles(head_dim, scale, sink).reshape(1, 1, -1, 32)
        _device_constants_cache[key] = ttnn.Tensor(
            tiles_rows, ttnn.bfloat16, device=device, layout=ttnn.TILE_LAYOUT, mem_config=ttnn.DRAM_MEMORY_CONFIG
        )
    return _device_constants_cache[key]

