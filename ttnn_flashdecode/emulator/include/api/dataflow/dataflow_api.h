// Emulator version of api/dataflow/dataflow_api.h (TT-Metalium 0.81.1): the subset the
// project's kernels use, with the real names and signatures, implemented on the emulator
// runtime (emu/runtime.hpp). Anything not here is unsupported and fails to compile.
#pragma once

#if defined(COMPILE_FOR_TRISC)
#error "api/dataflow/dataflow_api.h included in a compute (TRISC) kernel build"
#endif
#if !defined(COMPILE_FOR_BRISC) && !defined(COMPILE_FOR_NCRISC)
#error "api/dataflow/dataflow_api.h needs COMPILE_FOR_BRISC (writer) or COMPILE_FOR_NCRISC (reader)"
#endif

#include <cstdint>
#include <type_traits>

#include "emu/kernel_prelude.h"

// NoC modes (hostdev/dev_msgs.h) and this kernel's NoC and mode: tt-metal's JIT defines NOC_INDEX
// and NOC_MODE from the kernel's DataMovementConfig (dataflow_api_common.h), and so does the
// emulator's build. DM_DEDICATED_NOC: the kernel owns NoC noc_index and may use no other;
// DM_DYNAMIC_NOC (both data-movement kernels of a core alike): either NoC, per call.
enum : uint8_t { DM_DEDICATED_NOC = 0, DM_DYNAMIC_NOC = 1 };
#if !defined(NOC_INDEX) || !defined(NOC_MODE)
#error "NOC_INDEX and NOC_MODE must be passed by the emulator's kernel build"
#endif
constexpr uint8_t noc_index = NOC_INDEX;
constexpr uint8_t noc_mode = NOC_MODE;
static_assert(noc_index < 2 && noc_mode < 2, "NOC_INDEX: 0 or 1; NOC_MODE: DM_DEDICATED_NOC or DM_DYNAMIC_NOC");

#include "api/compile_time_args.h"
#include "api/debug/kernel_profiler.hpp"
#include "api/tensor/tensor_accessor.h"

#ifndef NOC_MAX_BURST_SIZE
#error "NOC_MAX_BURST_SIZE must be passed by the emulator's kernel build"
#endif

// tt::DataFormat as dataflow code sees it (get_dataformat).
enum class DataFormat : uint8_t {
    Float32 = 0,
    Float16 = 1,
    Bfp8 = 2,
    Bfp4 = 3,
    Bfp2 = 11,
    Float16_b = 5,
    Bfp8_b = 6,
    Bfp4_b = 7,
    Bfp2_b = 15,
    Lf8 = 10,
    Int8 = 14,
    UInt8 = 30,
    UInt16 = 9,
    Int32 = 8,
    UInt32 = 24,
    Tf32 = 4,
    Invalid = 0xff,
};

enum class ProgrammableCoreType : uint8_t { TENSIX = 0, ACTIVE_ETH = 1, IDLE_ETH = 2 };


// ----- coordinates -----------------------------------------------------------------------
inline uint8_t get_absolute_logical_x() { return static_cast<uint8_t>(emu::logical_x()); }
inline uint8_t get_absolute_logical_y() { return static_cast<uint8_t>(emu::logical_y()); }
inline uint8_t get_relative_logical_x() { return static_cast<uint8_t>(emu::logical_x()); }
inline uint8_t get_relative_logical_y() { return static_cast<uint8_t>(emu::logical_y()); }

// ----- runtime args: emu/kernel_args.h (shared with compute kernels) -----------------------
#include "emu/kernel_args.h"

