"""Host emulator for the project's TT-Metalium kernels (no Tenstorrent card needed).

It compiles the exact kernel sources with the host ``g++`` against a host implementation of the
TT-Metalium kernel API subset they use (same include paths, names and signatures as the installed
ttnn 0.81.1 headers) and runs a ``ttnn.ProgramDescriptor`` as a card would: one emulated Tensix
core per logical core in the program, its reader, writer and compute kernels as threads, all
cores at once.

What it models
--------------
- **Circular buffers** with tt-metal semantics (TT_FACTS §2): page size and count, uint16
  ``tiles_received``/``tiles_acked`` counters, read/write pointers that wrap only at the end,
  blocking reserve/wait on real counts. As on silicon, each kernel sees its own copy of a CB's
  pointers (``get_write_ptr``/``get_read_ptr`` move only with that kernel's own pushes/pops). Placed in an emulated L1 of the arch's real size
  (``MEM_L1_SIZE``) from the unreserved base upward, at the addresses tt-metal's program would
  give them (CB i of a descriptor: max over its cores of the current top, in descriptor order).
- **DRAM-interleaved buffers** in 12 (Wormhole B0) or 8 (Blackhole) banks: page i in bank
  ``i % NB`` at ``(i // NB) * align(page, DRAM_ALIGNMENT) + address`` (+ the bank's DRAM offset
  in the NoC address); the buffer's address is the same in every bank.
- **The NoC**: addresses encode ``(y << 42) | (x << 36) | addr`` with the soc descriptor's NoC-0
  coordinates (DRAM banks at their worker endpoints; Tensix cores at the functional-worker
  coordinates, see ``Emulator.worker_core_from_logical_core``); byte counts per core (DRAM vs
  L1-to-L1).
- **NoC ordering**: a transfer's data lands at the barrier that covers it, the latest moment
  tt-metal allows, not at issue. ``noc_async_read`` fills its destination with a poison
  (``Emulator.in_flight_poison``, 0xFFAD in every 16-bit half: NaN as bf16 and as fp32) at issue
  and copies the source at the issuing kernel's ``noc_async_read_barrier`` (or
  ``noc_async_full_barrier``); ``noc_async_write`` leaves
  its destination's old bytes until ``noc_async_write_barrier`` or ``noc_async_writes_flushed``.
  Each core keeps the L1 ranges that transfers in flight touch (any issuing kernel: destinations
  being filled, sources being read), and the checks below report any use of them. Only when every
  live kernel is blocked does everything in flight land early (on silicon it arrives eventually),
  so waiting on one's own un-barriered write is not a deadlock; the transfer still counts as
  un-barriered. Semaphore signals (``noc_semaphore_inc``, ``noc_semaphore_set``,
  ``noc_semaphore_set_remote``) act at issue, the earliest moment, and are not tracked by the
  barriers. ``Emulator.peek_l1`` shows what a run left in L1 (e.g. poison after a failed run).
- **Uninitialised L1**: every launch (every :meth:`Emulator.run`) fills each core's whole L1, CB
  space and firmware region included, with ``Emulator.l1_poison`` (0xFFC1 in every 16-bit half:
  NaN as bf16 and as fp32, over 4e9 as a uint32) before the kernels start; only the configured
  semaphores' initial values are written over it (runtime args are not in L1 here). On a card L1
  holds whatever earlier programs left, so a kernel that reads a CB page or an L1 word it never
  wrote sees NaN here, whatever the earlier runs or the test order. The pattern differs from the
  in-flight poison above, so an ``Emulator.peek_l1`` dump tells "never written" from "read not
  landed yet"; both are defined in one place, ``kL1Poison`` / ``kInFlightPoison`` in
  ``src/runtime.cpp``. ``Emulator(poison_l1=False)`` zeroes L1 at every launch instead (to check
  whether a failure is an uninitialised read).
- **Semaphores** (SemaphoreDescriptor): 16-byte slots from the start of the kernel-config region
  (``align(MEM_MAP_END, L1_ALIGNMENT)``; the real firmware puts them somewhere inside that region).
- **Args**: per-core runtime args and common runtime args, compile-time args and named
  compile-time args as the JIT passes them.
- **Profiler zones** (``DeviceZoneScopedN``): counted per core and name, with the compute API
  calls made inside each (charged to the innermost zone).

Checks (each error names the core, the kernel, the CB or address and the counts)
---------------------------------------------------------------------------------
CBs over-allocating L1; reading CB bytes not waited for / writing CB bytes not reserved (compute
PageRefs, NoC reads into and writes out of CB regions, also remote ones); pushing more than
reserved, popping more than waited; a reserve/wait that would run past the CB's end before the
pointer wraps; two kernels pushing (or popping) one CB; NoC addresses outside every DRAM buffer,
outside L1, or in the firmware region of L1; runtime args read past their count; unknown semaphore
ids. **NoC ordering** (each error names the accessing core and kernel, the L1 range, and the
transfer in flight: its number, issuing kernel, size and NoC source and destination): touching a
destination still in flight -- a NoC read's source or destination, a NoC write's source or
destination, a CB push or pop, a local semaphore write over L1 an un-barriered read is filling
or an un-flushed write is writing (so pushing a page an un-barriered read filled, or a local
copy out of a landing page before its barrier); modifying or freeing a source still in flight --
a NoC read into, a NoC write into, or a CB pop of L1 an un-barriered read is reading or an
un-flushed write is sending from; a semaphore signal while the signalling kernel has an
un-flushed ``noc_async_write`` (tt-metal's idiom is write, ``noc_async_writes_flushed`` or
``noc_async_write_barrier``, signal; the NoC ISA orders a write before a later atomic only once
acked, i.e. after the barrier, which the project's kernels use) or an un-barriered read from the
signalled core's L1 (the signal may let it reuse the source); ``kernel_main`` returning with
transfers in flight. DRAM ranges are not tracked (no kernel here reads DRAM another writes). **Watchdog**: when every live kernel is blocked and
no wait can be satisfied, the run ends with :class:`DeadlockError` listing each blocked kernel,
its core, the CB (received, acked, requested, page count) or semaphore; a wall-clock timeout is the
backstop.

What it does not model
----------------------
Timing (no cycle counts), NoC contention, the order in which transfers between two barriers land
(all land at the barrier, in issue order), noc_async_atomic_barrier (atomics act at issue),
multicast, transaction ids, sharded or
L1-interleaved tensors, the 16-byte TRISC CB pointer units, L1 buffers besides CBs, the NoCs' routes
and coordinates (both NoCs address a core or bank alike), dispatch. The two NoCs are modelled as
tt-metal's barriers see them: each data-movement kernel has its config's NoC and mode (the build
defines ``NOC_INDEX`` and ``NOC_MODE``); in DM_DEDICATED_NOC a kernel may use only its own NoC, in
DM_DYNAMIC_NOC either (both kernels of a core in one mode); a barrier covers only the transfers on
the NoC it names; :class:`CoreStats` counts read requests and bytes per NoC. **Kernels must touch L1 only through the
API** (NoC calls, semaphore calls, the compute engine): L1 addresses are real L1 byte addresses,
not host pointers, so dereferencing one (``*(uint32_t*)get_write_ptr(cb)``) crashes.
``get_tile_size``/``get_dataformat`` are runtime functions, not ``constexpr``.

Supported dataflow API (``api/dataflow/dataflow_api.h``, ``api/tensor/*``, ``api/compile_time_args.h``)
------------------------------------------------------------------------------------------------------
``void kernel_main()``; ``get_compile_time_arg_val(i)``, ``get_named_compile_time_arg_val("name")``;
``get_arg_val<T>(i)``, ``get_common_arg_val<T>(i)``, ``get_arg_addr``, ``get_common_arg_addr``;
``get_absolute_logical_x/y``, ``get_relative_logical_x/y``;
``cb_reserve_back``, ``cb_push_back``, ``cb_wait_front``, ``cb_pop_front``,
``cb_pages_reservable_at_back``, ``cb_pages_available_at_front``, ``get_write_ptr``,
``get_read_ptr``, ``get_tile_size``, ``get_tile_hw``, ``get_tile_num_faces``, ``get_dataformat``;
``CircularBuffer(cb).{reserve_back, push_back, wait_front, pop_front, get_write_ptr, get_read_ptr,
get_tile_size, pages_reservable_at_back, pages_available_at_front}`` (``api/dataflow/circular_buffer.h``);
``get_noc_addr(x, y, addr)``, ``get_noc_addr(addr)``, ``get_noc_addr_from_bank_id<true>``;
``noc_async_read``, ``noc_async_write``, ``noc_async_read_barrier``, ``noc_async_write_barrier``,
``noc_async_writes_flushed``, ``noc_async_atomic_barrier``, ``noc_async_full_barrier``;
``noc_async_read_page``, ``noc_async_write_page``, ``noc_async_read_tile``, ``noc_async_write_tile``
(with a ``TensorAccessor`` or ``InterleavedAddrGen<true>``);
``TensorAccessorArgs<CTA_OFFSET>()`` (DRAM interleaved, CTAs ``[2, aligned_page_size]``, or L1
sharded with every field compile-time, CTAs as :func:`sharded_tensor_accessor_compile_time_args`;
L1-interleaved and runtime-field configs fail with ``static_assert``), ``.next_compile_time_args_offset()``,
``TensorAccessor(args, base_addr, page_size)``, ``.get_noc_addr(page_id, offset=0)``,
``.get_aligned_page_size()``;
``get_semaphore(id)``, ``noc_semaphore_set``, ``noc_semaphore_wait``, ``noc_semaphore_wait_min``,
``noc_semaphore_inc``, ``noc_semaphore_set_remote``;
``DeviceZoneScopedN(name)`` (``api/debug/kernel_profiler.hpp``); ``DPRINT("fmt {}\\n", args...)``
(``api/debug/dprint.h``, to ``RunReport.log``); ``ASSERT(cond)`` (``api/debug/assert.h``, always
checked, fails the run).

Build defines: ``KERNEL_COMPILE_TIME_ARGS``, ``KERNEL_COMPILE_TIME_ARG_MAP`` (generated header),
the descriptor's defines, ``COMPILE_FOR_NCRISC`` (reader) / ``COMPILE_FOR_BRISC`` (writer) /
``COMPILE_FOR_TRISC=1`` (compute, one build for all three TRISCs), ``NUM_DRAM_BANKS``,
``IS_NOT_POW2_NUM_DRAM_BANKS`` or ``LOG_BASE_2_OF_NUM_DRAM_BANKS``, ``ARCH_WORMHOLE`` /
``ARCH_BLACKHOLE``, ``NOC_MAX_BURST_SIZE``, ``L1_ALIGNMENT``, ``DRAM_ALIGNMENT``, ``TT_EMULATOR``.
Compute kernels also get ``constexpr bool DST_ACCUM_MODE``, ``#define DST_SYNC_MODE
DstSync::Sync{Half,Full}``, ``#define MATH_FIDELITY static_cast<ckernel::MathFidelity>(n)``,
``constexpr bool APPROX`` and the raw ``EMU_MATH_FIDELITY``, ``EMU_DST_ACCUM_MODE``,
``EMU_DST_FULL_SYNC``, ``EMU_APPROX``. ``api/dataflow/dataflow_api.h`` ``#error``s in a TRISC build.

Supported compute API
---------------------
.. compute-engine section (owned by the compute engine: src/compute_engine.cpp, api/compute/*)

The compute kernel runs as ONE host thread: each call does its UNPACK, MATH and PACK parts in
program order (the three TRISCs are serialised). Names and signatures are the installed 0.81
headers' (``tests/emulator/test_api_conformance.py`` checks them). Every call is counted in
``CoreStats.calls``.

``compute_kernel_hw_startup<SrcOrder>(icb0, icb1, ocb)`` and ``(icb, ocb)``;
``tile_regs_acquire/commit/wait/release``, ``acquire_dst``/``release_dst`` (deprecated);
``cb_wait_front``, ``cb_pop_front``, ``cb_reserve_back``, ``cb_push_back``;
``copy_init``, ``copy_tile`` (``copy_tile_init``, ``unary_op_init_common``, ``init_sfpu``: deprecated);
``matmul_init``, ``matmul_tiles``, ``matmul_block_init``, ``matmul_block``;
``reduce_init<PoolType::MAX|SUM, ReduceDim::REDUCE_ROW>``, ``reduce_tile<..>``, ``reduce_uninit``;
``{add,sub,mul}_init``, ``{add,sub,mul}_tiles``; ``{add,sub,mul}_reuse_dest_init<EltwiseBinaryReuseDestType>``,
``{add,sub,mul}_reuse_dest_tiles<..>``; ``{add,sub,mul}_bcast_cols_init``, ``{add,sub,mul}_tiles_bcast_cols``,
``{add,sub,mul}_bcast_scalar_init``, ``{add,sub,mul}_tiles_bcast_scalar``;
``exp_tile_init<approx, scale, InputClamping>``, ``exp_tile<..>(idst, VectorMode, scale)``;
``recip_tile_init<ReciprocalDestAcc, ReciprocalApproxMode>``, ``recip_tile<..>(idst, VectorMode)``;
``binary_max_tile_init``, ``binary_max_tile(i0, i1, out, VectorMode)`` (VectorMode RC, R, C);
``tanh_tile_init<false>``, ``tanh_tile<false>``; ``binop_with_scalar_tile_init``, ``mul_unary_tile``;
``log_tile_init<false>``, ``log_tile<false>(idst)`` (log in double rounded to fp32; log(0) = -inf);
``add_binary_tile_init``, ``add_binary_tile(i0, i1, out)`` (one fp32 add); ``mul_binary_tile_init``,
``mul_binary_tile(i0, i1, out)`` (one fp32 multiply); ``unary_bcast_init<BroadcastType::COL>(cb)``,
``unary_bcast<BroadcastType::COL>(cb, tile, dst)`` (column 0 across the row, through SrcB, no
multiply), ``unary_bcast_uninit<BroadcastType::COL>(cb)``;
``pack_tile<out_of_order>(idst, cb, index)``; ``reconfig_data_format<SrcOrder>`` (2- and 4-operand),
``reconfig_data_format_srca/srcb`` (1- and 2-operand), ``pack_reconfig_data_format`` (1 and 2).
CB formats: Float16_b and Float32 (in and out), Bfp8_b and Bfp4_b (input only; from a
``ttnn.bfloat8_b`` / ``ttnn.bfloat4_b`` CBFormatDescriptor, tt::DataFormat codes 6 and 7). Other
codes (e.g. Int32) reach dataflow kernels unchanged but the compute engine refuses them. Anything
else fails to compile or fails at run time naming what is unsupported (row broadcast,
REDUCE_COL/SCALAR, AVG/MIN, transposing copy, pack to Bfp8_b/Bfp4_b, is_fp32_dest_acc_en
template != DST_ACCUM_MODE).

Checks (each message names the call, the CBs and what the engine is configured for):
any call before ``compute_kernel_hw_startup`` or a second startup; compile-time DST_ACCUM_MODE /
DST_SYNC_MODE / MATH_FIDELITY / APPROX differing from the ComputeConfigDescriptor; the DST
handshake order (math outside acquire..commit, pack outside wait..release, double acquire/wait,
wait with nothing committed, acquire with no free section); DST indices over the per-acquire
capacity (SyncHalf 8 tiles, 4 with fp32_dest_acc_en; SyncFull 16 / 8); every FPU op needs its
matching init since the engine was last configured for anything else, for the same CBs and
transpose / ct,rt,kt / pool / reduce dim / broadcast / reuse type; an FPU init after
``reduce_init`` without ``reduce_uninit`` (packer edge masks still set); SFPU ops need their init
since the last *different* SFPU init (SFPU inits overwrite the shared programmable constants;
FPU inits do not touch the SFPU's ADDR_MOD_6/7 or constants, so they keep it); every unpack /
pack checks the CB's format against the format the SrcA / SrcB unpacker or the packer is
configured for (``compute_kernel_hw_startup`` and the reconfig calls; the inits do NOT reconfigure
formats -- in 0.81 ``state_configure`` is a no-op unless the debug sentinel is compiled in; a
2-operand reconfig whose old and new CBs share a format changes nothing, as in the LLK); a
reduce scaler tile not in tt-metal's layout (``prepare_reduce_scaler``: row 0 of each face = the
scaler, else 0); ``kernel_main`` returning with a DST section held (when the runtime calls
``emu::compute::compute_thread_end``).

Numerics model: DST holds bf16 (fp32 with fp32_dest_acc_en); release clears the section
(FPU/packer read 0, MAX reduce reads -inf). Unpack: Float32 CB data enters SrcA/SrcB truncated
to TF32 (fp32 DST) or BF16 (bf16 DST) -- also for ``copy_tile`` (unpack-to-dest is not modelled);
bf16/Bfp8_b/Bfp4_b are exact. Block-float data become BF16 as the hardware unpacker does (isa
FloatBitPatterns.md "Conversion routines"): magnitude 0 is +0 whatever the exponent, sign with
magnitude 0 is 0xff80, and the normalising shift wraps the exponent mod 256; ttnn's packer emits
neither of the last two, so its pages decode to exactly what ``ttnn.Tensor.to_numpy()`` gives
(TT_FACTS §1). FPU results are rounded to nearest even into DST: matmul once per 16-wide K half
(face), reduce SUM once per 16-column half, eltwise once. Products are formed per
math-fidelity phase (isa SrcASrcB.md: SrcA 1+4 / +5 mantissa bits with its LSB ignored, SrcB
1+6 / rest; LoFi, HiFi2, HiFi3, HiFi4 = 1..4 phases) and summed exactly. matmul: in0 -> SrcB,
in1 -> SrcA. MAX reduce: GMPOOL scaling by the scaler's exponent only (a zero scaler datum
masks), fp32 DST read/written as TF32. ELWMUL ignores ``acc_to_dest`` (as the LLK does). SFPU
(exp, recip, max) computes in float; results written to a bf16 DST are truncated toward zero
with denormals flushed (isa SFPSTORE). Pack: fp32 exact; bf16 round-to-nearest-even; the REDUCE_ROW
packer mask keeps column 0 only.

Known differences from silicon:
- Packer fp32 -> bf16 rounds to nearest EVEN here; silicon rounds to nearest, ties AWAY from zero
  (isa Packers/FormatConversion.md). Results can differ by 1 bf16 ulp on exact ties.
- exp (approx=false) and 1/x are exact libm (rounded to float); silicon uses polynomial / Newton
  approximations. exp underflow flushes to 0.
- exp with approx=true is the LLK's own approximation (``ckernel_sfpu_exp.h``, Schraudolph: one fp32
  multiply-add, a round to a 16-bit integer, a shift into the exponent field; 8 mantissa bits,
  relative error about -4% .. +3%), modelled per the isa's SFPMAD / SFPSTOCHRND / SFPSTORE functional
  models (``emu::compute::exp_approx_llk``). SFPMAD is modelled as a fully fused FMA; the hardware's
  partial fusion can differ in the last bit of the sum, which moves a result by one step of the
  integer only when the sum sits within that bit of a rounding tie. Denormal results (x < ~-87.3)
  are flushed (the FPU reads them as 0).
- FPU accumulation: one rounding per K-half/column-half with exact partial sums; silicon rounds
  per fidelity phase / instruction, so bf16-DST results can differ by ~1 ulp.
- FP32 -> BF16 unpack (bf16 DST) is modelled as truncation [unverified].
- Unpacked BF16 bit patterns are read as IEEE: exponent 255 is +-inf/NaN here, +-(1+m)*2^128 to
  the FPU; exponent 0 with a mantissa is a denormal here, 0 to the FPU (isa FloatBitPatterns.md).
  Block-float data hit this only in a row with exponent 255 (ttnn packs a row holding inf/NaN
  so), a sign-only datum (0x80) or an exponent wrap.
- ComputeConfigDescriptor.unpack_to_dest_mode is not modelled (Float32 copy_tile goes via TF32).
- Timing, the TRISC overlap, the SFPU's 32-lane layout and DST bank swapping are not modelled.
- Operand routing of reduce SUM (scaler -> SrcA) follows 0.81's state_configure ordering.

Example::

    emu = Emulator(arch="wormhole_b0")
    buf = emu.allocate_dram(num_pages=64, page_bytes=2048)
    emu.write_pages(buf, data)
    report = emu.run(program_descriptor)
    out = emu.read_pages(buf)
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .arch import ArchSpec
from .build import (
    ROLE_COMPUTE,
    ROLE_READER,
    ROLE_WRITER,
    BuildError,
    KernelBuild,
    build_kernels,
    load_runtime,
)

__all__ = [
    "ArchSpec",
    "BuildError",
    "CBConfig",
    "CoreStats",
    "DeadlockError",
    "DramBuffer",
    "Emulator",
    "EmulatorError",
    "L1ShardedBuffer",
    "RunReport",
    "TT_DATA_FORMATS",
    "sharded_tensor_accessor_compile_time_args",
    "tensor_accessor_compile_time_args",
]

#: First DRAM address the emulator's allocator hands out in each bank (a zero address is
#: refused as "outside every buffer", which catches unset address arguments).
DRAM_BASE_ADDRESS = 0x100000


class EmulatorError(RuntimeError):
    """A kernel or program error found by the emulator; the message is the runtime's."""


