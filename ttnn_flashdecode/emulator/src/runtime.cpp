// The emulator runtime: cores, kernel threads, circular buffers, emulated L1 and DRAM, the NoC,
// semaphores, the watchdog, and the C entry points the Python driver calls (emu_*).
//
// Concurrency model: one std::thread per kernel per core, all cores at once. All shared state
// (CB counters and windows, semaphores, L1 data moved by the NoC, blocked/live counts) is guarded
// by one mutex (RunState::mu). A kernel that must wait registers a predicate and a description and
// sleeps on its core's condition variable; every state change notifies the affected core. When
// every live kernel is blocked and no predicate holds, the run is deadlocked: the watchdog ends it
// with a report naming each blocked kernel, its core, the CB or semaphore and the counts. A wall
// clock deadline (timeout_s) is the backstop.

#include <dlfcn.h>

#include "emu/compute_engine.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "emu/runtime.hpp"

namespace emu {
namespace {

using Clock = std::chrono::steady_clock;

struct KernelError {
    std::string msg;
};
struct Abort {};

enum ErrKind : int { kOk = 0, kKernel = 1, kDeadlock = 2, kTimeout = 3, kConfig = 4 };

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

// ----- architecture ----------------------------------------------------------------------
struct Arch {
    bool configured = false;
    uint32_t l1_size = 0, sem_base = 0, unreserved_base = 0, l1_align = 16, dram_align = 32, num_cbs = 32;
    uint64_t view_bytes = 0;
    std::vector<uint64_t> bank_offset;
    std::vector<uint32_t> bank_channel;
    std::vector<std::pair<uint32_t, uint32_t>> bank_xy;
    std::unordered_map<uint32_t, uint32_t> xy_to_channel;  // (x << 8 | y) -> channel
    std::vector<std::vector<uint32_t>> channel_banks;
};
struct Region;

constexpr uint32_t kMaxCBs = 64;
constexpr uint32_t kMaxSems = 16;
constexpr uint64_t kLocalMask = (uint64_t(1) << 36) - 1;

inline uint32_t xy_key(uint32_t x, uint32_t y) { return (x << 8) | y; }

// ----- DRAM (regions only change between runs) -------------------------------------------
struct Region {
    uint32_t size;
    std::vector<uint8_t> data;
};

// One emulated device (Emulator instance on the Python side): arch, DRAM, pooled L1 buffers.
struct Device {
    Arch arch;
    std::vector<std::map<uint32_t, Region>> dram;  // per bank: start address -> region
    std::vector<std::unique_ptr<uint8_t[]>> l1_pool;  // reused across runs, one per core slot
    std::vector<std::pair<uint32_t, uint32_t>> l1_pool_cores;  // logical core of each slot in the last run
    bool poison_l1 = true;  // each launch fills L1 with kL1Poison (false: zeroes it)
    std::string last_error, last_report;
    bool leaked = false;  // a stuck run still references this device
};
std::vector<std::unique_ptr<Device>> g_devices;
std::mutex g_devices_mu;
thread_local Device* t_dev = nullptr;

// ----- run state -------------------------------------------------------------------------
struct Core;
struct RunState;

struct CB {
    bool configured = false;
    uint32_t addr = 0, size = 0, page = 0, npages = 0;
    DataFormat fmt = DataFormat::Float16_b;
    uint16_t received = 0, acked = 0;
    uint32_t rd = 0, wr = 0;
    int producer = -1, consumer = -1;  // kernel slot that reserves/pushes, pops
    uint32_t reserved = 0;             // pages reserved by the producer, not yet pushed
    uint32_t waited[3] = {0, 0, 0};    // per slot: pages waited for, not yet popped
    uint32_t pack_cursor = 0;
    uint32_t in_cb() const { return static_cast<uint16_t>(received - acked); }
    uint32_t end() const { return addr + size; }
};

struct Wait {
    std::function<bool()> pred;
    std::function<std::string()> describe;
};

// ----- NoC transfers in flight ------------------------------------------------------------
// A noc_async_read / noc_async_write between its issue and the barrier that covers it. Its data
// lands at that barrier (noc_async_read_barrier; noc_async_write_barrier or
// noc_async_writes_flushed; noc_async_full_barrier), not at issue: until then a read's
// destination holds kInFlightPoison and a write's destination its old bytes. Only when every live
// kernel is blocked does the runtime land everything still in flight (on silicon it arrives
// eventually), so a kernel waiting on its own un-barriered write is not a deadlock; the transfer
// stays un-barriered for the checks.
struct Transfer {
    uint64_t id;             // per kernel, in issue order (1, 2, ...)
    bool is_read;
    bool landed;             // data moved (at the barrier, or early when the run would deadlock)
    uint32_t size;
    const uint8_t* src;      // host pointers
    uint8_t* dst;
    uint64_t src_noc, dst_noc;  // NoC addresses, for messages
    Core* src_core;          // nullptr: DRAM
    Core* dst_core;
    uint8_t noc;             // the NoC it travels on: only a barrier on that NoC covers it
};

// What an in-flight transfer is doing to an L1 byte range of a core. Destinations being filled
// (kReadDst, kWriteDst) conflict with any access; sources being read (kReadSrc, kWriteSrc) only
// with accesses that modify or free them.
enum class Touch : uint8_t { kReadDst, kReadSrc, kWriteSrc, kWriteDst };

struct Kernel;
struct InFlight {
    uint32_t lo, hi;  // L1 byte range [lo, hi)
    Touch touch;
    Kernel* owner;
    uint64_t id;      // Transfer::id in owner's list
    uint8_t noc;      // Transfer::noc
};

// ----- poison: L1 bytes that hold nothing a kernel wrote ----------------------------------
// Each pattern is one 16-bit half at every even L1 address (little-endian), so every aligned bf16
// there reads as the half and every aligned fp32 word as (half << 16 | half): NaN both ways
// (exponent all ones, mantissa non-zero), so arithmetic on such bytes shows up as NaN in the output
// instead of a plausible number. As a uint32 it is over 4e9, so an index or size read from it fails
// a range check. Two values, so a dump tells which one a kernel read:
//   kL1Poison        every core's whole L1 at every launch, before the runtime writes the only
//                    thing it places there (the semaphores' initial values): on a card L1 holds
//                    whatever earlier programs left, and a pool reused across runs must not hand
//                    one run's data to the next (whether a missing write shows would depend on
//                    test order). Emulator(poison_l1=False) zeroes L1 instead.
//   kInFlightPoison  a noc_async_read's destination from issue until the data lands.
// Read as a block-float page, the shared exponents alternate 255 and 0xc1 / 0xad (inf/NaN, ~2^66 / ~2^46).
constexpr uint16_t kL1Poison = 0xffc1;
constexpr uint16_t kInFlightPoison = 0xffad;

constexpr bool nan_as_bf16_and_fp32(uint16_t half) {
    const float as_bf16 = std::bit_cast<float>(uint32_t(half) << 16);  // bf16 is fp32's top half
    const float as_fp32 = std::bit_cast<float>(uint32_t(half) << 16 | half);
    return as_bf16 != as_bf16 && as_fp32 != as_fp32;
}
static_assert(nan_as_bf16_and_fp32(kL1Poison) && nan_as_bf16_and_fp32(kInFlightPoison));
static_assert(kL1Poison != kInFlightPoison);

struct Kernel {
    Core* core = nullptr;
    RunState* run = nullptr;
    KernelRole role = KernelRole::Reader;
    int slot = 0;
    std::string name, prefix;
    void (*fn)() = nullptr;
    std::vector<uint32_t> rt, crt;
    ComputeConfig cc{};
    std::vector<Transfer> reads_in_flight, writes_in_flight;  // issue order
    uint64_t transfers_issued = 0;
    bool blocked = false, done = false;
    Wait wait;
    std::unordered_map<const char*, uint64_t> calls, zones;
    // Compute API calls (not cb_*) made inside a profiler zone, charged to the innermost one.
    std::map<std::pair<const char*, const char*>, uint64_t> zone_calls;  // (zone, api) -> calls
    std::vector<const char*> zone_stack;
    std::unordered_map<const char*, uint64_t> work;  // engine work by kind (count_work)
    uint64_t dram_rd = 0, dram_wr = 0, l1_rd = 0, l1_wr = 0;  // NoC bytes by remote kind
    uint8_t noc = 0, noc_mode = 0;  // NOC_INDEX, NOC_MODE (dataflow kernels; DM_DEDICATED_NOC = 0)
    uint64_t noc_reads[2] = {}, noc_read_bytes[2] = {}, noc_writes[2] = {};  // requests and bytes per NoC
    std::map<std::pair<const char*, int>, uint64_t> zone_noc_reads;  // (innermost zone, NoC) -> reads
    std::map<std::pair<const char*, int>, uint64_t> zone_noc_write_bytes;  // (innermost zone, NoC) -> bytes written
    std::map<std::pair<int, int>, uint64_t> bank_noc_reads;  // (DRAM bank, NoC) -> reads
};

struct Core {
    uint32_t lx = 0, ly = 0, nx = 0, ny = 0;
    uint8_t* l1 = nullptr;
    CB cbs[kMaxCBs];
    bool sem_configured[kMaxSems] = {};
    std::vector<InFlight> in_flight;  // transfers (any core's kernels) touching this core's L1
    std::condition_variable cv;
    Kernel* k[3] = {nullptr, nullptr, nullptr};
};

struct RunState {
    Device* dev = nullptr;
    std::mutex mu;
    std::condition_variable done_cv;
    std::vector<std::unique_ptr<Core>> cores;
    std::unordered_map<uint32_t, Core*> by_xy;
    std::vector<std::unique_ptr<Kernel>> kernels;
    int live = 0, blocked = 0;
    std::atomic<bool> abort{false};
    int err_kind = kOk;
    std::string err;
    Clock::time_point deadline;
    std::vector<std::string> log;
};

std::unordered_map<std::string, void (*)()> g_kernel_fns;  // .so path -> kernel_main
std::mutex g_kernel_fns_mu;

thread_local Kernel* t_k = nullptr;

const char* role_name(KernelRole r) {
    switch (r) {
        case KernelRole::Reader: return "reader";
        case KernelRole::Writer: return "writer";
        case KernelRole::Compute: return "compute";
    }
    return "?";
}

[[noreturn]] void raise(const std::string& msg) { throw KernelError{(t_k ? t_k->prefix : std::string()) + msg}; }

inline Kernel& me() {
    Kernel* k = t_k;
    if (!k) throw KernelError{"emulator API called outside a kernel thread"};
    if (t_k->run->abort.load(std::memory_order_relaxed)) throw Abort{};
    return *k;
}

inline void bump(Kernel& k, const char* api) { ++k.calls[api]; }
// CB calls from a compute kernel are counted by the compute engine (its cb_api.h front end).
inline void bump_dataflow(Kernel& k, const char* api) {
    if (k.role != KernelRole::Compute) ++k.calls[api];
}

void notify_all_cores_locked(RunState& R) {
    for (auto& c : R.cores) c->cv.notify_all();
    R.done_cv.notify_all();
}

void record_error_locked(RunState& R, int kind, const std::string& msg) {
    if (R.err_kind == kOk) {
        R.err_kind = kind;
        R.err = msg;
    }
    R.abort.store(true);
    notify_all_cores_locked(R);
}

std::string describe_blocked_locked(RunState& R) {
    std::string s;
    for (auto& k : R.kernels) {
        if (k->blocked) s += "\n  " + k->prefix + k->wait.describe();
    }
    std::string fin, run;
    for (auto& k : R.kernels) {
        if (k->done) fin += "\n  " + k->prefix + "finished";
        else if (!k->blocked) run += "\n  " + k->prefix + "running (not in a blocking call)";
    }
    return s + run + fin;
}

bool land_everything_in_flight_locked(RunState& R);

// Deadlock: every live kernel is blocked and none of their conditions holds, even once every
// transfer in flight has landed.
bool check_deadlock_locked(RunState& R) {
    if (R.live == 0 || R.blocked < R.live) return false;
    auto any_can_go = [&R] {
        for (auto& k : R.kernels)
            if (k->blocked && k->wait.pred()) return true;
        return false;
    };
    if (any_can_go()) return false;
    if (land_everything_in_flight_locked(R) && any_can_go()) {
        notify_all_cores_locked(R);
        return false;
    }
    record_error_locked(R, kDeadlock,
                        "deadlock: no kernel can make progress (every live kernel waits on a condition "
                        "nothing else will satisfy):" +
                            describe_blocked_locked(R));
    return true;
}

void block_until(std::unique_lock<std::mutex>& lk, Kernel& k, std::function<bool()> pred,
                 std::function<std::string()> describe) {
    RunState& R = *k.run;
    if (pred()) return;
    k.wait = Wait{std::move(pred), std::move(describe)};
    k.blocked = true;
    ++R.blocked;
    struct Unblock {
        Kernel& k;
        RunState& R;
        ~Unblock() {
            k.blocked = false;
            --R.blocked;
        }
    } unblock{k, R};
    if (check_deadlock_locked(R)) throw Abort{};
    while (!k.wait.pred()) {
        if (R.abort.load()) throw Abort{};
        auto now = Clock::now();
        if (now >= R.deadline) {
            record_error_locked(R, kTimeout,
                                "timeout: the run exceeded its wall-clock limit; kernel states:" +
                                    describe_blocked_locked(R));
            throw Abort{};
        }
        k.core->cv.wait_until(lk, std::min(R.deadline, now + std::chrono::milliseconds(200)));
    }
}

CB& cb_of(Kernel& k, uint32_t cb, const char* api) {
    if (cb >= t_dev->arch.num_cbs)
        raise(fmt("%s: CB index %u is out of range (this arch has %u CBs)", api, cb, t_dev->arch.num_cbs));
    CB& c = k.core->cbs[cb];
    if (!c.configured)
        raise(fmt("%s: CB %u is not configured on this core (no CBDescriptor format with buffer_index %u "
                  "covers it)",
                  api, cb, cb));
    return c;
}

const char* slot_kernel_name(Core& core, int slot) {
    return (slot >= 0 && slot < 3 && core.k[slot]) ? core.k[slot]->name.c_str() : "?";
}

std::string cb_state(const CB& c) {
    return fmt("received=%u acked=%u (%u pages in the CB), page count=%u", c.received, c.acked, c.in_cb(),
               c.npages);
}

// ----- L1 checks -------------------------------------------------------------------------
void check_l1_range(uint32_t addr, uint64_t bytes, const char* what) {
    if (uint64_t(addr) + bytes > t_dev->arch.l1_size)
        raise(fmt("%s: L1 range [0x%x, 0x%llx) is outside L1 (%u bytes)", what, addr,
                  (unsigned long long)(addr + bytes), t_dev->arch.l1_size));
    const uint32_t sem_end = t_dev->arch.sem_base + kMaxSems * t_dev->arch.l1_align;
    const bool in_sems = addr >= t_dev->arch.sem_base && uint64_t(addr) + bytes <= sem_end;
    if (addr < t_dev->arch.unreserved_base && !in_sems)
        raise(fmt("%s: L1 range [0x%x, 0x%llx) reaches into the firmware/kernel-config region below the "
                  "unreserved base 0x%x (semaphores live at [0x%x, 0x%x))",
                  what, addr, (unsigned long long)(addr + bytes), t_dev->arch.unreserved_base, t_dev->arch.sem_base,
                  sem_end));
}

inline bool inside(uint32_t a, uint64_t n, uint32_t lo, uint64_t hi) { return a >= lo && uint64_t(a) + n <= hi; }
inline bool overlaps(uint32_t a, uint64_t n, uint32_t lo, uint64_t hi) { return uint64_t(a) + n > lo && a < hi; }

// Reading an L1 range that lies in a CB: it must be inside pages waited for (and not popped) or
// reserved (and not pushed). On the caller's own core only the caller's windows count.
void check_cb_read(Core& core, Kernel* self, uint32_t addr, uint32_t bytes, const char* what) {
    const CB* bad = nullptr;
    uint32_t bad_idx = 0;
    for (uint32_t i = 0; i < t_dev->arch.num_cbs; ++i) {
        const CB& c = core.cbs[i];
        if (!c.configured || !overlaps(addr, bytes, c.addr, c.end())) continue;
        if (inside(addr, bytes, c.addr, c.end())) {
            for (int s = 0; s < 3; ++s) {
                if (self && s != self->slot) continue;
                if (c.waited[s] && inside(addr, bytes, c.rd, uint64_t(c.rd) + uint64_t(c.waited[s]) * c.page)) return;
            }
            if (c.producer >= 0 && (!self || c.producer == self->slot) && c.reserved &&
                inside(addr, bytes, c.wr, uint64_t(c.wr) + uint64_t(c.reserved) * c.page))
                return;
        }
        if (!bad) {
            bad = &c;
            bad_idx = i;
        }
    }
    if (bad)
        raise(fmt("%s reads L1 [0x%x, +%u) on core (%u,%u) in CB %u (0x%x..0x%x, page %u B) outside the pages "
                  "%s waited for or reserved: read pointer page %u, waited %u; write pointer page %u, reserved %u; %s",
                  what, addr, bytes, core.lx, core.ly, bad_idx, bad->addr, bad->end(), bad->page,
                  self ? "this kernel has" : "its kernels have", (bad->rd - bad->addr) / bad->page,
                  self ? bad->waited[self->slot] : std::max({bad->waited[0], bad->waited[1], bad->waited[2]}),
                  (bad->wr - bad->addr) / bad->page, bad->reserved, cb_state(*bad).c_str()));
}

// Writing an L1 range that lies in a CB: it must be inside pages reserved (and not pushed) by the
// CB's producer (by the caller itself when `self` is given).
void check_cb_write(Core& core, Kernel* self, uint32_t addr, uint32_t bytes, const char* what) {
    const CB* bad = nullptr;
    uint32_t bad_idx = 0;
    for (uint32_t i = 0; i < t_dev->arch.num_cbs; ++i) {
        const CB& c = core.cbs[i];
        if (!c.configured || !overlaps(addr, bytes, c.addr, c.end())) continue;
        if (inside(addr, bytes, c.addr, c.end()) && c.producer >= 0 && (!self || c.producer == self->slot) &&
            c.reserved && inside(addr, bytes, c.wr, uint64_t(c.wr) + uint64_t(c.reserved) * c.page))
            return;
        if (!bad) {
            bad = &c;
            bad_idx = i;
        }
    }
    if (bad)
        raise(fmt("%s writes L1 [0x%x, +%u) on core (%u,%u) in CB %u (0x%x..0x%x, page %u B) outside the pages "
                  "reserved (cb_reserve_back) and not yet pushed%s: write pointer page %u, reserved %u; %s",
                  what, addr, bytes, core.lx, core.ly, bad_idx, bad->addr, bad->end(), bad->page,
                  self ? " by this kernel" : "", (bad->wr - bad->addr) / bad->page, bad->reserved,
                  cb_state(*bad).c_str()));
}

// ----- NoC address resolution --------------------------------------------------------------
struct Target {
    Core* core = nullptr;      // L1 of a core
    uint8_t* ptr = nullptr;    // host pointer to the bytes
    int bank = -1;             // DRAM bank
};

Target resolve(uint64_t noc_addr, uint32_t bytes, const char* what) {
    const uint32_t x = (noc_addr >> 36) & 0x3f, y = (noc_addr >> 42) & 0x3f;
    const uint64_t a = noc_addr & kLocalMask;
    Target t;
    auto it = t_k->run->by_xy.find(xy_key(x, y));
    if (it != t_k->run->by_xy.end()) {
        if (a > 0xffffffffull) raise(fmt("%s: L1 address 0x%llx at NoC (%u,%u) is not a 32-bit address", what,
                                         (unsigned long long)a, x, y));
        check_l1_range(uint32_t(a), bytes, what);
        t.core = it->second;
        t.ptr = t.core->l1 + a;
        return t;
    }
    auto ch = t_dev->arch.xy_to_channel.find(xy_key(x, y));
    if (ch == t_dev->arch.xy_to_channel.end())
        raise(fmt("%s: NoC address 0x%llx is (x=%u, y=%u, addr=0x%llx): neither a core of this program nor a "
                  "DRAM endpoint",
                  what, (unsigned long long)noc_addr, x, y, (unsigned long long)a));
    for (uint32_t b : t_dev->arch.channel_banks[ch->second]) {
        const uint64_t off = t_dev->arch.bank_offset[b];
        if (a < off || a >= off + t_dev->arch.view_bytes) continue;
        const uint64_t local = a - off;
        auto& regions = t_dev->dram[b];
        auto r = regions.upper_bound(uint32_t(std::min<uint64_t>(local, 0xffffffffull)));
        if (r != regions.begin()) {
            --r;
            if (local >= r->first && local + bytes <= uint64_t(r->first) + r->second.size) {
                t.bank = int(b);
                t.ptr = r->second.data.data() + (local - r->first);
                return t;
            }
        }
        raise(fmt("%s: DRAM bank %u address 0x%llx (+%u bytes) is outside every allocated buffer", what, b,
                  (unsigned long long)local, bytes));
    }
    raise(fmt("%s: address 0x%llx on DRAM channel %u (NoC %u,%u) matches no bank view", what,
              (unsigned long long)a, ch->second, x, y));
}

uint64_t noc_xy_addr_of(const Core& c, uint32_t l1_addr) {
    return (uint64_t(c.ny) << 42) | (uint64_t(c.nx) << 36) | l1_addr;
}

std::string noc_str(uint64_t noc_addr) {
    return fmt("(x=%u,y=%u) 0x%llx", unsigned((noc_addr >> 36) & 0x3f), unsigned((noc_addr >> 42) & 0x3f),
               (unsigned long long)(noc_addr & kLocalMask));
}

std::string kernel_str(const Kernel& owner) {
    return &owner == t_k ? std::string("this kernel") : owner.prefix.substr(0, owner.prefix.size() - 2);
}

std::string transfer_str(const Kernel& owner, const Transfer& t) {
    return fmt("%s #%llu of %s (%u bytes from NoC %s to NoC %s)", t.is_read ? "noc_async_read" : "noc_async_write",
               (unsigned long long)t.id, kernel_str(owner).c_str(), t.size, noc_str(t.src_noc).c_str(),
               noc_str(t.dst_noc).c_str());
}

const Transfer* find_transfer(const InFlight& f) {
    const bool read = f.touch == Touch::kReadDst || f.touch == Touch::kReadSrc;
    for (const Transfer& t : read ? f.owner->reads_in_flight : f.owner->writes_in_flight)
        if (t.id == f.id) return &t;
    return nullptr;
}

enum class Access : uint8_t { kReads, kModifies };  // modifies: writes the bytes or frees them (pop)

// Fails when `access` to L1 [addr, addr+bytes) of `core` (by the calling kernel, described by
// `what`) meets a transfer in flight: a destination still being filled, or a source still being
// read that the access would modify.
void check_in_flight(Core& core, uint32_t addr, uint64_t bytes, Access access, const std::string& what) {
    for (const InFlight& f : core.in_flight) {
        if (!overlaps(addr, bytes, f.lo, f.hi)) continue;
        const bool destination = f.touch == Touch::kReadDst || f.touch == Touch::kWriteDst;
        if (!destination && access == Access::kReads) continue;
        static const char* const doing[] = {"is still filling", "is still reading", "is still sending from",
                                            "is still writing"};
        const bool read = f.touch == Touch::kReadDst || f.touch == Touch::kReadSrc;
        const Transfer* t = find_transfer(f);
        raise(fmt("%s L1 [0x%x, +%llu) on core (%u,%u) while %s %s L1 [0x%x, 0x%x) there: expected %s's %s "
                  "before this (the transfer travels on NoC %u: only a barrier on that NoC covers it)",
                  what.c_str(), addr, (unsigned long long)bytes, core.lx, core.ly,
                  t ? transfer_str(*f.owner, *t).c_str() : "a transfer", doing[int(f.touch)], f.lo, f.hi,
                  kernel_str(*f.owner).c_str(),
                  read ? "noc_async_read_barrier" : "noc_async_write_barrier (or noc_async_writes_flushed)",
                  unsigned(f.noc)));
    }
}

// `Half` into host bytes [dst, +size), which are L1 [l1_addr, +size): phased by the address's
// parity, so the half sits at every even L1 address whatever the range's start.
template <uint16_t Half>
void fill_poison(uint8_t* dst, uint32_t l1_addr, uint64_t size) {
    static constexpr size_t kChunk = 4096;
    static constexpr auto pattern = [] {
        std::array<uint8_t, kChunk + 1> p{};  // +1: a range starting at an odd address begins at p[1]
        for (size_t i = 0; i < p.size(); ++i) p[i] = uint8_t(i & 1 ? Half >> 8 : Half & 0xff);
        return p;
    }();
    for (uint64_t done = 0; done < size;) {
        const size_t n = size_t(std::min<uint64_t>(size - done, kChunk));
        std::memcpy(dst + done, pattern.data() + ((l1_addr + done) & 1), n);
        done += n;
    }
}

void land(Transfer& t) {
    if (t.landed) return;
    std::memmove(t.dst, t.src, t.size);
    t.landed = true;
    if (!t.is_read && t.dst_core) t.dst_core->cv.notify_all();  // the bytes may be a semaphore someone waits on
}

// Lands every transfer in `list` on NoC `noc` (issue order), forgets it, and drops its touches;
// the other NoC's stay in flight.
void complete(Kernel& k, std::vector<Transfer>& list, uint8_t noc) {
    if (list.empty()) return;
    const bool reads = list.front().is_read;
    Core* cores[8];
    size_t ncores = 0;
    bool overflow = false;
    auto note = [&](Core* c) {
        if (!c) return;
        for (size_t i = 0; i < ncores; ++i)
            if (cores[i] == c) return;
        if (ncores < 8) cores[ncores++] = c;
        else overflow = true;
    };
    for (Transfer& t : list) {
        if (t.noc != noc) continue;
        land(t);
        note(t.src_core);
        note(t.dst_core);
    }
    auto mine = [&](const InFlight& f) {
        const bool read = f.touch == Touch::kReadDst || f.touch == Touch::kReadSrc;
        return f.owner == &k && read == reads && f.noc == noc;
    };
    auto drop = [&](Core& c) { c.in_flight.erase(std::remove_if(c.in_flight.begin(), c.in_flight.end(), mine), c.in_flight.end()); };
    if (overflow) {
        for (auto& c : k.run->cores) drop(*c);
    } else {
        for (size_t i = 0; i < ncores; ++i) drop(*cores[i]);
    }
    list.erase(std::remove_if(list.begin(), list.end(), [noc](const Transfer& t) { return t.noc == noc; }), list.end());
}

// A semaphore signal tells its receiver that data has arrived or a source may be reused; both must
// be true before it is sent (tt-metal: write, then noc_async_writes_flushed or
// noc_async_write_barrier, then noc_semaphore_inc).
void check_signal(Kernel& k, const std::string& what, const Core* target) {
    if (!k.writes_in_flight.empty())
        raise(fmt("%s while %s is not flushed: the receiver may read its destination before the data arrives; "
                  "expected noc_async_write_barrier (or noc_async_writes_flushed) before the signal",
                  what.c_str(), transfer_str(k, k.writes_in_flight.front()).c_str()));
    for (const Transfer& t : k.reads_in_flight)
        if (t.src_core == target)
            raise(fmt("%s while %s, reading that core's L1, is still in flight: the signal may let it reuse the "
                      "source; expected noc_async_read_barrier before the signal",
                      what.c_str(), transfer_str(k, t).c_str()));
}

void check_nothing_in_flight_at_exit(Kernel& k) {
    std::lock_guard<std::mutex> g(k.run->mu);
    for (auto* list : {&k.reads_in_flight, &k.writes_in_flight})
        if (!list->empty())
            raise(fmt("kernel_main returns with %zu %s in flight, first %s: expected %s before returning (on NoC %u)",
                      list->size(), list == &k.reads_in_flight ? "noc_async_read(s)" : "noc_async_write(s)",
                      transfer_str(k, list->front()).c_str(),
                      list == &k.reads_in_flight ? "noc_async_read_barrier" : "noc_async_write_barrier",
                      unsigned(list->front().noc)));
}

// Every live kernel is blocked: on silicon their transfers would still arrive, so land them all
// (they stay un-barriered for the checks). True when anything landed.
bool land_everything_in_flight_locked(RunState& R) {
    bool any = false;
    for (auto& k : R.kernels)
        for (auto* list : {&k->reads_in_flight, &k->writes_in_flight})
            for (Transfer& t : *list)
                if (!t.landed) {
                    land(t);
                    any = true;
                }
    return any;
}

void thread_main(Kernel* k) {
    RunState& R = *k->run;
    t_k = k;
    t_dev = R.dev;
    try {
        if (k->role == KernelRole::Compute) compute::compute_thread_begin();
        k->fn();
        if (k->role == KernelRole::Compute) compute::compute_thread_end();  // e.g. DST still held
        check_nothing_in_flight_at_exit(*k);
    } catch (KernelError& e) {
        std::lock_guard<std::mutex> g(R.mu);
        record_error_locked(R, kKernel, e.msg);
    } catch (Abort&) {
    } catch (std::exception& e) {
        std::lock_guard<std::mutex> g(R.mu);
        record_error_locked(R, kKernel, k->prefix + "uncaught C++ exception: " + e.what());
    } catch (...) {
        std::lock_guard<std::mutex> g(R.mu);
        record_error_locked(R, kKernel, k->prefix + "uncaught exception");
    }
    t_k = nullptr;
    std::lock_guard<std::mutex> g(R.mu);
    k->done = true;
    --R.live;
    if (R.live > 0) check_deadlock_locked(R);
    if (R.live == 0) R.done_cv.notify_all();
}

std::string json_escape(const std::string& s) {
    std::string o;
    for (char ch : s) {
        switch (ch) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            default:
                if (static_cast<unsigned char>(ch) < 0x20) o += fmt("\\u%04x", ch);
                else o += ch;
        }
    }
    return o;
}

std::string build_report(RunState& R, double wall_s) {
    std::string o = "{\"wall_s\":" + fmt("%.6f", wall_s) + ",\"cores\":[";
    bool first = true;
    for (auto& c : R.cores) {
        uint64_t dr = 0, dw = 0, lr = 0, lw = 0;
        std::map<std::string, uint64_t> calls, zones, zone_calls, work;  // zone_calls key: "zone/api"
        std::map<std::string, uint64_t> zone_noc_reads, bank_noc_reads, zone_noc_write_bytes;  // "zone/noc", "bank/noc"
        uint64_t noc_reads[2] = {}, noc_read_bytes[2] = {}, noc_writes[2] = {};
        for (auto* k : c->k) {
            if (!k) continue;
            dr += k->dram_rd, dw += k->dram_wr, lr += k->l1_rd, lw += k->l1_wr;
            for (int n = 0; n < 2; ++n)
                noc_reads[n] += k->noc_reads[n], noc_read_bytes[n] += k->noc_read_bytes[n], noc_writes[n] += k->noc_writes[n];
            for (auto& [z, v] : k->zone_noc_reads) zone_noc_reads[std::string(z.first) + "/" + std::to_string(z.second)] += v;
            for (auto& [z, v] : k->zone_noc_write_bytes)
                zone_noc_write_bytes[std::string(z.first) + "/" + std::to_string(z.second)] += v;
            for (auto& [b, v] : k->bank_noc_reads) bank_noc_reads[std::to_string(b.first) + "/" + std::to_string(b.second)] += v;
            for (auto& [n, v] : k->calls) calls[n] += v;
            for (auto& [n, v] : k->zones) zones[n] += v;
            for (auto& [n, v] : k->zone_calls) zone_calls[std::string(n.first) + "/" + n.second] += v;
            for (auto& [n, v] : k->work) work[n] += v;
        }
        o += first ? "" : ",";
        first = false;
        o += fmt("{\"core\":[%u,%u],\"dram_read\":%llu,\"dram_write\":%llu,\"l1_read\":%llu,\"l1_write\":%llu,", c->lx,
                 c->ly, (unsigned long long)dr, (unsigned long long)dw, (unsigned long long)lr,
                 (unsigned long long)lw);
        o += "\"calls\":{";
        bool f2 = true;
        for (auto& [n, v] : calls) o += (f2 ? "" : ",") + ("\"" + json_escape(n) + "\":" + std::to_string(v)), f2 = false;
        o += "},\"zones\":{";
        f2 = true;
        for (auto& [n, v] : zones) o += (f2 ? "" : ",") + ("\"" + json_escape(n) + "\":" + std::to_string(v)), f2 = false;
        o += "},\"zone_calls\":{";
        f2 = true;
        for (auto& [n, v] : zone_calls) o += (f2 ? "" : ",") + ("\"" + json_escape(n) + "\":" + std::to_string(v)), f2 = false;
        o += "},\"work\":{";
        f2 = true;
        for (auto& [n, v] : work) o += (f2 ? "" : ",") + ("\"" + json_escape(n) + "\":" + std::to_string(v)), f2 = false;
        o += "},\"zone_noc_reads\":{";
        f2 = true;
        for (auto& [n, v] : zone_noc_reads) o += (f2 ? "" : ",") + ("\"" + json_escape(n) + "\":" + std::to_string(v)), f2 = false;
        o += "},\"zone_noc_write_bytes\":{";
        f2 = true;
        for (auto& [n, v] : zone_noc_write_bytes) o += (f2 ? "" : ",") + ("\"" + json_escape(n) + "\":" + std::to_string(v)), f2 = false;
        o += "},\"bank_noc_reads\":{";
        f2 = true;
        for (auto& [n, v] : bank_noc_reads) o += (f2 ? "" : ",") + ("\"" + json_escape(n) + "\":" + std::to_string(v)), f2 = false;
        o += fmt("},\"noc_reads\":[%llu,%llu],\"noc_read_bytes\":[%llu,%llu],\"noc_writes\":[%llu,%llu]}",
                 (unsigned long long)noc_reads[0], (unsigned long long)noc_reads[1],
                 (unsigned long long)noc_read_bytes[0], (unsigned long long)noc_read_bytes[1],
                 (unsigned long long)noc_writes[0], (unsigned long long)noc_writes[1]);
    }
    o += "],\"log\":[";
    for (size_t i = 0; i < R.log.size(); ++i) o += (i ? ",\"" : "\"") + json_escape(R.log[i]) + "\"";
    o += "]}";
    return o;
}

}  // namespace

