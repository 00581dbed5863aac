// Emulator host version of api/compute/eltwise_binary.h. add/sub/mul: DST = A op B (add/sub with
// acc_to_dest: DST += A op B; ELWMUL ignores acc_to_dest). Dest reuse: DEST_TO_SRCA computes
// DST = DST op B(cb), DEST_TO_SRCB computes DST = A(cb) op DST.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/eltwise_binary.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include <cstdint>

#include "api/compute/common.h"

namespace ckernel {

ALWI void add_init(
    std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false, std::uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::binary_init(
        "add_init", emu::compute::BinaryOp::Add, emu::compute::Bcast::None, icb0, icb1, acc_to_dest);
}

template <EltwiseBinaryReuseDestType reuse_dest>
ALWI void add_reuse_dest_init(std::uint32_t icb, std::uint32_t call_line = __builtin_LINE()) {
    static_assert(
        reuse_dest != EltwiseBinaryReuseDestType::NONE,
        "reuse_dest must be DEST_TO_SRCA or DEST_TO_SRCB; for the two-operand op call add_init(icb0, icb1).");
    (void)call_line;
    emu::compute::binary_reuse_init(
        "add_reuse_dest_init", emu::compute::BinaryOp::Add, static_cast<emu::compute::ReuseDest>(reuse_dest), icb);
}

ALWI void sub_init(
    std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = false, std::uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::binary_init(
        "sub_init", emu::compute::BinaryOp::Sub, emu::compute::Bcast::None, icb0, icb1, acc_to_dest);
}

template <EltwiseBinaryReuseDestType reuse_dest>
ALWI void sub_reuse_dest_init(std::uint32_t icb, std::uint32_t call_line = __builtin_LINE()) {
    static_assert(
        reuse_dest != EltwiseBinaryReuseDestType::NONE,
        "reuse_dest must be DEST_TO_SRCA or DEST_TO_SRCB; for the two-operand op call sub_init(icb0, icb1).");
    (void)call_line;
    emu::compute::binary_reuse_init(
        "sub_reuse_dest_init", emu::compute::BinaryOp::Sub, static_cast<emu::compute::ReuseDest>(reuse_dest), icb);
}

ALWI void mul_init(
    std::uint32_t icb0, std::uint32_t icb1, bool acc_to_dest = true, std::uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::binary_init(
        "mul_init", emu::compute::BinaryOp::Mul, emu::compute::Bcast::None, icb0, icb1, acc_to_dest);
}

template <EltwiseBinaryReuseDestType reuse_dest>
ALWI void mul_reuse_dest_init(std::uint32_t icb, std::uint32_t call_line = __builtin_LINE()) {
    static_assert(
        reuse_dest != EltwiseBinaryReuseDestType::NONE,
        "reuse_dest must be DEST_TO_SRCA or DEST_TO_SRCB; for the two-operand op call mul_init(icb0, icb1).");
    (void)call_line;
    emu::compute::binary_reuse_init(
        "mul_reuse_dest_init", emu::compute::BinaryOp::Mul, static_cast<emu::compute::ReuseDest>(reuse_dest), icb);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_tiles(
    std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1, std::uint32_t idst) {
    emu::compute::binary_tiles(
        "mul_tiles", emu::compute::BinaryOp::Mul, emu::compute::Bcast::None, icb0, icb1, itile0, itile1, idst,
        is_fp32_dest_acc_en);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void add_tiles(
    std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1, std::uint32_t idst) {
    emu::compute::binary_tiles(
        "add_tiles", emu::compute::BinaryOp::Add, emu::compute::Bcast::None, icb0, icb1, itile0, itile1, idst,
        is_fp32_dest_acc_en);
}

template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sub_tiles(
    std::uint32_t icb0, std::uint32_t icb1, std::uint32_t itile0, std::uint32_t itile1, std::uint32_t idst) {
    emu::compute::binary_tiles(
        "sub_tiles", emu::compute::BinaryOp::Sub, emu::compute::Bcast::None, icb0, icb1, itile0, itile1, idst,
        is_fp32_dest_acc_en);
}

template <EltwiseBinaryReuseDestType reuse_dest, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void add_reuse_dest_tiles(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index) {
    emu::compute::binary_reuse_tiles(
        "add_reuse_dest_tiles", emu::compute::BinaryOp::Add, static_cast<emu::compute::ReuseDest>(reuse_dest),
        in_cb_id, in_tile_index, dst_tile_index, is_fp32_dest_acc_en);
}

template <EltwiseBinaryReuseDestType reuse_dest, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void sub_reuse_dest_tiles(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index) {
    emu::compute::binary_reuse_tiles(
        "sub_reuse_dest_tiles", emu::compute::BinaryOp::Sub, static_cast<emu::compute::ReuseDest>(reuse_dest),
        in_cb_id, in_tile_index, dst_tile_index, is_fp32_dest_acc_en);
}

template <EltwiseBinaryReuseDestType reuse_dest, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>
ALWI void mul_reuse_dest_tiles(std::uint32_t in_cb_id, std::uint32_t in_tile_index, std::uint32_t dst_tile_index) {
    emu::compute::binary_reuse_tiles(
        "mul_reuse_dest_tiles", emu::compute::BinaryOp::Mul, static_cast<emu::compute::ReuseDest>(reuse_dest),
        in_cb_id, in_tile_index, dst_tile_index, is_fp32_dest_acc_en);
}

}  // namespace ckernel