class DeadlockError(EmulatorError):
    """The watchdog ended the run: no kernel could make progress (or the wall-clock limit passed).

    The message lists every blocked kernel with its core, the CB (received, acked, requested,
    page count) or semaphore it waits on.
    """


@dataclasses.dataclass(frozen=True)
class DramBuffer:
    """A DRAM-interleaved buffer: ``num_pages`` pages of ``page_bytes`` bytes at ``address`` in every bank.

    ``aligned_page_bytes`` = ``align(page_bytes, DRAM_ALIGNMENT)``, the per-bank stride.
    """

    address: int
    page_bytes: int
    num_pages: int
    aligned_page_bytes: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes of data (num_pages * page_bytes)."""
        return self.num_pages * self.page_bytes


def tensor_accessor_compile_time_args(buf: DramBuffer) -> list[int]:
    """Compile-time args of ``TensorAccessorArgs`` for a DRAM-interleaved buffer: ``[2, aligned_page_bytes]``.

    Same as ``ttnn.TensorAccessorArgs(t).get_compile_time_args()`` for a DRAM-interleaved tensor
    (ArgConfig IsDram = 2; no common runtime args).
    """
    return [2, buf.aligned_page_bytes or buf.page_bytes]


@dataclasses.dataclass
class L1ShardedBuffer:
    """A sharded L1 buffer: ``pages_per_bank`` pages of ``page_bytes`` bytes at ``address`` in the
    L1 of each bank core (``banks``: logical cores in bank order), as a sharded tensor's buffer.
    ``data`` holds each bank's bytes (what :meth:`Emulator.write_l1_bank` last wrote)."""

    address: int
    page_bytes: int
    banks: tuple[tuple[int, int], ...]
    pages_per_bank: int
    data: dict = dataclasses.field(default_factory=dict)

    @property
    def bank_bytes(self) -> int:
        """Bytes the buffer takes in each bank core's L1."""
        return self.pages_per_bank * self.page_bytes