// =============================== emu:: API (runtime.hpp) ===================================

void fail(const std::string& message) { raise(message); }

KernelRole current_role() { return me().role; }

const ComputeConfig& compute_config() {
    Kernel& k = me();
    if (k.role != KernelRole::Compute) raise("compute_config() called from a dataflow kernel");
    return k.cc;
}

void count_call(const char* api_name) {
    Kernel* k = t_k;
    if (!k) return;
    ++k->calls[api_name];
    if (k->role == KernelRole::Compute && !k->zone_stack.empty() && std::strncmp(api_name, "cb_", 3) != 0)
        ++k->zone_calls[{k->zone_stack.back(), api_name}];
}

void count_work(const char* what, uint32_t amount) {
    if (Kernel* k = t_k) k->work[what] += amount;
}

void cb_reserve_back(uint32_t cb, uint32_t n) {
    Kernel& k = me();
    bump_dataflow(k, "cb_reserve_back");
    std::unique_lock<std::mutex> lk(t_k->run->mu);
    CB& c = cb_of(k, cb, "cb_reserve_back");
    if (c.producer >= 0 && c.producer != k.slot)
        raise(fmt("cb_reserve_back(cb=%u, %u): CB %u is produced by %s; only one kernel may reserve/push a CB", cb, n,
                  cb, slot_kernel_name(*k.core, c.producer)));
    c.producer = k.slot;
    if (n > c.npages)
        raise(fmt("cb_reserve_back(cb=%u, %u): the CB holds only %u pages; this would wait forever", cb, n, c.npages));
    const uint32_t wr_page = (c.wr - c.addr) / c.page;
    if (uint64_t(c.wr) + uint64_t(n) * c.page > c.end())
        raise(fmt("cb_reserve_back(cb=%u, %u): the write pointer is at page %u of %u, so %u pages would run past "
                  "the CB's end before it wraps (the page count must be a multiple of every reserve/push size)",
                  cb, n, wr_page, c.npages, n));
    block_until(
        lk, k, [&c, n] { return c.npages - c.in_cb() >= n; },
        [&c, cb, n] {
            return fmt("cb_reserve_back(cb=%u, %u pages) waits for free space: %s, requested=%u", cb, n,
                       cb_state(c).c_str(), n);
        });
    c.reserved = std::max(c.reserved, n);
}

