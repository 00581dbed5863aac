// Emulator host version of api/compute/bcast.h (column and scalar broadcast of the second
// operand): cols: DST = A[r][c] op B[r][0]; scalar: DST = A[r][c] op B[0][0]. B goes to SrcB.
// unary_bcast<COL>: DST = B[r][0], a copy through SrcB (no multiply, so no fidelity phases).
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/bcast.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common.h"

namespace ckernel {

ALWI void sub_bcast_cols_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::binary_init(
        "sub_bcast_cols_init", emu::compute::BinaryOp::Sub, emu::compute::Bcast::Col, icb0, icb1, false);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sub_tiles_bcast_cols(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst) {
    emu::compute::binary_tiles(
        "sub_tiles_bcast_cols", emu::compute::BinaryOp::Sub, emu::compute::Bcast::Col, icb0, icb1, itile0,
        itile1, idst, is_fp32_dest_acc_en);
}

ALWI void mul_bcast_cols_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::binary_init(
        "mul_bcast_cols_init", emu::compute::BinaryOp::Mul, emu::compute::Bcast::Col, icb0, icb1, false);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_tiles_bcast_cols(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst) {
    emu::compute::binary_tiles(
        "mul_tiles_bcast_cols", emu::compute::BinaryOp::Mul, emu::compute::Bcast::Col, icb0, icb1, itile0,
        itile1, idst, is_fp32_dest_acc_en);
}

ALWI void add_bcast_cols_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::binary_init(
        "add_bcast_cols_init", emu::compute::BinaryOp::Add, emu::compute::Bcast::Col, icb0, icb1, false);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void add_tiles_bcast_cols(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst) {
    emu::compute::binary_tiles(
        "add_tiles_bcast_cols", emu::compute::BinaryOp::Add, emu::compute::Bcast::Col, icb0, icb1, itile0,
        itile1, idst, is_fp32_dest_acc_en);
}

ALWI void mul_bcast_scalar_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::binary_init(
        "mul_bcast_scalar_init", emu::compute::BinaryOp::Mul, emu::compute::Bcast::Scalar, icb0, icb1, false);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_tiles_bcast_scalar(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst) {
    emu::compute::binary_tiles(
        "mul_tiles_bcast_scalar", emu::compute::BinaryOp::Mul, emu::compute::Bcast::Scalar, icb0, icb1, itile0,
        itile1, idst, is_fp32_dest_acc_en);
}

ALWI void sub_bcast_scalar_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::binary_init(
        "sub_bcast_scalar_init", emu::compute::BinaryOp::Sub, emu::compute::Bcast::Scalar, icb0, icb1, false);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sub_tiles_bcast_scalar(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst) {
    emu::compute::binary_tiles(
        "sub_tiles_bcast_scalar", emu::compute::BinaryOp::Sub, emu::compute::Bcast::Scalar, icb0, icb1, itile0,
        itile1, idst, is_fp32_dest_acc_en);
}

ALWI void add_bcast_scalar_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::binary_init(
        "add_bcast_scalar_init", emu::compute::BinaryOp::Add, emu::compute::Bcast::Scalar, icb0, icb1, false);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void add_tiles_bcast_scalar(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst) {
    emu::compute::binary_tiles(
        "add_tiles_bcast_scalar", emu::compute::BinaryOp::Add, emu::compute::Bcast::Scalar, icb0, icb1, itile0,
        itile1, idst, is_fp32_dest_acc_en);
}

// unary_bcast: column broadcast only (DST[r][c] = tile[r][0]); other broadcasts fail to compile.
template <BroadcastType bcast_type, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void unary_bcast_init(uint32_t icb) {
    static_assert(bcast_type == BroadcastType::COL, "the emulator's unary_bcast supports BroadcastType::COL only");
    emu::compute::unary_bcast_col_init(icb, is_fp32_dest_acc_en);
}

template <BroadcastType bcast_type, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void unary_bcast(uint32_t icb, uint32_t in_tile_index, uint32_t dst_tile_index) {
    static_assert(bcast_type == BroadcastType::COL, "the emulator's unary_bcast supports BroadcastType::COL only");
    emu::compute::unary_bcast_col(icb, in_tile_index, dst_tile_index, is_fp32_dest_acc_en);
}

template <BroadcastType bcast_type>
ALWI void unary_bcast_uninit(uint32_t icb) {
    static_assert(bcast_type == BroadcastType::COL, "the emulator's unary_bcast supports BroadcastType::COL only");
    emu::compute::unary_bcast_col_uninit(icb);
}

}  // namespace ckernel
