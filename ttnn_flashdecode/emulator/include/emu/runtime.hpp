// The emulator runtime's interface: what the dataflow API headers, the compute engine and the
// runtime library (src/runtime.cpp) agree on. One emulated Tensix core runs three kernel threads
// (reader, compute, writer); every call below acts on the calling thread's core and kernel.
#pragma once

#include <cstdint>
#include <string>

namespace emu {

// tt::DataFormat codes (tt_metal/hw/inc/internal/tt-1xx/*/tensix_types.h).
enum class DataFormat : uint8_t { Float32 = 0, Float16_b = 5, Bfp8_b = 6 };

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

}  // namespace emu
