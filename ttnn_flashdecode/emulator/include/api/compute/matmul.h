// Emulator host version of api/compute/matmul.h. DST[idst] += in0 · in1 (in1 transposed per tile
// when the init's transpose is set); in0 is unpacked to SrcB and in1 to SrcA.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/matmul.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common.h"

namespace ckernel {

ALWI void matmul_init(
    std::uint32_t in0_cb_id,
    std::uint32_t in1_cb_id,
    const std::uint32_t transpose = 0,
    std::uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::matmul_init("matmul_init", in0_cb_id, in1_cb_id, transpose, 1, 1, 1);
}

ALWI void matmul_tiles(
    std::uint32_t in0_cb_id,
    std::uint32_t in1_cb_id,
    std::uint32_t in0_tile_index,
    std::uint32_t in1_tile_index,
    std::uint32_t idst) {
    emu::compute::matmul_tiles(in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst);
}

ALWI void matmul_block_init(
    std::uint32_t in0_cb_id,
    std::uint32_t in1_cb_id,
    const std::uint32_t transpose = 0,
    std::uint32_t ct_dim = 1,
    std::uint32_t rt_dim = 1,
    std::uint32_t kt_dim = 1,
    std::uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::matmul_init("matmul_block_init", in0_cb_id, in1_cb_id, transpose, ct_dim, rt_dim, kt_dim);
}

// For r < rt_dim, c < ct_dim: DST[idst + r*ct_dim + c] += in0[in0_tile_index + r*kt_dim] · in1[in1_tile_index + c].
ALWI void matmul_block(
    std::uint32_t in0_cb_id,
    std::uint32_t in1_cb_id,
    std::uint32_t in0_tile_index,
    std::uint32_t in1_tile_index,
    std::uint32_t idst,
    const std::uint32_t transpose,
    std::uint32_t ct_dim,
    std::uint32_t rt_dim,
    std::uint32_t kt_dim,
    std::uint32_t call_line = __builtin_LINE()) {
    (void)call_line;
    emu::compute::matmul_block(
        in0_cb_id, in1_cb_id, in0_tile_index, in1_tile_index, idst, transpose, ct_dim, rt_dim, kt_dim);
}

}  // namespace ckernel
