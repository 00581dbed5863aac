// Test compute kernel: one tile op selected by the named CT arg "op", inputs c_0 (A), c_1 (B),
// c_2 (reduce scaler), output one tile to c_16. Ops >= 100 are deliberate misuses the engine must
// refuse. Named CT arg "transpose" for matmul.
#include <cstdint>

#include "api/compute/bcast.h"
#include "api/compute/binary_max_min.h"
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/eltwise_unary/exp.h"
#include "api/compute/eltwise_unary/recip.h"
#include "api/compute/matmul.h"
#include "api/compute/reduce.h"
#include "api/compute/tile_move_copy.h"

enum Op : uint32_t {
    COPY, MATMUL, REDUCE_MAX, REDUCE_SUM, SUB_BCAST_COLS, MUL_BCAST_COLS, MUL_BCAST_SCALAR, ADD, SUB, MUL,
    ADD_REUSE, EXP, RECIP, BINARY_MAX,
    BAD_DST_INDEX = 100, BAD_STALE_INIT, BAD_NO_REDUCE_UNINIT, BAD_PACK_OUTSIDE_WAIT,
};

constexpr uint32_t A = tt::CBIndex::c_0, B = tt::CBIndex::c_1, S = tt::CBIndex::c_2, OUT = tt::CBIndex::c_16;

void pack_out() {
    tile_regs_commit();
    tile_regs_wait();
    cb_reserve_back(OUT, 1);
    pack_tile(0, OUT);
    cb_push_back(OUT, 1);
    tile_regs_release();
}

void kernel_main() {
    constexpr uint32_t op = get_named_compile_time_arg_val("op");
    constexpr uint32_t transpose = get_named_compile_time_arg_val("transpose");
    constexpr bool two_inputs = op != COPY && op != EXP && op != RECIP && op != REDUCE_MAX && op != REDUCE_SUM &&
                                op != BAD_DST_INDEX && op != BAD_PACK_OUTSIDE_WAIT;
    constexpr bool reduce = op == REDUCE_MAX || op == REDUCE_SUM || op == BAD_NO_REDUCE_UNINIT;
    if constexpr (op == MATMUL || op == BAD_STALE_INIT) {
        compute_kernel_hw_startup<SrcOrder::Reverse>(A, B, OUT);
    } else {
        compute_kernel_hw_startup(A, reduce ? S : B, OUT);
    }
    cb_wait_front(A, 1);
    if constexpr (two_inputs && !reduce) cb_wait_front(B, 1);
    if constexpr (reduce) cb_wait_front(S, 1);
    tile_regs_acquire();
    if constexpr (op == COPY) {
        copy_init(A);
        copy_tile(A, 0, 0);
    } else if constexpr (op == MATMUL) {
        matmul_init(A, B, transpose);
        matmul_tiles(A, B, 0, 0, 0);
    } else if constexpr (op == REDUCE_MAX) {
        reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(A, S, OUT);
        reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(A, S, 0, 0, 0);
    } else if constexpr (op == REDUCE_SUM) {
        reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(A, S, OUT);
        reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(A, S, 0, 0, 0);
    } else if constexpr (op == SUB_BCAST_COLS) {
        sub_bcast_cols_init(A, B);
        sub_tiles_bcast_cols(A, B, 0, 0, 0);
    } else if constexpr (op == MUL_BCAST_COLS) {
        mul_bcast_cols_init(A, B);
        mul_tiles_bcast_cols(A, B, 0, 0, 0);
    } else if constexpr (op == MUL_BCAST_SCALAR) {
        mul_bcast_scalar_init(A, B);
        mul_tiles_bcast_scalar(A, B, 0, 0, 0);
    } else if constexpr (op == ADD) {
        add_init(A, B);
        add_tiles(A, B, 0, 0, 0);
    } else if constexpr (op == SUB) {
        sub_init(A, B);
        sub_tiles(A, B, 0, 0, 0);
    } else if constexpr (op == MUL) {
        mul_init(A, B);
        mul_tiles(A, B, 0, 0, 0);
    } else if constexpr (op == ADD_REUSE) {
        copy_init(A);
        copy_tile(A, 0, 0);
        add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(B);
        add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(B, 0, 0);
    } else if constexpr (op == EXP) {
        copy_init(A);
        copy_tile(A, 0, 0);
        exp_tile_init();
        exp_tile(0);
    } else if constexpr (op == RECIP) {
        copy_init(A);
        copy_tile(A, 0, 0);
        recip_tile_init();
        recip_tile(0);
    } else if constexpr (op == BINARY_MAX) {
        copy_init(A);
        copy_tile(A, 0, 0);
        reconfig_data_format_srca(B);
        copy_init(B);
        copy_tile(B, 0, 1);
        binary_max_tile_init();
        binary_max_tile(0, 1, 0);
    } else if constexpr (op == BAD_DST_INDEX) {
        copy_init(A);
        copy_tile(A, 0, DST_ACCUM_MODE ? 4 : 8);  // one past SyncHalf capacity
    } else if constexpr (op == BAD_STALE_INIT) {
        add_init(A, B);
        matmul_tiles(A, B, 0, 0, 0);  // configured for add_init
    } else if constexpr (op == BAD_NO_REDUCE_UNINIT) {
        reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(A, S, OUT);
        reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(A, S, 0, 0, 0);
        copy_init(A);  // reduce_uninit() missing
        copy_tile(A, 0, 0);
    } else if constexpr (op == BAD_PACK_OUTSIDE_WAIT) {
        copy_init(A);
        copy_tile(A, 0, 0);
        cb_reserve_back(OUT, 1);
        pack_tile(0, OUT);  // before tile_regs_commit/tile_regs_wait
    }
    pack_out();
    if constexpr (reduce) reduce_uninit();
}
