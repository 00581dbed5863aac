// The compute kernel's SFPU calls, each on the live rows only (issue 35 item 3): a GQA group of 4
// or 8 heads fills 4 or 8 of a Q tile's 32 rows. When every request's stage rows fit rows 0..15 of
// their row tile (faces 0 and 1) the SFPU runs with the LLK's VectorMode::R, half the faces of
// VectorMode::RC, and on each of those faces only the iterations that hold live rows: an SFPU
// iteration loads and stores four consecutive DST rows, their even or odd columns (tt-isa-
// documentation, SFPLOAD: Dst row (Addr & ~3) + lane / 8, column 2 * (lane & 7) + ((Addr & 2) != 0);
// the LLK functors advance Addr by 2 an iteration), so ITERATIONS = 2 * live rows / 4 covers rows
// 0..live_rows-1 of a face, all 16 columns. The LLK moves to the next face from the face's start,
// whatever the functor's iterations (_llk_math_eltwise_sfpu_inc_dst_face_addr_: SETRWC with CR_D),
// and ttnn's own SDPA kernel passes exp_tile an iteration count with a vector mode
// (compute_common.hpp, sub_exp_block_bcast_cols_inplace). Part of the compute kernel
// (attention_compute_base.hpp includes it): every SFPU op of the kernel goes through one of these,
// so none runs on rows it need not.
//
// Why the dead rows (past live_rows: padding, and on R faces 2 and 3) may be left as the FPU wrote
// them (un-exponentiated, un-reciprocated, ...): they are stage rows past stage_rows(), padding
// (attention_protocol.hpp "Request kinds": row-local, never written out, may hold anything). Every
// step is row-local -- REDUCE_ROW,
// the column broadcasts (row r takes row r's column 0), S = QS . K^T and O = P . V (row r of the
// result from row r of QS / P), the elementwise ops and the split-K combine (a child's partial
// row r is added to its parent's row r) -- and the writer writes stage rows only (OUT, LSE). So no
// dead row reaches a live row or an output element. They need not be finite:
// a padding row of QSTAGE is never written by the reader (the emulator poisons it with NaN, so every
// test already runs with NaN dead rows), and no FPU, SFPU or packer op traps on a NaN or an inf.
#pragma once

#include <cstdint>

#include "api/compute/binary_max_min.h"
#include "api/compute/compute_kernel_api.h"
#include "api/compute/eltwise_binary_sfpu.h"
#include "api/compute/eltwise_unary/binop_with_scalar.h"
#include "api/compute/eltwise_unary/bitwise.h"
#include "api/compute/eltwise_unary/exp.h"
#include "api/compute/eltwise_unary/recip.h"
#include "attention_args.hpp"

namespace {

// The compute config's math_approx_mode, as a named arg: tt-metal declares APPROX for the MATH and
// PACK threads only, so a kernel that names it outside MATH(...) does not build for UNPACK.
constexpr bool kExpApprox = flashdecode::args::exp_approx() != 0;
// Rows of a row tile holding live stage rows, rounded up to 4 (op/shape.py DecodeShape.live_rows).
constexpr uint32_t kLiveRows = flashdecode::args::live_rows();
static_assert(kLiveRows % 4 == 0 && kLiveRows >= 4 && kLiveRows <= 32, "live_rows: a multiple of 4, 4..32");
constexpr VectorMode kLiveFaces = kLiveRows <= 16 ? VectorMode::R : VectorMode::RC;
// SFPU iterations per face: two per four live rows (even columns, then odd); all 8 on RC.
constexpr int kLiveIterations = kLiveRows <= 16 ? static_cast<int>(kLiveRows / 2) : 8;
// The approximate exp's LLK (SFPLOADMACRO) is hand-unrolled for 8 iterations and ignores the count
// (ckernel_sfpu_exp.h calculate_exponential, tt-llk#1486): it runs whole faces.
constexpr int kExpIterations = kExpApprox ? 8 : kLiveIterations;

// exp's public API takes the vector mode and the iterations; recip's and max's fix 8 iterations, so
// they go through the LLK calls their API makes (ttnn 0.81's recip_tile with its default
// ReciprocalApproxMode, binary_max_tile) with kLiveIterations.
void live_exp_tile(uint32_t idst) {
    exp_tile<kExpApprox, false, InputClamping::ClampToNegative, kExpIterations>(idst, kLiveFaces);
}
void live_recip_tile(uint32_t idst) {
    MATH(SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_reciprocal, (APPROX, DST_ACCUM_MODE, kLiveIterations),
                         idst, kLiveFaces));
}
void live_max_tile(uint32_t idst0, uint32_t idst1, uint32_t odst) {
    MATH((SFPU_BINARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_binary_max_min, (true, kLiveIterations), idst0, idst1,
                           odst, kLiveFaces)));
}