def sharded_tensor_accessor_compile_time_args(page_bytes: int, tensor_pages: Sequence[int], shard_pages: Sequence[int],
                                              bank_noc_xy: Sequence[tuple[int, int]],
                                              shard_contiguous: bool = False) -> list[int]:
    """Compile-time args of ``TensorAccessorArgs`` for an L1-sharded tensor, every field static:
    ``[Sharded (1), page_bytes, rank, banks (bit 31: shard-contiguous), *tensor_pages,
    *shard_pages, bank coordinates two to a word]`` (bank ``2i`` in the low half; a half is
    ``x << 8 | y``, NoC-0 coordinates). ``tensor_pages`` and ``shard_pages``: the tensor's and one
    shard's shape in pages, outermost first (height sharding: rank 1, ``[pages]`` and
    ``[pages per shard]``). What ``ttnn.TensorAccessorArgs(t).get_compile_time_args()`` gives for
    such a tensor on a device (pinned by tests/emulator/test_emulator_sharded.py).

    Raises:
        ValueError: ranks differ or are 0, a shape entry is not positive, no banks, or a coordinate
            does not fit a byte.
    """
    if len(tensor_pages) != len(shard_pages) or not tensor_pages:
        raise ValueError(f"tensor_pages {list(tensor_pages)} and shard_pages {list(shard_pages)}: expected one rank >= 1")
    if min(*tensor_pages, *shard_pages) < 1 or not bank_noc_xy:
        raise ValueError("expected positive shapes and at least one bank")
    halves = []
    for x, y in bank_noc_xy:
        if not (0 <= x < 256 and 0 <= y < 256):
            raise ValueError(f"bank NoC coordinate {(x, y)} does not fit a byte each")
        halves.append(x << 8 | y)
    halves += [0] * (len(halves) % 2)
    coords = [halves[i] | halves[i + 1] << 16 for i in range(0, len(halves), 2)]
    banks = len(bank_noc_xy) | (1 << 31 if shard_contiguous else 0)
    return [1, int(page_bytes), len(tensor_pages), banks, *map(int, tensor_pages), *map(int, shard_pages), *coords]