void cb_push_back(uint32_t cb, uint32_t n) {
    Kernel& k = me();
    bump_dataflow(k, "cb_push_back");
    std::unique_lock<std::mutex> lk(t_k->run->mu);
    CB& c = cb_of(k, cb, "cb_push_back");
    if (c.producer >= 0 && c.producer != k.slot)
        raise(fmt("cb_push_back(cb=%u, %u): CB %u is already pushed by %s; two kernels push the same CB", cb, n, cb,
                  slot_kernel_name(*k.core, c.producer)));
    if (n > c.reserved || c.producer < 0)
        raise(fmt("cb_push_back(cb=%u, %u): only %u pages are reserved (cb_reserve_back) and not yet pushed; %s", cb,
                  n, c.producer < 0 ? 0 : c.reserved, cb_state(c).c_str()));
    if (!k.core->in_flight.empty())
        check_in_flight(*k.core, c.wr, uint64_t(n) * c.page, Access::kReads, fmt("cb_push_back(cb=%u, %u) pushes", cb, n));
    c.received = static_cast<uint16_t>(c.received + n);
    c.wr += n * c.page;
    if (c.wr >= c.end()) c.wr -= c.size;
    c.reserved -= n;
    c.pack_cursor = 0;
    k.core->cv.notify_all();
}

