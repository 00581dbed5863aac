"""Program factory: validated decode shapes in, a ``ttnn.ProgramDescriptor`` out. No device.

Split into a frozen *plan* (what compiles: residency, CBs, core map, compile-time args, compute
config, program hash, and the WORK table of each core's requests; built once per model shape) and
the per-call operand addresses (common runtime args, :func:`set_addresses`; cheap). The same
descriptor runs on a card through ``ttnn.generic_op`` and on the host emulator.

Request kinds (:class:`DecodeShape` ``kind``, DESIGN.md §3 and §5): ``"decode"`` (one query row
per user), ``"rows"`` (``rows`` consecutive query rows per user, the ROWS flag) and ``"chunk"``
(a causal chunk of ``rows`` consecutive positions per sequence, the CHUNK flag). Q and the output
hold ``batch * rows`` rows, user ``b``'s at ``b * rows ..``; a user's rows may straddle a row tile
(the kernels take Q's width in tiles, ``q_width_tiles``, as a compile-time arg).

Work split: one request per (user, KV group) for decode and rows, per (sequence, Q head) for chunk;
a :class:`~ttnn_flashdecode.op.schedule.Schedule` cuts long requests into split-K slices on
dedicated cores and packs the others, several per core when there are more requests than cores. No
kernel has per-core runtime args (tt-metal re-applies those on every program-cache hit): core ``i``
reads row ``i`` of the WORK table, ``[request_count, words(request 0), words(request 1), ...]``
(:func:`work_table`), and the reader and writer share common runtime args: the operands' addresses
in :data:`OPERANDS` order (``protocol.CommonArg``), then, for a split program, the NoC coordinate
table of its cores; a split program also has the semaphores of ``protocol.semaphore_ids`` (five
handshakes, one arrival per inbox slot).

Limits relied on: a core serves at most 21 requests (its work row's bound); tt-metal's ``max_runtime_args =
341`` uint32 per kernel (unique + common, TT_FACTS §3) bounds the common args."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence

import numpy as np
import ttnn

from ttnn_flashdecode.op import protocol
from ttnn_flashdecode.op.append import append_named_args
from ttnn_flashdecode.op.sparse import sparse_named_args
from ttnn_flashdecode.op.grid import core_range_set, grid_cores, grid_size, grid_text, is_rectangle
from ttnn_flashdecode.op.paths import kernel_dir, named_args_used
from ttnn_flashdecode.op.protocol import Operand, Request
from ttnn_flashdecode.op.residency import BFP4_B, BFP8_B, FLOAT16_B, FLOAT32, INT32, KV_FORMATS, Residency, cb_plan, check_fits
from ttnn_flashdecode.op.schedule import Schedule
from ttnn_flashdecode.op.compute_options import ComputeOptions
from ttnn_flashdecode.op.shape import DecodeShape
from ttnn_flashdecode.op.data_movement import data_movement_config

__all__ = [
    "MAX_RUNTIME_ARGS",
    "MAX_REQUESTS_PER_CORE",
    "Plan",
    "Addresses",
    "plan_decode",
    "operand_accessor_args",
    "work_table",
    "set_addresses",
    "AddressWriter",
    "decode_requests",
    "build_program",
    "KERNEL_FILES",
]

MAX_RUNTIME_ARGS = 341
"""uint32 runtime args per kernel per core that tt-metal guarantees (TT_FACTS §3)."""

MAX_REQUESTS_PER_CORE = protocol.MAX_REQUESTS_PER_CORE
"""Most requests one core runs (its work row's bound; ``kMaxRequestsPerCore``)."""

KERNEL_FILES = {"reader": "attention_reader.cpp", "compute": "attention_compute.cpp", "writer": "attention_writer.cpp"}
"""Kernel sources under :func:`ttnn_flashdecode.op.paths.kernel_dir`; names appear in profiler reports."""

OPERANDS = ("q", "k", "v", "constants", "out", "positions", "page_table", "mask", "work", "lse", "append", "append_v")
"""Order of the operands' TensorAccessorArgs in every kernel's positional compile-time args
(``attention_dataflow.hpp``), and of their addresses in the common runtime args
(:class:`~ttnn_flashdecode.op.protocol.CommonArg`). ``positions``: one int32 per user, a ROW_MAJOR
DRAM-interleaved buffer of one page (ttnn's ``cur_pos_tensor``). ``page_table``: a paged cache's
int32 page table ``[batch, entries]``, ROW_MAJOR, one page per user; a contiguous cache has none,
and the POSITIONS operand's args stand in (never used). ``mask``: a non-causal call's attention
mask ``[mask_users, 1, n_q_heads, capacity]`` (bfloat16 TILE); without one, the previous operand's
args stand in. ``work``: the plan's work table (:func:`work_table`), a ROW_MAJOR DRAM-interleaved
uint32 buffer like POSITIONS, whose TensorAccessorArgs are therefore POSITIONS' (the table is
written after the plan it belongs to). ``lse``: a ``return_lse`` call's LSE output, float32
ROW_MAJOR DRAM interleaved (a page of ``n_q_heads`` values per output row), likewise POSITIONS'
args; address 0 without ``return_lse``. ``append``, ``append_v``: a fused append's rows (``op/append.py``)."""


def operand_accessor_args(per_operand: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], ...]:
    """The TensorAccessorArgs lists of :data:`OPERANDS`, from those of the operands a call brings
    (Q .. POSITIONS, PAGE_TABLE when paged, MASK with an attention mask): a missing PAGE_TABLE or
    MASK takes the last given one's args, which the kernels never use for it (a contiguous cache
    with a mask passes POSITIONS' args in PAGE_TABLE's place), and the WORK table and the LSE
    output POSITIONS' (buffers of the same kind).

    Raises:
        ValueError: not 6 to 8 lists (or 9 to 11, through WORK, LSE or APPEND, or all 12).
    """
    brought = len(OPERANDS) - 4  # all but WORK, LSE and the append's, which the op makes or adds
    lists = tuple(tuple(int(a) for a in args) for args in per_operand)
    if len(lists) == len(OPERANDS):  # already complete (a plan's own)
        return lists
    if brought < len(lists) < len(OPERANDS):  # through WORK, LSE or APPEND: the rest stand in
        return lists + (lists[OPERANDS.index("positions")],) * (len(OPERANDS) - len(lists))
    if not brought - 2 <= len(lists) <= brought:
        raise ValueError(f"accessor args: expected {brought - 2} to {brought} lists ({', '.join(OPERANDS[:brought])}), "
                         f"or all {len(OPERANDS)}, got {len(per_operand)}")
    positions = lists[OPERANDS.index("positions")]
    return lists + lists[-1:] * (brought - len(lists)) + (positions,) * 4


