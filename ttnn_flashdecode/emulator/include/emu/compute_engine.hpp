// The emulator's compute engine: what the compute API headers (include/api/compute/*.h) call.
//
// Execution model. On silicon a compute kernel is compiled three times and runs on three TRISCs
// (UNPACK, MATH, PACK) that hand tiles to each other through SrcA/SrcB and the DST register. Here
// the kernel is compiled once and runs as ONE host thread: each API call does its unpack, math and
// pack parts in program order (the three TRISCs are serialised). The engine keeps the state the
// hardware keeps between calls -- DST contents and sections, the unpacker / FPU / packer
// configuration written by the *_init calls, the SFPU configuration, the data formats -- and
// fails the run (emu::fail) when a call would read state that is missing, stale or for other CBs,
// because on silicon those calls silently produce garbage.
//
// All state is per compute thread (thread_local): one emulated core runs one compute kernel.
// The runtime calls compute_thread_begin() before the compute kernel's kernel_main() and
// compute_thread_end() after it returns.
//
// Template parameters of the real API are passed here as plain integers; every function fails
// when called from a dataflow kernel. Every entry point counts its API call (emu::count_call).
#pragma once

#include <cstdint>

// Kernels are built with -fvisibility=hidden; these live in libttemu.so.
#pragma GCC visibility push(default)