void cb_wait_front(uint32_t cb, uint32_t n) {
    Kernel& k = me();
    bump_dataflow(k, "cb_wait_front");
    std::unique_lock<std::mutex> lk(t_k->run->mu);
    CB& c = cb_of(k, cb, "cb_wait_front");
    if (n > c.npages)
        raise(fmt("cb_wait_front(cb=%u, %u): the CB holds only %u pages; this would wait forever", cb, n, c.npages));
    const uint32_t rd_page = (c.rd - c.addr) / c.page;
    if (uint64_t(c.rd) + uint64_t(n) * c.page > c.end())
        raise(fmt("cb_wait_front(cb=%u, %u): the read pointer is at page %u of %u, so %u pages would run past the "
                  "CB's end before it wraps (the page count must be a multiple of every wait/pop size)",
                  cb, n, rd_page, c.npages, n));
    block_until(
        lk, k, [&c, n] { return c.in_cb() >= n; },
        [&c, cb, n] {
            return fmt("cb_wait_front(cb=%u, %u pages) waits for data: %s, requested=%u", cb, n, cb_state(c).c_str(),
                       n);
        });
    c.waited[k.slot] = std::max(c.waited[k.slot], n);
}

void cb_pop_front(uint32_t cb, uint32_t n) {
    Kernel& k = me();
    bump_dataflow(k, "cb_pop_front");
    std::unique_lock<std::mutex> lk(t_k->run->mu);
    CB& c = cb_of(k, cb, "cb_pop_front");
    if (c.consumer >= 0 && c.consumer != k.slot)
        raise(fmt("cb_pop_front(cb=%u, %u): CB %u is already popped by %s; two kernels pop the same CB", cb, n, cb,
                  slot_kernel_name(*k.core, c.consumer)));
    if (n > c.waited[k.slot])
        raise(fmt("cb_pop_front(cb=%u, %u): only %u pages are waited for (cb_wait_front) and not yet popped; %s", cb,
                  n, c.waited[k.slot], cb_state(c).c_str()));
    c.consumer = k.slot;
    if (!k.core->in_flight.empty())
        check_in_flight(*k.core, c.rd, uint64_t(n) * c.page, Access::kModifies, fmt("cb_pop_front(cb=%u, %u) frees", cb, n));
    c.acked = static_cast<uint16_t>(c.acked + n);
    c.rd += n * c.page;
    if (c.rd >= c.end()) c.rd -= c.size;
    for (int s = 0; s < 3; ++s) c.waited[s] = c.waited[s] > n ? c.waited[s] - n : 0;
    k.core->cv.notify_all();
}

