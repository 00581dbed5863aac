"""Device model v2: cycles of each compute API call the kernels make (issue 35, item 1).

**Modelled, not measured.** A call's cost is split over the Tensix threads it occupies: the
matrix unit (FPU) and the vector unit (SFPU), both issued from the math thread (TRISC1) in our
kernel, so they add up; the packer (TRISC2) and the unpacker (TRISC0), which run beside it. The
costs are *priced* by math fidelity (fidelity phases), DST mode (fp32 / bf16) and the faces an op
processes (4 for a whole 32x32 tile; 2 when an SFPU op runs with the LLK's row vector mode
``VectorMode::R``, faces 0-1, the tile's upper 16 rows; 2 for a 16x32 "half-height" tile on the FPU).

Where each number comes from (LLK sources are those of the installed ttnn 0.81 wheel,
``ttnn/tt_metal/tt-llk/tt_llk_blackhole`` and ``ttnn/tt_metal/hw/ckernels/blackhole``; read, not
copied; instruction timings from tenstorrent/tt-isa-documentation):

- **Matmul**: :data:`MVMULS_PER_TILE_PHASE` MVMULs per 32x32x32 tile MAC per fidelity phase
  (``llk_math_matmul.h``: the MOP replays a 16-instruction buffer for 32x32 operands, 8 when in0 is
  16x32, and its inner loop count is the number of fidelity phases: LoFi 1, HiFi2 2, HiFi3 3,
  HiFi4 4), one MVMUL a cycle: HiFi2 32 cycles, which is what tt-metal #55760 measured on a p100a
  ("the HiFi2 tile MAC costs 32 cycles"). On top, #55760's two measured overheads:
  :data:`MATMUL_OVERHEAD_FRACTION` of the tile MACs and :func:`step_overhead_cycles` per q tile per
  k-chunk step. Our kernel's "step" is a K/V block; it starts two matmul blocks per step (Q.K^T and
  P.V, two ``matmul_init`` calls), so each ``matmul_init`` is charged half a step's overhead.
- **Eltwise binary / broadcast / copy**: :data:`ELTWISE_INSTRS_PER_TILE` FPU instructions per tile
  (``llk_math_eltwise_binary.h``: the MOP's outer loop runs once per face, its inner loop
  ``face_r_dim / 8`` = 2 times); ``ELWMUL`` runs every fidelity phase.
- **Reduce (row)**: :data:`REDUCE_ROW_INSTRS` instructions per tile, counted in ``llk_math_reduce.h``'s
  row path (a pool per face, a transpose through SrcB and an add per face row).
- **SFPU**: 8 iterations of 32 lanes per 16x16 face (tt-isa-documentation ``VectorUnit.md``: 32
  lanes; ``SFPLOAD`` moves 4 rows x 8 columns; ``llk_math_eltwise_sfpu_common.h`` runs the function
  on 4 faces for ``VectorMode::RC``, 2 for ``R``), one instruction a cycle (``VectorUnit.md`` IPC 1)
  plus the latency stalls of dependent ``SFPMAD`` chains (2 cycles). Instructions per iteration:
  :data:`SFPU_INSTRS_PER_ITERATION`. The approximate exp is #55760's measured ~70 cycles per tile.
- **Reconfig**: :data:`RECONFIG_CYCLES` per data-format reconfig site, derived from tt-metal #56692
  (139,214 cycles of reconfig and matmul re-init sites, 12 sites per k128 step, ~167 steps on the
  wall core: 551,041 front-end cycles / ~3,300 per step).
- **Pack / unpack**: no public per-tile figure was found; :data:`PACK_CYCLES_PER_TILE` and the
  unpacker keeping pace with the FPU are [U] assumptions (stated wherever they bind).

Where our kernel's op differs from the one #55760 measured (the SDPA streaming kernel): its score
tiles are Q-rows x 32 positions instead of q-chunk x k-chunk, so a step is a K/V block of up to
16 position tiles with one q tile; the per-step costs carry over per block and per q tile; the
per-tile costs carry over unchanged (same LLK calls).
"""

