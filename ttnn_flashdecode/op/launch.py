"""Launching a planned call on a card (FlashInfer's *run*): through ``ttnn.generic_op``, with the
operands it needs (the constants operand, the POSITIONS, PAGE_TABLE and WORK operands); and what
both backends share (the last report, host arrays <-> tile pages). The host backend is
:mod:`ttnn_flashdecode.op.emulator_backend`."""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence

import numpy as np
import ttnn

from ttnn_flashdecode.op import constants
from ttnn_flashdecode.op.append import check_append_accessors
from ttnn_flashdecode.op.mesh import PerDeviceSinks, device_count, program_for_device
from ttnn_flashdecode.op.operands import Operands
from ttnn_flashdecode.op.options import AttentionOptions, resolve_grid
from ttnn_flashdecode.op.plan import Target, plan_call
from ttnn_flashdecode.op.program_factory import AddressWriter, Plan, build_program, operand_accessor_args, work_table
from ttnn_flashdecode.op.residency import device_cb_budget_bytes
from ttnn_flashdecode.op.shape import DecodeShape
from ttnn_flashdecode.op.validate import Inputs

__all__ = ["last_report", "to_numpy", "run_on_device", "prepare_device_launch", "DeviceLaunch"]

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

    def __call__(self, q, k, v, positions, page_table=None, mask=None, *, append=(None, None)):
        """Launch on this launch's device; returns the output tensor (``out_spec``), or with
        ``lse_spec`` ``(output, lse)``.

        ``positions``: the POSITIONS operand (a device int32 tensor); ``page_table``: a paged
        cache's device page table, else None; ``mask``: a non-causal call's device attention mask;
        ``append``: a fused append's APPEND_K and APPEND_V operands (``op/append.py``; None each)."""
        # A Tracy signpost names the call in ops_perf_results (profile-report reads it). ttnn.tracy_message
        # is what tracy.signpost sends, without its loguru INFO line on every call of a per-layer op.
        ttnn.tracy_message(self.signpost)
        with _launch_lock:
            # generic_op's last tensor is its output; the rest are inputs kept alive for the launch
            # (the LSE among them: the writer fills it, generic_op needs only its address).
            tensors = self.bind(q, k, v, positions, page_table, mask, append=append)
            program = self.program if self.mesh is None else program_for_device(self.mesh, self.program)
            out = ttnn.generic_op(tensors, program)
        return out if self.lse_spec is None else (out, tensors[-2])

    def bind(self, q, k, v, positions, page_table=None, mask=None, *, append=(None, None)) -> list:
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
                               0 if lse is None else lse.buffer_address(),
                               *(0 if rows is None else rows.buffer_address() for rows in append)))
        if page_table is None and mask is None and lse is None and all(t is None for t in append):
            return [q, k, v, self.constants, positions, self.work, out]
        extra = [t for t in (page_table, mask, *append) if t is not None]
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


def prepare_device_launch(operands: Operands, inputs: Inputs, options: AttentionOptions) -> DeviceLaunch:
    """Plan a device call (cached plan and descriptor; constants and WORK uploaded once per
    device) and return its :class:`DeviceLaunch`.

    Raises:
        ValueError: as :func:`~ttnn_flashdecode.op.plan.plan_call`.
    """
    shape, q, memory_config = inputs.shape, operands.q, options.memory_config
    device = q.device()
    arch = "blackhole" if "BLACKHOLE" in str(device.arch()).upper() else "wormhole_b0"
    full = device.compute_with_storage_grid_size()
    cores = resolve_grid(options.grid, (full.x, full.y))
    constants_tensor = _device_constants(device, shape.head_dim, options.scale, inputs.sink)
    # An output like every call's: its spec, and its accessor args (set by its kind, not its address).
    probe_out = ttnn.allocate_tensor_on_device(q.shape, ttnn.bfloat16, ttnn.TILE_LAYOUT, device,
                                               memory_config or ttnn.DRAM_MEMORY_CONFIG)
    out_spec = probe_out.spec
    positions = constants_tensor if inputs.positions_tensor is None else inputs.positions_tensor  # a list: see below
    # With device inputs the page table and the mask are device tensors (validate refuses others).
    tensors = _accessor_operands([q, operands.k, operands.v, constants_tensor, probe_out, positions],
                                 inputs.page_table_tensor if shape.paged else None, inputs.mask_tensor)
    # Accessor args depend on each operand's kind (DRAM interleaved, or Q's L1 shards), not its address;
    # a list of positions is uploaded to DRAM interleaved, ROW_MAJOR, like a cur_pos_tensor.
    args = [ttnn.TensorAccessorArgs(t).get_compile_time_args() for t in tensors]
    if inputs.positions_tensor is None:
        args[5] = _dram_row_major_accessor_args(device)
    accessor_args = operand_accessor_args(args)
    if inputs.append is not None:  # the fused append's rows: the reader addresses them with CONST's args (op/append.py)
        check_append_accessors(args, [ttnn.TensorAccessorArgs(t).get_compile_time_args()
                                      for t in (inputs.append.k, inputs.append.v) if t is not None])
    target = Target(arch, cores, accessor_args, _device_noc_xy(device), device_cb_budget_bytes(device))
    plan = plan_call(shape, options, target)
    signpost = (f"`TT_SIGNPOST: ttnn_flashdecode.attention {shape.kind} batch={shape.batch} rows={shape.rows} "
                f"heads={shape.n_q_heads}/{shape.n_kv_heads}`")
    lse_spec = None
    if shape.lse:  # float32 ROW_MAJOR DRAM interleaved, a page a row: its accessor args are POSITIONS' kind's
        lse_spec = ttnn.TensorSpec(ttnn.Shape(shape.lse_shape), ttnn.float32, ttnn.ROW_MAJOR_LAYOUT,
                                   buffer_type=ttnn.BufferType.DRAM)
    return DeviceLaunch(plan, device, constants_tensor, _device_work_table(device, plan), out_spec, signpost,
                        mesh=device if device_count(device) > 1 else None, lse_spec=lse_spec)


def run_on_device(operands: Operands, inputs: Inputs, options: AttentionOptions):
    """One device call without the fast path: prepare its launch, upload a ``cur_pos`` list as the
    POSITIONS operand (int32 [batch], ROW_MAJOR, DRAM: one page; under trace capture only a
    ``cur_pos_tensor`` works: no host writes), launch. Returns ``(output, launch)``."""
    _last_report.value = None
    launch = prepare_device_launch(operands, inputs, options)
    q = operands.q
    positions = inputs.positions_tensor
    if positions is None and not inputs.shape.scores.causal:  # every user at the cache's last position: the same each call
        positions = _device_fixed_positions(q.device(), inputs.positions)
    elif positions is None:
        positions = ttnn.Tensor(_positions_page(inputs.positions), ttnn.int32, device=q.device(),
                                layout=ttnn.ROW_MAJOR_LAYOUT, mem_config=ttnn.DRAM_MEMORY_CONFIG)
    page_table = inputs.page_table_tensor if inputs.shape.paged else None
    append = (None, None) if inputs.append is None else (inputs.append.k, inputs.append.v)
    return launch(q, operands.k, operands.v, positions, page_table, inputs.mask_tensor, append=append), launch


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