namespace emu::compute {

// Mirrors of the ckernel enums (llk_defs.h) as plain integers, so this header does not depend on
// the kernel-side headers.
enum class BinaryOp : uint8_t { Mul = 0, Add = 2, Sub = 3 };           // EltwiseBinaryType values
enum class Bcast : uint8_t { None = 0, Col = 1, Row = 2, Scalar = 3 };  // BroadcastType values
enum class ReuseDest : uint8_t { None = 0, ToSrcA = 1, ToSrcB = 2 };    // EltwiseBinaryReuseDestType
enum class Pool : uint8_t { Sum = 0, Avg = 1, Max = 2, Min = 3 };       // PoolType values
enum class RDim : uint8_t { Row = 0, Col = 1, Scalar = 2 };             // ReduceDim values
enum class VecMode : uint8_t { None = 0, R = 1, C = 2, RC = 4, RC_custom = 6 };  // VectorMode

// Lifecycle (called by the runtime around the compute kernel's kernel_main()).
void compute_thread_begin();
void compute_thread_end();

// compute_kernel_hw_startup<SrcOrder>(icb0, icb1, ocb) after SrcOrder is applied; the
// compile-time constants the kernel was built with are checked against emu::compute_config().
void hw_startup(uint32_t srca_cb, uint32_t srcb_cb, uint32_t ocb, bool dst_accum_mode, bool dst_sync_full,
                uint32_t math_fidelity, bool approx);

// DST handshake (reg_api.h).
void tile_regs_acquire();
void tile_regs_commit(bool is_fp32_dest_acc_en);
void tile_regs_wait();
void tile_regs_release(bool is_fp32_dest_acc_en);
void acquire_dst();
void release_dst(bool is_fp32_dest_acc_en);

// Compute-side circular-buffer calls (cb_api.h): counted, then forwarded to the runtime.
void cb_wait_front(uint32_t cb, uint32_t n);
void cb_pop_front(uint32_t cb, uint32_t n);
void cb_reserve_back(uint32_t cb, uint32_t n);
void cb_push_back(uint32_t cb, uint32_t n);
// read_tile_value: uint32 `element_offset` of page `tile` of `cb`, which must be waited for.
uint32_t read_tile_value(uint32_t cb, uint32_t tile, uint32_t element_offset);

// Unpack -> DST copy (tile_move_copy.h).
void copy_init(const char* api, uint32_t cb, uint32_t transpose, uint32_t transpose_within_face,
               bool is_fp32_dest_acc_en);
void copy_tile(uint32_t cb, uint32_t itile, uint32_t idst, bool is_fp32_dest_acc_en);
// unary_bcast<BroadcastType::COL> (bcast.h): DST[idst][r][c] = CB tile[r][0]; a data copy, no multiply.
void unary_bcast_col_init(uint32_t cb, bool is_fp32_dest_acc_en);
void unary_bcast_col(uint32_t cb, uint32_t itile, uint32_t idst, bool is_fp32_dest_acc_en);
void unary_bcast_col_uninit(uint32_t cb);

// Matmul (matmul.h). DST[idst] += in0 · in1 (in1 transposed per init).
void matmul_init(const char* api, uint32_t in0, uint32_t in1, uint32_t transpose, uint32_t ct, uint32_t rt,
                 uint32_t kt);
void matmul_tiles(uint32_t in0, uint32_t in1, uint32_t i0, uint32_t i1, uint32_t idst);
void matmul_block(uint32_t in0, uint32_t in1, uint32_t i0, uint32_t i1, uint32_t idst, uint32_t transpose,
                  uint32_t ct, uint32_t rt, uint32_t kt);

// Reduce (reduce.h).
void reduce_init(Pool pool, RDim dim, bool is_fp32_dest_acc_en, uint32_t icb, uint32_t scb, uint32_t ocb);
void reduce_tile(Pool pool, RDim dim, bool is_fp32_dest_acc_en, uint32_t icb, uint32_t scb, uint32_t itile,
                 uint32_t itile_scaler, uint32_t idst);
void reduce_uninit(uint32_t icb);

// Element-wise binary and broadcast (eltwise_binary.h, bcast.h). `api` is the API name.
void binary_init(const char* api, BinaryOp op, Bcast bcast, uint32_t icb0, uint32_t icb1, bool acc_to_dest);
void binary_tiles(const char* api, BinaryOp op, Bcast bcast, uint32_t icb0, uint32_t icb1, uint32_t i0,
                  uint32_t i1, uint32_t idst, bool is_fp32_dest_acc_en);
void binary_reuse_init(const char* api, BinaryOp op, ReuseDest reuse, uint32_t icb);
void binary_reuse_tiles(const char* api, BinaryOp op, ReuseDest reuse, uint32_t icb, uint32_t itile, uint32_t idst,
                        bool is_fp32_dest_acc_en);

// SFPU (eltwise_unary/exp.h, eltwise_unary/recip.h, binary_max_min.h).
void exp_tile_init(bool approx, uint32_t scale_fp32_bits, bool clamp_to_negative, bool is_fp32_dest_acc_en);
void exp_tile(bool approx, bool scale_en, bool clamp_to_negative, int iterations, bool is_fp32_dest_acc_en,
              uint32_t idst, VecMode mode, uint16_t scale_bf16);
// One datum of the LLK's approximate exp (exp_tile<approx=true>) as it leaves the SFPU's LReg, before
// SFPSTORE (exp_init's `scale` as a float; clamp: InputClamping::ClampToNegative). See compute_engine.cpp.
float exp_approx_llk(float x, float scale, bool clamp_to_negative);
// approx_mode: 0 = Default (APPROX), 1 = Precise, 2 = Approximate (ReciprocalApproxMode).
void recip_tile_init(bool fp32_dest, int approx_mode);
void recip_tile(bool fp32_dest, int approx_mode, uint32_t idst, VecMode mode, int iterations = 8);
// The LLK functor recip_tile calls (calculate_reciprocal), its ReciprocalApproxMode resolved to a bool.
void recip_functor(bool fp32_dest, bool approximation, uint32_t idst, VecMode mode, int iterations);
void binary_max_tile_init();
void binary_max_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, VecMode mode, int iterations = 8);
// tanh (compute_kernel_api.h tanh_tile; fast_and_approx refused) and DST * fp32 scalar
// (eltwise_unary/binop_with_scalar.h mul_unary_tile), the logit softcap's SFPU passes.
void tanh_tile_init(bool approx, bool is_fp32_dest_acc_en);
void tanh_tile(bool approx, bool is_fp32_dest_acc_en, uint32_t idst, VecMode mode, int iterations = 8);
// One datum of the LLK's bfloat16-DST tanh (calculate_tanh<false, false>) before SFPSTORE.
float tanh_poly_llk(float x);
void binop_with_scalar_tile_init();
void mul_unary_tile(bool is_fp32_dest_acc_en, uint32_t idst, uint32_t param_fp32_bits, VecMode mode, int iterations = 8);
// The integer SFPU ops on a 32-bit DST's raw datum bits (SFPLOAD / SFPSTORE INT32 move them
// unconverted): + an int32 scalar (add_unary_tile_int32, after binop_with_scalar_tile_init) and AND a
// 32-bit scalar (bitwise_and_tile<Int32>, after bitwise_and_tile_init). A 16-bit DST is refused.
void add_int32_scalar_tile(uint32_t idst, uint32_t scalar, VecMode mode, int iterations = 8);
void bitwise_and_tile_init();
void bitwise_and_scalar_tile(uint32_t idst, uint32_t value, VecMode mode, int iterations = 8);
// The LSE stage's SFPU passes: log (compute_kernel_api.h log_tile; fast_and_approx refused) and the
// binary SFPU add of two DST tiles (eltwise_binary_sfpu.h). The `mode` of the SFPU calls whose public
// API fixes VectorMode::RC (tanh, log, mul_unary, the binary ops) is the LLK call's (SFPU_UNARY_CALL /
// SFPU_BINARY_CALL, llk_sfpu_calls.h), through which a kernel runs them on fewer faces.
void log_tile_init(bool approx, bool is_fp32_dest_acc_en);
void log_tile(bool approx, bool is_fp32_dest_acc_en, uint32_t idst, VecMode mode, int iterations = 8);
void add_binary_tile_init();
void add_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, VecMode mode, int iterations = 8);
void sub_binary_tile_init();
void sub_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, VecMode mode, int iterations = 8);
void mul_binary_tile_init();
void mul_binary_tile(bool is_fp32_dest_acc_en, uint32_t idst0, uint32_t idst1, uint32_t odst, VecMode mode, int iterations = 8);

// Pack (pack.h).
void pack_tile(bool out_of_order, bool is_fp32_dest_acc_en, uint32_t idst, uint32_t cb, uint32_t tile_index);

// Data-format reconfiguration (reconfig_data_format.h). `old_cb` = UINT32_MAX when not given.
void reconfig_srca(const char* api, uint32_t old_cb, uint32_t new_cb);
void reconfig_srcb(const char* api, uint32_t old_cb, uint32_t new_cb);
void pack_reconfig(const char* api, uint32_t old_cb, uint32_t new_cb);
// reconfig_data_format (both unpackers; one counted call). Arguments already in SrcA/SrcB order.
void reconfig_both(const char* api, uint32_t a_old, uint32_t a_new, uint32_t b_old, uint32_t b_new);

constexpr uint32_t kNoCb = 0xFFFFFFFFu;

}  // namespace emu::compute

#pragma GCC visibility pop