from __future__ import annotations

import dataclasses

__all__ = ["ComputeConfig", "OpCost", "call_cost", "FIDELITY_PHASES", "MVMULS_PER_TILE_PHASE",
           "MATMUL_OVERHEAD_FRACTION", "STEP_OVERHEAD_MACS", "STEP_OVERHEAD_FIXED", "step_overhead_cycles",
           "ELTWISE_INSTRS_PER_TILE", "REDUCE_ROW_INSTRS", "SFPU_INSTRS_PER_ITERATION", "EXP_APPROX_CYCLES_PER_TILE",
           "RECONFIG_CYCLES", "PACK_CYCLES_PER_TILE", "SFPU_ITERATIONS_PER_FACE", "SFPU_CALL_CYCLES",
           "INIT_CYCLES", "REGS_HANDSHAKE_CYCLES", "STARTUP_CYCLES", "SFPU_APIS", "tile_mac_cycles"]

FIDELITY_PHASES = {"LoFi": 1, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}
"""Fidelity phases per math fidelity (``llk_math_matmul.h``: ``inner_loops = to_underlying(math_fidelity)``)."""

MVMULS_PER_TILE_PHASE = 16
"""MVMULs per 32x32x32 tile MAC per fidelity phase (``llk_math_matmul.h``: ``replay_buf_len`` 16 for
32x32 operands, 8 for a 16x32 in0). One a cycle: HiFi2 = 32 cycles (tt-metal #55760: "the HiFi2
tile MAC costs 32 cycles")."""

MATMUL_OVERHEAD_FRACTION = 0.049
"""Matmul overhead as a fraction of the tile MACs (tt-metal #55760: "a fraction of the tile MACs (4.9 percent)")."""

STEP_OVERHEAD_MACS, STEP_OVERHEAD_FIXED = 0.96, 74.0
"""Per q tile per k-chunk step: 0.96 tile-MAC equivalents that scale with fidelity plus 74 fixed
cycles, about 105 cycles at HiFi2 (tt-metal #55760)."""

ELTWISE_INSTRS_PER_TILE = 8
"""ELWADD/ELWSUB/ELWMUL (and datacopy) instructions per 32x32 tile: 4 faces x 2 (``llk_math_eltwise_binary.h``:
outer loop ``num_faces``, inner loop ``face_r_dim / 8``). One a cycle [U: issue rate assumed]."""

REDUCE_ROW_INSTRS = 26
"""FPU instructions of one ``reduce_tile<REDUCE_ROW>`` (``llk_math_reduce.h``: per face row, two
pools, the SrcB transpose sequence and the add-back, ~13 instructions; two face rows)."""

SFPU_ITERATIONS_PER_FACE = 8
"""32-lane SFPU iterations per 16x16 face (tt-isa-documentation ``VectorUnit.md``/``SFPLOAD.md``;
the LLKs' ``ITERATIONS = 8``)."""

SFPU_INSTRS_PER_ITERATION = {
    "exp_accurate_bf16": 16,  # ckernel_sfpu_exp.h: _sfpu_exp_21f_bf16_tti_ BODY_LEN 15 + 1 (bf16 DST)
    "exp_accurate_fp32": 36,  # _sfpu_exp_fp32_accurate_: ~28 instructions + ~8 stalls of its dependent MAD chain
    "recip_approx": 4,        # ckernel_sfpu_recip.h: _calculate_reciprocal_fast_7b_ loop body
    "recip_accurate": 12,     # _calculate_reciprocal_fast_24b_5c_: a seed and Newton steps
    "tanh": 12,               # ckernel_sfpu_tanh.h polynomial [U: rough count]
    "log": 14,                # ckernel_sfpu_log.h polynomial [U: rough count]
    "binary": 5,              # two SFPLOADs, one op (2-cycle latency), SFPSTORE
    "unary_scalar": 4,        # SFPLOAD, SFPMUL with a loaded constant, SFPSTORE
    "unary_int": 3,           # ckernel_sfpu_binop_with_unary.h calculate_add_int32 / ckernel_sfpu_bitwise.h:
                              # SFPLOAD (I32), SFPIADD or SFPAND with the hoisted scalar, SFPSTORE
    "mask": 6,                # loads of value and mask, condition, move, store
}
"""SFPU instructions (cycles, with dependent-latency stalls) per 32-datum iteration, counted in the LLK sources."""