// Each RISC keeps its own copy of a CB's pointers (tt-metal's local CB interface, set to the CB's
// start at kernel launch) and moves it only with its own pushes / pops: a kernel that never
// pushes (pops) a CB sees its start, whatever the producer (consumer) has done.
uint32_t cb_read_addr(uint32_t cb) {
    Kernel& k = me();
    bump(k, "get_read_ptr");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    const CB& c = cb_of(k, cb, "get_read_ptr");
    return c.consumer >= 0 && c.consumer != k.slot ? c.addr : c.rd;
}

uint32_t cb_write_addr(uint32_t cb) {
    Kernel& k = me();
    bump(k, "get_write_ptr");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    const CB& c = cb_of(k, cb, "get_write_ptr");
    return c.producer >= 0 && c.producer != k.slot ? c.addr : c.wr;
}

uint32_t cb_page_size(uint32_t cb) {
    Kernel& k = me();
    return cb_of(k, cb, "get_tile_size").page;
}
uint32_t cb_num_pages(uint32_t cb) {
    Kernel& k = me();
    return cb_of(k, cb, "cb_num_pages").npages;
}
DataFormat cb_format(uint32_t cb) {
    Kernel& k = me();
    return cb_of(k, cb, "get_dataformat").fmt;
}
bool cb_pages_reservable_at_back(uint32_t cb, uint32_t n) {
    Kernel& k = me();
    std::lock_guard<std::mutex> g(t_k->run->mu);
    CB& c = cb_of(k, cb, "cb_pages_reservable_at_back");
    return c.npages - c.in_cb() >= n;
}
bool cb_pages_available_at_front(uint32_t cb, uint32_t n) {
    Kernel& k = me();
    std::lock_guard<std::mutex> g(t_k->run->mu);
    return cb_of(k, cb, "cb_pages_available_at_front").in_cb() >= n;
}

PageRef front_page(uint32_t cb, uint32_t index) {
    Kernel& k = me();
    std::lock_guard<std::mutex> g(t_k->run->mu);
    CB& c = cb_of(k, cb, "front_page");
    if (index >= c.waited[k.slot])
        raise(fmt("reads page %u of CB %u, but only %u pages are waited for (cb_wait_front) and not popped; %s", index,
                  cb, c.waited[k.slot], cb_state(c).c_str()));
    return PageRef{k.core->l1 + c.rd + index * c.page, c.fmt, c.page};
}

PageRef back_page(uint32_t cb, uint32_t index) {
    Kernel& k = me();
    std::lock_guard<std::mutex> g(t_k->run->mu);
    CB& c = cb_of(k, cb, "back_page");
    const uint32_t res = c.producer == k.slot ? c.reserved : 0;
    if (index >= res)
        raise(fmt("writes page %u of CB %u, but only %u pages are reserved (cb_reserve_back) by this kernel and not "
                  "pushed; %s",
                  index, cb, res, cb_state(c).c_str()));
    return PageRef{k.core->l1 + c.wr + index * c.page, c.fmt, c.page};
}

uint32_t& pack_cursor(uint32_t cb) {
    Kernel& k = me();
    return cb_of(k, cb, "pack_cursor").pack_cursor;
}

uint8_t* l1_ptr(uint32_t addr, uint32_t bytes) {
    Kernel& k = me();
    if (uint64_t(addr) + bytes > t_dev->arch.l1_size)
        raise(fmt("L1 range [0x%x, +%u) is outside L1 (%u bytes)", addr, bytes, t_dev->arch.l1_size));
    return k.core->l1 + addr;
}

// The checks of a dataflow kernel's uint32 load (or store) of its own L1 word at `addr`; the
// caller holds the run's lock.
static void check_l1_word(Kernel& k, uint32_t addr, bool store) {
    const char* what = store ? "a uint32 L1 store" : "a uint32 L1 load";
    if (addr % 4) raise(fmt("%s at 0x%x is not 4-byte aligned", what, addr));
    check_l1_range(addr, 4, what);
    if (store) {
        check_cb_write(*k.core, &k, addr, 4, what);
    } else {
        check_cb_read(*k.core, &k, addr, 4, what);
    }
    check_in_flight(*k.core, addr, 4, store ? Access::kModifies : Access::kReads, what);
}

uint32_t l1_read_word(uint32_t addr) {
    Kernel& k = me();
    bump(k, "l1_read_word");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    check_l1_word(k, addr, /*store=*/false);
    uint32_t value;
    std::memcpy(&value, k.core->l1 + addr, sizeof value);
    return value;
}

void l1_write_word(uint32_t addr, uint32_t value) {
    Kernel& k = me();
    bump(k, "l1_write_word");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    check_l1_word(k, addr, /*store=*/true);
    std::memcpy(k.core->l1 + addr, &value, sizeof value);
}

// ----- args / coordinates ----------------------------------------------------------------
uint32_t arg(uint32_t idx) {
    Kernel& k = me();
    bump(k, "get_arg_val");
    if (idx >= k.rt.size())
        raise(fmt("get_arg_val(%u): this kernel has %zu runtime args on this core", idx, k.rt.size()));
    return k.rt[idx];
}
uint32_t common_arg(uint32_t idx) {
    Kernel& k = me();
    bump(k, "get_common_arg_val");
    if (idx >= k.crt.size())
        raise(fmt("get_common_arg_val(%u): this kernel has %zu common runtime args", idx, k.crt.size()));
    return k.crt[idx];
}
uintptr_t arg_addr(uint32_t idx) {
    Kernel& k = me();
    if (idx >= k.rt.size())
        raise(fmt("get_arg_addr(%u): this kernel has %zu runtime args on this core", idx, k.rt.size()));
    return reinterpret_cast<uintptr_t>(&k.rt[idx]);
}
uintptr_t common_arg_addr(uint32_t idx) {
    Kernel& k = me();
    if (idx >= k.crt.size())
        raise(fmt("get_common_arg_addr(%u): this kernel has %zu common runtime args", idx, k.crt.size()));
    return reinterpret_cast<uintptr_t>(&k.crt[idx]);
}
uint32_t logical_x() { return me().core->lx; }
uint32_t logical_y() { return me().core->ly; }
uint32_t noc_x() { return me().core->nx; }
uint32_t noc_y() { return me().core->ny; }

