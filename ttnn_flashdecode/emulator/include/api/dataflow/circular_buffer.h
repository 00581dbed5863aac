// Emulator version of api/dataflow/circular_buffer.h (TT-Metalium 0.81.1): the CircularBuffer
// wrapper sdpa-style kernels use, for dataflow and compute kernels alike. The calls go straight to
// the emulator's CB runtime, which applies the same checks for every role.
#pragma once

#include <cstdint>

#include "emu/kernel_prelude.h"

class CircularBuffer {
public:
    enum class AddrSelector { WRITE_PTR, READ_PTR };

    explicit CircularBuffer(uint32_t cb_id) : cb_id_(cb_id) {}

    uint32_t get_cb_id() const { return cb_id_; }
    void reserve_back(int32_t num_pages) { emu::cb_reserve_back(cb_id_, static_cast<uint32_t>(num_pages)); }
    void push_back(int32_t num_pages) { emu::cb_push_back(cb_id_, static_cast<uint32_t>(num_pages)); }
    void wait_front(int32_t num_pages) { emu::cb_wait_front(cb_id_, static_cast<uint32_t>(num_pages)); }
    void pop_front(int32_t num_pages) { emu::cb_pop_front(cb_id_, static_cast<uint32_t>(num_pages)); }
    uint32_t get_tile_size() const { return emu::cb_page_size(cb_id_); }
    uint32_t get_tile_hw() const { return 32 * 32; }
    bool pages_reservable_at_back(int32_t n) const {
        return emu::cb_pages_reservable_at_back(cb_id_, static_cast<uint32_t>(n));
    }
    bool pages_available_at_front(int32_t n) const {
        return emu::cb_pages_available_at_front(cb_id_, static_cast<uint32_t>(n));
    }
    // Byte L1 addresses (the TRISC 16-byte-word form is not modelled).
    uint32_t get_write_ptr() const { return emu::cb_write_addr(cb_id_); }
    uint32_t get_read_ptr() const { return emu::cb_read_addr(cb_id_); }

private:
    uint32_t cb_id_;
};