EXP_APPROX_CYCLES_PER_TILE = 70.0
"""The approximate exp (``SFPLOADMACRO`` path of ``ckernel_sfpu_exp.h``: ~16 macro issues and NOPs per
face), measured on a p100a: "exp costs ~70 cycles per tile" (tt-metal #55760)."""

SFPU_CALL_CYCLES = 8
"""Per SFPU call: the face-address increments and the STALLWAIT around it (``llk_math_eltwise_sfpu_common.h``) [U: count]."""

RECONFIG_CYCLES = 70.0
"""One data-format reconfig site, derived from tt-metal #56692: 139,214 cycles at 12 sites per step over
~167 steps (551,041 front-end cycles / ~3,300 per k128 step) = ~69.5."""

PACK_CYCLES_PER_TILE = 64
"""Packing one tile from DST to L1 [U: no public per-tile figure; 4 packers, one face each, 16 rows
at 4 a cycle assumed]. #56692 found the pack thread binding in compute-bound SDPA regimes."""

INIT_CYCLES = 20
"""Any ``*_init`` (MOP and address-mod programming on the TRISCs) [U]."""

REGS_HANDSHAKE_CYCLES = 4
"""Each ``tile_regs_*`` DST handshake (a semaphore post or wait) [U]."""

STARTUP_CYCLES = 500
"""``compute_kernel_hw_startup``, once per core [U]."""

SFPU_APIS = ("exp_tile", "recip_tile", "tanh_tile", "log_tile", "binary_max_tile", "add_binary_tile",
             "sub_binary_tile", "mul_binary_tile", "mul_unary_tile", "mask_tile", "add_unary_tile_int32",
             "bitwise_and_tile")
"""Compute API calls that run on the SFPU (the rest of the tile ops run on the FPU)."""


@dataclasses.dataclass(frozen=True)
class ComputeConfig:
    """The compute config axis: math fidelity, DST mode, exp mode."""

    fidelity: str = "HiFi4"
    fp32_dest: bool = True
    exp_approx: bool = False

    def __post_init__(self):
        if self.fidelity not in FIDELITY_PHASES:
            raise ValueError(f"fidelity: expected one of {tuple(FIDELITY_PHASES)}, got {self.fidelity!r}")

    @property
    def phases(self) -> int:
        return FIDELITY_PHASES[self.fidelity]

    @property
    def label(self) -> str:
        return f"{self.fidelity} {'fp32' if self.fp32_dest else 'bf16'} DST, exp {'approx' if self.exp_approx else 'accurate'}"


@dataclasses.dataclass(frozen=True)
class OpCost:
    """Cycles of one call on each thread it occupies."""

    fpu: float = 0.0
    sfpu: float = 0.0
    pack: float = 0.0
    unpack: float = 0.0
    front: float = 0.0  # TRISC-side programming: inits, reconfigs, handshakes (on the math thread's timeline)

    @property
    def math(self) -> float:
        """The math thread's cycles: FPU + SFPU + its front-end work, which issue in order on TRISC1."""
        return self.fpu + self.sfpu + self.front


def tile_mac_cycles(cfg: ComputeConfig, faces: int = 4) -> float:
    """One 32x32x32 tile MAC (``faces`` 2: a 16x32 in0), without overheads."""
    return MVMULS_PER_TILE_PHASE * cfg.phases * faces / 4


def step_overhead_cycles(cfg: ComputeConfig) -> float:
    """#55760's matmul cost per q tile per k-chunk step (105 at HiFi2)."""
    return STEP_OVERHEAD_MACS * tile_mac_cycles(cfg) + STEP_OVERHEAD_FIXED