// ----- NoC -----------------------------------------------------------------------------------
uint64_t noc_xy_addr(uint32_t x, uint32_t y, uint64_t addr) {
    Kernel& k = me();
    bump(k, "get_noc_addr");
    if (x > 0x3f || y > 0x3f) raise(fmt("get_noc_addr: NoC coordinate (%u,%u) does not fit 6 bits", x, y));
    return (uint64_t(y) << 42) | (uint64_t(x) << 36) | (addr & kLocalMask);
}

// The data moves at the covering barrier (see Transfer); issue checks both ends, records the
// transfer and its touches, and poisons a read's destination.
void noc_read(uint64_t src, uint32_t dst, uint32_t size, uint8_t noc) {
    Kernel& k = me();
    bump(k, "noc_async_read");
    check_noc(noc, "noc_async_read");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    check_l1_range(dst, size, "noc_async_read destination");
    check_cb_write(*k.core, &k, dst, size, "noc_async_read");
    Target t = resolve(src, size, "noc_async_read source");
    const uint32_t src_l1 = uint32_t(src & kLocalMask);
    if (t.core) {
        check_cb_read(*t.core, t.core == k.core ? &k : nullptr, src_l1, size, "noc_async_read source");
        if (!t.core->in_flight.empty()) check_in_flight(*t.core, src_l1, size, Access::kReads, "noc_async_read reads");
        k.l1_rd += size;
    } else {
        k.dram_rd += size;
    }
    if (!k.core->in_flight.empty()) check_in_flight(*k.core, dst, size, Access::kModifies, "noc_async_read fills");
    const uint64_t id = ++k.transfers_issued;
    uint8_t* dst_ptr = k.core->l1 + dst;
    ++k.noc_reads[noc];
    k.noc_read_bytes[noc] += size;
    if (!k.zone_stack.empty()) ++k.zone_noc_reads[{k.zone_stack.back(), int(noc)}];
    if (!t.core) ++k.bank_noc_reads[{t.bank, int(noc)}];
    k.reads_in_flight.push_back(Transfer{id, true, false, size, t.ptr, dst_ptr,
                                         src, noc_xy_addr_of(*k.core, dst), t.core, k.core, noc});
    k.core->in_flight.push_back(InFlight{dst, dst + size, Touch::kReadDst, &k, id, noc});
    if (t.core) t.core->in_flight.push_back(InFlight{src_l1, src_l1 + size, Touch::kReadSrc, &k, id, noc});
    // A local copy onto overlapping bytes would poison its own source; it keeps them.
    if (!(t.core == k.core && overlaps(src_l1, size, dst, uint64_t(dst) + size)))
        fill_poison<kInFlightPoison>(dst_ptr, dst, size);
}

void noc_write(uint32_t src, uint64_t dst, uint32_t size, uint8_t noc) {
    Kernel& k = me();
    bump(k, "noc_async_write");
    check_noc(noc, "noc_async_write");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    check_l1_range(src, size, "noc_async_write source");
    check_cb_read(*k.core, &k, src, size, "noc_async_write source");
    if (!k.core->in_flight.empty()) check_in_flight(*k.core, src, size, Access::kReads, "noc_async_write sends");
    Target t = resolve(dst, size, "noc_async_write destination");
    const uint32_t dst_l1 = uint32_t(dst & kLocalMask);
    if (t.core) {
        check_cb_write(*t.core, nullptr, dst_l1, size, "noc_async_write destination");
        if (!t.core->in_flight.empty())
            check_in_flight(*t.core, dst_l1, size, Access::kModifies, "noc_async_write writes");
        k.l1_wr += size;
    } else {
        k.dram_wr += size;
    }
    const uint64_t id = ++k.transfers_issued;
    ++k.noc_writes[noc];
    if (!k.zone_stack.empty()) k.zone_noc_write_bytes[{k.zone_stack.back(), int(noc)}] += size;
    k.writes_in_flight.push_back(Transfer{id, false, false, size, k.core->l1 + src, t.ptr,
                                          noc_xy_addr_of(*k.core, src), dst, k.core, t.core, noc});
    k.core->in_flight.push_back(InFlight{src, src + size, Touch::kWriteSrc, &k, id, noc});
    if (t.core) t.core->in_flight.push_back(InFlight{dst_l1, dst_l1 + size, Touch::kWriteDst, &k, id, noc});
}

void noc_read_barrier(uint8_t noc) {
    Kernel& k = me();
    bump(k, "noc_async_read_barrier");
    check_noc(noc, "noc_async_read_barrier");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    complete(k, k.reads_in_flight, noc);
}

void noc_write_barrier(uint8_t noc) {
    Kernel& k = me();
    bump(k, "noc_async_write_barrier");
    check_noc(noc, "noc_async_write_barrier");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    complete(k, k.writes_in_flight, noc);
}

void check_noc(uint8_t noc, const char* api) {
    Kernel& k = me();
    if (noc > 1) raise(fmt("%s on NoC %u: a Tensix core has NoCs 0 and 1", api, unsigned(noc)));
    if (k.noc_mode == 0 && noc != k.noc)
        raise(fmt("%s on NoC %u from a DM_DEDICATED_NOC kernel on NoC %u: in dedicated mode each data-movement "
                  "kernel owns one NoC (its command buffers and barrier counters); use NOC_MODE.DM_DYNAMIC_NOC on "
                  "both data-movement kernels of the core to issue on either NoC",
                  api, unsigned(noc), unsigned(k.noc)));
}

uint32_t num_dram_banks() { return static_cast<uint32_t>(t_dev->arch.bank_offset.size()); }
uint32_t dram_alignment() { return t_dev->arch.dram_align; }

uint64_t dram_bank_noc_addr(uint32_t bank, uint32_t bank_address) {
    Kernel& k = me();
    if (bank >= t_dev->arch.bank_offset.size())
        raise(fmt("DRAM bank %u does not exist (%zu banks)", bank, t_dev->arch.bank_offset.size()));
    (void)k;
    const auto& xy = t_dev->arch.bank_xy[bank];
    return (uint64_t(xy.second) << 42) | (uint64_t(xy.first) << 36) | ((t_dev->arch.bank_offset[bank] + bank_address) & kLocalMask);
}

uint64_t dram_page_noc_addr(uint32_t page_id, uint32_t base, uint32_t page_size, uint32_t offset) {
    const uint32_t nb = static_cast<uint32_t>(t_dev->arch.bank_offset.size());
    const uint32_t a = t_dev->arch.dram_align;
    const uint32_t aligned = (page_size + a - 1) / a * a;
    const uint32_t bank = page_id % nb;
    return dram_bank_noc_addr(bank, (page_id / nb) * aligned + base + offset);
}

// ----- semaphores ------------------------------------------------------------------------
uint32_t semaphore_addr(uint32_t id) {
    Kernel& k = me();
    bump(k, "get_semaphore");
    if (id >= kMaxSems || !k.core->sem_configured[id])
        raise(fmt("get_semaphore(%u): no SemaphoreDescriptor with id %u covers this core", id, id));
    return t_dev->arch.sem_base + id * t_dev->arch.l1_align;
}

static uint32_t* sem_word(Core& c, uint32_t addr, const char* what) {
    if (addr % 4) raise(fmt("%s: semaphore address 0x%x is not 4-byte aligned", what, addr));
    check_l1_range(addr, 4, what);
    return reinterpret_cast<uint32_t*>(c.l1 + addr);
}

void semaphore_set(uint32_t addr, uint32_t value) {
    Kernel& k = me();
    bump(k, "noc_semaphore_set");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    uint32_t* w = sem_word(*k.core, addr, "noc_semaphore_set");
    const std::string what = fmt("noc_semaphore_set(semaphore @0x%x, %u) on this core", addr, value);
    check_signal(k, what, k.core);
    if (!k.core->in_flight.empty()) check_in_flight(*k.core, addr, 4, Access::kModifies, what + " writes");
    *w = value;
    k.core->cv.notify_all();
}

uint32_t semaphore_read(uint32_t addr) {
    Kernel& k = me();
    std::lock_guard<std::mutex> g(t_k->run->mu);
    return *sem_word(*k.core, addr, "semaphore read");
}

void semaphore_wait(uint32_t addr, uint32_t value, bool at_least) {
    Kernel& k = me();
    const char* api = at_least ? "noc_semaphore_wait_min" : "noc_semaphore_wait";
    bump(k, api);
    std::unique_lock<std::mutex> lk(t_k->run->mu);
    uint32_t* w = sem_word(*k.core, addr, api);
    block_until(
        lk, k, [w, value, at_least] { return at_least ? *w >= value : *w == value; },
        [w, value, at_least, addr, api] {
            return fmt("%s(semaphore @0x%x, %s %u) waits: the semaphore holds %u", api, addr, at_least ? ">=" : "==",
                       value, *w);
        });
}

void semaphore_inc(uint64_t noc_addr, uint32_t incr) {
    Kernel& k = me();
    bump(k, "noc_semaphore_inc");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    Target t = resolve(noc_addr, 4, "noc_semaphore_inc");
    if (!t.core) raise("noc_semaphore_inc: the target is DRAM, not a core's L1");
    const uint32_t addr = uint32_t(noc_addr & kLocalMask);
    uint32_t* w = sem_word(*t.core, addr, "noc_semaphore_inc");
    const std::string what =
        fmt("noc_semaphore_inc(core (%u,%u) semaphore @0x%x, %u)", t.core->lx, t.core->ly, addr, incr);
    check_signal(k, what, t.core);
    if (!t.core->in_flight.empty()) check_in_flight(*t.core, addr, 4, Access::kModifies, what + " writes");
    *w += incr;
    k.l1_wr += 4;
    t.core->cv.notify_all();
}

