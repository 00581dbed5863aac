"""The host backend: a planned call run on :mod:`ttnn_flashdecode.emulator` (FlashInfer's *run*).

Three steps: the operands' tile pages and TensorAccessorArgs are made from the call (nothing
allocated), :func:`~ttnn_flashdecode.op.plan.plan_call` plans it, then the pages go into emulated
DRAM (or L1 shards) keyed by operand name, the program runs, and the output and LSE come back."""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import ttnn

from ttnn_flashdecode.op import append, constants, tiles
from ttnn_flashdecode.op.launch import (_accessor_operands, _heads_padded, _heads_unpadded, _last_report, _launch_lock,
                                        _positions_page, emulator_deadline, to_numpy)
from ttnn_flashdecode.op.mesh import PerDeviceSinks
from ttnn_flashdecode.op.operands import Operands
from ttnn_flashdecode.op.options import AttentionOptions, resolve_grid
from ttnn_flashdecode.op.plan import DEFAULT_ARCH, Target, plan_call, program_for
from ttnn_flashdecode.op.program_factory import Addresses, operand_accessor_args, set_addresses, work_table
from ttnn_flashdecode.op.shape import DecodeShape
from ttnn_flashdecode.op.validate import Inputs, height_sharded_l1

__all__ = ["run_on_emulator"]


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


def _operand_pages(operands: Operands, inputs: Inputs, options: AttentionOptions) -> dict[str, np.ndarray]:
    """Every operand the call brings, by :data:`~ttnn_flashdecode.op.program_factory.OPERANDS` name,
    as the pages the emulator holds (the output zeroed, the LSE poisoned: every value is written)."""
    shape = inputs.shape
    q_np = to_numpy(operands.q)
    q_pages = tiles.to_tile_bytes(_heads_padded(q_np, shape) if shape.q_layout == "rows" else q_np)
    if shape.kv_dtype == "bfloat16":
        k_pages, v_pages = (tiles.to_tile_bytes(to_numpy(t)) for t in (operands.k, operands.v))
    else:  # the tensors' own packed pages (ttnn's host packing)
        k_pages, v_pages = (tiles.to_block_float_tile_bytes(t, shape.kv_dtype) for t in (operands.k, operands.v))
    if isinstance(inputs.sink, PerDeviceSinks):
        raise ValueError("attention_sink: per-device sinks (a sink tensor sharded over a mesh) need a mesh: Q, K, V "
                         "on that mesh, or host multi-device tensors")
    pages = {"q": q_pages, "k": k_pages, "v": v_pages, "constants": _constant_pages(shape.head_dim, options.scale,
                                                                                    inputs.sink),
             "out": np.zeros_like(q_pages), "positions": _positions_page(inputs.positions)[None]}
    if shape.paged:  # one page per user: its row
        pages["page_table"] = inputs.page_table.astype("<i4")
    if inputs.mask is not None:  # [mask_users, 1, n_q_heads, capacity] in tiles
        pages["mask"] = tiles.to_tile_bytes(inputs.mask[:, None])
    if inputs.sparse is not None:  # int32 ROW_MAJOR, a page per list (the MASK operand's slot): user-major
        pages["mask"] = inputs.sparse.values.reshape(-1, inputs.sparse.k)
    if shape.lse:  # float32 ROW_MAJOR, a page of n_q_heads values per output row
        pages["lse"] = np.full((shape.lse_shape[-2], shape.n_q_heads), np.nan, dtype="<f4")
    if inputs.append is not None:  # the fused append's new rows (op/append.py)
        pages |= append.append_pages(inputs.append)
    return pages


