"""Program factory: validated decode shapes in, a ``ttnn.ProgramDescriptor`` out. No device.

Split into a frozen *plan* (what compiles: residency, CBs, core map, compile-time args, compute
config, program hash; built once per model shape) and per-call *runtime args* (addresses and
positions; cheap). The same descriptor runs on a card through ``ttnn.generic_op`` and on the
host emulator.

Work split: one request per (user, KV group), spread over the compute grid in contiguous runs;
when there are more requests than cores a core serves several in sequence. Every kernel's
runtime args on a core are ``[request_count, words(request 0), words(request 1), ...]``.

Runtime-arg limit relied on: tt-metal's ``max_runtime_args = 341`` uint32 per kernel per core
(unique + common; "0 to 341" in the kernel API docs, TT_FACTS §3), so a core serves at most
``(341 - 1) // 16 = 21`` requests; more is refused at plan time.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

import ttnn

from ttnn_flashdecode import protocol
from ttnn_flashdecode.paths import kernel_dir
from ttnn_flashdecode.protocol import Operand, Request
from ttnn_flashdecode.residency import Residency, cb_plan, check_fits

__all__ = [
    "MAX_RUNTIME_ARGS",
    "MAX_REQUESTS_PER_CORE",
    "DecodeShape",
    "ComputeOptions",
    "Plan",
    "Addresses",
    "plan_decode",
    "runtime_args",
    "decode_requests",
    "build_program",
    "KERNEL_FILES",
]

MAX_RUNTIME_ARGS = 341
"""uint32 runtime args per kernel per core that tt-metal guarantees (TT_FACTS §3)."""

MAX_REQUESTS_PER_CORE = (MAX_RUNTIME_ARGS - 1) // protocol.WORDS

KERNEL_FILES = {"reader": "attention_reader.cpp", "compute": "attention_compute.cpp", "writer": "attention_writer.cpp"}
"""Kernel sources under :func:`ttnn_flashdecode.paths.kernel_dir`; names appear in profiler reports."""

OPERANDS = ("q", "k", "v", "constants", "out")
"""Order of the operands' TensorAccessorArgs in every kernel's positional compile-time args."""


@dataclasses.dataclass(frozen=True)
class DecodeShape:
    """Shapes of one decode call.

    Attributes:
        batch: users; Q row ``b`` is user ``b``.
        n_q_heads, n_kv_heads: head counts; ``n_q_heads % n_kv_heads == 0`` (GQA ratio = q_rows).
        head_dim: elements per head (any >= 1; padded to ``dim_tiles * 32``).
        capacity: positions the KV cache holds per (user, KV head).
    """

    batch: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    capacity: int

    @property
    def q_rows(self) -> int:
        """GQA ratio: Q heads per KV group."""
        return self.n_q_heads // self.n_kv_heads

    @property
    def dim_tiles(self) -> int:
        """``ceil(head_dim / 32)``."""
        return -(-self.head_dim // 32)

    @property
    def capacity_tiles(self) -> int:
        """``ceil(capacity / 32)`` position tiles per (user, KV head)."""
        return -(-self.capacity // 32)

    @property
    def q_width_tiles(self) -> int:
        """Tile columns of Q and the output: every head padded to ``dim_tiles`` tiles."""
        return self.n_q_heads * self.dim_tiles

    @property
    def requests(self) -> int:
        """Requests per call: one per (user, KV group)."""
        return self.batch * self.n_kv_heads


@dataclasses.dataclass(frozen=True)
class ComputeOptions:
    """The compute kernel's configuration (``ttnn.ComputeConfigDescriptor``).

    Defaults favour accuracy: HiFi4, fp32 DST accumulation, exact (non-approximate) exp.
    """

    math_fidelity: ttnn.MathFidelity = ttnn.MathFidelity.HiFi4
    fp32_dest_acc_en: bool = True
    math_approx_mode: bool = False
    dst_full_sync_en: bool = False

    @property
    def dst_tiles(self) -> int:
        """DST tiles per acquire: 8 (16-bit) / 4 (fp32) in half sync, doubled in full sync (TT_FACTS §6)."""
        tiles = 4 if self.fp32_dest_acc_en else 8
        return tiles * 2 if self.dst_full_sync_en else tiles

    def descriptor(self) -> ttnn.ComputeConfigDescriptor:
        """The ttnn descriptor for these options."""
        return ttnn.ComputeConfigDescriptor(
            math_fidelity=self.math_fidelity,
            math_approx_mode=self.math_approx_mode,
            fp32_dest_acc_en=self.fp32_dest_acc_en,
            dst_full_sync_en=self.dst_full_sync_en,
        )

    @classmethod
    def from_config(cls, config) -> ComputeOptions:
        """From ``None`` (defaults), a :class:`ComputeOptions`, a ``ttnn.ComputeConfigDescriptor``,
        or a ttnn compute-kernel config with the same attribute names.

        Raises:
            TypeError: ``config`` has none of the expected attributes.
        """
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        try:
            return cls(
                math_fidelity=config.math_fidelity,
                fp32_dest_acc_en=bool(config.fp32_dest_acc_en),
                math_approx_mode=bool(config.math_approx_mode),
                dst_full_sync_en=bool(getattr(config, "dst_full_sync_en", False)),
            )
        except AttributeError as error:
            raise TypeError(
                f"compute_kernel_config: expected None, ComputeOptions or a ttnn compute config, got {type(config).__name__}"
            ) from error


@dataclasses.dataclass(frozen=True)
class Plan:
    """What compiles, built once per (shape, residency, grid, compute options, accessor args).

    Attributes:
        shape: the :class:`DecodeShape`.
        residency: the CB residency.
        cores: logical ``(x, y)`` of every core used, in request order.
        requests_per_core: how many consecutive requests each core serves.
        compute: the :class:`ComputeOptions`.
        accessor_args: positional compile-time args (TensorAccessorArgs of Q, K, V, CONST, OUT).
        program_hash: ``custom_program_hash``: structure only, so new positions or buffer
            addresses never recompile.
    """

    shape: DecodeShape
    residency: Residency
    cores: tuple[tuple[int, int], ...]
    requests_per_core: tuple[int, ...]
    compute: ComputeOptions
    accessor_args: tuple[int, ...]
    program_hash: int

    @property
    def named_compile_time_args(self) -> list[tuple[str, int]]:
        """The same named compile-time args for all three kernels."""
        r = self.residency
        return [("q_rows", r.q_rows), ("dim_tiles", r.dim_tiles), ("block_tiles", r.block_tiles),
                ("tile_bytes", r.tile_bytes), ("dst_tiles", self.compute.dst_tiles)]


def plan_decode(
    shape: DecodeShape,
    residency: Residency,
    *,
    grid: tuple[int, int],
    arch: str,
    compute: ComputeOptions,
    accessor_args: Sequence[Sequence[int]],
) -> Plan:
    """Plan a decode program.

    Args:
        shape: validated shapes.
        residency: must match the shape's q_rows and dim_tiles; must fit ``arch``'s L1.
        grid: compute grid ``(x, y)`` in cores.
        arch: ``"wormhole_b0"`` or ``"blackhole"`` (for the L1 check).
        compute: compute-kernel options.
        accessor_args: five lists, the TensorAccessorArgs compile-time args of Q, K, V, CONST, OUT.

    Raises:
        ValueError: residency disagrees with the shape or does not fit L1; more requests than
            ``grid`` cores * 21 (the runtime-arg limit); wrong number of accessor arg lists.
    """
    if (residency.q_rows, residency.dim_tiles) != (shape.q_rows, shape.dim_tiles):
        raise ValueError(
            f"residency: expected q_rows {shape.q_rows} and dim_tiles {shape.dim_tiles} for {shape}, "
            f"got q_rows {residency.q_rows} and dim_tiles {residency.dim_tiles}"
        )
    check_fits(residency, arch)
    if len(accessor_args) != len(OPERANDS):
        raise ValueError(f"accessor_args: expected {len(OPERANDS)} lists ({', '.join(OPERANDS)}), got {len(accessor_args)}")
    grid_cores = grid[0] * grid[1]
    if shape.requests > grid_cores * MAX_REQUESTS_PER_CORE:
        raise ValueError(
            f"requests: expected at most {grid_cores * MAX_REQUESTS_PER_CORE} (batch x n_kv_heads) on a "
            f"{grid[0]}x{grid[1]} grid ({MAX_REQUESTS_PER_CORE} per core, {MAX_RUNTIME_ARGS} runtime args), "
            f"got {shape.requests} ({shape.batch} x {shape.n_kv_heads})"
        )
    used = min(shape.requests, grid_cores)
    base, extra = divmod(shape.requests, used)
    per_core = tuple(base + (1 if i < extra else 0) for i in range(used))
    cores = tuple((i % grid[0], i // grid[0]) for i in range(used))
    flat_args = tuple(int(a) for args in accessor_args for a in args)
    structure = repr((shape, residency, cores, per_core, compute, flat_args, sorted(KERNEL_FILES.items())))
    program_hash = int.from_bytes(hashlib.blake2b(structure.encode(), digest_size=8).digest(), "little")
    return Plan(shape, residency, cores, per_core, compute, flat_args, program_hash)


@dataclasses.dataclass(frozen=True)
class Addresses:
    """Buffer addresses (bytes) of the five DRAM-interleaved operands of one call."""

    q: int
    k: int
    v: int
    constants: int
    out: int


def decode_requests(plan: Plan, cur_pos: Sequence[int], addresses: Addresses) -> list[Request]:
    """One :class:`Request` per (user, KV group), in plan order (user-major).

    Args:
        plan: the plan.
        cur_pos: per user, the last position attended to (user ``b`` attends to ``0..cur_pos[b]``).
        addresses: buffer addresses of this call's operands.

    Raises:
        ValueError: from :func:`protocol.encode` checks done later; here only a wrong
            ``cur_pos`` length.
    """
    shape, residency = plan.shape, plan.residency
    if len(cur_pos) != shape.batch:
        raise ValueError(f"cur_pos: expected {shape.batch} positions (one per user), got {len(cur_pos)}")
    requests = []
    for user, position in enumerate(cur_pos):
        row_tile, query_row = divmod(user, protocol.TILE_POSITIONS)
        for group in range(shape.n_kv_heads):
            q_page = row_tile * shape.q_width_tiles + group * shape.q_rows * shape.dim_tiles
            kv_page = (user * shape.n_kv_heads + group) * shape.capacity_tiles * shape.dim_tiles
            requests.append(Request(
                q_rows=shape.q_rows,
                dim_tiles=shape.dim_tiles,
                kv_positions=int(position) + 1,
                block_tiles=residency.block_tiles,
                capacity_tiles=shape.capacity_tiles,
                query_row=query_row,
                q=Operand.interleaved(addresses.q, q_page),
                k=Operand.interleaved(addresses.k, kv_page),
                v=Operand.interleaved(addresses.v, kv_page),
                constants=Operand.interleaved(addresses.constants),
                out=Operand.interleaved(addresses.out, q_page),
                tile_bytes=residency.tile_bytes,
            ))
    return requests


def runtime_args(plan: Plan, requests: Sequence[Request]) -> list[list[int]]:
    """Per-core runtime args ``[count, words...]`` in ``plan.cores`` order.

    Raises:
        ValueError: a request fails :func:`protocol.encode`'s checks, or the count differs from the plan's.
    """
    if len(requests) != sum(plan.requests_per_core):
        raise ValueError(f"requests: expected {sum(plan.requests_per_core)}, got {len(requests)}")
    per_core, start = [], 0
    for count in plan.requests_per_core:
        args = [count]
        for request in requests[start:start + count]:
            args.extend(protocol.encode(request, plan.residency))
        per_core.append(args)
        start += count
    return per_core


def _core_range_set(cores: Sequence[tuple[int, int]]) -> ttnn.CoreRangeSet:
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(x, y), ttnn.CoreCoord(x, y)) for x, y in cores])


def build_program(plan: Plan, requests: Sequence[Request]) -> ttnn.ProgramDescriptor:
    """The ``ttnn.ProgramDescriptor`` for one call: 16 CBs, reader / compute / writer kernels with
    absolute source paths, compile-time args from the plan, runtime args from ``requests``.

    Raises:
        ValueError: as :func:`runtime_args`.
    """
    core_ranges = _core_range_set(plan.cores)
    args = runtime_args(plan, requests)
    cbs = [
        ttnn.CBDescriptor(
            total_size=spec.total_bytes,
            core_ranges=core_ranges,
            format_descriptors=[ttnn.CBFormatDescriptor(buffer_index=spec.index, data_format=ttnn.bfloat16, page_size=spec.page_bytes)],
        )
        for spec in cb_plan(plan.residency)
    ]
    configs = {
        "reader": ttnn.ReaderConfigDescriptor(),
        "compute": plan.compute.descriptor(),
        "writer": ttnn.WriterConfigDescriptor(),
    }
    kernels = []
    for role, filename in KERNEL_FILES.items():
        per_core = ttnn.RuntimeArgs()
        for (x, y), core_args in zip(plan.cores, args):
            per_core.append(ttnn.CoreCoord(x, y), core_args)
        kernels.append(ttnn.KernelDescriptor(
            kernel_source=str(kernel_dir() / filename),
            source_type=ttnn.KernelDescriptor.SourceType.FILE_PATH,
            core_ranges=core_ranges,
            compile_time_args=list(plan.accessor_args),
            named_compile_time_args=plan.named_compile_time_args,
            runtime_args=per_core,
            config=configs[role],
        ))
    program = ttnn.ProgramDescriptor(kernels=kernels, semaphores=[], cbs=cbs)
    program.custom_program_hash = plan.program_hash
    return program