def _sfpu(per_iteration: float, faces: int) -> OpCost:
    return OpCost(sfpu=per_iteration * SFPU_ITERATIONS_PER_FACE * faces + SFPU_CALL_CYCLES)


def _exp(cfg: ComputeConfig, faces: int) -> OpCost:
    if cfg.exp_approx:
        return OpCost(sfpu=EXP_APPROX_CYCLES_PER_TILE * faces / 4)  # measured per call: its overhead included
    key = "exp_accurate_fp32" if cfg.fp32_dest else "exp_accurate_bf16"
    return _sfpu(SFPU_INSTRS_PER_ITERATION[key], faces)


_SFPU_KIND = {"recip_tile": None, "tanh_tile": "tanh", "log_tile": "log", "binary_max_tile": "binary",
              "add_binary_tile": "binary", "sub_binary_tile": "binary", "mul_binary_tile": "binary",
              "mul_unary_tile": "unary_scalar", "mask_tile": "mask", "add_unary_tile_int32": "unary_int",
              "bitwise_and_tile": "unary_int"}
_FPU_ELTWISE = ("add_tiles", "sub_tiles", "add_reuse_dest_tiles", "copy_tile", "unary_bcast", "sub_tiles_bcast")
_FPU_MUL = ("mul_tiles",)


def call_cost(name: str, cfg: ComputeConfig, *, sfpu_faces: float = 4, fpu_faces: int = 4) -> OpCost:
    """Cycles of one call of compute API ``name`` (the emulator's ``CoreStats.calls`` key).

    Args:
        name: the API name (template arguments, e.g. ``unary_bcast<BroadcastType::COL>``, are ignored).
        cfg: the compute config.
        sfpu_faces: faces an SFPU op processes (4: ``VectorMode::RC``; 2: ``VectorMode::R``), in
            whole-face equivalents: SFPU iterations / :data:`SFPU_ITERATIONS_PER_FACE` (0.5 for 4 live
            rows on ``R``: 2 iterations on each of two faces).
        fpu_faces: faces an FPU tile op processes (4; 2 for a half-height 16x32 tile).
    """
    base = name.split("<", 1)[0]
    if base == "matmul_tiles":
        return OpCost(fpu=tile_mac_cycles(cfg, fpu_faces) * (1 + MATMUL_OVERHEAD_FRACTION))
    if base == "matmul_init":
        return OpCost(front=INIT_CYCLES, fpu=step_overhead_cycles(cfg) / 2)
    if base.endswith(("_init", "_uninit", "_init_short")):
        return OpCost(front=INIT_CYCLES)
    if base == "reduce_tile":
        return OpCost(fpu=REDUCE_ROW_INSTRS * fpu_faces / 4)
    if base.startswith(_FPU_MUL):
        return OpCost(fpu=ELTWISE_INSTRS_PER_TILE * cfg.phases * fpu_faces / 4)
    if base.startswith(_FPU_ELTWISE):
        return OpCost(fpu=ELTWISE_INSTRS_PER_TILE * fpu_faces / 4)
    if base == "exp_tile":
        return _exp(cfg, sfpu_faces)
    if base == "recip_tile":
        return _sfpu(SFPU_INSTRS_PER_ITERATION["recip_accurate" if cfg.fp32_dest else "recip_approx"], sfpu_faces)
    if base in _SFPU_KIND:
        return _sfpu(SFPU_INSTRS_PER_ITERATION[_SFPU_KIND[base]], sfpu_faces)
    if base == "pack_tile":
        return OpCost(pack=PACK_CYCLES_PER_TILE * fpu_faces / 4)
    if "reconfig" in base:
        return OpCost(front=RECONFIG_CYCLES)
    if base.startswith("tile_regs_"):
        return OpCost(front=REGS_HANDSHAKE_CYCLES)
    if base == "compute_kernel_hw_startup":
        return OpCost(front=STARTUP_CYCLES)
    return OpCost(front=REGS_HANDSHAKE_CYCLES)  # read_tile_value and other TRISC-side calls