def _accessor_args(emu, pages: dict, shards: dict) -> tuple:
    """The operands' TensorAccessorArgs from their page sizes and shard specs (not their addresses)."""
    from ttnn_flashdecode.emulator import sharded_tensor_accessor_compile_time_args

    def args(name: str) -> list[int]:
        page_bytes = pages[name].nbytes // len(pages[name])
        if shards.get(name) is not None:
            banks, shard_pages = shards[name]
            return sharded_tensor_accessor_compile_time_args(page_bytes, [len(pages[name])], [shard_pages],
                                                             [emu.worker_core_from_logical_core(*c) for c in banks])
        alignment = emu.spec.dram_alignment
        return [2, -(-page_bytes // alignment) * alignment]  # DRAM interleaved (ttnn's IsDram args)

    named = ["q", "k", "v", "constants", "out", "positions"]
    ordered = _accessor_operands(named, "page_table" if "page_table" in pages else None,
                                 "mask" if "mask" in pages else None)
    lists = operand_accessor_args([args(name) for name in ordered])
    return lists[:-2] + (tuple(args("append")),) * 2 if "append" in pages else lists  # APPEND_V's: APPEND's


class _Buffers(contextlib.ExitStack):
    """The call's emulated buffers by operand name, freed on exit."""

    def __init__(self, emu):
        super().__init__()
        self.emu, self.by_name, self.shard_pages = emu, {}, {}

    def put(self, name: str, pages: np.ndarray, shards=None) -> None:
        emu = self.emu
        page_bytes = pages.nbytes // len(pages)
        if shards is None:
            buffer = emu.allocate_dram(len(pages), page_bytes)
            self.callback(emu.free, buffer)
            emu.write_pages(buffer, pages)
        else:
            banks, shard_pages = shards
            count = -(-len(pages) // shard_pages)
            buffer = emu.allocate_l1_sharded(banks, -(-count // len(banks)) * shard_pages, page_bytes)
            self.callback(emu.free_l1, buffer)
            for bank in range(min(len(banks), count)):  # shard s in bank s % banks, slot s // banks (round robin)
                emu.write_l1_bank(buffer, bank, np.concatenate([pages[s * shard_pages:(s + 1) * shard_pages]
                                                                for s in range(bank, count, len(banks))]))
            self.shard_pages[name] = shard_pages
        self.by_name[name] = buffer

    def address(self, name: str) -> int:
        return self.by_name[name].address if name in self.by_name else 0

    def read(self, name: str, num_pages: int) -> np.ndarray:
        buffer = self.by_name[name]
        if name not in self.shard_pages:
            return self.emu.read_pages(buffer)
        size = self.shard_pages[name] * buffer.page_bytes
        banks = buffer.banks
        shards = [self.emu.peek_l1(banks[s % len(banks)], buffer.address + s // len(banks) * size, size)
                  for s in range(-(-num_pages // self.shard_pages[name]))]
        return np.concatenate(shards)[:num_pages * buffer.page_bytes].reshape(num_pages, buffer.page_bytes)


def run_on_emulator(operands: Operands, inputs: Inputs, options: AttentionOptions):
    """Plan the call, then run it on the emulated device; returns the output (and the LSE) in the
    kind of Q: a numpy array of Q's dtype, or a host ``ttnn.Tensor`` in Q's layout (TILE for TILE,
    as ttnn's op returns)."""
    _last_report.value = None
    shape = inputs.shape
    emu = _emulator(DEFAULT_ARCH)
    pages = _operand_pages(operands, inputs, options)
    q = operands.q
    shards = {"q": _height_shards(q.memory_config() if isinstance(q, ttnn.Tensor) else None, shape,
                                  len(pages["q"]), emu.grid, "q"),
              "out": _height_shards(options.memory_config, shape, len(pages["q"]), emu.grid, "memory_config")}
    target = Target(DEFAULT_ARCH, resolve_grid(options.grid, tuple(emu.grid)), _accessor_args(emu, pages, shards),
                    emu.worker_core_from_logical_core)
    plan = plan_call(shape, options, target)
    pages["work"] = work_table(plan)
    with _Buffers(emu) as buffers:
        for name, operand_pages in pages.items():
            buffers.put(name, operand_pages, shards.get(name))
        addresses = Addresses(*(buffers.address(name) for name in ("q", "k", "v", "constants", "out", "positions")),
                              page_table=buffers.address("page_table"), mask=buffers.address("mask"),
                              work=buffers.address("work"), lse=buffers.address("lse"),
                              append=buffers.address("append"), append_v=buffers.address("append_v"))
        program = program_for(plan)
        with _launch_lock:
            set_addresses(program, addresses)
            report = emu.run(program, timeout_s=emulator_deadline(shape))
        report.plan = plan
        result = tiles.from_tile_bytes(buffers.read("out", len(pages["q"])), shape.q_tiled_shape)
        lse = None if not shape.lse else \
            np.ascontiguousarray(buffers.read("lse", 0)).view("<f4").reshape(shape.lse_shape).astype(np.float32)
        if inputs.append is not None:  # the rows the kernels wrote, into the caller's cache
            append.write_back(operands, inputs, buffers.read("k", 0), None if shape.values_from_keys else buffers.read("v", 0))
    _last_report.value = report
    return _in_q_kind(result, lse, operands.q, inputs)


def _in_q_kind(result: np.ndarray, lse, q, inputs: Inputs):
    """The emulator's tiled output as Q's kind and shape: numpy of Q's dtype, or a host tensor in Q's layout."""
    shape = inputs.shape
    if shape.q_layout == "rows":
        result = _heads_unpadded(result[:, :, :shape.q_height], shape)
    else:
        result = result[:, :, :shape.n_q_heads, :shape.head_dim]
    if inputs.kind == "host":
        layout = q.layout if isinstance(q, ttnn.Tensor) else ttnn.ROW_MAJOR_LAYOUT
        out = ttnn.Tensor(np.ascontiguousarray(result, dtype=np.float32), ttnn.bfloat16, layout=layout)
        return out if lse is None else (out, ttnn.Tensor(lse, ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT))
    out = result.astype(q.dtype)  # a numpy Q here: host tensors took the branch above
    return out if lse is None else (out, lse)
