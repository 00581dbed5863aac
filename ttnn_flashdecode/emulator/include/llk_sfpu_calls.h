// Emulator host version of the LLK's SFPU call layer that the compute API's SFPU functions expand to
// (ttnn 0.81.1's llk_math_eltwise_unary_sfpu_macros.h / llk_math_eltwise_binary_sfpu_macros.h,
// SFPU_UNARY_CALL and SFPU_BINARY_CALL, and the ckernel::sfpu functors they name). A kernel calls
// them directly, inside MATH(...), to pick the vector mode of an SFPU op whose public API fixes
// VectorMode::RC (tanh_tile, log_tile, mul_unary_tile, add / sub / mul_binary_tile), or to run an op whose API fixes
// 8 iterations a face on fewer (recip_tile, binary_max_tile). Only the
// functors those APIs use are here; the engine runs each with the call's vector mode.
#pragma once

#include <cstdint>

#include "emu/compute_engine.hpp"
#include "llk_defs.h"

#define EMU_SFPU_EXPAND(...) __VA_ARGS__
#define SFPU_UNARY_CALL(DST_SYNC, DST_ACCUM, FN, TEMPLATES, DST_IDX, VECTOR_MODE, ...) \
    (::ckernel::sfpu::FN<EMU_SFPU_EXPAND TEMPLATES>(DST_IDX, VECTOR_MODE, ##__VA_ARGS__))
#define SFPU_BINARY_CALL(DST_SYNC, DST_ACCUM, FN, TEMPLATES, DST_IN0, DST_IN1, DST_OUT, VECTOR_MODE, ...) \
    (::ckernel::sfpu::FN<EMU_SFPU_EXPAND TEMPLATES>(DST_IN0, DST_IN1, DST_OUT, VECTOR_MODE, ##__VA_ARGS__))

namespace ckernel {

// ckernel_defs.h (values as the wheel's).
enum class DstRoundingMode : std::uint8_t { Default = 0, NearestEven = 1 };
enum class BinaryOp : std::uint8_t { ADD = 0, SUB = 1, MUL = 2, DIV = 3, RSUB = 4, POW = 5, XLOGY = 6 };
// binop_with_scalar.h's BINOP_MODE values.
enum { ADD_UNARY = 0, SUB_UNARY = 1, MUL_UNARY = 2, DIV_UNARY = 3, RSUB_UNARY = 4 };

namespace sfpu {

inline emu::compute::VecMode emu_mode(VectorMode mode) { return static_cast<emu::compute::VecMode>(mode); }

template <bool APPROXIMATION_MODE, bool is_fp32_dest_acc_en, int ITERATIONS>
inline void calculate_tanh(std::uint32_t idst, VectorMode mode) {
    emu::compute::tanh_tile(APPROXIMATION_MODE, is_fp32_dest_acc_en, idst, emu_mode(mode), ITERATIONS);
}

template <bool APPROXIMATION_MODE, bool FAST_APPROX, bool HAS_BASE_SCALING, bool is_fp32_dest_acc_en, int ITERATIONS = 8,
          bool IS_BASE_TWO = false>
inline void calculate_log(std::uint32_t idst, VectorMode mode, std::uint32_t log_base_scale_factor) {
    static_assert(!HAS_BASE_SCALING && !IS_BASE_TWO, "the emulator models the natural log only");
    (void)log_base_scale_factor;
    emu::compute::log_tile(FAST_APPROX, is_fp32_dest_acc_en, idst, emu_mode(mode), ITERATIONS);
}

template <bool APPROXIMATION_MODE, int BINOP_MODE, int ITERATIONS, bool is_fp32_dest_acc_en>
inline void calculate_binop_with_scalar(std::uint32_t idst, VectorMode mode, std::uint32_t param) {
    static_assert(BINOP_MODE == MUL_UNARY, "the emulator models mul_unary_tile only");
    emu::compute::mul_unary_tile(is_fp32_dest_acc_en, idst, param, emu_mode(mode), ITERATIONS);
}

// ckernel_sfpu_binop_with_unary.h calculate_add_int32 (add_unary_tile_int32's functor): DST datum + an
// int32 scalar, on the datum's 32 bits as a two's complement integer.
template <bool APPROXIMATION_MODE, int ITERATIONS>
inline void calculate_add_int32(std::uint32_t idst, VectorMode mode, std::uint32_t scalar) {
    emu::compute::add_int32_scalar_tile(idst, scalar, emu_mode(mode), ITERATIONS);
}

// ckernel_sfpu_bitwise.h (bitwise_and_tile's functor): DST datum AND a 32-bit scalar, Int32 layout.
enum class UnaryBitwiseOp : std::uint8_t { AND = 0, OR = 1, XOR = 2 };
template <bool APPROXIMATION_MODE, UnaryBitwiseOp BITWISE_OP, DataFormat DATA_FORMAT = DataFormat::Int32,
          int ITERATIONS = 8>
inline void calculate_sfpu_unary_bitwise(std::uint32_t idst, VectorMode mode, std::uint32_t value) {
    static_assert(BITWISE_OP == UnaryBitwiseOp::AND && DATA_FORMAT == DataFormat::Int32,
                  "the emulator models the Int32 bitwise AND only");
    emu::compute::bitwise_and_scalar_tile(idst, value, emu_mode(mode), ITERATIONS);
}

template <bool APPROXIMATION_MODE, BinaryOp BINOP, int ITERATIONS, bool is_fp32_dest_acc_en,
          DstRoundingMode dst_rounding_mode = DstRoundingMode::Default>
inline void calculate_sfpu_binary(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, VectorMode mode) {
    static_assert((BINOP == BinaryOp::ADD || BINOP == BinaryOp::SUB) && dst_rounding_mode == DstRoundingMode::Default,
                  "the emulator models the SFPU add and subtract (default rounding) only");
    if constexpr (BINOP == BinaryOp::ADD) {
        emu::compute::add_binary_tile(idst0, idst1, odst, emu_mode(mode), ITERATIONS);
    } else {
        emu::compute::sub_binary_tile(idst0, idst1, odst, emu_mode(mode), ITERATIONS);
    }
}

template <bool APPROXIMATION_MODE, BinaryOp BINOP, int ITERATIONS, bool is_fp32_dest_acc_en>
inline void calculate_sfpu_binary_mul(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, VectorMode mode) {
    static_assert(BINOP == BinaryOp::MUL, "the emulator models the SFPU multiply only");
    emu::compute::mul_binary_tile(is_fp32_dest_acc_en, idst0, idst1, odst, emu_mode(mode), ITERATIONS);
}

// ckernel_sfpu_recip.h calculate_reciprocal (recip_tile's functor, its ReciprocalApproxMode resolved
// to APPROXIMATION_MODE; the engine checks that against recip_tile_init's).
template <bool APPROXIMATION_MODE, bool is_fp32_dest_acc_en, int ITERATIONS = 8>
inline void calculate_reciprocal(std::uint32_t idst, VectorMode mode) {
    emu::compute::recip_functor(is_fp32_dest_acc_en, APPROXIMATION_MODE, idst, emu_mode(mode), ITERATIONS);
}

// ckernel_sfpu_binary_max_min.h calculate_binary_max_min (binary_max_tile's functor): the max only.
template <bool IS_MAX_OP = true, int ITERATIONS = 8>
inline void calculate_binary_max_min(std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst, VectorMode mode) {
    static_assert(IS_MAX_OP, "the emulator models binary_max_tile only");
    emu::compute::binary_max_tile(idst0, idst1, odst, emu_mode(mode), ITERATIONS);
}

}  // namespace sfpu
}  // namespace ckernel