// ----- circular buffers (byte pointers on BRISC/NCRISC) ----------------------------------
FORCE_INLINE void cb_reserve_back(int32_t operand, int32_t num_pages) {
    emu::cb_reserve_back(static_cast<uint32_t>(operand), static_cast<uint32_t>(num_pages));
}
FORCE_INLINE void cb_push_back(const int32_t operand, const int32_t num_pages) {
    emu::cb_push_back(static_cast<uint32_t>(operand), static_cast<uint32_t>(num_pages));
}
FORCE_INLINE void cb_wait_front(int32_t operand, int32_t num_pages) {
    emu::cb_wait_front(static_cast<uint32_t>(operand), static_cast<uint32_t>(num_pages));
}
FORCE_INLINE void cb_pop_front(int32_t operand, int32_t num_pages) {
    emu::cb_pop_front(static_cast<uint32_t>(operand), static_cast<uint32_t>(num_pages));
}
FORCE_INLINE bool cb_pages_reservable_at_back(int32_t operand, int32_t num_pages) {
    return emu::cb_pages_reservable_at_back(static_cast<uint32_t>(operand), static_cast<uint32_t>(num_pages));
}
FORCE_INLINE bool cb_pages_available_at_front(int32_t operand, int32_t num_pages) {
    return emu::cb_pages_available_at_front(static_cast<uint32_t>(operand), static_cast<uint32_t>(num_pages));
}
FORCE_INLINE uint32_t get_write_ptr(uint32_t operand) { return emu::cb_write_addr(operand); }
FORCE_INLINE uint32_t get_read_ptr(uint32_t operand) { return emu::cb_read_addr(operand); }
// Not constexpr here (the JIT bakes CB formats into the kernel; the emulator looks them up).
inline std::int32_t get_tile_size(const std::int32_t operand) {
    return static_cast<std::int32_t>(emu::cb_page_size(static_cast<uint32_t>(operand)));
}
inline uint32_t get_tile_hw(const std::int32_t) { return 32 * 32; }
inline uint32_t get_tile_num_faces(const std::int32_t) { return 4; }
inline DataFormat get_dataformat(const std::int32_t operand) {
    return static_cast<DataFormat>(emu::cb_format(static_cast<uint32_t>(operand)));
}

// ----- NoC addresses ---------------------------------------------------------------------
FORCE_INLINE std::uint64_t get_noc_addr(std::uint32_t noc_x, std::uint32_t noc_y, std::uint32_t addr,
                                        uint8_t noc = noc_index) {
    emu::check_noc(noc, "get_noc_addr");
    return emu::noc_xy_addr(noc_x, noc_y, addr);
}
FORCE_INLINE std::uint64_t get_noc_addr(std::uint32_t addr, uint8_t noc = noc_index) {
    emu::check_noc(noc, "get_noc_addr");
    return emu::noc_xy_addr(emu::noc_x(), emu::noc_y(), addr);
}
template <bool DRAM>
FORCE_INLINE std::uint64_t get_noc_addr_from_bank_id(uint32_t bank_id, uint32_t bank_address_offset,
                                                     uint8_t noc = noc_index) {
    static_assert(DRAM, "the emulator has no L1-interleaved (bank) buffers");
    emu::check_noc(noc, "get_noc_addr_from_bank_id");
    return emu::dram_bank_noc_addr(bank_id, bank_address_offset);
}

// InterleavedAddrGen<DRAM> (dataflow_api_addrgen.h), DRAM only.
template <bool DRAM>
struct InterleavedAddrGen {
    static_assert(DRAM, "the emulator has no L1-interleaved buffers");
    static constexpr bool is_dram = DRAM;
    uint32_t bank_base_address;
    const uint32_t page_size;

    FORCE_INLINE std::uint64_t get_noc_addr(const uint32_t id, const uint32_t offset = 0,
                                            uint8_t noc = noc_index) const {
        emu::check_noc(noc, "InterleavedAddrGen::get_noc_addr");
        return emu::dram_page_noc_addr(id, bank_base_address, page_size, offset);
    }
};

// ----- NoC transfers ---------------------------------------------------------------------
template <uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, bool enable_noc_tracing = true>
inline void noc_async_read(std::uint64_t src_noc_addr, std::uint32_t dst_local_l1_addr, std::uint32_t size,
                           uint8_t noc = noc_index, uint32_t read_req_vc = 0) {
    (void)read_req_vc;
    emu::noc_read(src_noc_addr, dst_local_l1_addr, size, noc);
}

template <uint32_t max_page_size = NOC_MAX_BURST_SIZE + 1, bool enable_noc_tracing = true, bool posted = false>
inline void noc_async_write(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr, std::uint32_t size,
                            uint8_t noc = noc_index, uint32_t vc = 0) {
    (void)vc;
    emu::noc_write(src_local_l1_addr, dst_noc_addr, size, noc);
}

// Each barrier waits for this kernel's transfers on ITS NoC only (tt-metal compares that NoC's
// counters): reads issued on the other NoC stay in flight.
inline void noc_async_read_barrier(uint8_t noc = noc_index) { emu::noc_read_barrier(noc); }
FORCE_INLINE void noc_async_write_barrier(uint8_t noc = noc_index) { emu::noc_write_barrier(noc); }
FORCE_INLINE void noc_async_writes_flushed(uint8_t noc = noc_index) {
    emu::count_call("noc_async_writes_flushed");
    emu::noc_write_barrier(noc);
}
FORCE_INLINE void noc_async_atomic_barrier(uint8_t noc_idx = noc_index) {
    emu::check_noc(noc_idx, "noc_async_atomic_barrier");
    emu::count_call("noc_async_atomic_barrier");
}
FORCE_INLINE void noc_async_full_barrier(uint8_t noc_idx = noc_index) {
    emu::noc_read_barrier(noc_idx);
    emu::noc_write_barrier(noc_idx);
}