@dataclasses.dataclass(frozen=True)
class Plan:
    """What compiles, built once per (shape, residency, grid, compute options, accessor args).

    Attributes:
        shape: the :class:`DecodeShape`.
        residency: the CB residency (``max_split`` sizes the split-K inbox).
        cores: logical ``(x, y)`` of every core used, in core-table order.
        schedule: which slices each core runs (same order as ``cores``).
        noc_table: split programs: ``(noc_y << 16) | noc_x`` of every core (the common runtime
            args of the reader and writer); empty when nothing is split.
        compute: the :class:`ComputeOptions`.
        accessor_args: positional compile-time args (TensorAccessorArgs of :data:`OPERANDS`, flat).
        program_hash: ``custom_program_hash``: structure only (shapes, residency, cores,
            schedule, compute options, accessor args), so new positions within the same schedule
            or new buffer addresses never recompile.
        grid: the compute grid ``(x, y)``, or a core set (``sub_core_grids``: a tuple of logical
            cores, :func:`grid_cores`); core ``(x, y)`` reads row ``work_slot(x, y, grid_x)`` of
            the work table.
    """

    shape: DecodeShape
    residency: Residency
    cores: tuple[tuple[int, int], ...]
    schedule: Schedule
    noc_table: tuple[int, ...]
    compute: ComputeOptions
    accessor_args: tuple[int, ...]
    program_hash: int
    grid: tuple = (8, 8)

    def __hash__(self) -> int:
        # The structure hash, computed once: a decode loop looks its descriptor up by (plan,
        # addresses) on every call, and hashing the whole schedule each time cost ~20 us.
        return self.program_hash

    @property
    def grid_x(self) -> int:
        """The width, in cores, that ``work_slot`` numbers rows by: the rectangle's, or for a core
        set the smallest that holds its cores."""
        return self.grid[0] if is_rectangle(self.grid) else max(x for x, _ in self.cores) + 1

    @property
    def work_slots(self) -> tuple[int, ...]:
        """Per core (``cores`` order), the row of the work table it reads (``work_slot``)."""
        return tuple(protocol.work_slot(x, y, self.grid_x) for x, y in self.cores)

    @property
    def split(self) -> bool:
        """True when some request is cut into split-K slices."""
        return self.residency.max_split > 1

    @property
    def block_tiles(self) -> int:
        """Position tiles per K/V block (the residency's; a drop-in's ``k_chunk_size`` / 32)."""
        return self.residency.block_tiles

    @property
    def split_counts(self) -> tuple[int, ...]:
        """Split-K slices of each request, in request order (1: not split)."""
        return tuple(self.schedule.split_count(r) for r in range(self.shape.requests))

    @property
    def requests_per_core(self) -> tuple[int, ...]:
        """Parameter blocks each core runs."""
        return tuple(len(slices) for slices in self.schedule.cores)

    @property
    def named_compile_time_args(self) -> list[tuple[str, int]]:
        """The program's named compile-time args; each kernel gets those it reads (:func:`build_program`)."""
        r = self.residency
        return [("dim_tiles", r.dim_tiles), ("block_tiles", r.block_tiles), ("tile_bytes", r.tile_bytes),
                ("dst_tiles", self.compute.dst_tiles), ("exp_approx", int(self.compute.approx_exp)),
                ("row_scaling_on_sfpu", int(self.compute.row_scaling_on_sfpu)), ("row_sum_groups", self.compute.row_sum_groups(r.block_tiles)),
                ("inbox_slots", protocol.tree_levels(r.max_split)), ("q_width_tiles", self.shape.q_width_tiles),
                ("positions_bytes", r.positions_bytes), ("kv_tile_bytes", r.kv_tile_bytes),
                ("work_row_bytes", r.work_row_bytes), ("grid_x", self.grid_x), *self.cache_layout_args,
                *self.shape.scores.named_args, ("lse", int(self.shape.lse)),
                ("row_tiles", r.row_tiles), ("values_from_keys", int(r.values_from_keys)),
                ("row_tile_users", int(r.row_tile_users)), ("accurate_scores", int(r.fp32_scores)),
                *append_named_args(self.shape), *sparse_named_args(self.shape), ("live_rows", self.shape.live_rows)]

    @property
    def cache_layout_args(self) -> list[tuple[str, int]]:
        """Named compile-time args of the KV cache's layout (``attention_protocol.hpp`` "Paged KV
        cache"); all 0 for a contiguous cache."""
        shape = self.shape
        block_pages = shape.n_kv_heads * shape.cache_block_tiles * shape.dim_tiles
        return [("cache_block_tiles", shape.cache_block_tiles), ("cache_block_pages", block_pages),
                ("cache_blocks", shape.cache_blocks), ("page_table_entries", shape.page_table_entries),
                ("cache_wrap_tiles", shape.cache_wrap_tiles), ("cache_half_blocks", int(shape.cache_half_blocks)),
                ("users_per_table_row", shape.users_per_table_row)]


