// The emulator runtime's interface: what the dataflow API headers, the compute engine and the
// runtime library (src/runtime.cpp) agree on. One emulated Tensix core runs three kernel threads
// (reader, compute, writer); every call below acts on the calling thread's core and kernel.
#pragma once

#include <cstdint>
#include <string>

namespace emu {

// tt::DataFormat codes (tt_metal/hw/inc/internal/tt-1xx/*/tensix_types.h). A CB may carry any other
// code (e.g. Int32 = 8 for dataflow-only CBs); the compute engine refuses to unpack or pack those.
enum class DataFormat : uint8_t { Float32 = 0, Float16_b = 5, Bfp8_b = 6, Bfp4_b = 7 };

enum class KernelRole : uint8_t { Reader = 0, Writer = 1, Compute = 2 };

// One page of a circular buffer, as the compute engine sees it.
struct PageRef {
    uint8_t* bytes;       // host pointer into the core's emulated L1
    DataFormat format;    // the CB's data format
    uint32_t page_bytes;  // the CB's page size
};

// Compute configuration of the calling compute kernel (from ComputeConfigDescriptor).
struct ComputeConfig {
    bool fp32_dest_acc_en;
    bool dst_full_sync_en;
    bool math_approx_mode;
    uint32_t math_fidelity;  // LoFi=0, HiFi2=2, HiFi3=3, HiFi4=4 (ttnn.MathFidelity values)
};

// Ends the whole run with an error. The message is prefixed with "core (x,y) <kernel name>: ".
[[noreturn]] void fail(const std::string& message);

// Context of the calling kernel thread.
KernelRole current_role();
const ComputeConfig& compute_config();  // fail()s when called from a dataflow kernel
void count_call(const char* api_name);  // per-core compute/dataflow API call counter
// Per-core engine work by kind (CoreStats.work): "sfpu_faces/<api>" faces an SFPU call computed,
// "reconfig/<unit>" data-format reconfigurations that reprogram an unpacker or the packer.
void count_work(const char* what, uint32_t amount);

// Circular buffers, tt-metal semantics (blocking; checked; see runtime.cpp).
void cb_reserve_back(uint32_t cb, uint32_t num_pages);
void cb_push_back(uint32_t cb, uint32_t num_pages);
void cb_wait_front(uint32_t cb, uint32_t num_pages);
void cb_pop_front(uint32_t cb, uint32_t num_pages);
uint32_t cb_read_addr(uint32_t cb);   // L1 byte address of the front page
uint32_t cb_write_addr(uint32_t cb);  // L1 byte address of the back (reserved) page

// Compute-side page access. `front_page` fails unless page `index` lies inside what this kernel
// has waited for and not popped; `back_page` fails unless it lies inside what it has reserved and
// not pushed.
PageRef front_page(uint32_t cb, uint32_t index);
PageRef back_page(uint32_t cb, uint32_t index);
// Pages packed in order (pack_tile<false>) since the last cb_push_back on `cb`; push resets it.
uint32_t& pack_cursor(uint32_t cb);

// L1 of the calling core: host pointer for [addr, addr+bytes), fail()s when out of range.
uint8_t* l1_ptr(uint32_t addr, uint32_t bytes);
// What a dataflow kernel's `*(volatile uint32_t*)addr` load of its own L1 returns; fails unless
// the word is 4-byte aligned, inside CB pages the kernel holds (waited for or reserved), and not
// the destination of a transfer still in flight.
uint32_t l1_read_word(uint32_t addr);
// A dataflow kernel's `*(volatile uint32_t*)addr = value` store to its own L1; fails unless the
// word is 4-byte aligned, inside CB pages the kernel has reserved (as producer), and not touched
// by a transfer still in flight.
void l1_write_word(uint32_t addr, uint32_t value);

// ---------------------------------------------------------------------------------------------
// Added by the runtime (dataflow API, args, NoC, semaphores, profiling). Implemented in
// src/runtime.cpp. L1 addresses are the real L1 byte addresses tt-metal would use (not host
// pointers); a kernel must touch L1 only through these calls (or the compute engine's PageRefs).
// NoC addresses encode (x, y, addr) as NOC_XY_ADDR does on both archs:
// (y << 42) | (x << 36) | addr, with NoC-0 coordinates from the soc descriptor.

// Runtime args of the calling kernel on its core; fail()s past the provided count.
uint32_t arg(uint32_t idx);
uint32_t common_arg(uint32_t idx);
uintptr_t arg_addr(uint32_t idx);         // host pointer to the arg word (for get_arg_addr)
uintptr_t common_arg_addr(uint32_t idx);

// Calling core's coordinates.
uint32_t logical_x();
uint32_t logical_y();
uint32_t noc_x();  // NoC-0 coordinate of the calling core
uint32_t noc_y();

// CB geometry (dataflow get_tile_size etc.).
uint32_t cb_page_size(uint32_t cb);
uint32_t cb_num_pages(uint32_t cb);
DataFormat cb_format(uint32_t cb);
bool cb_pages_reservable_at_back(uint32_t cb, uint32_t num_pages);
bool cb_pages_available_at_front(uint32_t cb, uint32_t num_pages);

// NoC. A transfer's data lands at the barrier that covers it (a read's destination holds poison
// until then); touching an end of a transfer still in flight, signalling a semaphore with writes
// un-flushed, and returning from kernel_main with transfers in flight fail (see runtime.cpp).
uint64_t noc_xy_addr(uint32_t x, uint32_t y, uint64_t addr);
// Every transfer and barrier names its NoC (0 or 1; check_noc's rules); a barrier covers this
// kernel's transfers on that NoC only.
void noc_read(uint64_t src_noc_addr, uint32_t dst_l1_addr, uint32_t size, uint8_t noc);
void noc_write(uint32_t src_l1_addr, uint64_t dst_noc_addr, uint32_t size, uint8_t noc);
void noc_read_barrier(uint8_t noc);
void noc_write_barrier(uint8_t noc);   // also used for noc_async_writes_flushed and noc_async_full_barrier
// fail()s unless the calling kernel may use NoC `noc` in `api`: 0 or 1, and its own NoC when its
// DataMovementConfig is DM_DEDICATED_NOC (the other NoC's command buffers and counters are the
// other data-movement kernel's).
void check_noc(uint8_t noc, const char* api);
uint32_t num_dram_banks();
uint32_t dram_alignment();
// NoC address of byte `offset` of page `page_id` of a DRAM-interleaved buffer (TT_FACTS §4).
uint64_t dram_page_noc_addr(uint32_t page_id, uint32_t bank_base_address, uint32_t page_size,
                            uint32_t offset);
uint64_t dram_bank_noc_addr(uint32_t bank_id, uint32_t bank_address);

// Semaphores (SemaphoreDescriptor ids), L1 words at semaphore_addr(id).
uint32_t semaphore_addr(uint32_t id);
void semaphore_set(uint32_t l1_addr, uint32_t value);
uint32_t semaphore_read(uint32_t l1_addr);
void semaphore_wait(uint32_t l1_addr, uint32_t value, bool at_least);
void semaphore_inc(uint64_t noc_addr, uint32_t incr);
void semaphore_set_remote(uint32_t src_l1_addr, uint64_t dst_noc_addr);  // delivered at issue

// Profiler zones (DeviceZoneScopedN): counted per core and name.
void zone_enter(const char* name);
void zone_exit(const char* name);

// Debug print (DPRINT): appended to the run's log, prefixed with core and kernel.
void dprint(const std::string& text);

}  // namespace emu
