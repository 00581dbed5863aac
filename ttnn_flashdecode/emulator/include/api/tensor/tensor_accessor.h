// Emulator version of api/tensor/tensor_accessor.h (TT-Metalium 0.81.1), DRAM-interleaved only:
// TensorAccessor(args, bank_base_address, page_size = args' aligned page size) maps page i to
// bank i % NUM_DRAM_BANKS at (i / NUM_DRAM_BANKS) * align(page_size, DRAM_ALIGNMENT)
// + bank_base_address + offset (+ the bank's DRAM offset), like InterleavedAddrGen<true>.
#pragma once

#include <cstddef>
#include <cstdint>

#include "emu/kernel_prelude.h"
#include "api/tensor/tensor_accessor_args.h"

template <typename DSpec>
struct TensorAccessor {
    static constexpr bool is_dram = true;
    uint32_t bank_base_address = 0;
    uint32_t page_size = 0;

    template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET>
    TensorAccessor(const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>&, const uint32_t bank_base_address_in,
                   const uint32_t page_size_in = TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>::AlignedPageSize)
        : bank_base_address(bank_base_address_in), page_size(page_size_in) {}

    uint32_t get_aligned_page_size() const { return page_size; }

    std::uint64_t get_noc_addr(const uint32_t page_id, const uint32_t offset = 0, uint8_t noc = 0) const {
        (void)noc;
        return emu::dram_page_noc_addr(page_id, bank_base_address, page_size, offset);
    }
};

template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET>
TensorAccessor(const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>&, size_t)
    -> TensorAccessor<TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>>;
template <std::size_t CTA_OFFSET, std::size_t CRTA_OFFSET>
TensorAccessor(const TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>&, size_t, uint32_t)
    -> TensorAccessor<TensorAccessorArgs<CTA_OFFSET, CRTA_OFFSET>>;