// Page transfers through an address generator (TensorAccessor or InterleavedAddrGen).
namespace emu_detail {
// C++17 (kernels compile as the JIT's -std=c++17): does AddrGen have get_aligned_page_size()?
template <typename AddrGen, typename = void>
struct has_aligned_page_size : std::false_type {};
template <typename AddrGen>
struct has_aligned_page_size<AddrGen, std::void_t<decltype(std::declval<const AddrGen&>().get_aligned_page_size())>>
    : std::true_type {};

template <typename AddrGen>
FORCE_INLINE uint32_t addrgen_page_size(const AddrGen& addrgen) {
    if constexpr (has_aligned_page_size<AddrGen>::value) {
        return addrgen.get_aligned_page_size();
    } else {
        return addrgen.page_size;
    }
}
}  // namespace emu_detail

template <typename AddrGen, bool enable_noc_tracing = true>
FORCE_INLINE void noc_async_read_page(const uint32_t id, const AddrGen& addrgen, uint32_t dst_local_l1_addr,
                                      uint32_t offset = 0, uint8_t noc = noc_index) {
    emu::noc_read(addrgen.get_noc_addr(id, offset, noc), dst_local_l1_addr, emu_detail::addrgen_page_size(addrgen), noc);
}

template <typename AddrGen, bool enable_noc_tracing = true, bool posted = false>
FORCE_INLINE void noc_async_write_page(const uint32_t id, const AddrGen& addrgen, uint32_t src_local_l1_addr,
                                       uint32_t size = 0, uint32_t offset = 0, uint8_t noc = noc_index) {
    const uint32_t bytes = size ? size : emu_detail::addrgen_page_size(addrgen);
    emu::noc_write(src_local_l1_addr, addrgen.get_noc_addr(id, offset, noc), bytes, noc);
}

// Deprecated in 0.81.1 but still present: whole-page forms.
template <typename AddrGen>
FORCE_INLINE void noc_async_read_tile(const uint32_t id, const AddrGen& addrgen, uint32_t dst_local_l1_addr,
                                      uint32_t offset = 0, uint8_t noc = noc_index) {
    noc_async_read_page<AddrGen, false>(id, addrgen, dst_local_l1_addr, offset, noc);
}
template <typename AddrGen>
FORCE_INLINE void noc_async_write_tile(const uint32_t id, const AddrGen& addrgen, uint32_t src_local_l1_addr,
                                       uint8_t noc = noc_index) {
    noc_async_write_page<AddrGen, false>(id, addrgen, src_local_l1_addr, 0, 0, noc);
}

// ----- semaphores ------------------------------------------------------------------------
template <ProgrammableCoreType type = ProgrammableCoreType::TENSIX>
FORCE_INLINE uintptr_t get_semaphore(uint32_t semaphore_id) {
    static_assert(type == ProgrammableCoreType::TENSIX, "the emulator models Tensix semaphores only");
    return emu::semaphore_addr(semaphore_id);
}

// The pointer arguments are L1 addresses cast to pointers, as kernels write them; the emulator
// turns them back into addresses (never dereferences them).
FORCE_INLINE void noc_semaphore_wait(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val) {
    emu::semaphore_wait(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(sem_addr)), val, false);
}
FORCE_INLINE void noc_semaphore_wait_min(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val) {
    emu::semaphore_wait(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(sem_addr)), val, true);
}
FORCE_INLINE void noc_semaphore_set(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val) {
    emu::semaphore_set(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(sem_addr)), val);
}
template <bool posted = false>
FORCE_INLINE void noc_semaphore_inc(uint64_t addr, uint32_t incr, uint8_t noc_id = noc_index, uint8_t vc = 0) {
    (void)vc;
    emu::check_noc(noc_id, "noc_semaphore_inc");
    emu::semaphore_inc(addr, incr);
}
inline void noc_semaphore_set_remote(std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr,
                                     uint8_t noc = noc_index) {
    emu::check_noc(noc, "noc_semaphore_set_remote");
    emu::semaphore_set_remote(src_local_l1_addr, dst_noc_addr);
}

#include "api/dataflow/circular_buffer.h"
