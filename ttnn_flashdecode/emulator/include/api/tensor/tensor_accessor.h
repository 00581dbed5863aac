// Emulator version of api/tensor/tensor_accessor.h (TT-Metalium 0.81.1), compile-time args only:
// - DRAM interleaved: page i in bank i % NUM_DRAM_BANKS at (i / NUM_DRAM_BANKS) *
//   align(page_size, DRAM_ALIGNMENT) + bank_base_address + offset, like InterleavedAddrGen<true>.
// - Sharded (L1): page i's coordinate in the tensor's page shape (row-major) gives its shard (the
//   shard grid flattened row-major) and its place in the shard; shard s lives in bank s % banks,
//   slot s / banks (round robin) or, shard-contiguous, bank s / (shards / banks), slot
//   s % (shards / banks); the page sits at bank_base_address + (slot * shard_volume + place) *
//   page_size + offset in the L1 of the bank's core (NoC x, y from the bank coordinates).
#pragma once

#include <cstddef>
#include <cstdint>

#include "emu/kernel_prelude.h"
#include "api/tensor/tensor_accessor_args.h"

template <typename DSpec>
struct TensorAccessor {
    static constexpr bool is_dram = DSpec::is_dram;
    uint32_t bank_base_address = 0;
    uint32_t page_size = 0;

    template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET>
    TensorAccessor(const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>&, const uint32_t bank_base_address_in,
                   const uint32_t page_size_in = TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>::AlignedPageSize)
        : bank_base_address(bank_base_address_in), page_size(page_size_in) {}

    uint32_t get_aligned_page_size() const { return page_size; }

    std::uint64_t get_noc_addr(const uint32_t page_id, const uint32_t offset = 0, uint8_t noc = noc_index) const {
        emu::check_noc(noc, "TensorAccessor::get_noc_addr");
        if constexpr (!DSpec::is_sharded) {
            return emu::dram_page_noc_addr(page_id, bank_base_address, page_size, offset);
        } else {
            uint32_t shard = 0, place = 0, rest = page_id;
            uint32_t grid_stride = 1, shard_stride = 1, shard_volume = 1, shards = 1;
            for (int i = int(DSpec::Rank) - 1; i >= 0; --i) {
                const uint32_t extent = DSpec::tensor_shape(i), edge = DSpec::shard_shape(i);
                const uint32_t coord = rest % extent;
                rest /= extent;
                shard += coord / edge * grid_stride;
                place += coord % edge * shard_stride;
                grid_stride *= (extent + edge - 1) / edge;
                shard_stride *= edge;
            }
            shard_volume = shard_stride;
            shards = grid_stride;
            if (rest != 0) emu::fail("TensorAccessor: page id past the sharded tensor's pages");
            uint32_t bank, slot;
            if constexpr (DSpec::ShardContiguous) {
                const uint32_t per_bank = shards / DSpec::NumBanks;
                bank = shard / per_bank;
                slot = shard % per_bank;
            } else {
                bank = shard % DSpec::NumBanks;
                slot = shard / DSpec::NumBanks;
            }
            const uint32_t xy = DSpec::bank_xy(bank);
            return emu::noc_xy_addr((xy >> 8) & 0xffu, xy & 0xffu,
                                    bank_base_address + (slot * shard_volume + place) * page_size + offset);
        }
    }
};

template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET>
TensorAccessor(const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>&, size_t)
    -> TensorAccessor<TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>>;
template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET>
TensorAccessor(const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>&, size_t, uint32_t)
    -> TensorAccessor<TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>>;