def plan_decode(
    shape: DecodeShape,
    residency: Residency,
    *,
    grid: tuple,
    arch: str,
    compute: ComputeOptions,
    accessor_args: Sequence[Sequence[int]],
    schedule: Schedule,
    noc_xy: Callable[[int, int], tuple[int, int]],
    l1_budget_bytes: int | None = None,
) -> Plan:
    """Plan a program for one call's shapes (any request kind).

    Args:
        shape: validated shapes.
        residency: must match the shape's q_rows and dim_tiles, hold the schedule's largest
            split in ``max_split``, and fit ``arch``'s L1.
        grid: compute grid ``(x, y)`` in cores (core-table index ``i`` is logical core ``(i % x,
            i // x)``), or a core set, a tuple of logical ``(x, y)`` cores taken in that order
            (:func:`grid_cores`).
        arch: ``"wormhole_b0"`` or ``"blackhole"`` (for the L1 check).
        compute: compute-kernel options.
        accessor_args: the TensorAccessorArgs compile-time args of :data:`OPERANDS` (6 to 10 lists:
            :func:`operand_accessor_args` fills in missing trailing operands).
        schedule: slices per core (:func:`ttnn_flashdecode.op.schedule.schedule`), one request per
            (user, KV group) -- per (sequence, Q head) for chunk -- in user-major order.
        noc_xy: logical core ``(x, y)`` -> its NoC coordinate (``worker_core_from_logical_core``).
        l1_budget_bytes: L1 bytes the CBs may take; default: ``arch``'s whole free L1.

    Raises:
        ValueError: residency disagrees with the shape or the schedule, or does not fit L1; the
            schedule does not cover the shape's requests, needs more cores than ``grid``, or puts
            more parameter blocks on a core than a work row holds; wrong number of
            accessor arg lists.
    """
    want = (shape.q_rows, shape.dim_tiles, shape.batch, shape.row_tiles)
    if (residency.q_rows, residency.dim_tiles, residency.batch, residency.row_tiles) != want:
        raise ValueError(
            f"residency: expected q_rows {shape.q_rows}, dim_tiles {shape.dim_tiles}, batch {shape.batch} and row_tiles "
            f"{shape.row_tiles} for {shape}, got q_rows {residency.q_rows}, dim_tiles {residency.dim_tiles}, batch "
            f"{residency.batch} and row_tiles {residency.row_tiles}"
        )
    if residency.paged != shape.paged:
        raise ValueError(f"residency: expected paged={shape.paged} (the cache's layout), got paged={residency.paged}")
    if residency.kv_format != KV_FORMATS[shape.kv_dtype]:
        raise ValueError(f"residency: expected kv_format {KV_FORMATS[shape.kv_dtype]} ({shape.kv_dtype} cache), "
                         f"got {residency.kv_format}")
    check_fits(residency, arch, l1_budget_bytes)
    accessor_args = operand_accessor_args(accessor_args)  # 6..8 lists, missing trailing operands stood in for
    if schedule.requests != shape.requests:
        heads = "n_q_heads" if shape.kind == "chunk" else "n_kv_heads"
        raise ValueError(f"schedule: expected {shape.requests} requests (batch x {heads}), got {schedule.requests}")
    available = grid_size(grid)
    if schedule.used_cores > available:
        raise ValueError(f"schedule: expected at most {available} cores ({grid_text(grid)}), got {schedule.used_cores}")
    largest_split = max(schedule.split_count(r) for r in range(shape.requests))
    if largest_split > residency.max_split:
        raise ValueError(f"residency: expected max_split >= {largest_split} (the schedule's largest split), got {residency.max_split}")
    cores = grid_cores(grid)[:schedule.used_cores]
    noc_table = tuple((ny << 16) | nx for nx, ny in (noc_xy(x, y) for x, y in cores)) if largest_split > 1 else ()
    busiest = max(len(slices) for slices in schedule.cores)
    if busiest > MAX_REQUESTS_PER_CORE or busiest > residency.work_requests:
        raise ValueError(
            f"requests: expected at most {min(MAX_REQUESTS_PER_CORE, residency.work_requests)} per core (the work row "
            f"the residency holds), got {busiest} on one core ({shape.requests} requests on {schedule.used_cores} cores)"
        )
    if protocol.CommonArg.CORE_TABLE + len(noc_table) > MAX_RUNTIME_ARGS:
        raise ValueError(f"cores: expected at most {MAX_RUNTIME_ARGS - protocol.CommonArg.CORE_TABLE} in a split program "
                         f"(common runtime args), got {len(noc_table)}")
    flat_args = tuple(int(a) for args in accessor_args for a in args)
    # The kernel folder is part of the structure: ttnn's program cache keys on this hash alone.
    kernels = (str(kernel_dir()), sorted(KERNEL_FILES.items()))
    structure = repr((shape, residency, tuple(grid), cores, schedule.cores, noc_table, compute, flat_args, kernels))
    program_hash = int.from_bytes(hashlib.blake2b(structure.encode(), digest_size=8).digest(), "little")
    return Plan(shape, residency, cores, schedule, noc_table, compute, flat_args, program_hash, tuple(grid))