// The rest fix VectorMode::RC and 8 iterations in their public API: the same LLK calls their API makes (ttnn 0.81's
// tanh_tile<false>, log_tile<false>, mul_unary_tile, add / sub / mul_binary_tile), with kLiveFaces and kLiveIterations.
void live_tanh_tile(uint32_t idst) {
    MATH(SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_tanh, (false, DST_ACCUM_MODE, kLiveIterations), idst, kLiveFaces));
}
void live_log_tile(uint32_t idst) {
    MATH(SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_log, (APPROX, false, false, DST_ACCUM_MODE, kLiveIterations), idst,
                         kLiveFaces, 0));
}
// DST tile `idst` *= the fp32 scalar whose bits are `scalar_bits`.
void live_mul_scalar_tile(uint32_t idst, uint32_t scalar_bits) {
    MATH(SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_binop_with_scalar, (APPROX, MUL_UNARY, kLiveIterations, DST_ACCUM_MODE),
                         idst, kLiveFaces, scalar_bits));
}
void live_add_tiles(uint32_t idst0, uint32_t idst1, uint32_t odst) {
    MATH((SFPU_BINARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_sfpu_binary,
                           (APPROX, ckernel::BinaryOp::ADD, kLiveIterations, DST_ACCUM_MODE), idst0, idst1, odst, kLiveFaces)));
}
void live_sub_tiles(uint32_t idst0, uint32_t idst1, uint32_t odst) {
    MATH((SFPU_BINARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_sfpu_binary,
                           (APPROX, ckernel::BinaryOp::SUB, kLiveIterations, DST_ACCUM_MODE), idst0, idst1, odst, kLiveFaces)));
}
void live_mul_tiles(uint32_t idst0, uint32_t idst1, uint32_t odst) {
    MATH((SFPU_BINARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_sfpu_binary_mul,
                           (APPROX, ckernel::BinaryOp::MUL, kLiveIterations, DST_ACCUM_MODE), idst0, idst1, odst, kLiveFaces)));
}

// DST tiles [first, first + count) rounded from fp32 to TF32 (10 stored mantissa bits), to nearest,
// ties away from zero, on the datums' bits: + 0x1000 (half of TF32's last place; a carry rounds the
// magnitude up, through the exponent), then the 13 low bits cleared. Two SFPU passes, no scratch
// tile. SFPLOAD / SFPSTORE in INT32 mode (the I32 data layout of the LLK's int32 add and bitwise
// AND) move fp32 DST datums unconverted (tt-isa-documentation, SFPLOAD: MOD0_FMT_INT32 reads as
// MOD0_FMT_FP32), so the integer ops see IEEE bits, whose sign-magnitude form makes the one add right
// for either sign. Needs fp32 DST (a bf16 DST has no low bits to round). Why round: SrcA and SrcB hold
// TF32 and truncate an fp32 CB's datums as they read them; rounded first, the read is exact and what
// is left is unbiased. The same LLK calls as add_unary_tile_int32 and bitwise_and_tile<Int32>, with
// kLiveFaces; each pass's init before it (binop_with_scalar_tile_init, bitwise_and_tile_init).
constexpr uint32_t kTf32HalfUlp = 0x1000u;
constexpr uint32_t kTf32KeptBits = 0xFFFFE000u;
void live_round_to_tf32(uint32_t first, uint32_t count) {
    binop_with_scalar_tile_init();
    for (uint32_t i = first; i < first + count; ++i) {
        MATH(SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_add_int32, (APPROX, kLiveIterations), i, kLiveFaces, kTf32HalfUlp));
    }
    bitwise_and_tile_init();
    for (uint32_t i = first; i < first + count; ++i) {
        MATH(SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_sfpu_unary_bitwise,
                             (APPROX, ckernel::sfpu::UnaryBitwiseOp::AND, DataFormat::Int32, kLiveIterations), i, kLiveFaces,
                             kTf32KeptBits));
    }
}

}  // namespace
