// A single-threaded stand-in for the emulator runtime (runtime.hpp), for the compute engine's C++
// unit tests (compute_unit.cpp). The test itself plays reader and writer through fake::host_*.
// emu::fail throws std::runtime_error so tests can assert on refusals.
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "emu/runtime.hpp"

namespace fake {
struct CB {
    emu::DataFormat fmt;
    uint32_t page_bytes = 0, pages = 0;
    std::vector<uint8_t> mem;
    uint32_t rd = 0, wr = 0, received = 0, acked = 0, waited = 0, reserved = 0, cursor = 0;
};
std::map<uint32_t, CB> cbs;
emu::ComputeConfig config{false, false, false, 4};
emu::KernelRole role = emu::KernelRole::Compute;
std::map<std::string, int> counts;

uint32_t tile_bytes(emu::DataFormat f) {
    switch (f) {
        case emu::DataFormat::Float16_b: return 2048;
        case emu::DataFormat::Bfp8_b: return 1088;
        case emu::DataFormat::Bfp4_b: return 576;
        default: return 4096;  // Float32, and codes the engine refuses (e.g. Int32)
    }
}
void reset() {
    cbs.clear();
    counts.clear();
    role = emu::KernelRole::Compute;
}
void setup_cb(uint32_t id, emu::DataFormat f, uint32_t pages) {
    CB c;
    c.fmt = f;
    c.page_bytes = tile_bytes(f);
    c.pages = pages;
    c.mem.assign(c.page_bytes * pages, 0);
    cbs[id] = c;
}
CB& get(uint32_t id) {
    auto it = cbs.find(id);
    if (it == cbs.end()) emu::fail("CB c_" + std::to_string(id) + " is not configured");
    return it->second;
}
void host_push(uint32_t id, const void* tile) {
    CB& c = get(id);
    if (c.pages - (c.received - c.acked) < 1) throw std::runtime_error("host_push: CB full");
    std::memcpy(c.mem.data() + c.wr * c.page_bytes, tile, c.page_bytes);
    c.wr = (c.wr + 1) % c.pages;
    c.received++;
}
void host_pop(uint32_t id, void* out) {
    CB& c = get(id);
    if (c.received - c.acked < 1) throw std::runtime_error("host_pop: CB empty");
    std::memcpy(out, c.mem.data() + c.rd * c.page_bytes, c.page_bytes);
    c.rd = (c.rd + 1) % c.pages;
    c.acked++;
}
}  // namespace fake

namespace emu {
void fail(const std::string& message) { throw std::runtime_error("core (0,0) compute: " + message); }
KernelRole current_role() { return fake::role; }
const ComputeConfig& compute_config() {
    if (fake::role != KernelRole::Compute) fail("compute_config() called from a dataflow kernel");
    return fake::config;
}
void count_call(const char* api_name) { fake::counts[api_name]++; }
void count_work(const char*, uint32_t) {}  // the engine's work counters: the unit cases do not read them
void cb_reserve_back(uint32_t cb, uint32_t n) {
    auto& c = fake::get(cb);
    if (c.pages - (c.received - c.acked) < n) fail("cb_reserve_back would block forever (single-threaded fake)");
    c.reserved = n;
}
void cb_push_back(uint32_t cb, uint32_t n) {
    auto& c = fake::get(cb);
    if (n > c.reserved) fail("cb_push_back without reserve");
    c.received += n;
    c.wr = (c.wr + n) % c.pages;
    c.reserved = 0;
    c.cursor = 0;
}
void cb_wait_front(uint32_t cb, uint32_t n) {
    auto& c = fake::get(cb);
    if (c.received - c.acked < n) fail("cb_wait_front would block forever (single-threaded fake)");
    c.waited = n;
}
void cb_pop_front(uint32_t cb, uint32_t n) {
    auto& c = fake::get(cb);
    if (n > c.waited) fail("cb_pop_front without wait");
    c.acked += n;
    c.rd = (c.rd + n) % c.pages;
    c.waited = 0;
}
uint32_t cb_read_addr(uint32_t) { fail("fake runtime: cb_read_addr unsupported"); }
uint32_t cb_write_addr(uint32_t) { fail("fake runtime: cb_write_addr unsupported"); }
PageRef front_page(uint32_t cb, uint32_t index) {
    auto& c = fake::get(cb);
    if (index >= c.waited)
        fail("front_page: c_" + std::to_string(cb) + " page " + std::to_string(index) + " not waited for");
    uint32_t p = (c.rd + index) % c.pages;
    return PageRef{c.mem.data() + p * c.page_bytes, c.fmt, c.page_bytes};
}
PageRef back_page(uint32_t cb, uint32_t index) {
    auto& c = fake::get(cb);
    if (index >= c.reserved)
        fail("back_page: c_" + std::to_string(cb) + " page " + std::to_string(index) + " not reserved");
    uint32_t p = (c.wr + index) % c.pages;
    return PageRef{c.mem.data() + p * c.page_bytes, c.fmt, c.page_bytes};
}
uint32_t& pack_cursor(uint32_t cb) { return fake::get(cb).cursor; }
uint8_t* l1_ptr(uint32_t, uint32_t) { fail("fake runtime: l1_ptr unsupported"); }
DataFormat cb_format(uint32_t cb) { return fake::get(cb).fmt; }
}  // namespace emu