@dataclasses.dataclass(frozen=True)
class Addresses:
    """Buffer addresses (bytes) of the DRAM-interleaved operands of one call (:data:`OPERANDS`,
    whose order is the common runtime args'); ``page_table`` is 0 for a contiguous cache."""

    q: int
    k: int
    v: int
    constants: int
    out: int
    positions: int
    page_table: int = 0
    mask: int = 0
    work: int = 0
    lse: int = 0
    append: int = 0
    append_v: int = 0

    def common_args(self) -> list[int]:
        """The words :class:`~ttnn_flashdecode.op.protocol.CommonArg` ``Q_BASE .. APPEND_BASE``.

        Raises:
            ValueError: an address does not fit 32 bits.
        """
        words = [self.q, self.k, self.v, self.constants, self.out, self.positions, self.page_table, self.mask, self.work,
                 self.lse, self.append, self.append_v]
        for name, address in zip(OPERANDS, words):
            if not 0 <= address <= 0xFFFFFFFF:
                raise ValueError(f"{name}: expected a uint32 byte address, got {address}")
        return words


def decode_requests(plan: Plan) -> list[Request]:
    """The program's requests, in plan order (user-major), for the plan's request kind; no
    position is needed (the kernels read them from the POSITIONS operand).

    decode and rows: one per (user, KV group) (per 32 Q heads of a wider group unless the plan has
    several ``row_tiles``, whose requests describe their row tile 0): ``q_rows`` = the GQA ratio, the group's first Q
    head's tile column, user ``b``'s first row ``b * rows``, ``user = b`` (its POSITIONS entry; rows:
    the ROWS flag and ``positions`` = rows). chunk: one per (sequence, Q head): ``q_rows`` = C (the
    CHUNK flag), the head's tile column, the sequence's first row ``b * C``, K/V of the head's KV
    group. The ``"heads"`` Q layout (HEAD_ROWS): the group's first head is row ``first % 32`` of
    user ``b``'s row tile ``first // 32``. ``kv_positions`` (host accounting only, not on the
    wire) is the plan's assumption, :attr:`DecodeShape.planned_kv_positions`.

    The operands' BASE words are 0: addresses are common runtime args (:meth:`Addresses.common_args`),
    not part of the plan.

    Args:
        plan: the plan.
    """
    shape, residency = plan.shape, plan.residency
    chunk = shape.kind == "chunk"
    flags = protocol.Flag.CHUNK if chunk else protocol.Flag.ROWS if shape.kind == "rows" else 0
    if shape.q_layout == "heads":
        flags = protocol.Flag.HEAD_ROWS
    heads_per_request = 1 if chunk else shape.q_rows * shape.row_tiles  # a request's words: its row tile 0
    kv_positions = iter(shape.planned_kv_positions)
    requests = []
    for user in range(0, shape.batch, shape.row_tiles if shape.row_tile_users else 1):  # row-tile users: a group's first
        row_tile, query_row = divmod(user * shape.rows, protocol.TILE_POSITIONS)
        for first in range(0, shape.n_q_heads, heads_per_request):
            group = first // shape.gqa_ratio
            q_page = row_tile * shape.q_width_tiles + first * shape.dim_tiles
            if shape.q_layout == "heads":  # the group's first head is a row of the user's own row tiles
                head_tile, query_row = divmod(first, protocol.TILE_POSITIONS)
                q_page = (user * shape.head_row_tiles + head_tile) * shape.dim_tiles
            if shape.paged:  # the KV head's offset inside a cache block; the page table gives the block
                kv_page = group * shape.cache_block_tiles * shape.dim_tiles
            else:
                kv_page = (user * shape.n_kv_heads + group) * shape.capacity_tiles * shape.dim_tiles
            requests.append(Request(
                q_rows=shape.request_q_rows,
                dim_tiles=shape.dim_tiles,
                kv_positions=next(kv_positions),
                block_tiles=residency.block_tiles,
                capacity_tiles=shape.position_tiles(residency.block_tiles),
                query_row=query_row,
                flags=int(flags),
                positions=shape.rows if shape.kind == "rows" else 0,
                user=user,
                q=Operand.interleaved(0, q_page),
                k=Operand.interleaved(0, kv_page),
                v=Operand.interleaved(0, kv_page),
                constants=Operand.interleaved(0),
                out=Operand.interleaved(0, q_page),
                tile_bytes=residency.tile_bytes,
            ))
    return requests


