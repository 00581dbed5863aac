// Emulator version of api/tensor/tensor_accessor_args.h (TT-Metalium 0.81.1): DRAM-interleaved and
// sharded tensors whose every field is compile-time. CTA layout (the wheel's TensorAccessorArgs):
//   interleaved: [ArgConfig (IsDram = 2), aligned_page_size]
//   sharded:     [ArgConfig (Sharded = 1, + IsDram = 2 for DRAM), aligned_page_size, rank, num_banks
//                 (bit 31: shard-contiguous), tensor_shape[rank] and shard_shape[rank] in pages,
//                 bank coordinates two per word (bank 2i in the low half; x in a half's high byte)]
// Runtime (common-runtime-arg) fields and L1-interleaved tensors are refused at compile time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/compile_time_args.h"

namespace tensor_accessor {
constexpr std::size_t UNKNOWN = static_cast<std::size_t>(-1);
constexpr std::size_t MAX_RANK = 8;
constexpr uint32_t ShardContiguousBit = 1u << 31;

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
    static_assert(is_sharded || is_dram,
                  "emulator: L1-interleaved TensorAccessorArgs are not supported (DRAM-interleaved or sharded)");
    static_assert((args_config_raw & ~uint32_t(tensor_accessor::ArgConfig::IsDram | tensor_accessor::ArgConfig::Sharded)) == 0,
                  "emulator: runtime fields of TensorAccessorArgs (ArgConfig bits above IsDram) are not supported");
    static constexpr uint32_t AlignedPageSize = get_ct_arg<CTA_OFFSET + 1>();

    static constexpr uint32_t Rank = [] {
        if constexpr (is_sharded) return get_ct_arg<CTA_OFFSET + 2>(); else return 0u;
    }();
    static constexpr uint32_t NumBanksRaw = [] {
        if constexpr (is_sharded) return get_ct_arg<CTA_OFFSET + 3>(); else return 0u;
    }();
    static constexpr uint32_t NumBanks = NumBanksRaw & ~tensor_accessor::ShardContiguousBit;
    static constexpr bool ShardContiguous = (NumBanksRaw & tensor_accessor::ShardContiguousBit) != 0;
    static_assert(!is_sharded || (Rank >= 1 && Rank <= tensor_accessor::MAX_RANK), "emulator: sharded rank must be 1..8");
    static_assert(!is_sharded || NumBanks >= 1, "emulator: a sharded tensor needs at least one bank");
    static constexpr uint32_t TensorShapeOffset = CTA_OFFSET + 4;
    static constexpr uint32_t ShardShapeOffset = TensorShapeOffset + Rank;
    static constexpr uint32_t BankCoordsOffset = ShardShapeOffset + Rank;

    constexpr TensorAccessorArgs() = default;
    static constexpr uint32_t num_compile_time_args() { return is_sharded ? 4 + 2 * Rank + (NumBanks + 1) / 2 : 2; }
    static constexpr uint32_t num_common_runtime_args() { return 0; }
    static constexpr uint32_t next_compile_time_args_offset() { return CTA_OFFSET + num_compile_time_args(); }
    static constexpr uint32_t next_common_runtime_args_offset() {
        return CRTA_OFFSET == tensor_accessor::UNKNOWN ? 0 : CRTA_OFFSET;
    }
    static constexpr uint32_t get_aligned_page_size() { return AlignedPageSize; }
    static constexpr uint32_t tensor_shape(uint32_t i) { return kernel_compile_time_args[TensorShapeOffset + i]; }
    static constexpr uint32_t shard_shape(uint32_t i) { return kernel_compile_time_args[ShardShapeOffset + i]; }
    // Bank `bank`'s packed NoC coordinate: x in the high byte, y in the low byte.
    static constexpr uint32_t bank_xy(uint32_t bank) {
        const uint32_t word = kernel_compile_time_args[BankCoordsOffset + bank / 2];
        return bank % 2 ? word >> 16 : word & 0xffffu;
    }
};