// A 4-byte write that signals, so it is checked and delivered like noc_semaphore_inc: at issue,
// untracked by the write barriers.
void semaphore_set_remote(uint32_t src, uint64_t dst) {
    Kernel& k = me();
    bump(k, "noc_semaphore_set_remote");
    std::lock_guard<std::mutex> g(t_k->run->mu);
    const uint32_t* v = sem_word(*k.core, src, "noc_semaphore_set_remote source");
    Target t = resolve(dst, 4, "noc_semaphore_set_remote");
    if (!t.core) raise("noc_semaphore_set_remote: the target is DRAM, not a core's L1");
    const uint32_t addr = uint32_t(dst & kLocalMask);
    uint32_t* w = sem_word(*t.core, addr, "noc_semaphore_set_remote");
    const std::string what =
        fmt("noc_semaphore_set_remote(L1 0x%x -> core (%u,%u) semaphore @0x%x)", src, t.core->lx, t.core->ly, addr);
    check_signal(k, what, t.core);
    if (!k.core->in_flight.empty()) check_in_flight(*k.core, src, 4, Access::kReads, what + " sends");
    if (!t.core->in_flight.empty()) check_in_flight(*t.core, addr, 4, Access::kModifies, what + " writes");
    *w = *v;
    k.l1_wr += 4;
    t.core->cv.notify_all();
}

// ----- profiling / debug -----------------------------------------------------------------
void zone_enter(const char* name) {
    if (Kernel* k = t_k) {
        ++k->zones[name];
        k->zone_stack.push_back(name);
    }
}
void zone_exit(const char*) {
    if (Kernel* k = t_k; k && !k->zone_stack.empty()) k->zone_stack.pop_back();
}

void dprint(const std::string& text) {
    Kernel& k = me();
    std::lock_guard<std::mutex> g(t_k->run->mu);
    t_k->run->log.push_back(k.prefix + text);
}

}  // namespace emu

// =============================== C entry points (Python driver) ============================
using namespace emu;