def work_table(plan: Plan) -> np.ndarray:
    """The plan's WORK operand: one row per work slot up to the last core's (``work_slot``; a core
    set may leave slots no core reads, zero), each ``[request count, words(request 0),
    words(request 1), ...]`` zero-padded to ``residency.work_row_bytes``, every scheduled slice's
    request with its split fields (word 5) filled in from the schedule. Address-free, so it is
    built and uploaded once per plan.

    Returns:
        uint32 ``[max(plan.work_slots) + 1, work_row_bytes // 4]``.

    Raises:
        ValueError: a request fails :func:`protocol.encode`'s checks.
    """
    requests = decode_requests(plan)
    slots = plan.work_slots
    table = np.zeros((max(slots) + 1, plan.residency.work_row_bytes // 4), dtype=np.uint32)
    for slot, slices in zip(slots, plan.schedule.cores):
        words = [len(slices)]
        for item in slices:
            request = requests[item.request]
            if item.count > 1:
                request = dataclasses.replace(
                    request, split_index=item.index, split_count=item.count,
                    split_first_core=plan.schedule.first_core(item.request),
                )
            words.extend(protocol.encode(request, plan.residency))
        table[slot, :len(words)] = words
    return table


_DATA_TYPES = {FLOAT16_B: ttnn.bfloat16, FLOAT32: ttnn.float32, INT32: ttnn.int32, BFP8_B: ttnn.bfloat8_b,
               BFP4_B: ttnn.bfloat4_b}


def build_program(plan: Plan) -> ttnn.ProgramDescriptor:
    """The ``ttnn.ProgramDescriptor`` of ``plan``: the CBs of :func:`cb_plan`, reader / compute /
    writer kernels with absolute source paths and compile-time args from the plan (each kernel the
    named args it reads: :func:`~ttnn_flashdecode.op.paths.named_args_used`; the operands'
    TensorAccessorArgs for the reader and writer only, as compute reads no operand), no per-core
    runtime args (each core reads its row of :func:`work_table`), and common runtime args of the
    reader and writer that :func:`set_addresses` fills per call (zeros until then) followed by
    the NoC table of a split program.
    """
    core_ranges = core_range_set(plan.cores)
    placeholder = [0] * protocol.CommonArg.CORE_TABLE + list(plan.noc_table)
    cbs = [
        ttnn.CBDescriptor(
            total_size=spec.total_bytes,
            core_ranges=core_ranges,
            format_descriptors=[ttnn.CBFormatDescriptor(
                buffer_index=spec.index, data_format=_DATA_TYPES[spec.data_format], page_size=spec.page_bytes)],
        )
        for spec in cb_plan(plan.residency)
    ]
    configs = {
        "reader": data_movement_config("reader"),
        "compute": plan.compute.descriptor(),
        "writer": data_movement_config("writer"),
    }
    kernels = []
    for role, filename in KERNEL_FILES.items():
        source = kernel_dir() / filename
        reads = named_args_used(source)
        kernels.append(ttnn.KernelDescriptor(
            kernel_source=str(source),
            source_type=ttnn.KernelDescriptor.SourceType.FILE_PATH,
            core_ranges=core_ranges,
            compile_time_args=list(plan.accessor_args) if role != "compute" else [],  # compute reads no operand
            named_compile_time_args=[(name, value) for name, value in plan.named_compile_time_args if name in reads],
            runtime_args=ttnn.RuntimeArgs(),
            common_runtime_args=placeholder if role != "compute" else [],
            config=configs[role],
        ))
    semaphores = [
        ttnn.SemaphoreDescriptor(id=sem, core_ranges=core_ranges, initial_value=0)
        for sem in protocol.semaphore_ids(plan.residency.max_split)
    ] if plan.split else []
    program = ttnn.ProgramDescriptor(kernels=kernels, semaphores=semaphores, cbs=cbs)
    program.custom_program_hash = plan.program_hash
    return program


_DATAFLOW_KERNELS = tuple(i for i, role in enumerate(KERNEL_FILES) if role != "compute")


class AddressWriter:
    """Writes a call's operand addresses (:meth:`Addresses.common_args` order) into a descriptor's
    common runtime args, in place, for the reader and the writer: only the words that changed since
    this writer's last call (a decode loop changes Q's and the output's), each one element of the
    descriptor's ``VectorUInt32``, so a call costs a few ``__setitem__`` and no list conversion. The
    descriptor must be written by this writer alone, else its memo of the last words is stale."""

    __slots__ = ("_views", "_last")

    def __init__(self, program: ttnn.ProgramDescriptor):
        kernels = program.kernels
        self._views = tuple(kernels[i].common_runtime_args for i in _DATAFLOW_KERNELS)
        self._last = [None] * protocol.CommonArg.CORE_TABLE

    def __call__(self, words: Sequence[int]) -> None:
        """Write ``words`` (``CORE_TABLE`` addresses).

        Raises:
            ValueError: an address does not fit 32 bits (nothing after it is written).
        """
        last = self._last
        for index, word in enumerate(words):
            if word != last[index]:
                try:
                    for view in self._views:
                        view[index] = word
                except TypeError:  # nanobind's conversion to uint32 refuses it
                    last[index] = None
                    raise ValueError(f"{OPERANDS[index]}: expected a uint32 byte address, got {word}") from None
                last[index] = word


def set_addresses(program: ttnn.ProgramDescriptor, addresses: Addresses) -> None:
    """Write this call's operand addresses into ``program``'s common runtime args (reader and
    writer), in place: the per-call half of the descriptor. ttnn's program cache re-applies
    common args on every hit. A launch that writes its own descriptor on every call keeps an
    :class:`AddressWriter` instead (it skips the unchanged words).

    Raises:
        ValueError: as :meth:`Addresses.common_args`.
    """
    AddressWriter(program)(addresses.common_args())
