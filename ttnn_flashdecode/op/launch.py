"""Launching a planned call (FlashInfer's *run*): on a card through ``ttnn.generic_op``, on the host
through :mod:`ttnn_flashdecode.emulator`, with the operands each needs (tile pages, the constants
operand, the POSITIONS and PAGE_TABLE operands)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

import numpy as np
import ttnn

from ttnn_flashdecode.op import constants, tiles
from ttnn_flashdecode.op.mesh import PerDeviceSinks, device_count, program_for_device
from ttnn_flashdecode.op.plan import DEFAULT_ARCH, check_windows, plan_program, program_for
from ttnn_flashdecode.op.program_factory import (Addresses, AddressWriter, Plan, build_program, operand_accessor_args,
                                                 set_addresses, work_table)
from ttnn_flashdecode.op.shape import ComputeOptions, DecodeShape
from ttnn_flashdecode.op.residency import device_cb_budget_bytes
from ttnn_flashdecode.op.options import resolve_grid
from ttnn_flashdecode.op.validate import Inputs, height_sharded_l1

__all__ = ["last_report", "to_numpy", "run_on_emulator", "run_on_device", "prepare_device_launch", "DeviceLaunch"]

_last_report = threading.local()


def last_report():
    """The emulator's :class:`~ttnn_flashdecode.emulator.RunReport` of this thread's last
    emulated :func:`~ttnn_flashdecode.attention` call, or ``None`` if the last call ran on a device
    or none ran yet: what ran (``kernel_cores``, ``cb_pages``, ``named_compile_time_args``: the
    K/V block ``block_tiles``, ...), what each core did (DRAM/NoC bytes, API calls, zones, time),
    what the kernels reported (``errors``), and the call's plan (``plan``:
    :class:`~ttnn_flashdecode.op.program_factory.Plan`, e.g. ``plan.block_tiles``,
    ``plan.split_counts``, ``plan.cores``)."""
    return getattr(_last_report, "value", None)


# ---------------------------------------------------------------- host arrays <-> tile pages

def to_numpy(tensor) -> np.ndarray:
    """``tensor`` as a numpy array: itself if it is one, else a ttnn.Tensor's values (float32 for
    bfloat16; read back from a device first), row-major."""
    if isinstance(tensor, np.ndarray):
        return tensor
    host = tensor.cpu() if tensor.storage_type() == ttnn.StorageType.DEVICE else tensor
    if host.dtype == ttnn.float32:
        return np.asarray(host.to_numpy(), dtype=np.float32)
    # to_list reads any layout and dtype at its logical shape (a TILE tensor padded past one tile,
    # a block-float one whose rows are not whole tiles), where .to(ROW_MAJOR) refuses to unpad.
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


def _positions_page(positions: Sequence[int]) -> np.ndarray:
    """The POSITIONS operand's one page: ``positions`` (per user: cur_pos, or the chunk start) as
    little-endian int32, ``4 * batch`` bytes."""
    return np.asarray(positions, dtype="<i4")


def _accessor_operands(operands: list, page_table, mask) -> list:
    """``operands`` (Q .. POSITIONS) followed by the operands whose TensorAccessorArgs the program
    takes in :data:`~ttnn_flashdecode.op.program_factory.OPERANDS` order: the page table when
    paged, and an attention mask (POSITIONS standing in for a contiguous cache's page table)."""
    extra = [] if page_table is None and mask is None else [operands[5] if page_table is None else page_table]
    return operands + extra + ([] if mask is None else [mask])


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


def _height_shards(config, shape: DecodeShape, pages, grid, what: str):
    """``(bank cores, pages per shard)`` when ``config`` (a memory config, or None) is sharded: L1
    height-sharded with the heads layout only, as on a device; its shard whole tile rows spanning
    the tensor's padded width, on at least as many cores of the emulator's ``grid`` as the
    tensor's ``pages`` (tiles) make shards (ttnn refuses more shards than cores). None for a
    DRAM-interleaved one.

    Raises:
        ValueError: a config neither DRAM interleaved nor (heads layout) L1 height-sharded, a shard
            that is not whole tile rows across the padded width, more shards than cores, or a
            core outside the grid; each names ``what``.
    """
    if config is None or (not config.is_sharded() and config.buffer_type == ttnn.BufferType.DRAM):
        return None
    if shape.q_layout != "heads" or not height_sharded_l1(config):
        raise ValueError(f"{what}: expected DRAM interleaved (or, q_layout 'heads', L1 height-sharded), got {config}")
    spec = config.shard_spec
    height, shard_width = (int(x) for x in spec.shape)
    width = shape.dim_tiles * 32
    if shard_width != width or height % 32 or height == 0:
        raise ValueError(f"{what}: a height shard of whole tile rows spanning the padded width {width} (head_dim "
                         f"{shape.head_dim}) expected, got shard shape {[height, shard_width]}")
    row_major = spec.orientation == ttnn.ShardOrientation.ROW_MAJOR
    banks = [(c.x, c.y) for c in ttnn.corerange_to_cores(spec.grid, None, row_major)]
    shard_pages = height // 32 * shape.dim_tiles
    shards = -(-pages // shard_pages)
    if shards > len(banks):
        raise ValueError(f"{what}: {shards} shards of {height} rows on {len(banks)} cores: ttnn needs a core a shard")
    outside = [c for c in banks if not (c[0] < grid[0] and c[1] < grid[1])]
    if outside:
        raise ValueError(f"{what}: shard cores {outside} are outside the {grid[0]}x{grid[1]} grid")
    return banks, shard_pages


def _sharded_buffer(emu, pages: np.ndarray, banks, shard_pages: int):
    """``pages`` in an emulated L1 height-sharded buffer: shard ``s`` (pages ``s * shard_pages``
    on) in bank ``s % len(banks)``, slot ``s // len(banks)`` (round robin), and the buffer's
    TensorAccessorArgs (as ``ttnn.TensorAccessorArgs`` gives for such a tensor)."""
    from ttnn_flashdecode.emulator import sharded_tensor_accessor_compile_time_args

    shards = -(-len(pages) // shard_pages)
    buffer = emu.allocate_l1_sharded(banks, -(-shards // len(banks)) * shard_pages, pages.shape[1])
    for bank in range(min(len(banks), shards)):
        emu.write_l1_bank(buffer, bank, np.concatenate([pages[s * shard_pages:(s + 1) * shard_pages]
                                                        for s in range(bank, shards, len(banks))]))
    args = sharded_tensor_accessor_compile_time_args(pages.shape[1], [len(pages)], [shard_pages],
                                                     [emu.worker_core_from_logical_core(*c) for c in banks])
    return buffer, args


def _read_sharded(emu, buffer, num_pages: int, shard_pages: int) -> np.ndarray:
    """The ``num_pages`` pages of ``buffer`` (see :func:`_sharded_buffer`) as the last run left them."""
    size = shard_pages * buffer.page_bytes
    banks = buffer.banks
    shards = [emu.peek_l1(banks[s % len(banks)], buffer.address + s // len(banks) * size, size)
              for s in range(-(-num_pages // shard_pages))]
    return np.concatenate(shards)[:num_pages * buffer.page_bytes].reshape(num_pages, buffer.page_bytes)


def run_on_emulator(q, k, v, inputs: Inputs, scale, block_tiles, split, compute: ComputeOptions, *, grid=None,
                    max_split=None, memory_config=None):
    _last_report.value = None
    from ttnn_flashdecode.emulator import tensor_accessor_compile_time_args

    shape = inputs.shape
    emu = _emulator(DEFAULT_ARCH)
    cores = resolve_grid(grid, tuple(emu.grid))
    q_np = to_numpy(q)
    q_pages = tiles.to_tile_bytes(_heads_padded(q_np, shape) if shape.q_layout == "rows" else q_np)
    if shape.kv_dtype == "bfloat16":
        kv_pages = [tiles.to_tile_bytes(to_numpy(t)) for t in (k, v)]
    else:  # the tensors' own packed pages (ttnn's host packing)
        kv_pages = [tiles.to_block_float_tile_bytes(t, shape.kv_dtype) for t in (k, v)]
    if isinstance(inputs.sink, PerDeviceSinks):
        raise ValueError("attention_sink: per-device sinks (a sink tensor sharded over a mesh) need a mesh: Q, K, V "
                         "on that mesh, or host multi-device tensors")
    const_pages = _constant_pages(shape.head_dim, scale, inputs.sink)
    q_shards = _height_shards(q.memory_config() if isinstance(q, ttnn.Tensor) else None, shape, len(q_pages), emu.grid,
                              "q")
    out_shards = _height_shards(memory_config, shape, len(q_pages), emu.grid, "memory_config")
    buffers = []
    q_sharded = out_sharded = None
    sharded_args = {}  # L1 buffer id -> its TensorAccessorArgs
    try:
        if q_shards is not None:
            q_sharded, sharded_args[id(q_sharded)] = _sharded_buffer(emu, q_pages, *q_shards)
        for pages in (q_pages, *kv_pages, const_pages):
            if pages is q_pages and q_sharded is not None:
                buffers.append(q_sharded)
                continue
            buffer = emu.allocate_dram(len(pages), pages.shape[1])
            buffers.append(buffer)
            emu.write_pages(buffer, pages)
        if out_shards is None:
            out_buffer = emu.allocate_dram(len(q_pages), q_pages.shape[1])
            emu.write_pages(out_buffer, np.zeros_like(q_pages))
        else:
            out_sharded, sharded_args[id(out_sharded)] = _sharded_buffer(emu, np.zeros_like(q_pages), *out_shards)
            out_buffer = out_sharded
        buffers.append(out_buffer)
        positions = _positions_page(inputs.positions)
        buffers.append(emu.allocate_dram(1, positions.nbytes))  # one page: the whole vector
        emu.write_pages(buffers[-1], positions)
        table_buffer = mask_buffer = None
        if shape.paged:  # one page per user: its row
            table = inputs.page_table.astype("<i4")
            table_buffer = emu.allocate_dram(table.shape[0], table.shape[1] * 4)
            buffers.append(table_buffer)
            emu.write_pages(table_buffer, table)
        if inputs.mask is not None:  # [mask_users, 1, n_q_heads, capacity] in tiles
            mask_pages = tiles.to_tile_bytes(inputs.mask[:, None])
            mask_buffer = emu.allocate_dram(len(mask_pages), mask_pages.shape[1])
            buffers.append(mask_buffer)
            emu.write_pages(mask_buffer, mask_pages)
        operands = _accessor_operands(buffers[:6], table_buffer, mask_buffer)
        accessor_args = operand_accessor_args([sharded_args[id(b)] if id(b) in sharded_args
                                               else tensor_accessor_compile_time_args(b) for b in operands])
        plan = plan_program(shape, block_tiles, split, compute, DEFAULT_ARCH, cores, accessor_args,
                            emu.worker_core_from_logical_core, max_split=max_split)
        check_windows(plan)
        table = work_table(plan)
        buffers.append(emu.allocate_dram(table.shape[0], table.shape[1] * 4))
        emu.write_pages(buffers[-1], table)
        lse_buffer = None
        if shape.lse:  # float32 ROW_MAJOR, a page of n_q_heads values per output row; poisoned: every value is written
            rows = shape.lse_shape[-2]
            lse_buffer = emu.allocate_dram(rows, 4 * shape.n_q_heads)
            buffers.append(lse_buffer)
            emu.write_pages(lse_buffer, np.full((rows, shape.n_q_heads), np.nan, dtype="<f4"))
        addresses = Addresses(*(b.address for b in buffers[:6]), page_table=0 if table_buffer is None else table_buffer.address,
                              mask=0 if mask_buffer is None else mask_buffer.address, work=buffers[-2 if shape.lse else -1].address,
                              lse=0 if lse_buffer is None else lse_buffer.address)
        program = program_for(plan)
        with _launch_lock:
            set_addresses(program, addresses)
            report = emu.run(program, timeout_s=emulator_deadline(shape))
        report.plan = plan
        out_pages = emu.read_pages(out_buffer) if out_sharded is None else \
            _read_sharded(emu, out_sharded, len(q_pages), out_shards[1])
        result = tiles.from_tile_bytes(out_pages, shape.q_tiled_shape)
        lse = None if lse_buffer is None else \
            np.ascontiguousarray(emu.read_pages(lse_buffer)).view("<f4").reshape(shape.lse_shape).astype(np.float32)
    finally:
        for buffer in buffers:
            if id(buffer) not in sharded_args:
                emu.free(buffer)
        for buffer in (q_sharded, out_sharded):
            if buffer is not None:
                emu.free_l1(buffer)
    _last_report.value = report
    if shape.q_layout == "rows":
        result = _heads_unpadded(result[:, :, :shape.q_height], shape)
    else:
        result = result[:, :, :shape.n_q_heads, :shape.head_dim]
    if inputs.kind == "host":
        out = ttnn.Tensor(np.ascontiguousarray(result, dtype=np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)
        return out if lse is None else (out, ttnn.Tensor(lse, ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT))
    out = result.astype(q_np.dtype)
    return out if lse is None else (out, lse)


# ---------------------------------------------------------------- device backend

class DeviceLaunch:
    """Everything a device call of one plan needs beyond its tensors, prepared once: the plan's
    descriptor (this launch's own copy: only it writes the addresses there), its constants and WORK
    operands on the device, and the output's spec. Calling it launches: allocate the output, write
    the tensors' addresses into the descriptor's common runtime args (the changed words only),
    ``ttnn.generic_op``. Nothing here depends on positions or tensor contents, so a decode loop (and
    :mod:`ttnn_flashdecode.op.fast_path`) reuses it for every call whose tensor specs and options
    match.

    Attributes: ``plan``; ``program`` (its ttnn.ProgramDescriptor); ``device`` (the device or mesh it
    was prepared on); ``constants`` and ``work`` (the device operands); ``out_spec`` and ``lse_spec``
    (ttnn.TensorSpec of the output and, with return_lse, of the LSE: float32 ROW_MAJOR DRAM, else
    None); ``signpost`` (the Tracy message naming the call in ops_perf_results); ``mesh`` (the
    device when it is a multi-chip ttnn.MeshDevice: the program goes out as a MeshProgramDescriptor,
    else None).
    """

    __slots__ = ("plan", "program", "device", "constants", "work", "out_spec", "signpost", "mesh", "lse_spec",
                 "_write_addresses", "_fixed_addresses")

    def __init__(self, plan: Plan, device, constants_tensor, work, out_spec, signpost: str, *, mesh=None,
                 lse_spec=None):
        self.plan = plan
        self.program = device_program(plan)
        self.device = device
        self.constants = constants_tensor
        self.work = work
        self.out_spec = out_spec
        self.signpost = signpost
        self.mesh = mesh
        self.lse_spec = lse_spec
        self._write_addresses = AddressWriter(self.program)
        self._fixed_addresses = constants_tensor.buffer_address(), work.buffer_address()

    def __call__(self, q, k, v, positions, page_table=None, mask=None):
        """Launch on this launch's device; returns the output tensor (``out_spec``), or with
        ``lse_spec`` ``(output, lse)``.

        ``positions``: the POSITIONS operand (a device int32 tensor); ``page_table``: a paged
        cache's device page table, else None; ``mask``: a non-causal call's device attention mask."""
        # A Tracy signpost names the call in ops_perf_results (profile-report reads it). ttnn.tracy_message
        # is what tracy.signpost sends, without its loguru INFO line on every call of a per-layer op.
        ttnn.tracy_message(self.signpost)
        with _launch_lock:
            # generic_op's last tensor is its output; the rest are inputs kept alive for the launch
            # (the LSE among them: the writer fills it, generic_op needs only its address).
            tensors = self.bind(q, k, v, positions, page_table, mask)
            program = self.program if self.mesh is None else program_for_device(self.mesh, self.program)
            out = ttnn.generic_op(tensors, program)
        return out if self.lse_spec is None else (out, tensors[-2])

    def bind(self, q, k, v, positions, page_table=None, mask=None) -> list:
        """Allocate an output and write this call's operand addresses into the descriptor; returns
        ``generic_op``'s tensor list (inputs, then the output). The caller holds ``_launch_lock``
        until ``generic_op`` has read the descriptor."""
        out = _allocate(self.out_spec, self.device)
        lse = None if self.lse_spec is None else _allocate(self.lse_spec, self.device)
        constants_address, work_address = self._fixed_addresses
        self._write_addresses((q.buffer_address(), k.buffer_address(), v.buffer_address(), constants_address,
                               out.buffer_address(), positions.buffer_address(),
                               0 if page_table is None else page_table.buffer_address(),
                               0 if mask is None else mask.buffer_address(), work_address,
                               0 if lse is None else lse.buffer_address()))
        if page_table is None and mask is None and lse is None:
            return [q, k, v, self.constants, positions, self.work, out]
        extra = [t for t in (page_table, mask) if t is not None]
        return [q, k, v, self.constants, positions, *extra, self.work, out] if lse is None else \
            [q, k, v, self.constants, positions, *extra, self.work, lse, out]


EMULATOR_BACKSTOP_SECONDS = 60.0
EMULATOR_SECONDS_PER_TILE = 2e-3
"""The emulator's wall-clock backstop (its deadlock detector ends a stuck run at once; this ends a
livelock): 60 s plus 2 ms per K/V tile the program may read, per dim tile and Q row tile. A fixed
60 s cut ttnn's own non-causal Llama-3.2-vision case (32 users x 8 KV heads x 4224 positions,
135168 such tiles) short while it still made progress; its test (two such calls and a float64
reference) ran in 87 s beside two other jobs on this 2-core machine (under 0.35 ms a tile a call),
so the backstop (330 s) leaves it over 7x."""


def emulator_deadline(shape: DecodeShape) -> float:
    """Seconds the emulator may run ``shape``'s program: :data:`EMULATOR_BACKSTOP_SECONDS` plus
    :data:`EMULATOR_SECONDS_PER_TILE` per tile of the K/V it may read (every request at its planned
    positions, each dim tile and Q row tile)."""
    tiles = sum(-(-positions // 32) for positions in shape.planned_kv_positions)
    return EMULATOR_BACKSTOP_SECONDS + EMULATOR_SECONDS_PER_TILE * tiles * shape.dim_tiles * shape.row_tiles


def device_program(plan: Plan):
    """A device launch's own ``ttnn.ProgramDescriptor`` of ``plan``: built for it, not
    ``program_for``'s shared one, since its :class:`AddressWriter` remembers what it wrote there. The
    one place the device path gets a descriptor (the wolfpine check wraps it to swap the compute kernel)."""
    return build_program(plan)


# ttnn's Python wrapper of the op (graph recording, queue ids) costs ~1-2 us a call; its C++ function is
# the same allocation.
_allocate = getattr(ttnn.allocate_tensor_on_device, "function", ttnn.allocate_tensor_on_device)


def prepare_device_launch(q, k, v, inputs: Inputs, scale, block_tiles, split, compute: ComputeOptions,
                          memory_config, *, grid=None, max_split=None) -> DeviceLaunch:
    """Plan a device call (cached plan and descriptor; constants and WORK uploaded once per
    device) and return its :class:`DeviceLaunch`.

    Raises:
        ValueError: a ``memory_config`` other than DRAM interleaved (or, with the heads layout,
            L1 height-sharded); as :func:`~ttnn_flashdecode.op.plan.plan_program` and
            :func:`~ttnn_flashdecode.op.plan.check_windows`.
    """
    shape = inputs.shape
    sharded_ok = shape.q_layout == "heads" and memory_config is not None and height_sharded_l1(memory_config)
    if memory_config is not None and not sharded_ok and (
            memory_config.buffer_type != ttnn.BufferType.DRAM or memory_config.is_sharded()):
        also = " or (q_layout 'heads') L1 height-sharded" if shape.q_layout == "heads" else ""
        raise ValueError(f"memory_config: expected DRAM interleaved{also}, got {memory_config}")
    device = q.device()
    arch = "blackhole" if "BLACKHOLE" in str(device.arch()).upper() else "wormhole_b0"
    full = device.compute_with_storage_grid_size()
    cores = resolve_grid(grid, (full.x, full.y))
    constants_tensor = _device_constants(device, shape.head_dim, scale, inputs.sink)
    # An output like every call's: its spec, and its accessor args (set by its kind, not its address).
    probe_out = ttnn.allocate_tensor_on_device(q.shape, ttnn.bfloat16, ttnn.TILE_LAYOUT, device,
                                               memory_config or ttnn.DRAM_MEMORY_CONFIG)
    out_spec = probe_out.spec
    positions = constants_tensor if inputs.positions_tensor is None else inputs.positions_tensor  # a list: see below
    # With device inputs the page table and the mask are device tensors (validate refuses others).
    operands = _accessor_operands([q, k, v, constants_tensor, probe_out, positions],
                                  inputs.page_table_tensor if shape.paged else None, inputs.mask_tensor)
    # Accessor args depend on each operand's kind (DRAM interleaved, or Q's L1 shards), not its address;
    # a list of positions is uploaded to DRAM interleaved, ROW_MAJOR, like a cur_pos_tensor.
    args = [ttnn.TensorAccessorArgs(t).get_compile_time_args() for t in operands]
    if inputs.positions_tensor is None:
        args[5] = _dram_row_major_accessor_args(device)
    plan = plan_program(shape, block_tiles, split, compute, arch, cores, operand_accessor_args(args),
                        _device_noc_xy(device), device_cb_budget_bytes(device), max_split)
    check_windows(plan)
    signpost = (f"`TT_SIGNPOST: ttnn_flashdecode.attention {shape.kind} batch={shape.batch} rows={shape.rows} "
                f"heads={shape.n_q_heads}/{shape.n_kv_heads}`")
    lse_spec = None
    if shape.lse:  # float32 ROW_MAJOR DRAM interleaved, a page a row: its accessor args are POSITIONS' kind's
        lse_spec = ttnn.TensorSpec(ttnn.Shape(shape.lse_shape), ttnn.float32, ttnn.ROW_MAJOR_LAYOUT,
                                   buffer_type=ttnn.BufferType.DRAM)
    return DeviceLaunch(plan, device, constants_tensor, _device_work_table(device, plan), out_spec, signpost,
                        mesh=device if device_count(device) > 1 else None, lse_spec=lse_spec)


def run_on_device(q, k, v, inputs: Inputs, scale, block_tiles, split, compute: ComputeOptions, memory_config, *,
                  grid=None, max_split=None):
    """One device call without the fast path: prepare its launch, upload a ``cur_pos`` list as the
    POSITIONS operand (int32 [batch], ROW_MAJOR, DRAM: one page; under trace capture only a
    ``cur_pos_tensor`` works: no host writes), launch. Returns ``(output, launch)``."""
    _last_report.value = None
    launch = prepare_device_launch(q, k, v, inputs, scale, block_tiles, split, compute, memory_config, grid=grid,
                                   max_split=max_split)
    positions = inputs.positions_tensor
    if positions is None and not inputs.shape.causal:  # every user at the cache's last position: the same each call
        positions = _device_fixed_positions(q.device(), inputs.positions)
    elif positions is None:
        positions = ttnn.Tensor(_positions_page(inputs.positions), ttnn.int32, device=q.device(),
                                layout=ttnn.ROW_MAJOR_LAYOUT, mem_config=ttnn.DRAM_MEMORY_CONFIG)
    page_table = inputs.page_table_tensor if inputs.shape.paged else None
    return launch(q, k, v, positions, page_table, inputs.mask_tensor), launch


@functools.lru_cache(maxsize=8)
def _dram_row_major_accessor_args(device) -> tuple[int, ...]:
    """TensorAccessorArgs of a DRAM-interleaved ROW_MAJOR int32 buffer (POSITIONS, WORK)."""
    probe = ttnn.Tensor(np.zeros(8, np.int32), ttnn.int32, device=device, layout=ttnn.ROW_MAJOR_LAYOUT,
                        mem_config=ttnn.DRAM_MEMORY_CONFIG)
    return tuple(ttnn.TensorAccessorArgs(probe).get_compile_time_args())


@functools.lru_cache(maxsize=8)
def _device_noc_xy(device):
    """Logical worker core -> NoC coordinate on ``device`` (cached so plans cache per device)."""

    def noc_xy(x: int, y: int) -> tuple[int, int]:
        core = device.worker_core_from_logical_core(ttnn.CoreCoord(x, y))
        return core.x, core.y

    return noc_xy


_device_constants_cache: dict = {}
_device_work_tables: dict = {}
_device_fixed_positions_cache: dict = {}
_launch_lock = threading.Lock()
"""Held from writing a call's addresses into its plan's shared descriptor until the launch has
read them (``set_addresses``)."""


def _device_fixed_positions(device, positions):
    """A non-causal call's POSITIONS operand on ``device`` (every user at the cache's last
    position), uploaded once per (device object, positions): a traced non-causal decode loop
    replays without host writes."""
    key = (id(device), tuple(positions))  # the device object, held below
    if key not in _device_fixed_positions_cache:
        _device_fixed_positions_cache[key] = device, ttnn.Tensor(
            _positions_page(positions), ttnn.int32, device=device, layout=ttnn.ROW_MAJOR_LAYOUT,
            mem_config=ttnn.DRAM_MEMORY_CONFIG)
    return _device_fixed_positions_cache[key][1]


def _device_work_table(device, plan: Plan):
    """The plan's WORK operand on ``device`` (:func:`~ttnn_flashdecode.op.program_factory.work_table`,
    uint32 ROW_MAJOR, DRAM interleaved: one page per core), uploaded once per (device object, plan) and
    kept for the process's life (a few KiB; a plan's rows never change, whatever the tensors)."""
    key = (id(device), plan)  # the device object itself, held below: a reopened device is another object
    if key not in _device_work_tables:
        _device_work_tables[key] = device, ttnn.Tensor(work_table(plan), ttnn.uint32, device=device,
                                                       layout=ttnn.ROW_MAJOR_LAYOUT, mem_config=ttnn.DRAM_MEMORY_CONFIG)
    return _device_work_tables[key][1]



def _device_constants(device, head_dim: int, scale: float | None, sink: tuple[float, ...] | None = None):
    """The constants operand on ``device``, uploaded once per (device, head_dim, scale, sinks) and
    kept for the process's life (66 tiles, 132 KiB of DRAM; + a tile per 32 Q heads with sinks).
    Keyed by the device object, not its id: a device closed and opened again is a new object whose
    DRAM holds none of the old tensors."""
    key = (id(device), head_dim, scale, sink)  # the device object, held below: a reopened device is another object
    if key not in _device_constants_cache:
        if isinstance(sink, PerDeviceSinks):  # one buffer address, each device its own sink tiles
            if len(sink) != device_count(device):
                raise ValueError(f"attention_sink: expected sinks for the {device_count(device)} devices of q's mesh, "
                                 f"got {len(sink)}")
            shards = [ttnn.Tensor(constants.constant_tiles(head_dim, scale, s).reshape(1, 1, -1, 32), ttnn.bfloat16,
                                  layout=ttnn.TILE_LAYOUT) for s in sink]
            tensor = ttnn.from_host_shards(shards, device.shape).to(device, ttnn.DRAM_MEMORY_CONFIG)
        else:
            tiles_rows = constants.constant_tiles(head_dim, scale, sink).reshape(1, 1, -1, 32)
            tensor = ttnn.Tensor(tiles_rows, ttnn.bfloat16, device=device, layout=ttnn.TILE_LAYOUT,
                                 mem_config=ttnn.DRAM_MEMORY_CONFIG)
        _device_constants_cache[key] = device, tensor
    return _device_constants_cache[key][1]

