// Emulator version of api/tensor/tensor_accessor_args.h (TT-Metalium 0.81.1), interleaved only.
// CTA layout (TT_FACTS §3): CTA[off] = ArgConfig bits; a DRAM-interleaved tensor is
// [IsDram(2), aligned_page_size] (2 CTAs, 0 CRTAs). Sharded or runtime-field configs are refused
// at compile time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/compile_time_args.h"

namespace tensor_accessor {
constexpr std::size_t UNKNOWN = static_cast<std::size_t>(-1);

struct ArgConfig {
    enum : uint8_t {
        None = 0,
        Sharded = 1 << 0,
        IsDram = 1 << 1,
        RuntimeRank = 1 << 2,
        RuntimeNumBanks = 1 << 3,
        RuntimeTensorShape = 1 << 4,
        RuntimeShardShape = 1 << 5,
        RuntimeBankCoords = 1 << 6,
        RuntimePageSize = 1 << 7,
    };
};
}  // namespace tensor_accessor

template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET = tensor_accessor::UNKNOWN>
struct TensorAccessorArgs {
    static constexpr uint32_t args_config_raw = get_ct_arg<CTA_OFFSET>();
    static constexpr bool is_sharded = (args_config_raw & tensor_accessor::ArgConfig::Sharded) != 0;
    static constexpr bool is_dram = (args_config_raw & tensor_accessor::ArgConfig::IsDram) != 0;
    static constexpr bool runtime_page_size = (args_config_raw & tensor_accessor::ArgConfig::RuntimePageSize) != 0;
    static_assert(!is_sharded, "emulator: sharded TensorAccessorArgs are not supported (DRAM-interleaved only)");
    static_assert(is_dram, "emulator: L1-interleaved TensorAccessorArgs are not supported (DRAM-interleaved only)");
    static_assert(!runtime_page_size, "emulator: RuntimePageSize TensorAccessorArgs are not supported");
    static_assert((args_config_raw & ~uint32_t(tensor_accessor::ArgConfig::IsDram)) == 0,
                  "emulator: only ArgConfig::IsDram (2) is supported for TensorAccessorArgs");
    static constexpr uint32_t AlignedPageSize = get_ct_arg<CTA_OFFSET + 1>();

    constexpr TensorAccessorArgs() = default;
    static constexpr uint32_t num_compile_time_args() { return 2; }
    static constexpr uint32_t num_common_runtime_args() { return 0; }
    static constexpr uint32_t next_compile_time_args_offset() { return CTA_OFFSET + num_compile_time_args(); }
    static constexpr uint32_t next_common_runtime_args_offset() {
        return CRTA_OFFSET == tensor_accessor::UNKNOWN ? 0 : CRTA_OFFSET;
    }
    static constexpr uint32_t get_aligned_page_size() { return AlignedPageSize; }
};
