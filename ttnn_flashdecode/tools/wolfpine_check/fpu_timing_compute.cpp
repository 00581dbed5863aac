// wolfpine FPU timing probe: N repetitions of ONE compute API call on tiles already in a CB.
//
// Runtime args: [0] the op (kOp* below), [1] N. The reader pushes tile A into CB 0 and tile B
// into CB 1 once; this kernel runs the op's init once, then N calls of the op into DST tile 0
// (matmul_tiles, reduce_tile and mul_tiles -- ELWMUL always adds onto DST -- accumulate into DST; add, sub and copy overwrite
// it), packs DST tile 0 once into CB 16 (the pack op: N pack_tile calls, out of order onto the
// same page). The writer drains CB 16. Two runs, N and 2N calls, give the marginal cost of one
// call: everything else (start-up, CB handshakes, the final pack) is the same in both.
// FPU, unpacker and packer only: wolfpine cannot run SFPU code built without SFPI's compiler.
#include <cstdint>

#include "api/compute/bcast.h"
#include "api/compute/compute_kernel_api.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/matmul.h"
#include "api/compute/pack.h"
#include "api/compute/reconfig_data_format.h"
#include "api/compute/reduce.h"
#include "api/compute/tile_move_copy.h"

namespace {

constexpr uint32_t kCbA = 0;
constexpr uint32_t kCbB = 1;
constexpr uint32_t kCbOut = 16;

// Keep in step with fpu_timing.OPS (the runtime arg's values).
constexpr uint32_t kOpMatmul = 0;
constexpr uint32_t kOpReduceMax = 1;
constexpr uint32_t kOpReduceSum = 2;
constexpr uint32_t kOpAdd = 3;
constexpr uint32_t kOpSubBcastCols = 4;
constexpr uint32_t kOpMul = 5;
constexpr uint32_t kOpCopy = 6;
constexpr uint32_t kOpPack = 7;

}  // namespace

void kernel_main() {
    const uint32_t op = get_arg_val<uint32_t>(0);
    const uint32_t n = get_arg_val<uint32_t>(1);
    compute_kernel_hw_startup(kCbA, kCbB, kCbOut);
    cb_wait_front(kCbA, 1);
    cb_wait_front(kCbB, 1);
    cb_reserve_back(kCbOut, 1);
    tile_regs_acquire();
    switch (op) {
        case kOpMatmul:
            matmul_init(kCbA, kCbB);
            for (uint32_t i = 0; i < n; ++i) {
                matmul_tiles(kCbA, kCbB, 0, 0, 0);
            }
            break;
        case kOpReduceMax:
            reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(kCbA, kCbB, kCbOut);
            for (uint32_t i = 0; i < n; ++i) {
                reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(kCbA, kCbB, 0, 0, 0);
            }
            break;
        case kOpReduceSum:
            reconfig_data_format(kCbB, kCbA);  // REDUCE_ROW SUM swaps the operands (reduce.h)
            reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(kCbA, kCbB, kCbOut);
            for (uint32_t i = 0; i < n; ++i) {
                reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(kCbA, kCbB, 0, 0, 0);
            }
            break;
        case kOpAdd:
            add_init(kCbA, kCbB);
            for (uint32_t i = 0; i < n; ++i) {
                add_tiles(kCbA, kCbB, 0, 0, 0);
            }
            break;
        case kOpSubBcastCols:
            sub_bcast_cols_init(kCbA, kCbB);
            for (uint32_t i = 0; i < n; ++i) {
                sub_tiles_bcast_cols(kCbA, kCbB, 0, 0, 0);
            }
            break;
        case kOpMul:
            mul_init(kCbA, kCbB);
            for (uint32_t i = 0; i < n; ++i) {
                mul_tiles(kCbA, kCbB, 0, 0, 0);
            }
            break;
        case kOpCopy:
        case kOpPack:
            copy_init(kCbA);
            for (uint32_t i = 0, calls = op == kOpCopy ? n : 1; i < calls; ++i) {
                copy_tile(kCbA, 0, 0);
            }
            break;
        default:
            break;
    }
    tile_regs_commit();
    tile_regs_wait();
    pack_reconfig_data_format(kCbOut);
    if (op == kOpPack) {
        for (uint32_t i = 0; i < n; ++i) {
            pack_tile<true>(0, kCbOut, 0);
        }
    } else {
        pack_tile(0, kCbOut);
    }
    tile_regs_release();
    cb_push_back(kCbOut, 1);
}