@dataclasses.dataclass
class CoreStats:
    """Per-core (or total) counters of one run. Bytes are NoC payload bytes."""

    dram_read_bytes: int = 0  #: bytes read from DRAM
    dram_write_bytes: int = 0  #: bytes written to DRAM
    l1_read_bytes: int = 0  #: bytes read from L1 (any core, via the NoC)
    l1_write_bytes: int = 0  #: bytes written to L1 of any core via the NoC (semaphore incs count 4)
    calls: dict[str, int] = dataclasses.field(default_factory=dict)  #: API name -> calls
    zones: dict[str, int] = dataclasses.field(default_factory=dict)  #: DeviceZoneScopedN name -> entries
    #: ``"zone/api"`` -> compute API calls (``cb_*`` excluded) made with that DeviceZoneScopedN as
    #: the innermost open zone
    zone_calls: dict[str, int] = dataclasses.field(default_factory=dict)
    #: engine work by kind: ``"sfpu_faces/<api>"`` 16x16 faces an SFPU API computed (4 a call in
    #: ``VectorMode::RC``, 2 in ``R``); ``"sfpu_iterations/<api>"`` the 32-datum SFPU iterations it ran
    #: over those faces (8 a face for the whole face, 2 per 4 live rows); ``"reconfig/<unit>"`` (``srca``, ``srcb``, ``pack``) data-format
    #: reconfigurations that reprogram the unit (a call without an old operand, or whose old and new
    #: formats differ; the LLK skips the rest)
    work: dict[str, int] = dataclasses.field(default_factory=dict)

    #: NoC (0, 1) -> read requests issued on it (one per ``noc_async_read*`` call);
    #: ``noc_read_request_bytes`` their bytes, ``noc_write_requests`` the writes'; ``zone_noc_reads``: ``"zone/noc"`` -> read
    #: requests issued with that DeviceZoneScopedN as the innermost open zone; ``dram_bank_noc_reads``:
    #: ``"bank/noc"`` -> DRAM read requests to that bank on that NoC; ``zone_noc_write_bytes``:
    #: ``"zone/noc"`` -> bytes written on that NoC with that zone innermost
    noc_read_requests: dict[int, int] = dataclasses.field(default_factory=dict)
    noc_read_request_bytes: dict[int, int] = dataclasses.field(default_factory=dict)
    noc_write_requests: dict[int, int] = dataclasses.field(default_factory=dict)
    zone_noc_reads: dict[str, int] = dataclasses.field(default_factory=dict)
    dram_bank_noc_reads: dict[str, int] = dataclasses.field(default_factory=dict)
    zone_noc_write_bytes: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def sfpu_faces(self) -> dict[str, int]:
        """SFPU API -> faces it computed."""
        return {k.split("/", 1)[1]: v for k, v in self.work.items() if k.startswith("sfpu_faces/")}

    @property
    def sfpu_iterations(self) -> dict[str, int]:
        """SFPU API -> 32-datum SFPU iterations it ran (8 per whole face)."""
        return {k.split("/", 1)[1]: v for k, v in self.work.items() if k.startswith("sfpu_iterations/")}

    @property
    def sfpu_face_ops(self) -> int:
        """Faces the SFPU computed, over every SFPU API call."""
        return sum(self.sfpu_faces.values())

    @property
    def format_reconfigs(self) -> dict[str, int]:
        """Unit (``srca``, ``srcb``, ``pack``) -> data-format reconfigurations that reprogrammed it."""
        return {k.split("/", 1)[1]: v for k, v in self.work.items() if k.startswith("reconfig/")}

    @property
    def noc_read_bytes(self) -> int:
        """All bytes read over the NoC (DRAM + L1)."""
        return self.dram_read_bytes + self.l1_read_bytes

    @property
    def noc_write_bytes(self) -> int:
        """All bytes written over the NoC (DRAM + L1)."""
        return self.dram_write_bytes + self.l1_write_bytes

    def _add(self, o: "CoreStats") -> None:
        self.dram_read_bytes += o.dram_read_bytes
        self.dram_write_bytes += o.dram_write_bytes
        self.l1_read_bytes += o.l1_read_bytes
        self.l1_write_bytes += o.l1_write_bytes
        for k, v in o.calls.items():
            self.calls[k] = self.calls.get(k, 0) + v
        for k, v in o.zones.items():
            self.zones[k] = self.zones.get(k, 0) + v
        for mine, theirs in ((self.zone_calls, o.zone_calls), (self.work, o.work), (self.noc_read_requests, o.noc_read_requests),
                             (self.noc_read_request_bytes, o.noc_read_request_bytes), (self.noc_write_requests, o.noc_write_requests),
                             (self.zone_noc_reads, o.zone_noc_reads), (self.dram_bank_noc_reads, o.dram_bank_noc_reads),
                             (self.zone_noc_write_bytes, o.zone_noc_write_bytes)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v


#: tt::DataFormat names by code (tt_metal tensix_types.h), for :attr:`CBConfig.data_format`.
TT_DATA_FORMATS = {
    0: "Float32", 1: "Float16", 2: "Bfp8", 3: "Bfp4", 4: "Tf32", 5: "Float16_b", 6: "Bfp8_b", 7: "Bfp4_b",
    8: "Int32", 9: "UInt16", 10: "Lf8", 11: "Bfp2", 14: "Int8", 15: "Bfp2_b", 24: "UInt32", 30: "UInt8",
}


@dataclasses.dataclass(frozen=True)
class CBConfig:
    """One circular buffer as a run configured it on one core (a row of :attr:`RunReport.cb_pages`)."""

    page_bytes: int  #: bytes per page: the CBFormatDescriptor's ``page_size``
    num_pages: int  #: pages in the CB: the CBDescriptor's ``total_size // page_bytes``
    #: the tt::DataFormat the kernels see (``get_dataformat``), by name: ``"Float16_b"`` for
    #: ``ttnn.bfloat16``, ``"Float32"``, ``"Bfp8_b"``, ``"Bfp4_b"``, ``"Int32"``, ... (``"DataFormat(n)"``
    #: for a code without a name)
    data_format: str
    address: int  #: L1 byte address of page 0 (CBs sharing a CBDescriptor share it)


@dataclasses.dataclass
class RunReport:
    """What one `Emulator.run` did: what the descriptor ran where, and what each core did.

    Kernels are named by their source file's stem (``"attention_reader"`` for
    ``kernels/attention_reader.cpp``), an inline (SOURCE_CODE) kernel as ``"inline#i"`` with ``i``
    its index in ``program.kernels``; when several kernel descriptors share a stem, each is named
    ``"stem#i"``. Cores are logical ``(x, y)``; the per-core tables cover the cores that ran a kernel.
    """

    cores: dict[tuple[int, int], CoreStats]  #: logical core (x, y) -> its counters
    wall_s: float  #: wall time of the kernel threads, seconds
    setup_s: float  #: host time before the threads started (descriptor reading, compiles), seconds
    log: list[str]  #: DPRINT lines, prefixed with core and kernel
    #: the descriptor's ``custom_program_hash`` (None when unset): what the program cache keys on
    program_hash: int | None = None
    #: sha256 (hex) of every kernel's runtime args on every core and its common runtime args, in
    #: descriptor order: equal digests and hashes mean two calls ran the same program with the same args
    runtime_args_sha256: str = ""
    #: kernel name -> the logical cores it ran on, sorted: ``kernel_cores["attention_reader"]``
    kernel_cores: dict[str, list[tuple[int, int]]] = dataclasses.field(default_factory=dict)
    #: core -> CB index -> its page size, page count, data format and L1 address:
    #: ``cb_pages[(0, 0)][0].page_bytes``
    cb_pages: dict[tuple[int, int], dict[int, CBConfig]] = dataclasses.field(default_factory=dict)
    #: core -> kernel name -> its compile-time args (``get_compile_time_arg_val``), in order
    compile_time_args: dict[tuple[int, int], dict[str, tuple[int, ...]]] = dataclasses.field(default_factory=dict)
    #: core -> kernel name -> its named compile-time args (``get_named_compile_time_arg_val``);
    #: ``{}`` for a kernel whose descriptor has none
    named_compile_time_args: dict[tuple[int, int], dict[str, dict[str, int]]] = dataclasses.field(
        default_factory=dict)
    #: what the launching code planned, attached by it after the run (``ttnn_flashdecode``'s
    #: ``attention()`` attaches its Plan: block size, split counts, cores); never read here
    plan: object = None

    @property
    def errors(self) -> list[str]:
        """DPRINT lines whose text starts with ``ERROR``: what a kernel found wrong but survived
        (e.g. a POSITIONS entry outside the cache, clamped), prefixed like :attr:`log`."""
        return [line for line in self.log if line.split(": ", 1)[-1].startswith("ERROR")]

    @property
    def cores_used(self) -> list[tuple[int, int]]:
        """Logical cores that ran at least one kernel."""
        return sorted(self.cores)

    @property
    def totals(self) -> CoreStats:
        """Sum over all cores."""
        t = CoreStats()
        for s in self.cores.values():
            t._add(s)
        return t

    @property
    def total_dram_read_bytes(self) -> int:
        """Bytes read from DRAM by all cores (``totals.dram_read_bytes``)."""
        return sum(s.dram_read_bytes for s in self.cores.values())

    @property
    def total_dram_write_bytes(self) -> int:
        """Bytes written to DRAM by all cores (``totals.dram_write_bytes``)."""
        return sum(s.dram_write_bytes for s in self.cores.values())


def runtime_args_digest(kernel_args: Sequence[tuple[Sequence[int], dict[tuple[int, int], Sequence[int]]]]) -> str:
    """sha256 (hex) over each kernel's common runtime args and its per-core runtime args (cores in
    row-major order), kernels in descriptor order (:attr:`RunReport.runtime_args_sha256`).

    ``kernel_args``: per kernel, ``(common args, {core: args})``, as ``Emulator.run`` reads them.
    """
    h = hashlib.sha256()
    for index, (common, per_core) in enumerate(kernel_args):
        h.update(f"kernel {index} common {list(common)}\n".encode())
        for x, y in sorted(per_core, key=lambda c: (c[1], c[0])):
            h.update(f"kernel {index} core {x},{y} {list(per_core[x, y])}\n".encode())
    return h.hexdigest()


def _role_of(cfg: Any) -> int:
    import ttnn

    if isinstance(cfg, ttnn.ReaderConfigDescriptor):
        return ROLE_READER
    if isinstance(cfg, ttnn.WriterConfigDescriptor):
        return ROLE_WRITER
    if isinstance(cfg, ttnn.ComputeConfigDescriptor):
        return ROLE_COMPUTE
    if isinstance(cfg, ttnn.DataMovementConfigDescriptor):
        proc = cfg.processor.value
        if proc == 1:
            return ROLE_READER  # RISCV_1 = NCRISC
        if proc == 0:
            return ROLE_WRITER  # RISCV_0 = BRISC
        raise EmulatorError(f"expected DataMovementConfigDescriptor.processor RISCV_0 or RISCV_1, got {cfg.processor}")
    raise EmulatorError(f"unsupported kernel config type {type(cfg).__name__}")


def _noc_of(cfg: Any, role: int) -> tuple[int, int]:
    """A data-movement kernel's ``(NOC_INDEX, NOC_MODE)``: ``ReaderConfigDescriptor`` and
    ``WriterConfigDescriptor`` as tt-metal's ``Reader/WriterDataMovementConfig`` (NoC 0 and NoC 1,
    the preferred DRAM read / write NoCs, DM_DEDICATED_NOC); a ``DataMovementConfigDescriptor``'s
    ``noc`` (``RISCV_0_default`` is 0, ``RISCV_1_default`` 1) and ``noc_mode``."""
    import ttnn

    if isinstance(cfg, ttnn.DataMovementConfigDescriptor):
        return int(cfg.noc.value), int(cfg.noc_mode.value)
    return (0 if role == ROLE_READER else 1), 0


def _check_noc_modes(per_core: dict) -> None:
    """tt-metal's rules for the two data-movement kernels of a core: one NoC mode for both
    ("KernelGroup must have the same noc mode for all kernels": dynamic mode shares the NoCs' barrier
    counters between them), and in DM_DEDICATED_NOC different NoCs (each owns its NoC)."""
    for core, d in per_core.items():
        dataflow = [(name, noc) for role, _, name, *_rest, noc in d["k"] if role != ROLE_COMPUTE]
        if len(dataflow) < 2:
            continue
        (a, (a_noc, a_mode)), (b, (b_noc, b_mode)) = dataflow
        if a_mode != b_mode:
            raise EmulatorError(f"core {core}: {a} has NOC_MODE {a_mode} and {b} {b_mode}: both data-movement kernels "
                                f"of a core need the same noc_mode (tt-metal: KernelGroup must have the same noc mode)")
        if a_mode == 0 and a_noc == b_noc:
            raise EmulatorError(f"core {core}: {a} and {b} are both DM_DEDICATED_NOC on NoC {a_noc}: in dedicated mode "
                                f"each data-movement kernel needs its own NoC")


_ROLE_NAMES = {ROLE_READER: "reader", ROLE_WRITER: "writer", ROLE_COMPUTE: "compute"}


def _cores_of(crs: Any) -> list[tuple[int, int]]:
    out = []
    for r in crs.ranges():
        for y in range(r.start.y, r.end.y + 1):
            for x in range(r.start.x, r.end.x + 1):
                out.append((x, y))
    return out


class Emulator:
    """An emulated device: DRAM, a grid of Tensix cores, and `run` for ProgramDescriptors.

    Parameters
    ----------
    arch : "wormhole_b0" | "blackhole"
        Architecture; its facts come from the installed ttnn (:class:`ArchSpec`).
    grid : (x, y) or None
        Logical compute grid in cores; default the arch's compute grid (8x8 on Wormhole n150,
        13x10 on an unharvested Blackhole p150). Programs may use only cores inside it.
    poison_l1 : bool
        True (default): every :meth:`run` fills each core's whole L1 with :attr:`l1_poison` before
        its kernels start, so a read of L1 no kernel wrote gives NaN, never an earlier run's data.
        False: every run zeroes L1 instead (to tell whether a failure comes from such a read).

    Attributes ``l1_poison`` and ``in_flight_poison`` are the 16-bit halves (0xFFC1, 0xFFAD) that
    fill uninitialised L1 and a NoC read's destination before it lands; each is NaN as a bf16 and,
    repeated, as an fp32 word.

    Raises ``ValueError`` for an unknown arch or a grid larger than the chip's worker grid, and
    :class:`BuildError` when the runtime library does not compile. Instances are independent
    (each has its own DRAM); runs on one instance are serialised.
    """

    def __init__(self, arch: str = "wormhole_b0", grid: tuple[int, int] | None = None,
                 poison_l1: bool = True) -> None:
        self.spec = ArchSpec.for_name(arch)
        self.arch = arch
        gx, gy = grid if grid is not None else self.spec.default_grid
        if not (0 < gx <= len(self.spec.worker_xs) and 0 < gy <= len(self.spec.worker_ys)):
            raise ValueError(
                f"expected a grid within {len(self.spec.worker_xs)}x{len(self.spec.worker_ys)}, got {gx}x{gy}"
            )
        self.grid = (int(gx), int(gy))
        self._lib = load_runtime()
        self.poison_l1 = bool(poison_l1)
        self.l1_poison: int = int(self._lib.emu_poison_half(0))  #: fills L1 at every launch
        self.in_flight_poison: int = int(self._lib.emu_poison_half(1))  #: a NoC read's destination until it lands
        s = self.spec
        words = [s.l1_bytes, s.kernel_config_base, s.unreserved_base, s.l1_alignment, s.dram_alignment,
                 32 if arch == "wormhole_b0" else 64, s.dram_view_bytes & 0xFFFFFFFF, s.dram_view_bytes >> 32,
                 s.dram_banks]
        for b in range(s.dram_banks):
            x, y = s.dram_bank_noc_xy[b]
            off = s.dram_bank_offset[b]
            words += [s.dram_bank_channel[b], x, y, off & 0xFFFFFFFF, off >> 32]
        words.append(len(s.dram_channel_noc_xy))
        for eps in s.dram_channel_noc_xy:
            words.append(len(eps))
            for x, y in eps:
                words += [x, y]
        words.append(int(self.poison_l1))
        arr = (ctypes.c_uint32 * len(words))(*words)
        h = self._lib.emu_configure(arr, len(words))
        if h < 0:
            raise EmulatorError(self._lib.emu_config_error().decode())
        self._h = h
        self._lock = threading.Lock()
        self._allocs: dict[int, int] = {}  # address -> bytes per bank
        self._l1_buffers: list[L1ShardedBuffer] = []  # top down from the end of L1
        self._dram_limit = min(s.dram_view_bytes, 1 << 32)

    def __del__(self) -> None:
        lib, h = getattr(self, "_lib", None), getattr(self, "_h", None)
        if lib is not None and h is not None:
            lib.emu_destroy(h)

    # ------------------------------------------------------------------ coordinates
    def worker_core_from_logical_core(self, x: int, y: int) -> tuple[int, int]:
        """NoC-0 (x, y) of logical core (x, y), as kernels need for ``get_noc_addr(x, y, addr)``."""
        return self.spec.worker_noc_xy(x, y)

    # ------------------------------------------------------------------ DRAM
    def allocate_dram(self, num_pages: int, page_bytes: int) -> DramBuffer:
        """Allocate a DRAM-interleaved buffer of ``num_pages`` pages of ``page_bytes`` bytes.

        The same address is used in every bank (first fit from ``DRAM_BASE_ADDRESS``); each bank
        holds ``ceil(num_pages / banks) * align(page_bytes, DRAM_ALIGNMENT)`` bytes. Contents
        start zeroed. Raises ``ValueError`` for non-positive sizes and :class:`EmulatorError`
        when a bank is full.
        """
        if num_pages <= 0 or page_bytes <= 0:
            raise ValueError(f"expected positive num_pages and page_bytes, got {num_pages}, {page_bytes}")
        al = self.spec.dram_alignment
        aligned = -(-page_bytes // al) * al
        per_bank = -(-num_pages // self.spec.dram_banks) * aligned
        with self._lock:
            addr = DRAM_BASE_ADDRESS
            for a in sorted(self._allocs):
                if addr + per_bank <= a:
                    break
                addr = max(addr, -(-(a + self._allocs[a]) // al) * al)
            if addr + per_bank > self._dram_limit:
                raise EmulatorError(
                    f"DRAM full: need {per_bank} bytes per bank at 0x{addr:x}, banks end at 0x{self._dram_limit:x}"
                )
            if self._lib.emu_dram_alloc(self._h, addr, per_bank) != 0:
                raise EmulatorError(f"DRAM allocation at 0x{addr:x} (+{per_bank} per bank) overlaps a buffer")
            self._allocs[addr] = per_bank
        return DramBuffer(addr, int(page_bytes), int(num_pages), aligned)

    def free(self, buf: DramBuffer) -> None:
        """Release ``buf``; raises :class:`EmulatorError` if it is not allocated."""
        with self._lock:
            if buf.address not in self._allocs or self._lib.emu_dram_free(self._h, buf.address) != 0:
                raise EmulatorError(f"DRAM buffer at 0x{buf.address:x} is not allocated")
            del self._allocs[buf.address]

    # ------------------------------------------------------------------ L1 (sharded buffers)
    def allocate_l1_sharded(self, banks: Sequence[tuple[int, int]], pages_per_bank: int, page_bytes: int) -> L1ShardedBuffer:
        """Allocate ``pages_per_bank`` pages of ``page_bytes`` bytes at one address in the L1 of each
        logical core of ``banks`` (bank order), top down from the end of L1, as the allocator places
        a sharded tensor's buffer. Every later :meth:`run` finds the bytes there (written after the
        launch's L1 poison); CBs that would reach the lowest such buffer of a core raise, as
        tt-metal's "circular buffers clash with L1 buffers". Raises ``ValueError`` for non-positive
        sizes, a repeated core or one outside the grid, :class:`EmulatorError` when L1 is full."""
        banks = tuple((int(x), int(y)) for x, y in banks)
        if pages_per_bank <= 0 or page_bytes <= 0 or not banks:
            raise ValueError(f"expected banks and positive sizes, got {banks}, {pages_per_bank}, {page_bytes}")
        if len(set(banks)) != len(banks) or any(not (0 <= x < self.grid[0] and 0 <= y < self.grid[1]) for x, y in banks):
            raise ValueError(f"banks {banks}: expected distinct cores of the {self.grid[0]}x{self.grid[1]} grid")
        with self._lock:
            top = min([b.address for b in self._l1_buffers] or [self.spec.l1_bytes])
            address = (top - pages_per_bank * page_bytes) // self.spec.l1_alignment * self.spec.l1_alignment
            if address < self.spec.unreserved_base:
                raise EmulatorError(f"L1 full: {pages_per_bank * page_bytes} bytes per core below 0x{top:x}")
            buf = L1ShardedBuffer(address, int(page_bytes), banks, int(pages_per_bank))
            self._l1_buffers.append(buf)
        return buf

    def write_l1_bank(self, buf: L1ShardedBuffer, bank: int, data: bytes | np.ndarray) -> None:
        """Bank ``bank``'s bytes of ``buf`` (at most :attr:`L1ShardedBuffer.bank_bytes`; the rest
        keeps L1's poison). Raises ``ValueError`` for a bank out of range or too many bytes."""
        raw = np.ascontiguousarray(np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray))
                                   else np.ascontiguousarray(data).view(np.uint8).reshape(-1))
        if not 0 <= bank < len(buf.banks) or raw.size > buf.bank_bytes:
            raise ValueError(f"bank {bank} of {len(buf.banks)}, {raw.size} bytes of at most {buf.bank_bytes}")
        buf.data[buf.banks[bank]] = raw.copy()

    def free_l1(self, buf: L1ShardedBuffer) -> None:
        """Release ``buf``; raises :class:`EmulatorError` if it is not allocated."""
        with self._lock:
            if not any(b is buf for b in self._l1_buffers):
                raise EmulatorError(f"L1 buffer at 0x{buf.address:x} is not allocated")
            self._l1_buffers = [b for b in self._l1_buffers if b is not buf]

    def write_pages(self, buf: DramBuffer, data: bytes | np.ndarray) -> None:
        """Write all pages of ``buf``: page i = bytes ``[i*page_bytes, (i+1)*page_bytes)`` of ``data``.

        ``data`` is bytes or any contiguous ndarray of exactly ``num_pages * page_bytes`` bytes.
        Raises ``ValueError`` on a size mismatch.
        """
        raw = np.ascontiguousarray(np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray))
                                   else np.ascontiguousarray(data).view(np.uint8).reshape(-1))
        if raw.size != buf.nbytes:
            raise ValueError(f"expected {buf.nbytes} bytes ({buf.num_pages} pages x {buf.page_bytes}), got {raw.size}")
        with self._lock:
            rc = self._lib.emu_dram_write_pages(self._h, buf.address, buf.page_bytes, buf.num_pages,
                                                raw.ctypes.data_as(ctypes.c_void_p))
        if rc != 0:
            raise EmulatorError(f"DRAM buffer at 0x{buf.address:x} is not allocated with this geometry")

    def read_pages(self, buf: DramBuffer) -> np.ndarray:
        """All pages of ``buf`` as one flat ``uint8`` array of ``num_pages * page_bytes`` bytes."""
        out = np.empty(buf.nbytes, dtype=np.uint8)
        with self._lock:
            rc = self._lib.emu_dram_read_pages(self._h, buf.address, buf.page_bytes, buf.num_pages,
                                               out.ctypes.data_as(ctypes.c_void_p))
        if rc != 0:
            raise EmulatorError(f"DRAM buffer at 0x{buf.address:x} is not allocated with this geometry")
        return out

    def peek_bank(self, bank: int, address: int, nbytes: int) -> np.ndarray:
        """Raw ``nbytes`` of DRAM bank ``bank`` at ``address`` (for placement tests); ``uint8`` array.

        Raises :class:`EmulatorError` when the range is outside every buffer of that bank.
        """
        out = np.empty(nbytes, dtype=np.uint8)
        with self._lock:
            rc = self._lib.emu_dram_peek(self._h, bank, address, nbytes, out.ctypes.data_as(ctypes.c_void_p))
        if rc != 0:
            raise EmulatorError(f"DRAM bank {bank} [0x{address:x}, +{nbytes}) is outside every buffer")
        return out

    def peek_l1(self, core: tuple[int, int], address: int, nbytes: int) -> np.ndarray:
        """Raw ``nbytes`` of logical ``core``'s L1 at ``address`` as the last :meth:`run` left it
        (also after a failed run: e.g. a read's destination still poisoned); ``uint8`` array.

        Raises :class:`EmulatorError` when the core was not in the last run or the range leaves L1.
        """
        out = np.empty(nbytes, dtype=np.uint8)
        with self._lock:
            rc = self._lib.emu_l1_peek(self._h, core[0], core[1], address, nbytes, out.ctypes.data_as(ctypes.c_void_p))
        if rc != 0:
            raise EmulatorError(f"L1 of core {core} [0x{address:x}, +{nbytes}): the core was not in the last run "
                                f"or the range is outside L1")
        return out

    # ------------------------------------------------------------------ run
    def run(self, program: Any, timeout_s: float = 60.0) -> RunReport:
        """Run a ``ttnn.ProgramDescriptor`` to completion.

        Reads the descriptor field by field: kernels (source path or inline code, core ranges,
        compile-time and named compile-time args, defines, per-core runtime args via
        ``kd.runtime_args[x][y]`` — a core without any runs with zero args — common runtime args,
        config type and compute config), CBs (total size, core ranges, format descriptors) and
        semaphores. Compiles missing kernels (cached), places CBs, starts all kernel threads.

        ``timeout_s`` is the wall-clock limit in seconds (backstop of the deadlock detector).

        Raises :class:`EmulatorError` for a kernel error or an invalid program (e.g. CBs past the
        end of L1, a core outside the grid, two kernels of one role on a core),
        :class:`DeadlockError` when the watchdog ends the run, :class:`BuildError` when a kernel
        does not compile.
        """
        t0 = time.perf_counter()
        plan_words, strings, digest, ran = self._plan(program)
        c_strings = (ctypes.c_char_p * len(strings))(*[s.encode() for s in strings])
        arr = (ctypes.c_uint32 * len(plan_words))(*plan_words)
        setup = time.perf_counter() - t0
        with self._lock:
            rc = self._lib.emu_run(self._h, arr, len(plan_words), c_strings, len(strings), float(timeout_s))
            err = self._lib.emu_last_error(self._h).decode(errors="replace")
            rep = self._lib.emu_last_report(self._h).decode(errors="replace")
        if rc in (2, 3):
            raise DeadlockError(err)
        if rc != 0:
            raise EmulatorError(err)
        d = json.loads(rep)
        ran_on = {c for kernel_cores in ran["kernel_cores"].values() for c in kernel_cores}
        cores = {}
        for c in d["cores"]:
            if tuple(c["core"]) not in ran_on:  # it only holds an L1 buffer
                continue
            cores[tuple(c["core"])] = CoreStats(
                c["dram_read"], c["dram_write"], c["l1_read"], c["l1_write"], dict(c["calls"]), dict(c["zones"]),
                dict(c["zone_calls"]), dict(c["work"]), noc_read_requests=dict(enumerate(c["noc_reads"])),
                noc_read_request_bytes=dict(enumerate(c["noc_read_bytes"])), noc_write_requests=dict(enumerate(c["noc_writes"])),
                zone_noc_reads=dict(c["zone_noc_reads"]), dram_bank_noc_reads=dict(c["bank_noc_reads"]),
                zone_noc_write_bytes=dict(c["zone_noc_write_bytes"]))
        program_hash = getattr(program, "custom_program_hash", None)
        return RunReport(cores=cores, wall_s=d["wall_s"], setup_s=setup, log=list(d["log"]),
                         program_hash=None if program_hash is None else int(program_hash), runtime_args_sha256=digest,
                         **ran)

    # ------------------------------------------------------------------ plan
    def _plan(self, program: Any) -> tuple[list[int], list[str], str, dict[str, dict]]:
        """The runtime's plan words and strings, the runtime-args digest, and what the program runs
        where (the :class:`RunReport` fields ``kernel_cores``, ``cb_pages``, ``compile_time_args``,
        ``named_compile_time_args``), all from one reading of the descriptor."""
        import ttnn

        spec = self.spec
        gx, gy = self.grid

        def check_core(c: tuple[int, int], what: str) -> None:
            if not (0 <= c[0] < gx and 0 <= c[1] < gy):
                raise EmulatorError(f"{what} uses core {c}, outside the {gx}x{gy} grid")

        # kernels
        kernels = []  # (role, build, name, cores, rt_getter, crt, compute)
        builds = []
        for ki, kd in enumerate(program.kernels):
            role = _role_of(kd.config)
            inline = kd.source_type == ttnn.KernelDescriptor.SourceType.SOURCE_CODE
            src = kd.kernel_source
            name = f"{_ROLE_NAMES[role]} kernel {('inline#%d' % ki) if inline else Path(src).name}"
            compute = None
            if role == ROLE_COMPUTE:
                cfg = kd.config
                compute = (int(cfg.math_fidelity.value), bool(cfg.fp32_dest_acc_en), bool(cfg.dst_full_sync_en),
                           bool(cfg.math_approx_mode))
            kb = KernelBuild(
                source_path=None if inline else str(src),
                source_text=src if inline else None,
                role=role,
                compile_time_args=tuple(int(v) for v in kd.compile_time_args),
                named_args=tuple((str(n), int(v)) for n, v in kd.named_compile_time_args),
                defines=tuple((str(k), str(v)) for k, v in kd.defines),
                include_paths=tuple(str(p) for p in kd.compiler_include_paths),
                compute=compute,
                arch=self.arch,
                noc=_noc_of(kd.config, role) if role != ROLE_COMPUTE else (0, 0),
            )
            cores = _cores_of(kd.core_ranges)
            for c in cores:
                check_core(c, name)
            builds.append(kb)
            kernels.append((role, name, cores, kd, [int(v) for v in kd.common_runtime_args], compute, kb.noc))
        so_paths = build_kernels(builds)

        # What ran where, for the run report; kernels keyed by source stem (see RunReport).
        stems = [f"inline#{ki}" if kb.source_text is not None else Path(kb.source_path).stem
                 for ki, kb in enumerate(builds)]
        keys = [f"{st}#{ki}" if stems.count(st) > 1 and kb.source_text is None else st
                for ki, (st, kb) in enumerate(zip(stems, builds))]
        kernel_cores: dict[str, list[tuple[int, int]]] = {}
        compile_time_args: dict[tuple[int, int], dict[str, tuple[int, ...]]] = {}
        named_compile_time_args: dict[tuple[int, int], dict[str, dict[str, int]]] = {}
        for key, kb, (_, _, cores, *_rest) in zip(keys, builds, kernels):
            kernel_cores[key] = sorted(set(cores))
            for c in cores:
                compile_time_args.setdefault(c, {})[key] = kb.compile_time_args
                named_compile_time_args.setdefault(c, {})[key] = dict(kb.named_args)
        cb_pages: dict[tuple[int, int], dict[int, CBConfig]] = {c: {} for c in compile_time_args}

        per_core: dict[tuple[int, int], dict[str, list]] = {}
        kernel_args = []  # per kernel: (common args, {core: args}), for the run report's digest
        for (role, name, cores, kd, crt, compute, noc), so in zip(kernels, so_paths):
            rta = kd.runtime_args
            args_of = {}
            for c in cores:
                try:  # (indexed by core: the descriptor's runtime_args never ends an iteration)
                    rt = [int(v) for v in rta[c[0]][c[1]]]
                except IndexError:
                    rt = []
                args_of[c] = rt
                per_core.setdefault(c, {"k": [], "cb": [], "sem": []})["k"].append((role, so, name, rt, crt, compute, noc))
            kernel_args.append((crt, args_of))
        _check_noc_modes(per_core)

        # CBs: in descriptor order, each at the max of its cores' current tops (one address for all)
        top: dict[tuple[int, int], int] = {}
        for bi, cb in enumerate(program.cbs):
            if cb.has_buffer():
                raise EmulatorError(f"CB descriptor #{bi}: globally allocated (buffer-backed) CBs are not supported")
            size = int(cb.total_size)
            cores = _cores_of(cb.core_ranges)
            for c in cores:
                check_core(c, f"CB descriptor #{bi}")
            addr = max([top.get(c, spec.unreserved_base) for c in cores] or [spec.unreserved_base])
            addr = -(-addr // spec.l1_alignment) * spec.l1_alignment
            end = addr + size
            idxs = [int(f.buffer_index) for f in cb.format_descriptors]
            if end > spec.l1_bytes:
                worst = max(cores, key=lambda c: top.get(c, spec.unreserved_base))
                raise EmulatorError(
                    f"CBs over-allocate L1 on core {worst}: CB descriptor #{bi} (indices {idxs}, {size} bytes) would "
                    f"end at {end} bytes (0x{end:x}), past L1's {spec.l1_bytes} bytes by {end - spec.l1_bytes}; the "
                    f"CBs on this core need {end - spec.unreserved_base} bytes from the unreserved base "
                    f"0x{spec.unreserved_base:x}, {spec.l1_bytes - spec.unreserved_base} are free"
                )
            floor = min([b.address for b in self._l1_buffers if any(c in b.banks for c in cores)] or [spec.l1_bytes])
            if end > floor:
                raise EmulatorError(f"CB descriptor #{bi} (indices {idxs}) ends at 0x{end:x}, past an L1 buffer at "
                                    f"0x{floor:x} on its cores: circular buffers clash with L1 buffers")
            for c in cores:
                top[c] = end
            for f in cb.format_descriptors:
                rec = (int(f.buffer_index), addr, size, int(f.page_size), int(f.data_format_as_uint8))
                fmt = TT_DATA_FORMATS.get(rec[4], f"DataFormat({rec[4]})")
                row = CBConfig(page_bytes=rec[3], num_pages=size // rec[3] if rec[3] else 0, data_format=fmt,
                               address=addr)
                for c in cores:
                    if c in per_core:
                        per_core[c]["cb"].append(rec)
                        cb_pages[c][rec[0]] = row

        for si, sd in enumerate(program.semaphores):
            if sd.core_type != ttnn.CoreType.WORKER:
                raise EmulatorError(f"semaphore #{si}: only WORKER (Tensix) semaphores are supported")
            for c in _cores_of(sd.core_ranges):
                check_core(c, f"semaphore #{si}")
                if c in per_core:
                    per_core[c]["sem"].append((int(sd.id), int(sd.initial_value) & 0xFFFFFFFF))

        for buf in self._l1_buffers:
            for c in buf.banks:
                check_core(c, "an L1 buffer")
                per_core.setdefault(c, {"k": [], "cb": [], "sem": []}).setdefault("l1", []).append(buf)

        words: list[int] = [len(per_core)]
        strings: list[str] = []
        sidx: dict[str, int] = {}

        def s(x: str) -> int:
            if x not in sidx:
                sidx[x] = len(strings)
                strings.append(x)
            return sidx[x]

        for c in sorted(per_core, key=lambda c: (c[1], c[0])):
            d = per_core[c]
            nx, ny = spec.worker_noc_xy(*c)
            words += [c[0], c[1], nx, ny, len(d["cb"])]
            for rec in d["cb"]:
                words += list(rec)
            words.append(len(d["sem"]))
            for sid, init in d["sem"]:
                words += [sid, init]
            words.append(len(d["k"]))
            for role, so, name, rt, crt, compute, noc in d["k"]:
                fid, fp32, full, approx = compute or (4, False, False, False)
                words += [role, s(so), s(name), fid, int(fp32), int(full), int(approx), *noc, len(rt), *rt, len(crt), *crt]
            preloads = [(buf.address, buf.data[c]) for buf in d.get("l1", []) if c in buf.data]
            words.append(len(preloads))
            for address, raw in preloads:
                padded = np.zeros(-(-raw.size // 4) * 4, np.uint8)
                padded[:raw.size] = raw
                words += [address, int(raw.size), *padded.view("<u4").tolist()]
        for w in words:
            if not 0 <= w <= 0xFFFFFFFF:
                raise EmulatorError(f"argument {w} does not fit a uint32")
        ran = {"kernel_cores": kernel_cores, "cb_pages": cb_pages, "compile_time_args": compile_time_args,
               "named_compile_time_args": named_compile_time_args}
        return words, strings, runtime_args_digest(kernel_args), ran