extern "C" {

// words: l1_size, sem_base, unreserved_base, l1_align, dram_align, num_cbs, view_bytes_lo, view_bytes_hi,
// num_banks, then per bank: channel, x, y, offset_lo, offset_hi; then num_channels, per channel: n, (x, y)*;
// then poison_l1 (0: each launch zeroes L1 instead of poisoning it).
// Selects device `h` for this host call; false when the handle is invalid.
static bool select_device(int h) {
    std::lock_guard<std::mutex> g(g_devices_mu);
    if (h < 0 || size_t(h) >= g_devices.size() || !g_devices[h]) return false;
    t_dev = g_devices[h].get();
    return true;
}

// Creates a device; returns its handle (>= 0) or -1 (message in emu_config_error()).
static std::string g_config_error;
__attribute__((visibility("default"))) const char* emu_config_error() { return g_config_error.c_str(); }

__attribute__((visibility("default"))) void emu_destroy(int h) {
    std::lock_guard<std::mutex> g(g_devices_mu);
    if (h >= 0 && size_t(h) < g_devices.size() && g_devices[h] && !g_devices[h]->leaked) g_devices[h].reset();
}

__attribute__((visibility("default"))) int emu_configure(const uint32_t* w, int n) {
    int i = 0;
    auto next = [&]() -> uint32_t {
        if (i >= n) throw std::runtime_error("emu_configure: short config");
        return w[i++];
    };
    try {
        Arch a;
        a.l1_size = next();
        a.sem_base = next();
        a.unreserved_base = next();
        a.l1_align = next();
        a.dram_align = next();
        a.num_cbs = next();
        uint64_t lo = next(), hi = next();
        a.view_bytes = lo | (hi << 32);
        uint32_t nb = next();
        for (uint32_t b = 0; b < nb; ++b) {
            a.bank_channel.push_back(next());
            uint32_t x = next(), y = next();
            a.bank_xy.emplace_back(x, y);
            uint64_t olo = next(), ohi = next();
            a.bank_offset.push_back(olo | (ohi << 32));
        }
        uint32_t nch = next();
        a.channel_banks.resize(nch);
        for (uint32_t c = 0; c < nch; ++c) {
            uint32_t ne = next();
            for (uint32_t e = 0; e < ne; ++e) {
                uint32_t x = next(), y = next();
                a.xy_to_channel[xy_key(x, y)] = c;
            }
        }
        for (uint32_t b = 0; b < nb; ++b) a.channel_banks.at(a.bank_channel[b]).push_back(b);
        const bool poison_l1 = next() != 0;
        if (nb == 0 || a.l1_size == 0 || a.dram_align == 0 || a.num_cbs > kMaxCBs)
            throw std::runtime_error("emu_configure: invalid arch");
        a.configured = true;
        auto d = std::make_unique<Device>();
        d->arch = std::move(a);
        d->poison_l1 = poison_l1;
        d->dram.assign(nb, {});
        std::lock_guard<std::mutex> g(g_devices_mu);
        g_devices.push_back(std::move(d));
        return static_cast<int>(g_devices.size() - 1);
    } catch (std::exception& e) {
        g_config_error = e.what();
        return -1;
    }
}

__attribute__((visibility("default"))) int emu_dram_alloc(int h, uint32_t addr, uint32_t bytes_per_bank) {
    if (!select_device(h)) return 2;
    for (auto& bank : t_dev->dram) {
        auto it = bank.upper_bound(addr);
        if (it != bank.end() && uint64_t(addr) + bytes_per_bank > it->first) return 1;
        if (it != bank.begin()) {
            auto p = std::prev(it);
            if (uint64_t(p->first) + p->second.size > addr) return 1;
        }
    }
    for (auto& bank : t_dev->dram) bank[addr] = Region{bytes_per_bank, std::vector<uint8_t>(bytes_per_bank, 0)};
    return 0;
}

__attribute__((visibility("default"))) int emu_dram_free(int h, uint32_t addr) {
    if (!select_device(h)) return 2;
    int found = 0;
    for (auto& bank : t_dev->dram) found += static_cast<int>(bank.erase(addr));
    return found ? 0 : 1;
}

static uint8_t* host_page(uint32_t addr, uint32_t page_bytes, uint32_t i) {
    const uint32_t nb = static_cast<uint32_t>(t_dev->dram.size());
    const uint32_t a = t_dev->arch.dram_align;
    const uint32_t aligned = (page_bytes + a - 1) / a * a;
    auto& bank = t_dev->dram[i % nb];
    auto it = bank.find(addr);
    if (it == bank.end()) return nullptr;
    const uint64_t off = uint64_t(i / nb) * aligned;
    if (off + page_bytes > it->second.size) return nullptr;
    return it->second.data.data() + off;
}

__attribute__((visibility("default"))) int emu_dram_write_pages(int h, uint32_t addr, uint32_t page_bytes,
                                                                 uint32_t num_pages, const uint8_t* data) {
    if (!select_device(h)) return 2;
    for (uint32_t i = 0; i < num_pages; ++i) {
        uint8_t* p = host_page(addr, page_bytes, i);
        if (!p) return 1;
        std::memcpy(p, data + uint64_t(i) * page_bytes, page_bytes);
    }
    return 0;
}

__attribute__((visibility("default"))) int emu_dram_read_pages(int h, uint32_t addr, uint32_t page_bytes,
                                                                uint32_t num_pages, uint8_t* out) {
    if (!select_device(h)) return 2;
    for (uint32_t i = 0; i < num_pages; ++i) {
        const uint8_t* p = host_page(addr, page_bytes, i);
        if (!p) return 1;
        std::memcpy(out + uint64_t(i) * page_bytes, p, page_bytes);
    }
    return 0;
}

// Raw bytes of DRAM bank `bank` at `addr` (tests: interleaved placement). 0 ok, 1 outside a buffer.
__attribute__((visibility("default"))) int emu_dram_peek(int h, uint32_t bank, uint32_t addr, uint32_t n,
                                                         uint8_t* out) {
    if (!select_device(h) || bank >= t_dev->dram.size()) return 2;
    auto& regions = t_dev->dram[bank];
    auto r = regions.upper_bound(addr);
    if (r == regions.begin()) return 1;
    --r;
    if (uint64_t(addr) + n > uint64_t(r->first) + r->second.size) return 1;
    std::memcpy(out, r->second.data.data() + (addr - r->first), n);
    return 0;
}

// Raw bytes of logical core (x, y)'s L1 as the last run left it (tests: what a kernel left in
// flight). 0 ok, 1 the core was not in the last run or the range is outside L1.
__attribute__((visibility("default"))) int emu_l1_peek(int h, uint32_t x, uint32_t y, uint32_t addr, uint32_t n,
                                                       uint8_t* out) {
    if (!select_device(h)) return 2;
    if (uint64_t(addr) + n > t_dev->arch.l1_size) return 1;
    for (size_t i = 0; i < t_dev->l1_pool_cores.size() && i < t_dev->l1_pool.size(); ++i) {
        if (t_dev->l1_pool_cores[i] == std::make_pair(x, y) && t_dev->l1_pool[i]) {
            std::memcpy(out, t_dev->l1_pool[i].get() + addr, n);
            return 0;
        }
    }
    return 1;
}

// The 16-bit poison halves (see kL1Poison): which 0 = uninitialised L1, 1 = a read in flight.
__attribute__((visibility("default"))) uint32_t emu_poison_half(int which) {
    return which == 0 ? kL1Poison : kInFlightPoison;
}

__attribute__((visibility("default"))) const char* emu_last_error(int h) {
    return select_device(h) ? t_dev->last_error.c_str() : "invalid emulator handle";
}
__attribute__((visibility("default"))) const char* emu_last_report(int h) {
    return select_device(h) ? t_dev->last_report.c_str() : "";
}

// Plan (uint32 words): ncores, per core: lx ly nx ny, ncb, (idx addr size page fmt)*, nsem, (id init)*,
// nk, per kernel: role, so_str, name_str, fidelity, fp32, fullsync, approx, nrt, rt..., ncrt, crt...
// Strings by index into `strs`. Returns 0 ok, 1 kernel error, 2 deadlock, 3 timeout, 4 config error.
__attribute__((visibility("default"))) int emu_run(int h, const uint32_t* w, int n, const char** strs,
                                                   int nstr, double timeout_s) {
    if (!select_device(h)) return kConfig;
    t_dev->last_error.clear();
    t_dev->last_report.clear();
    if (!t_dev->arch.configured) {
        t_dev->last_error = "emu_run: emu_configure was not called";
        return kConfig;
    }
    auto R = std::make_unique<RunState>();
    R->dev = t_dev;
    int i = 0;
    auto next = [&]() -> uint32_t {
        if (i >= n) throw std::runtime_error("emu_run: truncated plan");
        return w[i++];
    };
    auto str = [&](uint32_t idx) -> std::string {
        if (int(idx) >= nstr) throw std::runtime_error("emu_run: bad string index");
        return strs[idx];
    };
    try {
        const uint32_t ncores = next();
        // Slots past this run's cores keep an earlier run's bytes: emu_l1_peek must not find them.
        t_dev->l1_pool_cores.assign(ncores, {UINT32_MAX, UINT32_MAX});
        for (uint32_t ci = 0; ci < ncores; ++ci) {
            auto core = std::make_unique<Core>();
            core->lx = next(), core->ly = next(), core->nx = next(), core->ny = next();
            if (ci >= t_dev->l1_pool.size()) t_dev->l1_pool.resize(ci + 1);
            if (!t_dev->l1_pool[ci]) t_dev->l1_pool[ci].reset(new uint8_t[t_dev->arch.l1_size]);
            core->l1 = t_dev->l1_pool[ci].get();
            // Every launch, all of L1 (firmware region and CB space too): nothing of an earlier run
            // survives. The semaphores' initial values are written below, over it.
            if (t_dev->poison_l1) fill_poison<kL1Poison>(core->l1, 0, t_dev->arch.l1_size);
            else std::memset(core->l1, 0, t_dev->arch.l1_size);
            t_dev->l1_pool_cores[ci] = {core->lx, core->ly};
            const uint32_t ncb = next();
            for (uint32_t j = 0; j < ncb; ++j) {
                uint32_t idx = next(), addr = next(), size = next(), page = next(), fmtc = next();
                if (idx >= t_dev->arch.num_cbs || idx >= kMaxCBs)
                    throw std::runtime_error(fmt("core (%u,%u): CB index %u out of range (%u CBs)", core->lx,
                                                 core->ly, idx, t_dev->arch.num_cbs));
                CB& c = core->cbs[idx];
                if (c.configured)
                    throw std::runtime_error(
                        fmt("core (%u,%u): CB %u is configured twice", core->lx, core->ly, idx));
                if (page == 0 || size % page)
                    throw std::runtime_error(fmt("core (%u,%u): CB %u total_size %u is not a multiple of its page "
                                                 "size %u",
                                                 core->lx, core->ly, idx, size, page));
                c.configured = true;
                c.addr = c.rd = c.wr = addr;
                c.size = size;
                c.page = page;
                c.npages = size / page;
                c.fmt = static_cast<DataFormat>(fmtc);
            }
            const uint32_t nsem = next();
            for (uint32_t j = 0; j < nsem; ++j) {
                uint32_t id = next(), init = next();
                if (id >= kMaxSems)
                    throw std::runtime_error(fmt("core (%u,%u): semaphore id %u >= %u", core->lx, core->ly, id,
                                                 kMaxSems));
                if (core->sem_configured[id])
                    throw std::runtime_error(fmt("core (%u,%u): semaphore id %u configured twice", core->lx,
                                                 core->ly, id));
                core->sem_configured[id] = true;
                std::memcpy(core->l1 + t_dev->arch.sem_base + id * t_dev->arch.l1_align, &init, 4);
            }
            const uint32_t nk = next();
            for (uint32_t j = 0; j < nk; ++j) {
                auto k = std::make_unique<Kernel>();
                k->core = core.get();
                k->run = R.get();
                k->role = static_cast<KernelRole>(next());
                k->slot = static_cast<int>(k->role);
                if (k->slot > 2) throw std::runtime_error("bad kernel role");
                const std::string so = str(next());
                k->name = str(next());
                k->cc.math_fidelity = next();
                k->cc.fp32_dest_acc_en = next() != 0;
                k->cc.dst_full_sync_en = next() != 0;
                k->cc.math_approx_mode = next() != 0;
                k->noc = static_cast<uint8_t>(next());
                k->noc_mode = static_cast<uint8_t>(next());
                const uint32_t nrt = next();
                for (uint32_t r = 0; r < nrt; ++r) k->rt.push_back(next());
                const uint32_t ncrt = next();
                for (uint32_t r = 0; r < ncrt; ++r) k->crt.push_back(next());
                if (core->k[k->slot])
                    throw std::runtime_error(fmt("core (%u,%u): two %s kernels (%s and %s)", core->lx, core->ly,
                                                 role_name(k->role), core->k[k->slot]->name.c_str(),
                                                 k->name.c_str()));
                std::lock_guard<std::mutex> fg(g_kernel_fns_mu);
                auto f = g_kernel_fns.find(so);
                if (f == g_kernel_fns.end()) {
                    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
                    if (!h) throw std::runtime_error(fmt("cannot load kernel %s: %s", so.c_str(), dlerror()));
                    void* sym = dlsym(h, "_Z11kernel_mainv");
                    if (!sym)
                        throw std::runtime_error(
                            fmt("kernel %s defines no `void kernel_main()`", k->name.c_str()));
                    f = g_kernel_fns.emplace(so, reinterpret_cast<void (*)()>(sym)).first;
                }
                k->fn = f->second;
                k->prefix = fmt("core (%u,%u) %s: ", core->lx, core->ly, k->name.c_str());
                core->k[k->slot] = k.get();
                R->kernels.push_back(std::move(k));
            }
            // L1 buffers' bytes (a sharded tensor's shards), written over the poison before any
            // kernel starts: addr, bytes, then the data as ceil(bytes / 4) words.
            const uint32_t npre = next();
            for (uint32_t j = 0; j < npre; ++j) {
                const uint32_t addr = next(), bytes = next();
                if (uint64_t(addr) + bytes > t_dev->arch.l1_size)
                    throw std::runtime_error(fmt("core (%u,%u): L1 buffer [0x%x, +%u) is outside L1 (%u bytes)",
                                                 core->lx, core->ly, addr, bytes, t_dev->arch.l1_size));
                for (uint32_t b = 0; b < bytes; b += 4) {
                    const uint32_t word = next();
                    std::memcpy(core->l1 + addr + b, &word, std::min<uint32_t>(4, bytes - b));
                }
            }
            const uint32_t key = xy_key(core->nx, core->ny);
            if (R->by_xy.count(key))
                throw std::runtime_error(fmt("two cores at NoC (%u,%u)", core->nx, core->ny));
            R->by_xy[key] = core.get();
            R->cores.push_back(std::move(core));
        }
    } catch (std::exception& e) {
        t_dev->last_error = e.what();
        return kConfig;
    }

    const auto t0 = Clock::now();
    R->deadline = t0 + std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
    R->live = static_cast<int>(R->kernels.size());
    std::vector<std::thread> threads;
    threads.reserve(R->kernels.size());
    for (auto& k : R->kernels) threads.emplace_back(thread_main, k.get());

    bool stuck = false;
    {
        std::unique_lock<std::mutex> lk(R->mu);
        while (R->live > 0) {
            if (Clock::now() >= R->deadline && R->err_kind == kOk) {
                record_error_locked(*R, kTimeout,
                                    "timeout: the run exceeded its wall-clock limit of " + fmt("%.3g", timeout_s) +
                                        " s; kernel states:" + describe_blocked_locked(*R));
            }
            if (R->abort.load() && Clock::now() >= R->deadline + std::chrono::seconds(2)) {
                stuck = true;
                break;
            }
            R->done_cv.wait_until(lk, std::min(R->abort.load() ? R->deadline + std::chrono::seconds(2) : R->deadline,
                                               Clock::now() + std::chrono::milliseconds(200)));
        }
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (stuck) {
        // A kernel spins without calling the API; it can't be stopped. Leak its state so it stays valid.
        for (auto& t : threads) t.detach();
        t_dev->last_error = R->err + "\n(kernel threads that never call the emulator API could not be stopped; "
                                "their state is leaked and L1 buffers are no longer reused)";
        t_dev->leaked = true;
        for (auto& p : t_dev->l1_pool) (void)p.release();  // still in use by the stuck threads
        t_dev->l1_pool.clear();
        (void)R.release();
        return kTimeout;
    }
    for (auto& t : threads) t.join();
    const int kind = R->err_kind;
    t_dev->last_error = R->err;
    t_dev->last_report = build_report(*R, wall);
    return kind;
}

}  // extern "C"
