// Emulator host version of tt-llk's llk_lib/llk_defs.h: the ckernel enums the compute API uses,
// with the same names, underlying types and values as ttnn 0.81.1's
// tt_metal/tt-llk/tt_llk_wormhole_b0/llk_lib/llk_defs.h.
#pragma once

#include <cstdint>

// tt::DataFormat, at global scope as the compute kernels see it (tensix_types.h); only the codes the
// compute API's integer SFPU ops take as a template argument here (the CB formats the engine
// unpacks and packs are emu::DataFormat).
enum class DataFormat : std::uint8_t { Int32 = 8, UInt16 = 9, UInt32 = 24 };

namespace ckernel {

enum class VectorMode : std::uint8_t { None = 0, R = 1, C = 2, RC = 4, RC_custom = 6, Invalid = 0xFF };

enum class ReduceDim : std::uint8_t { REDUCE_ROW, REDUCE_COL, REDUCE_SCALAR };

enum class PoolType : std::uint8_t { SUM, AVG, MAX, MIN };

enum class DataCopyType : std::uint8_t { A2D, B2D };

enum class EltwiseBinaryType : std::uint8_t { ELWMUL, ELWDIV, ELWADD, ELWSUB, ELWLESS };

enum class EltwiseBinaryReuseDestType { NONE = 0, DEST_TO_SRCA = 1, DEST_TO_SRCB = 2 };

enum class DstSync : std::uint8_t { SyncHalf = 0, SyncFull = 1 };

enum class BroadcastType : std::uint8_t { NONE = 0x0, COL = 0x1, ROW = 0x2, SCALAR = 0x3 };

enum class MathFidelity : std::uint8_t { LoFi = 0, HiFi2 = 2, HiFi3 = 3, HiFi4 = 4 };

constexpr bool UnpackToDestEn = true;
constexpr bool UnpackToDestDis = false;

// ckernel_instr_params.h
struct p_sfpu {
    constexpr static std::uint32_t kCONST_1_FP16B = 0x3F80;
};

}  // namespace ckernel
