// The emulator's compute engine. See include/emu/compute_engine.hpp for the execution model and
// the compute section of ttnn_flashdecode/emulator/__init__.py's docstring for the supported calls
// and the numerics model (with its known differences from silicon).
#include "emu/compute_engine.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "emu/runtime.hpp"

namespace emu::compute {
namespace {

constexpr uint32_t kTileElems = 1024;
constexpr uint32_t kFaceElems = 256;

// ---------------------------------------------------------------------------------------------
// Number formats.

inline uint32_t f2u(float f) { return std::bit_cast<uint32_t>(f); }
inline float u2f(uint32_t u) { return std::bit_cast<float>(u); }

inline float bf16_to_float(uint16_t b) { return u2f(static_cast<uint32_t>(b) << 16); }

// float -> bf16 bits, round to nearest, ties to even (NaN kept quiet).
inline uint16_t float_to_bf16_rne(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return static_cast<uint16_t>((u >> 16) | 0x40);
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return static_cast<uint16_t>(u >> 16);
}
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16_rne(f)); }

// Keep `bits` explicit mantissa bits, truncating toward zero (TF32 = 10, BF16 = 7).
inline float trunc_mantissa(float f, int bits) {
    if (!std::isfinite(f)) return f;
    uint32_t mask = ~((1u << (23 - bits)) - 1u);
    return u2f(f2u(f) & mask);
}

// double -> float with round-to-odd, so that a later RNE to bf16 is a single correct rounding.
inline float to_float_round_odd(double v) {
    if (!std::isfinite(v)) return static_cast<float>(v);
    float f = static_cast<float>(v);
    if (std::isinf(f)) return f;
    if (static_cast<double>(f) == v) return f;
    if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
    return u2f(f2u(f) | 1u);
}

// SFPSTORE to a BF16 DST: flush denormals to signed zero, truncate the mantissa toward zero.
inline float sfpu_store_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    return u2f(u & 0xffff0000u);
}

std::string fmt_name(DataFormat f) {
    switch (f) {
        case DataFormat::Float32: return "Float32";
        case DataFormat::Float16_b: return "Float16_b";
        case DataFormat::Bfp8_b: return "Bfp8_b";
        case DataFormat::Bfp4_b: return "Bfp4_b";
    }
    return "DataFormat(" + std::to_string(static_cast<unsigned>(f)) + ")";
}

// Bytes of one 32x32 tile; 0 for a format the engine cannot unpack or pack.
uint32_t tile_bytes(DataFormat f) {
    switch (f) {
        case DataFormat::Float32: return 4096;
        case DataFormat::Float16_b: return 2048;
        case DataFormat::Bfp8_b: return 1088;  // 64 exponent bytes + 1024 one-byte data
        case DataFormat::Bfp4_b: return 576;   // 64 exponent bytes + 512 bytes of two 4-bit data
    }
    return 0;
}

std::string cbn(uint32_t cb) { return "c_" + std::to_string(cb); }

inline uint32_t elem_index(uint32_t r, uint32_t c) {
    return ((r / 16) * 2 + c / 16) * kFaceElems + (r % 16) * 16 + (c % 16);
}

// A block-float datum (sign in bit 7, magnitude in bits 6..0, as BFP8) and its row's shared
// exponent -> the BF16 bits the unpacker produces (isa FloatBitPatterns.md, "Conversion routines").
// Hardware, not ttnn's host unpacker: sign with magnitude 0 gives 0xff80 (-2^128 to the FPU, -inf
// here) and a normalising shift larger than the exponent wraps it mod 256. ttnn's packer emits
// neither (a datum that rounds to 0 gets sign 0; kept data are normal floats), so packed pages
// decode to exactly ttnn's own dequantized values.
inline uint16_t bfp8_to_bf16(uint8_t datum, uint8_t exp) {
    const uint16_t sign = datum >> 7;
    uint8_t mag = static_cast<uint8_t>(datum << 1);
    if (mag == 0) return sign ? 0xff80 : 0;  // exponent ignored: exponent 0, magnitude 0 is +0
    const int lz = std::countl_zero(mag);
    mag = static_cast<uint8_t>(mag << lz);
    exp = static_cast<uint8_t>(exp - lz);
    return static_cast<uint16_t>((sign << 15) | (exp << 7) | (mag & 0x7e));
}

// Exact value of datum `i` (face layout) of a tile stored in a CB page. Block-float pages hold 64
// shared exponents (one per face row, faces 0..3), then the data in face order.
float read_cb_datum(const PageRef& p, uint32_t i) {
    switch (p.format) {
        case DataFormat::Float32: {
            float f;
            std::memcpy(&f, p.bytes + 4 * i, 4);
            return f;
        }
        case DataFormat::Float16_b: {
            uint16_t b;
            std::memcpy(&b, p.bytes + 2 * i, 2);
            return bf16_to_float(b);
        }
        case DataFormat::Bfp8_b:
            return bf16_to_float(bfp8_to_bf16(p.bytes[64 + i], p.bytes[i / 16]));
        case DataFormat::Bfp4_b: {
            // Datum 0 of each byte is its low nibble (ttnn packs datum 0 into a word's LSBs).
            const uint8_t b = p.bytes[64 + i / 2];
            const uint8_t nibble = (i & 1) ? b >> 4 : b & 0x0f;
            return bf16_to_float(bfp8_to_bf16(static_cast<uint8_t>(nibble << 4), p.bytes[i / 16]));
        }
    }
    fail("compute engine: cannot unpack a CB page of format " + fmt_name(p.format));
}

// ---------------------------------------------------------------------------------------------
// Engine state (one compute kernel per thread).

enum class Kind : uint8_t { None, Copy, BcastCopy, Matmul, Reduce, Binary, BinaryReuse };

struct FpuCfg {
    Kind kind = Kind::None;
    std::string desc = "nothing (no compute init has run)";  // the init call, for messages
    uint32_t cb0 = 0, cb1 = 0;
    uint32_t transpose = 0, ct = 1, rt = 1, kt = 1;
    BinaryOp op = BinaryOp::Add;
    Bcast bcast = Bcast::None;
    ReuseDest reuse = ReuseDest::None;
    bool acc = false;
    Pool pool = Pool::Sum;
    RDim dim = RDim::Row;
};

enum class SfpuKind : uint8_t { None, Exp, Recip, BinaryMax, Tanh, BinopScalar, Log, BinaryAdd, BinarySub, BinaryMul, BitwiseAnd };

struct SfpuCfg {
    SfpuKind kind = SfpuKind::None;
    std::string desc = "nothing (no SFPU init has run)";
    bool exp_approx = false, exp_clamp = true;
    uint32_t exp_scale = 0x3F800000u;
    bool recip_fp32 = false;
    int recip_mode = 0;
    bool tanh_fp32 = false;
    bool log_fp32 = false;
};

enum class SecState : uint8_t { Free, Math, Committed, Pack, Legacy };

struct Section {
    std::vector<float> v;
    std::vector<uint8_t> cleared;  // 1 = cleared by ZEROACC (reads as 0, or -inf for MAX reduce)
    SecState state = SecState::Free;
};

struct UnpackerFmt {
    uint32_t cb = 0;
    std::string by;  // the call that configured it
};

struct Engine {
    bool started = false;
    bool fp32 = false, sync_full = false, approx = false;
    uint32_t fidelity = 4;
    uint32_t cap = 8;  // tiles per section
    std::vector<Section> sections;
    uint32_t math_ptr = 0, pack_ptr = 0;
    bool math_held = false, pack_held = false, legacy = false;
    UnpackerFmt srca, srcb, pack;
    FpuCfg fpu;
    SfpuCfg sfpu;
    bool reduce_mask = false;  // packer edge masks left by reduce_init<.., REDUCE_ROW>
    std::string reduce_desc;
};

thread_local Engine g;

Engine& eng() { return g; }

// ---------------------------------------------------------------------------------------------
// Checks shared by all calls.

[[noreturn]] void failf(const std::string& api, const std::string& msg) { fail(api + ": " + msg); }

void enter(const char* api, bool needs_startup = true) {
    if (current_role() != KernelRole::Compute)
        fail(std::string(api) + ": compute API called from a dataflow kernel");
    count_call(api);
    if (needs_startup && !eng().started)
        failf(api, "called before compute_kernel_hw_startup(); the unpacker, math and packer are unconfigured");
}

void check_dest_acc(const char* api, bool is_fp32_dest_acc_en) {
    if (is_fp32_dest_acc_en != eng().fp32)
        failf(api, std::string("is_fp32_dest_acc_en template argument = ") + (is_fp32_dest_acc_en ? "true" : "false") +
                       " differs from the kernel's fp32_dest_acc_en = " + (eng().fp32 ? "true" : "false") +
                       "; mixed DST modes are not supported by the emulator");
}

std::optional<DataFormat> cb_format_of(uint32_t cb) { return emu::cb_format(cb); }

// Fails unless the unpacker/packer that will read/write `cb` is configured for `cb`'s format.
void check_format(const char* api, const char* unit, const UnpackerFmt& cfg, uint32_t cb, DataFormat fmt,
                  const char* fix) {
    if (cfg.cb == cb) return;
    std::optional<DataFormat> cfg_fmt = cb_format_of(cfg.cb);
    if (*cfg_fmt != fmt)
        failf(api, cbn(cb) + " holds " + fmt_name(fmt) + " but the " + unit + " is configured for " +
                       fmt_name(*cfg_fmt) + " (" + cfg.by + " on " + cbn(cfg.cb) + "); call " + fix + "(" + cbn(cb) +
                       ") first");
}

void check_idst(const char* api, uint32_t idst, const char* what = "DST index") {
    const Engine& e = eng();
    if (idst >= e.cap)
        failf(api, std::string(what) + " " + std::to_string(idst) + " is out of range: DST holds " +
                       std::to_string(e.cap) + " tiles per acquire (" + (e.sync_full ? "SyncFull" : "SyncHalf") +
                       ", " + (e.fp32 ? "fp32_dest_acc_en" : "16-bit") + ")");
}

Section& math_section(const char* api) {
    Engine& e = eng();
    if (!e.math_held)
        failf(api, "math outside tile_regs_acquire()..tile_regs_commit(); the math thread does not own a DST section");
    return e.sections[e.math_ptr];
}

Section& pack_section(const char* api) {
    Engine& e = eng();
    if (e.legacy) return e.sections[e.math_ptr];
    if (!e.pack_held)
        failf(api, "pack outside tile_regs_wait()..tile_regs_release(); the packer does not own a DST section");
    return e.sections[e.pack_ptr];
}

// The FPU/unpacker must be configured by the matching init for the same CBs and parameters.
void require_fpu(const char* api, bool ok, const std::string& want) {
    if (!ok)
        failf(api, "the unpacker/FPU are configured for " + eng().fpu.desc + ", not for this call; call " + want +
                       " first (a missing or stale init produces garbage on silicon)");
}

void note_fpu_init(const char* api) {
    Engine& e = eng();
    if (e.reduce_mask)
        failf(api, "reduce_uninit() was not called after " + e.reduce_desc +
                       "; the packer edge masks are still set and would zero all but column 0 of every later pack");
}

// DST element accessors.
inline float dst_get(const Section& s, uint32_t tile, uint32_t i) { return s.v[tile * kTileElems + i]; }
inline bool dst_cleared(const Section& s, uint32_t tile, uint32_t i) { return s.cleared[tile * kTileElems + i] != 0; }
inline void dst_put(Section& s, uint32_t tile, uint32_t i, float f) {
    s.v[tile * kTileElems + i] = f;
    s.cleared[tile * kTileElems + i] = 0;
}

// FPU write into DST: round to nearest even into the DST format.
inline float fpu_round(double v) {
    float f = to_float_round_odd(v);
    if (eng().fp32) return static_cast<float>(v);
    return round_bf16(f);
}

// CB datum as it lands in SrcA/SrcB: Float32 -> TF32 (fp32_dest_acc_en) or BF16, by truncation.
inline float to_src_reg(float f, DataFormat fmt) {
    if (fmt == DataFormat::Float32) return trunc_mantissa(f, eng().fp32 ? 10 : 7);
    return f;  // Float16_b and block-float values are exact in BF16
}

inline float unpack_src(const PageRef& p, uint32_t i) { return to_src_reg(read_cb_datum(p, i), p.format); }

// DST datum moved into a source register (dest reuse): FP32 DST -> TF32 (truncation).
inline float dst_to_src_reg(float f) { return eng().fp32 ? trunc_mantissa(f, 10) : f; }

// One FPU multiply of a SrcA operand by a SrcB operand at the configured fidelity (isa SrcASrcB.md
// "Fidelity phases"): phase 0 = A_hi*B_hi, 1 = A_lo*B_hi, 2 = A_hi*B_lo, 3 = A_lo*B_lo, where A_hi
// is the implicit 1 + 4 MSBs of SrcA's mantissa, A_lo the next 5 (TF32; the SrcA LSB is ignored),
// B_hi the implicit 1 + 6 MSBs of SrcB, B_lo the rest. LoFi/HiFi2/HiFi3/HiFi4 = phases 0 / 0-1 /
// 0-2 / 0-3. The partial products are summed exactly.
inline double fpu_mul(float a_srca, float b_srcb, uint32_t fidelity) {
    double a_hi = trunc_mantissa(a_srca, 4), a_all = trunc_mantissa(a_srca, 9);
    double b_hi = trunc_mantissa(b_srcb, 6), b_all = b_srcb;
    if (fidelity >= 4) return a_all * b_all;
    double a_lo = a_all - a_hi, b_lo = b_all - b_hi;
    double r = a_hi * b_hi;
    if (fidelity >= 2) r += a_lo * b_hi;
    if (fidelity >= 3) r += a_hi * b_lo;
    return r;
}

PageRef in_page(const char* api, uint32_t cb, uint32_t itile) {
    PageRef p = front_page(cb, itile);
    if (tile_bytes(p.format) == 0)
        failf(api, cbn(cb) + " holds " + fmt_name(p.format) +
                       ", which the emulator cannot unpack (it unpacks Float32, Float16_b, Bfp8_b and Bfp4_b)");
    if (p.page_bytes < tile_bytes(p.format))
        failf(api, cbn(cb) + " page size " + std::to_string(p.page_bytes) + " B is smaller than a 32x32 " +
                       fmt_name(p.format) + " tile (" + std::to_string(tile_bytes(p.format)) + " B)");
    return p;
}

std::string fidelity_name(uint32_t f) {
    switch (f) {
        case 0: return "LoFi";
        case 2: return "HiFi2";
        case 3: return "HiFi3";
        case 4: return "HiFi4";
    }
    return "MathFidelity(" + std::to_string(f) + ")";
}

const char* op_name(BinaryOp op) {
    switch (op) {
        case BinaryOp::Add: return "add";
        case BinaryOp::Sub: return "sub";
        case BinaryOp::Mul: return "mul";
    }
    return "?";
}

const char* reuse_name(ReuseDest r) {
    switch (r) {
        case ReuseDest::None: return "NONE";
        case ReuseDest::ToSrcA: return "DEST_TO_SRCA";
        case ReuseDest::ToSrcB: return "DEST_TO_SRCB";
    }
    return "?";
}

const char* pool_name(Pool p) {
    switch (p) {
        case Pool::Sum: return "SUM";
        case Pool::Avg: return "AVG";
        case Pool::Max: return "MAX";
        case Pool::Min: return "MIN";
    }
    return "?";
}

const char* dim_name(RDim d) {
    switch (d) {
        case RDim::Row: return "REDUCE_ROW";
        case RDim::Col: return "REDUCE_COL";
        case RDim::Scalar: return "REDUCE_SCALAR";
    }
    return "?";
}

// `kind` + "/" + `name` as a string that lives as long as the process: count_work keys on the pointer.
const char* work_key(const char* kind, const char* name) {
    static std::mutex mu;
    static std::map<std::string, std::string> keys;
    std::string key = std::string(kind) + "/" + name;
    std::lock_guard<std::mutex> lock(mu);
    return keys.try_emplace(key, key).first->second.c_str();
}

// The CoreStats.work keys of an SFPU API, built once per API and thread (work_key takes a lock and
// builds a string; every SFPU call counts two). API names are string literals: keyed by pointer.
struct SfpuWorkKeys {
    const char* faces;
    const char* iterations;
};
const SfpuWorkKeys& sfpu_work_keys(const char* api) {
    thread_local std::map<const char*, SfpuWorkKeys> keys;
    auto it = keys.find(api);
    if (it == keys.end()) {
        it = keys.emplace(api, SfpuWorkKeys{work_key("sfpu_faces", api), work_key("sfpu_iterations", api)}).first;
    }
    return it->second;
}

// Faces an SFPU call touches (llk _llk_math_eltwise_sfpu_apply_vector_mode_: RC all four, R faces 0
// and 1 -- rows 0..15 --, C faces 0 and 2), counted per core and API (CoreStats.sfpu_faces), and the
// SFPU iterations it runs over them (CoreStats.sfpu_iterations: `iterations` a face).
std::vector<uint32_t> sfpu_faces(const char* api, VecMode mode, int iterations) {
    std::vector<uint32_t> faces;
    switch (mode) {
        case VecMode::RC: faces = {0, 1, 2, 3}; break;
        case VecMode::R: faces = {0, 1}; break;
        case VecMode::C: faces = {0, 2}; break;
        default:
            failf(api, "VectorMode " + std::to_string(static_cast<int>(mode)) +
                           " is not supported by the emulator (RC, R and C are)");
    }
    if (iterations < 1 || iterations > 8) {
        failf(api, "ITERATIONS " + std::to_string(iterations) + " per face: the LLK's vector modes visit a face in 1..8");
    }
    const SfpuWorkKeys& keys = sfpu_work_keys(api);
    count_work(keys.faces, static_cast<uint32_t>(faces.size()));
    count_work(keys.iterations, static_cast<uint32_t>(faces.size() * iterations));
    return faces;
}

// The datums of a 16x16 face (row-major) that `iterations` SFPU iterations load and store: iteration
// d reads Dst rows 4 * (d / 2) .. + 3, the even columns when d is even, the odd when odd
// (tt-isa-documentation SFPLOAD: Row = (Addr & ~3) + lane / 8, Column = 2 * (lane & 7) + ((Addr & 2) != 0);
// the functors advance Addr by 2 an iteration). 8 iterations: the whole face.
const std::vector<uint32_t>& sfpu_face_datums(int iterations) {
    static const std::array<std::vector<uint32_t>, 9> datums = [] {
        std::array<std::vector<uint32_t>, 9> out;
        for (int n = 0; n <= 8; ++n) {
            for (int d = 0; d < n; ++d) {
                for (uint32_t lane = 0; lane < 32; ++lane) {
                    const uint32_t row = 4 * (d / 2) + lane / 8, col = 2 * (lane & 7) + (d & 1);
                    out[n].push_back(row * 16 + col);
                }
            }
            std::sort(out[n].begin(), out[n].end());
        }
        return out;
    }();
    return datums[iterations];
}

inline float sfpu_store(float f) { return eng().fp32 ? f : sfpu_store_bf16(f); }

void require_sfpu(const char* api, SfpuKind kind, bool params_ok, const std::string& want) {
    const SfpuCfg& s = eng().sfpu;
    if (s.kind != kind || !params_ok)
        failf(api, "the SFPU is configured for " + s.desc + ", not for this call; call " + want +
                       " first (a missing or stale SFPU init produces garbage on silicon)");
}

}  // namespace

// =============================================================================================
// Lifecycle and hardware startup.

void compute_thread_begin() { g = Engine{}; }

void compute_thread_end() {
    Engine& e = eng();
    if (!e.started) return;
    if (e.math_held) fail("kernel_main returned while holding a DST section (tile_regs_acquire without tile_regs_commit)");
    if (e.pack_held) fail("kernel_main returned while holding a DST section (tile_regs_wait without tile_regs_release)");
    for (const Section& s : e.sections)
        if (s.state == SecState::Committed)
            fail("kernel_main returned with a committed DST section that was never packed and released "
                 "(tile_regs_commit without tile_regs_wait/tile_regs_release)");
}

void hw_startup(uint32_t srca_cb, uint32_t srcb_cb, uint32_t ocb, bool dst_accum_mode, bool dst_sync_full,
                uint32_t math_fidelity, bool approx) {
    const char* api = "compute_kernel_hw_startup";
    enter(api, false);
    Engine& e = eng();
    if (e.started) failf(api, "called twice; it must run exactly once, before any other compute call");
    const ComputeConfig& cfg = compute_config();
    if (dst_accum_mode != cfg.fp32_dest_acc_en || dst_sync_full != cfg.dst_full_sync_en ||
        math_fidelity != cfg.math_fidelity || approx != cfg.math_approx_mode) {
        std::ostringstream m;
        m << "the kernel was compiled with DST_ACCUM_MODE=" << dst_accum_mode << " DST_SYNC_MODE="
          << (dst_sync_full ? "SyncFull" : "SyncHalf") << " MATH_FIDELITY=" << fidelity_name(math_fidelity)
          << " APPROX=" << approx << " but the ComputeConfig says fp32_dest_acc_en=" << cfg.fp32_dest_acc_en
          << " dst_full_sync_en=" << cfg.dst_full_sync_en << " math_fidelity=" << fidelity_name(cfg.math_fidelity)
          << " math_approx_mode=" << cfg.math_approx_mode;
        failf(api, m.str());
    }
    if (math_fidelity != 0 && math_fidelity != 2 && math_fidelity != 3 && math_fidelity != 4)
        failf(api, "unknown MathFidelity " + std::to_string(math_fidelity));
    e.started = true;
    e.fp32 = dst_accum_mode;
    e.sync_full = dst_sync_full;
    e.fidelity = math_fidelity;
    e.approx = approx;
    uint32_t total = dst_accum_mode ? 8 : 16;  // DEST = 1024 rows x 16 x 16 bit
    uint32_t nsec = dst_sync_full ? 1 : 2;
    e.cap = total / nsec;
    e.sections.assign(nsec, Section{});
    for (Section& s : e.sections) {
        s.v.assign(e.cap * kTileElems, 0.0f);
        s.cleared.assign(e.cap * kTileElems, 1);
    }
    e.srca = {srca_cb, "compute_kernel_hw_startup"};
    e.srcb = {srcb_cb, "compute_kernel_hw_startup"};
    e.pack = {ocb, "compute_kernel_hw_startup"};
    e.fpu = FpuCfg{};
    e.fpu.desc = "compute_kernel_hw_startup only (no op init has run)";
}

// =============================================================================================
// DST handshake.

void tile_regs_acquire() {
    const char* api = "tile_regs_acquire";
    enter(api);
    Engine& e = eng();
    if (e.legacy) failf(api, "called between acquire_dst() and release_dst()");
    if (e.math_held) failf(api, "called twice without tile_regs_commit()");
    Section& s = e.sections[e.math_ptr];
    if (s.state != SecState::Free)
        failf(api, "no free DST section: the packer still holds the next one (missing tile_regs_wait/"
                   "tile_regs_release); the three TRISCs are serialised here, so this would never complete");
    s.state = SecState::Math;
    e.math_held = true;
}

void tile_regs_commit(bool is_fp32_dest_acc_en) {
    const char* api = "tile_regs_commit";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    Engine& e = eng();
    if (e.legacy) failf(api, "called between acquire_dst() and release_dst()");
    if (!e.math_held) failf(api, "called without tile_regs_acquire()");
    e.sections[e.math_ptr].state = SecState::Committed;
    e.math_held = false;
    e.math_ptr = (e.math_ptr + 1) % e.sections.size();
}

void tile_regs_wait() {
    const char* api = "tile_regs_wait";
    enter(api);
    Engine& e = eng();
    if (e.legacy) failf(api, "called between acquire_dst() and release_dst()");
    if (e.pack_held) failf(api, "called twice without tile_regs_release()");
    Section& s = e.sections[e.pack_ptr];
    if (s.state != SecState::Committed)
        failf(api, "no committed DST section to wait for (tile_regs_commit has not run); on silicon the packer "
                   "would wait forever");
    s.state = SecState::Pack;
    e.pack_held = true;
}

namespace {
void clear_section(Section& s) {
    std::fill(s.v.begin(), s.v.end(), 0.0f);
    std::fill(s.cleared.begin(), s.cleared.end(), 1);
    s.state = SecState::Free;
}
}  // namespace

void tile_regs_release(bool is_fp32_dest_acc_en) {
    const char* api = "tile_regs_release";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    Engine& e = eng();
    if (e.legacy) failf(api, "called between acquire_dst() and release_dst()");
    if (!e.pack_held) failf(api, "called without tile_regs_wait()");
    clear_section(e.sections[e.pack_ptr]);  // ZEROACC on the section (_llk_pack_dest_section_done_)
    e.pack_held = false;
    e.pack_ptr = (e.pack_ptr + 1) % e.sections.size();
}

void acquire_dst() {
    const char* api = "acquire_dst";
    enter(api);
    Engine& e = eng();
    if (e.legacy || e.math_held || e.pack_held) failf(api, "called while a DST section is already held");
    if (e.math_ptr != e.pack_ptr || e.sections[e.math_ptr].state != SecState::Free)
        failf(api, "mixed with tile_regs_* calls that left a section in flight");
    e.sections[e.math_ptr].state = SecState::Legacy;
    e.legacy = true;
    e.math_held = true;
}

void release_dst(bool is_fp32_dest_acc_en) {
    const char* api = "release_dst";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    Engine& e = eng();
    if (!e.legacy) failf(api, "called without acquire_dst()");
    clear_section(e.sections[e.math_ptr]);
    e.legacy = false;
    e.math_held = false;
    e.math_ptr = e.pack_ptr = (e.math_ptr + 1) % e.sections.size();
}

// =============================================================================================
// Circular buffers.

void cb_wait_front(uint32_t cb, uint32_t n) {
    enter("cb_wait_front", false);
    emu::cb_wait_front(cb, n);
}
void cb_pop_front(uint32_t cb, uint32_t n) {
    enter("cb_pop_front", false);
    emu::cb_pop_front(cb, n);
}
void cb_reserve_back(uint32_t cb, uint32_t n) {
    enter("cb_reserve_back", false);
    emu::cb_reserve_back(cb, n);
}
void cb_push_back(uint32_t cb, uint32_t n) {
    enter("cb_push_back", false);
    emu::cb_push_back(cb, n);
}
uint32_t read_tile_value(uint32_t cb, uint32_t tile, uint32_t element_offset) {
    enter("read_tile_value", false);
    const PageRef page = front_page(cb, tile);  // fails unless the page is waited for
    if (uint64_t(element_offset) * 4 + 4 > page.page_bytes)
        failf("read_tile_value", "element_offset " + std::to_string(element_offset) + " is past the " +
                                     std::to_string(page.page_bytes) + "-byte page of CB " + std::to_string(cb));
    uint32_t value;
    std::memcpy(&value, page.bytes + element_offset * 4, sizeof value);
    return value;
}

// =============================================================================================
// Copy.

namespace {
// A data copy's init (copy_init, unary_bcast_init): the FPU configured for copies of `cb`.
void data_copy_init(const char* api, Kind kind, uint32_t cb, bool is_fp32_dest_acc_en) {
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    note_fpu_init(api);
    FpuCfg c;
    c.kind = kind;
    c.cb0 = cb;
    c.desc = std::string(api) + "(" + cbn(cb) + ")";
    eng().fpu = c;
}

// A data copy's checks (copy_tile, unary_bcast): its init since the FPU was last configured, the DST
// index, the DST section; returns the tile's page.
PageRef data_copy_page(const char* api, Kind kind, const char* init, uint32_t cb, uint32_t itile, uint32_t idst,
                       bool is_fp32_dest_acc_en) {
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    const FpuCfg& f = eng().fpu;
    require_fpu(api, f.kind == kind && f.cb0 == cb, std::string(init) + "(" + cbn(cb) + ")");
    check_idst(api, idst);
    return in_page(api, cb, itile);
}
}  // namespace

void copy_init(const char* api, uint32_t cb, uint32_t transpose, uint32_t transpose_within_face,
               bool is_fp32_dest_acc_en) {
    if (transpose != 0 || transpose_within_face != 0)
        failf(api, "transpose is not supported by the emulator (untested path disabled)");
    data_copy_init(api, Kind::Copy, cb, is_fp32_dest_acc_en);
}

void copy_tile(uint32_t cb, uint32_t itile, uint32_t idst, bool is_fp32_dest_acc_en) {
    const char* api = "copy_tile";
    PageRef p = data_copy_page(api, Kind::Copy, "copy_init", cb, itile, idst, is_fp32_dest_acc_en);
    Section& s = math_section(api);
    check_format(api, "SrcA unpacker", eng().srca, cb, p.format, "reconfig_data_format_srca");
    // Unpack to SrcA (Float32 -> TF32/BF16 by truncation), then MOVA2D into DST.
    for (uint32_t i = 0; i < kTileElems; ++i) dst_put(s, idst, i, fpu_round(unpack_src(p, i)));
}

void unary_bcast_col_init(uint32_t cb, bool is_fp32_dest_acc_en) {
    data_copy_init("unary_bcast_init<BroadcastType::COL>", Kind::BcastCopy, cb, is_fp32_dest_acc_en);
}

// bcast.h: the tile goes to SrcB with the column broadcast (Float32 -> TF32 / BF16 by truncation),
// then MOVB2D. bcast.h unpacks straight to DST only when the CB's unpack destination format is
// Float32, which takes ComputeConfigDescriptor.unpack_to_dest_mode UnpackToDestFp32 (the op leaves it
// Default, so its Float32 CBs unpack to TF32).
void unary_bcast_col(uint32_t cb, uint32_t itile, uint32_t idst, bool is_fp32_dest_acc_en) {
    const char* api = "unary_bcast<BroadcastType::COL>";
    PageRef p = data_copy_page(api, Kind::BcastCopy, "unary_bcast_init<BroadcastType::COL>", cb, itile, idst,
                               is_fp32_dest_acc_en);
    Section& s = math_section(api);
    check_format(api, "SrcB unpacker", eng().srcb, cb, p.format, "reconfig_data_format_srcb");
    for (uint32_t r = 0; r < 32; ++r) {
        const float v = fpu_round(unpack_src(p, elem_index(r, 0)));
        for (uint32_t c = 0; c < 32; ++c) dst_put(s, idst, elem_index(r, c), v);
    }
}

void unary_bcast_col_uninit(uint32_t cb) {
    const char* api = "unary_bcast_uninit<BroadcastType::COL>";
    enter(api);
    const FpuCfg& f = eng().fpu;
    require_fpu(api, f.kind == Kind::BcastCopy && f.cb0 == cb, "unary_bcast_init<BroadcastType::COL>(" + cbn(cb) + ")");
    eng().fpu = FpuCfg{};
}

// =============================================================================================
// Matmul.

void matmul_init(const char* api, uint32_t in0, uint32_t in1, uint32_t transpose, uint32_t ct, uint32_t rt,
                 uint32_t kt) {
    enter(api);
    note_fpu_init(api);
    if (ct == 0 || rt == 0 || kt == 0) failf(api, "ct_dim, rt_dim and kt_dim must be >= 1");
    if (ct * rt > eng().cap)
        failf(api, "ct_dim*rt_dim = " + std::to_string(ct * rt) + " exceeds the " + std::to_string(eng().cap) +
                       " DST tiles per acquire");
    FpuCfg c;
    c.kind = Kind::Matmul;
    c.cb0 = in0;
    c.cb1 = in1;
    c.transpose = transpose ? 1 : 0;
    c.ct = ct;
    c.rt = rt;
    c.kt = kt;
    std::ostringstream d;
    d << api << "(" << cbn(in0) << ", " << cbn(in1) << ", transpose=" << c.transpose;
    if (std::string(api) == "matmul_block_init") d << ", ct_dim=" << ct << ", rt_dim=" << rt << ", kt_dim=" << kt;
    d << ")";
    c.desc = d.str();
    eng().fpu = c;
}

namespace {
void matmul_one(const char* api, Section& s, const PageRef& a, const PageRef& b, bool transpose, uint32_t idst) {
    // DST += SrcB(in0) @ SrcA(in1 [transposed]); one rounding into DST per 16-wide K half (face).
    std::array<float, kTileElems> A, B;
    for (uint32_t i = 0; i < kTileElems; ++i) {
        A[i] = unpack_src(a, i);
        B[i] = unpack_src(b, i);
    }
    (void)api;
    const uint32_t fid = eng().fidelity;
    for (uint32_t r = 0; r < 32; ++r) {
        for (uint32_t c = 0; c < 32; ++c) {
            uint32_t di = elem_index(r, c);
            float acc = dst_cleared(s, idst, di) ? 0.0f : dst_get(s, idst, di);
            for (uint32_t kh = 0; kh < 2; ++kh) {
                double part = 0.0;
                for (uint32_t k = kh * 16; k < kh * 16 + 16; ++k) {
                    float av = A[elem_index(r, k)];
                    float bv = transpose ? B[elem_index(c, k)] : B[elem_index(k, c)];
                    part += fpu_mul(bv, av, fid);  // in1 is SrcA, in0 is SrcB
                }
                acc = fpu_round(static_cast<double>(acc) + part);
            }
            dst_put(s, idst, di, acc);
        }
    }
}

void matmul_formats(const char* api, uint32_t in0, const PageRef& a, uint32_t in1, const PageRef& b) {
    check_format(api, "SrcB unpacker", eng().srcb, in0, a.format, "reconfig_data_format_srcb");
    check_format(api, "SrcA unpacker", eng().srca, in1, b.format, "reconfig_data_format_srca");
}
}  // namespace

void matmul_tiles(uint32_t in0, uint32_t in1, uint32_t i0, uint32_t i1, uint32_t idst) {
    const char* api = "matmul_tiles";
    enter(api);
    const FpuCfg& f = eng().fpu;
    require_fpu(api, f.kind == Kind::Matmul && f.cb0 == in0 && f.cb1 == in1 && f.ct == 1 && f.rt == 1,
                "matmul_init(" + cbn(in0) + ", " + cbn(in1) + ", transpose)");
    check_idst(api, idst);
    Section& s = math_section(api);
    PageRef a = in_page(api, in0, i0), b = in_page(api, in1, i1);
    matmul_formats(api, in0, a, in1, b);
    matmul_one(api, s, a, b, f.transpose != 0, idst);
}

void matmul_block(uint32_t in0, uint32_t in1, uint32_t i0, uint32_t i1, uint32_t idst, uint32_t transpose,
                  uint32_t ct, uint32_t rt, uint32_t kt) {
    const char* api = "matmul_block";
    enter(api);
    const FpuCfg& f = eng().fpu;
    uint32_t tr = transpose ? 1 : 0;
    require_fpu(api,
                f.kind == Kind::Matmul && f.cb0 == in0 && f.cb1 == in1 && f.transpose == tr && f.ct == ct &&
                    f.rt == rt && f.kt == kt,
                "matmul_block_init(" + cbn(in0) + ", " + cbn(in1) + ", transpose=" + std::to_string(tr) +
                    ", ct_dim=" + std::to_string(ct) + ", rt_dim=" + std::to_string(rt) +
                    ", kt_dim=" + std::to_string(kt) + ")");
    if (ct * rt == 0) failf(api, "ct_dim and rt_dim must be >= 1");
    check_idst(api, idst + ct * rt - 1, "last DST index of the block (idst + ct_dim*rt_dim - 1)");
    Section& s = math_section(api);
    for (uint32_t r = 0; r < rt; ++r) {
        for (uint32_t c = 0; c < ct; ++c) {
            PageRef a = in_page(api, in0, i0 + r * kt), b = in_page(api, in1, i1 + c);
            matmul_formats(api, in0, a, in1, b);
            matmul_one(api, s, a, b, tr != 0, idst + r * ct + c);
        }
    }
}

// =============================================================================================
// Reduce.

void reduce_init(Pool pool, RDim dim, bool is_fp32_dest_acc_en, uint32_t icb, uint32_t scb, uint32_t ocb) {
    const char* api = "reduce_init";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    if (dim != RDim::Row || (pool != Pool::Sum && pool != Pool::Max))
        failf(api, std::string("reduce_init<PoolType::") + pool_name(pool) + ", ReduceDim::" + dim_name(dim) +
                       "> is not supported by the emulator (MAX and SUM with REDUCE_ROW are)");
    note_fpu_init(api);
    FpuCfg c;
    c.kind = Kind::Reduce;
    c.cb0 = icb;
    c.cb1 = scb;
    c.pool = pool;
    c.dim = dim;
    c.desc = std::string("reduce_init<PoolType::") + pool_name(pool) + ", ReduceDim::" + dim_name(dim) + ">(" +
             cbn(icb) + ", " + cbn(scb) + ", " + cbn(ocb) + ")";
    Engine& e = eng();
    e.fpu = c;
    e.reduce_mask = true;  // llk_pack_reduce_mask_config<REDUCE_ROW>
    e.reduce_desc = c.desc;
}

void reduce_uninit(uint32_t icb) {
    const char* api = "reduce_uninit";
    enter(api);
    (void)icb;
    Engine& e = eng();
    if (!e.reduce_mask && e.fpu.kind != Kind::Reduce)
        failf(api, "called without a preceding reduce_init (the engine is configured for " + e.fpu.desc + ")");
    e.reduce_mask = false;
    e.fpu = FpuCfg{};
    e.fpu.desc = "reduce_uninit (no op init since)";
}

namespace {
// Validates the scaler tile (tt-metal's prepare_reduce_scaler layout: zeros except row 0 of each
// face; faces 0/2 and 1/3 identical; every non-zero datum the same value) and returns the
// per-column SrcB weights of row 0.
std::array<float, 32> scaler_weights(const char* api, const PageRef& p, uint32_t cb, uint32_t itile) {
    std::array<float, 32> w{};
    std::optional<float> value;
    auto bad = [&](uint32_t r, uint32_t c, float v, const std::string& why) {
        std::ostringstream m;
        m << "scaler tile " << cbn(cb) << "[" << itile << "] is not in tt-metal's reduce-scaler layout (row 0 of "
          << "each face holds the scaler, everything else 0; see prepare_reduce_scaler): element (" << r << "," << c
          << ") = " << v << ": " << why;
        failf(api, m.str());
    };
    for (uint32_t r = 0; r < 32; ++r) {
        for (uint32_t c = 0; c < 32; ++c) {
            float v = read_cb_datum(p, elem_index(r, c));
            if (r % 16 != 0) {
                if (v != 0.0f) bad(r, c, v, "expected 0 outside row 0 of the face");
                continue;
            }
            if (r == 16) {
                float top = read_cb_datum(p, elem_index(0, c));
                if (v != top) bad(r, c, v, "faces 2/3 row 0 must equal faces 0/1 row 0");
                continue;
            }
            if (v != 0.0f) {
                if (value && *value != v) bad(r, c, v, "all non-zero scaler datums must be equal");
                value = v;
            }
            w[c] = to_src_reg(v, p.format);
        }
    }
    return w;
}

// GMPOOL's scaling: multiply by 2^exponent(scaler) only; a zero scaler gives -inf.
inline float max_scaled(float x, float w) {
    if (w == 0.0f || std::fpclassify(w) == FP_SUBNORMAL) return -std::numeric_limits<float>::infinity();
    if (x == 0.0f || std::fpclassify(x) == FP_SUBNORMAL) return 0.0f;  // denormals flushed
    return std::ldexp(x, std::ilogb(w));
}
}  // namespace

void reduce_tile(Pool pool, RDim dim, bool is_fp32_dest_acc_en, uint32_t icb, uint32_t scb, uint32_t itile,
                 uint32_t itile_scaler, uint32_t idst) {
    const char* api = "reduce_tile";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    const FpuCfg& f = eng().fpu;
    require_fpu(api, f.kind == Kind::Reduce && f.cb0 == icb && f.cb1 == scb && f.pool == pool && f.dim == dim,
                std::string("reduce_init<PoolType::") + pool_name(pool) + ", ReduceDim::" + dim_name(dim) + ">(" +
                    cbn(icb) + ", " + cbn(scb) + ", ocb)");
    check_idst(api, idst);
    Section& s = math_section(api);
    PageRef a = in_page(api, icb, itile), sp = in_page(api, scb, itile_scaler);
    // Operand routing as reduce_init's state_configure: MAX -> data in SrcA; SUM/ROW -> scaler in SrcA.
    if (pool == Pool::Max) {
        check_format(api, "SrcA unpacker", eng().srca, icb, a.format, "reconfig_data_format_srca");
        check_format(api, "SrcB unpacker", eng().srcb, scb, sp.format, "reconfig_data_format_srcb");
    } else {
        check_format(api, "SrcB unpacker", eng().srcb, icb, a.format, "reconfig_data_format_srcb");
        check_format(api, "SrcA unpacker", eng().srca, scb, sp.format, "reconfig_data_format_srca");
    }
    std::array<float, 32> w = scaler_weights(api, sp, scb, itile_scaler);
    const bool fp32 = eng().fp32;
    for (uint32_t r = 0; r < 32; ++r) {
        uint32_t d0 = elem_index(r, 0);
        float out;
        if (pool == Pool::Max) {
            // GMPOOL: cleared DST reads as -inf; with fp32 DST the accumulator is read/written as TF32.
            float acc = dst_cleared(s, idst, d0) ? -std::numeric_limits<float>::infinity()
                                                 : (fp32 ? trunc_mantissa(dst_get(s, idst, d0), 10)
                                                         : dst_get(s, idst, d0));
            for (uint32_t c = 0; c < 32; ++c) {
                float x = max_scaled(unpack_src(a, elem_index(r, c)), w[c]);
                if (x >= acc) acc = x;
            }
            out = fp32 ? trunc_mantissa(acc, 10) : acc;
        } else {
            float acc = dst_cleared(s, idst, d0) ? 0.0f : dst_get(s, idst, d0);
            for (uint32_t h = 0; h < 2; ++h) {
                double part = 0.0;
                for (uint32_t c = h * 16; c < h * 16 + 16; ++c)
                    part += fpu_mul(w[c], unpack_src(a, elem_index(r, c)), eng().fidelity);
                acc = fpu_round(static_cast<double>(acc) + part);
            }
            out = acc;
        }
        dst_put(s, idst, d0, out);
        for (uint32_t c = 1; c < 32; ++c) dst_put(s, idst, elem_index(r, c), 0.0f);
    }
}

// =============================================================================================
// Element-wise binary / broadcast.

namespace {
std::string binary_init_name(BinaryOp op, Bcast b) {
    std::string o = op_name(op);
    switch (b) {
        case Bcast::None: return o + "_init";
        case Bcast::Col: return o + "_bcast_cols_init";
        case Bcast::Row: return o + "_bcast_rows_init";
        case Bcast::Scalar: return o + "_bcast_scalar_init";
    }
    return "?";
}
}  // namespace

void binary_init(const char* api, BinaryOp op, Bcast bcast, uint32_t icb0, uint32_t icb1, bool acc_to_dest) {
    enter(api);
    note_fpu_init(api);
    if (bcast == Bcast::Row) failf(api, "row broadcast is not supported by the emulator (untested path disabled)");
    FpuCfg c;
    c.kind = Kind::Binary;
    c.op = op;
    c.bcast = bcast;
    c.cb0 = icb0;
    c.cb1 = icb1;
    c.acc = (op == BinaryOp::Mul) ? false : acc_to_dest;  // ELWMUL ignores acc_to_dest (llk MOP)
    c.desc = std::string(api) + "(" + cbn(icb0) + ", " + cbn(icb1) +
             (bcast == Bcast::None ? std::string(", acc_to_dest=") + (acc_to_dest ? "true" : "false") : "") + ")";
    eng().fpu = c;
}

void binary_tiles(const char* api, BinaryOp op, Bcast bcast, uint32_t icb0, uint32_t icb1, uint32_t i0, uint32_t i1,
                  uint32_t idst, bool is_fp32_dest_acc_en) {
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    const FpuCfg& f = eng().fpu;
    require_fpu(api, f.kind == Kind::Binary && f.op == op && f.bcast == bcast && f.cb0 == icb0 && f.cb1 == icb1,
                binary_init_name(op, bcast) + "(" + cbn(icb0) + ", " + cbn(icb1) + ")");
    check_idst(api, idst);
    Section& s = math_section(api);
    PageRef a = in_page(api, icb0, i0), b = in_page(api, icb1, i1);
    check_format(api, "SrcA unpacker", eng().srca, icb0, a.format, "reconfig_data_format_srca");
    check_format(api, "SrcB unpacker", eng().srcb, icb1, b.format, "reconfig_data_format_srcb");
    const uint32_t fid = eng().fidelity;
    for (uint32_t r = 0; r < 32; ++r) {
        for (uint32_t c = 0; c < 32; ++c) {
            uint32_t i = elem_index(r, c);
            float av = unpack_src(a, i);
            uint32_t bi = bcast == Bcast::Col ? elem_index(r, 0) : bcast == Bcast::Scalar ? elem_index(0, 0) : i;
            float bv = unpack_src(b, bi);
            double v = op == BinaryOp::Add ? double(av) + bv : op == BinaryOp::Sub ? double(av) - bv : fpu_mul(av, bv, fid);
            if (f.acc) v += dst_cleared(s, idst, i) ? 0.0 : dst_get(s, idst, i);
            dst_put(s, idst, i, fpu_round(v));
        }
    }
}

void binary_reuse_init(const char* api, BinaryOp op, ReuseDest reuse, uint32_t icb) {
    enter(api);
    note_fpu_init(api);
    if (reuse == ReuseDest::None) failf(api, "reuse_dest must be DEST_TO_SRCA or DEST_TO_SRCB");
    FpuCfg c;
    c.kind = Kind::BinaryReuse;
    c.op = op;
    c.reuse = reuse;
    c.cb0 = icb;
    c.desc = std::string(api) + "<EltwiseBinaryReuseDestType::" + reuse_name(reuse) + ">(" + cbn(icb) + ")";
    eng().fpu = c;
}

void binary_reuse_tiles(const char* api, BinaryOp op, ReuseDest reuse, uint32_t icb, uint32_t itile, uint32_t idst,
                        bool is_fp32_dest_acc_en) {
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    const FpuCfg& f = eng().fpu;
    require_fpu(api, f.kind == Kind::BinaryReuse && f.op == op && f.reuse == reuse && f.cb0 == icb,
                std::string(op_name(op)) + "_reuse_dest_init<EltwiseBinaryReuseDestType::" + reuse_name(reuse) + ">(" +
                    cbn(icb) + ")");
    check_idst(api, idst);
    Section& s = math_section(api);
    PageRef p = in_page(api, icb, itile);
    // DEST_TO_SRCA: the CB tile goes to SrcB; DEST_TO_SRCB: to SrcA (llk_unpack_A).
    if (reuse == ReuseDest::ToSrcA)
        check_format(api, "SrcB unpacker", eng().srcb, icb, p.format, "reconfig_data_format_srcb");
    else
        check_format(api, "SrcA unpacker", eng().srca, icb, p.format, "reconfig_data_format_srca");
    const uint32_t fid = eng().fidelity;
    for (uint32_t i = 0; i < kTileElems; ++i) {
        float d = dst_to_src_reg(dst_cleared(s, idst, i) ? 0.0f : dst_get(s, idst, i));
        float t = unpack_src(p, i);
        float a = reuse == ReuseDest::ToSrcA ? d : t;  // SrcA operand
        float b = reuse == ReuseDest::ToSrcA ? t : d;  // SrcB operand
        double v = op == BinaryOp::Add ? double(a) + b : op == BinaryOp::Sub ? double(a) - b : fpu_mul(a, b, fid);
        dst_put(s, idst, i, fpu_round(v));
    }
}

// =============================================================================================
// SFPU.

// The LLK's approximate exp (exp_tile<approx=true>), wormhole_b0 and blackhole alike: the 0.81 wheel's
// tt_metal/hw/ckernels/<arch>/metal/llk_api/llk_sfpu/ckernel_sfpu_exp.h, exp_init<true, scale, clamp>
// and calculate_exponential<true, ..>. Schraudolph's method: the bit pattern of 2^(x/ln2), read as an
// integer, is linear in x, so one multiply-add and a shift give exp(x) with a piecewise-linear mantissa.
// Per datum, with A = 256/ln2 * scale (fp32 369.329925537109375 at scale 1, 0x43B8AA3B) and
// B-C = 32500.818359375 (0x46FDE9A3; 127 * 256 less Schraudolph's correction C):
//   ClampToNegative (SFPLOADMACRO sequences 1 and 0):
//     x   = max(x, -88.5 / scale)                SFPSWAP against LREG14, stored back to DST first
//     d   = A * x + (B-C)                        SFPMAD: FP32, one rounding (to nearest even)
//     i   = min(round(|d|), 65535)               SFP_STOCH_RND FP32_TO_UINT16, deterministic: ties away
//                                                from zero, |d| < 0.5 -> 0, the sign dropped
//     y   = bits(i << 15)                        SFPSHFT left 15: exponent i >> 8, 8 mantissa bits i & 255
//   None (no clamp; SFPLOADMACRO sequence 0 with SETSGN):
//     i   = sign(d) * min(round(|d|), 32767)     SFP_STOCH_RND FP32_TO_INT16 (sign-magnitude)
//     y   = sign(i) | bits(|i| << 15)            SFPSHFT2 left 15 (the sign shifts out), SFPSETSGN
// then SFPSTORE: bf16 DST keeps the top 16 bits (truncation: i's lowest bit is lost), fp32 DST all 32.
// Functional models of SFPMAD, SFPSTOCHRND (FloatInt), SFPSTORE: tt-isa-documentation, WormholeB0/
// TensixTile/TensixCoprocessor. SFPMAD keeps the product in extra precision but is not fully fused;
// std::fma (fully fused) differs from it only in sticky-bit corner cases, i.e. in the last bit of d
// when d lies within an fp32 ulp (2^-8 near 2^15) of a rounding tie of the next step.
// So exp(0) = 0.978515625 (fp32 DST) / 0.9765625 (bf16 DST), and the relative error swings between about
// -4% and +3% with the fraction of x/ln2. Results below FLT_MIN (i < 256: x < ~-87.3) are denormal bit
// patterns the FPU reads as zero; they are flushed here, as the exact model's underflow is.
float exp_approx_llk(float x, float scale, bool clamp_to_negative) {
    constexpr float kLn2Recip = 1.4426950408889634f;
    const float a = 256.0f * kLn2Recip * scale;
    const float b_minus_c = 32500.818359375f;
    if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;  // SFPMAD reads denormals as zero
    if (clamp_to_negative) {
        const float threshold = -88.5f / scale;
        if (!(x > threshold)) x = std::isnan(x) ? x : threshold;  // SFPSWAP: the larger into the LReg
    }
    const float d = std::fma(a, x, b_minus_c);
    const uint32_t max_mag = clamp_to_negative ? 65535u : 32767u;
    uint32_t mag;
    const uint32_t du = f2u(d);
    const int e = static_cast<int>((du >> 23) & 0xffu) - 127;
    if (e < -1) {
        mag = 0;  // |d| < 0.5
    } else if (e >= 16) {
        mag = max_mag;  // |d| >= 2^16, inf and NaN
    } else {
        uint64_t m = 0x800000u | (du & 0x7fffffu);
        m = e >= 0 ? m << e : m >> -e;
        mag = static_cast<uint32_t>((m >> 23) + ((m & 0x7fffffu) >= 0x400000u ? 1u : 0u));
        if (mag > max_mag) mag = max_mag;
    }
    uint32_t bits = mag << 15;
    if (!clamp_to_negative && (du & 0x80000000u) && mag != 0) bits |= 0x80000000u;
    float y = u2f(bits);
    if (std::fpclassify(y) == FP_SUBNORMAL) y = 0.0f;
    return y;
}


void exp_tile_init(bool approx, uint32_t scale_fp32_bits, bool clamp_to_negative, bool is_fp32_dest_acc_en) {
    const char* api = "exp_tile_init";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    SfpuCfg c;
    c.kind = SfpuKind::Exp;
    c.exp_approx = approx;
    c.exp_scale = scale_fp32_bits;
    c.exp_clamp = clamp_to_negative;
    std::ostringstream d;
    d << "exp_tile_init<approx=" << approx << ", scale=0x" << std::hex << scale_fp32_bits << std::dec
      << ", clamp=" << (clamp_to_negative ? "ClampToNegative" : "None") << ">()";
    c.desc = d.str();
    eng().sfpu = c;
}

void exp_tile(bool approx, bool scale_en, bool clamp_to_negative, int iterations, bool is_fp32_dest_acc_en,
              uint32_t idst, VecMode mode, uint16_t scale_bf16) {
    const char* api = "exp_tile";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    const SfpuCfg& sc = eng().sfpu;
    require_sfpu(api, SfpuKind::Exp, sc.exp_approx == approx && sc.exp_clamp == clamp_to_negative,
                 std::string("exp_tile_init<approx=") + (approx ? "true" : "false") + ", .., " +
                     (clamp_to_negative ? "ClampToNegative" : "None") + ">()");
    // The approximate exp's LLK (SFPLOADMACRO) is hand-unrolled for 8 iterations and ignores the count
    // (ckernel_sfpu_exp.h calculate_exponential, tt-llk#1486): a kernel asking it for fewer gets whole faces.
    if (approx && iterations != 8) failf(api, "the approximate exp with ITERATIONS " + std::to_string(iterations) + ": its LLK runs 8 whatever it is asked");
    check_idst(api, idst);
    Section& s = math_section(api);
    const float scale = bf16_to_float(scale_bf16);
    // Approximate exp scales by exp_tile_init's `scale` (baked into its constants); exp_tile's
    // scale_en / scale apply to the exact path only (calculate_exponential ignores them when approx).
    const float approx_scale = u2f(sc.exp_scale);
    for (uint32_t face : sfpu_faces(api, mode, iterations)) {
        for (uint32_t k : sfpu_face_datums(iterations)) {
            uint32_t i = face * kFaceElems + k;
            float x = dst_cleared(s, idst, i) ? 0.0f : dst_get(s, idst, i);
            float y;
            if (approx) {
                y = exp_approx_llk(x, approx_scale, clamp_to_negative);
            } else {
                if (scale_en) x = x * scale;
                y = static_cast<float>(std::exp(static_cast<double>(x)));
                if (y != 0.0f && std::fabs(y) < std::numeric_limits<float>::min()) y = 0.0f;  // SFPU flushes denormals
            }
            dst_put(s, idst, i, sfpu_store(y));
        }
    }
}

void recip_tile_init(bool fp32_dest, int approx_mode) {
    const char* api = "recip_tile_init";
    enter(api);
    SfpuCfg c;
    c.kind = SfpuKind::Recip;
    c.recip_fp32 = fp32_dest;
    c.recip_mode = approx_mode;
    c.desc = std::string("recip_tile_init<") + (fp32_dest ? "FP32" : "BF16") + ", mode " + std::to_string(approx_mode) +
             ">()";
    eng().sfpu = c;
}

namespace {
// 1/x on `iterations` SFPU iterations of each of `mode`'s faces (recip_tile's checks done).
void recip_faces(const char* api, uint32_t idst, VecMode mode, int iterations) {
    check_idst(api, idst);
    Section& s = math_section(api);
    for (uint32_t face : sfpu_faces(api, mode, iterations)) {
        for (uint32_t k : sfpu_face_datums(iterations)) {
            uint32_t i = face * kFaceElems + k;
            float x = dst_cleared(s, idst, i) ? 0.0f : dst_get(s, idst, i);
            float y = static_cast<float>(1.0 / static_cast<double>(x));
            dst_put(s, idst, i, sfpu_store(y));
        }
    }
}
}  // namespace

void recip_tile(bool fp32_dest, int approx_mode, uint32_t idst, VecMode mode, int iterations) {
    const char* api = "recip_tile";
    enter(api);
    check_dest_acc(api, fp32_dest);
    const SfpuCfg& sc = eng().sfpu;
    require_sfpu(api, SfpuKind::Recip, sc.recip_fp32 == fp32_dest && sc.recip_mode == approx_mode,
                 "recip_tile_init<> with the same template arguments");
    recip_faces(api, idst, mode, iterations);
}

void recip_functor(bool fp32_dest, bool approximation, uint32_t idst, VecMode mode, int iterations) {
    const char* api = "recip_tile";
    enter(api);
    check_dest_acc(api, fp32_dest);
    const SfpuCfg& sc = eng().sfpu;
    const bool init_approximation = sc.recip_mode == 0 ? eng().approx : sc.recip_mode == 2;  // Default: APPROX
    require_sfpu(api, SfpuKind::Recip, sc.recip_fp32 == fp32_dest && init_approximation == approximation,
                 "recip_tile_init<> whose ReciprocalApproxMode resolves to the functor's APPROXIMATION_MODE");
    recip_faces(api, idst, mode, iterations);
}

void binary_max_tile_init() {
    const char* api = "binary_max_tile_init";
    enter(api);
    SfpuCfg c;
    c.kind = SfpuKind::BinaryMax;
    c.desc = "binary_max_tile_init()";
    eng().sfpu = c;
}

void binary_max_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, VecMode mode, int iterations) {
    const char* api = "binary_max_tile";
    enter(api);
    require_sfpu(api, SfpuKind::BinaryMax, true, "binary_max_tile_init()");
    check_idst(api, idst0, "idst0");
    check_idst(api, idst1, "idst1");
    check_idst(api, odst, "odst");
    Section& s = math_section(api);
    for (uint32_t face : sfpu_faces(api, mode, iterations)) {
        for (uint32_t k : sfpu_face_datums(iterations)) {
            uint32_t i = face * kFaceElems + k;
            float a = dst_cleared(s, idst0, i) ? 0.0f : dst_get(s, idst0, i);
            float b = dst_cleared(s, idst1, i) ? 0.0f : dst_get(s, idst1, i);
            dst_put(s, odst, i, sfpu_store(std::max(a, b)));
        }
    }
}

// The LLK's tanh, tanh_tile<fast_and_approx=false> (the 0.81 wheel's tt_metal/hw/ckernels/<arch>/
// metal/llk_api/llk_sfpu/ckernel_sfpu_tanh.h, calculate_tanh and tanh_init; wormhole_b0 and blackhole
// differ only in how the fp32 path seeds its reciprocal). Two paths, chosen by the DST mode:
//   fp32 DST (_sfpu_tanh_fp32_accurate_): t = expm1(2|x|) / 2 from a degree-6 expm1 polynomial on the
//     reduced argument and a 2^i scale, then t / (t + 1) through a reciprocal refined by two Newton
//     steps and a residual correction, sign restored; |x| < 2^-12 returns x, round(2|x| / ln 2) >= 61
//     (|x| >~ 21) returns +-1, NaN stays NaN, +-inf gives +-1. Its stated accuracy is fp32 grade; it is
//     modelled as tanh in double rounded to fp32 (a few fp32 ulp from the hardware's at most, far
//     below what the bfloat16 output can show), with the same saturation and tiny-input rules.
//   bfloat16 DST (_sfpu_tanh_polynomial_x2_): r = |x| (c1 + |x| (c2 + |x| (c3 + |x| (c4 + |x| (c5 +
//     |x| c6))))), Sollya's minimax coefficients (below), each step one SFPMAD (fp32, one rounding:
//     std::fma), r = min(r, 1), sign of x, then convert<vFloat16b> (round to nearest even) before
//     SFPSTORE. Modelled bit for bit, save SFPMAD's sticky-bit corner cases (see exp_approx_llk).
float tanh_poly_llk(float x) {
    constexpr float c1 = 0.999004364013671875f, c2 = 3.0897438526153564453125e-2f,
                    c3 = -0.4890659749507904052734375f, c4 = 0.281917631626129150390625f,
                    c5 = -6.6649019718170166015625e-2f, c6 = 5.876733921468257904052734375e-3f;
    if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;  // SFPMAD reads denormals as zero
    const float a = std::fabs(x);
    float r = c6;
    r = std::fma(r, a, c5);
    r = std::fma(r, a, c4);
    r = std::fma(r, a, c3);
    r = std::fma(r, a, c2);
    r = std::fma(r, a, c1);
    r = r * a;
    r = std::isnan(r) ? r : std::min(r, 1.0f);
    r = std::copysign(r, x);
    return round_bf16(r);
}

namespace {
float tanh_fp32_llk(float x) {
    if (std::isnan(x)) return x;
    if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
    const float a = std::fabs(x);
    if (std::nearbyint(2.0 * a / 0.6931471805599453) >= 61.0) return std::copysign(1.0f, x);  // i >= 61: saturated
    if (a < std::ldexp(1.0f, -12)) return x;  // tanh(x) rounds to x in fp32
    return static_cast<float>(std::tanh(static_cast<double>(x)));
}
}  // namespace

void tanh_tile_init(bool approx, bool is_fp32_dest_acc_en) {
    const char* api = "tanh_tile_init";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    if (approx) failf(api, "fast_and_approx (the LUT tanh) is not supported by the emulator");
    SfpuCfg c;
    c.kind = SfpuKind::Tanh;
    c.tanh_fp32 = is_fp32_dest_acc_en;
    c.desc = std::string("tanh_tile_init<false, ") + (is_fp32_dest_acc_en ? "true" : "false") + ">()";
    eng().sfpu = c;
}

void tanh_tile(bool approx, bool is_fp32_dest_acc_en, uint32_t idst, VecMode mode, int iterations) {
    const char* api = "tanh_tile";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    if (approx) failf(api, "fast_and_approx (the LUT tanh) is not supported by the emulator");
    // tanh_init loads different programmable constants for the fp32 and bfloat16 paths.
    require_sfpu(api, SfpuKind::Tanh, eng().sfpu.tanh_fp32 == is_fp32_dest_acc_en,
                 std::string("tanh_tile_init<false, ") + (is_fp32_dest_acc_en ? "true" : "false") + ">()");
    check_idst(api, idst);
    Section& s = math_section(api);
    for (uint32_t face : sfpu_faces(api, mode, iterations)) {
        for (uint32_t k : sfpu_face_datums(iterations)) {
            uint32_t i = face * kFaceElems + k;
            float x = dst_cleared(s, idst, i) ? 0.0f : dst_get(s, idst, i);
            float y = is_fp32_dest_acc_en ? tanh_fp32_llk(x) : tanh_poly_llk(x);
            dst_put(s, idst, i, sfpu_store(y));
        }
    }
}

void binop_with_scalar_tile_init() {
    const char* api = "binop_with_scalar_tile_init";
    enter(api);
    SfpuCfg c;
    c.kind = SfpuKind::BinopScalar;
    c.desc = "binop_with_scalar_tile_init()";
    eng().sfpu = c;
}

// calculate_binop_with_scalar<.., MUL, ..>: one SFPMAD per datum, val * param in fp32 (one rounding).
void mul_unary_tile(bool is_fp32_dest_acc_en, uint32_t idst, uint32_t param_fp32_bits, VecMode mode, int iterations) {
    const char* api = "mul_unary_tile";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    require_sfpu(api, SfpuKind::BinopScalar, true, "binop_with_scalar_tile_init()");
    check_idst(api, idst);
    Section& s = math_section(api);
    const float param = u2f(param_fp32_bits);
    for (uint32_t face : sfpu_faces(api, mode, iterations)) {
        for (uint32_t k : sfpu_face_datums(iterations)) {
            uint32_t i = face * kFaceElems + k;
            float x = dst_cleared(s, idst, i) ? 0.0f : dst_get(s, idst, i);
            if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
            dst_put(s, idst, i, sfpu_store(x * param));
        }
    }
}

namespace {
// One integer SFPU pass on a 32-bit DST's datums as raw bits (`op` on the uint32 bits; a datum the
// packer cleared reads as +0.0). The I32 layout's SFPLOAD / SFPSTORE convert nothing
// (tt-isa-documentation SFPLOAD / SFPSTORE, MOD0_FMT_INT32), so subnormals and NaNs pass as bits.
template <typename Op>
void sfpu_int_pass(const char* api, SfpuKind kind, const char* init, uint32_t idst, VecMode mode, int iterations, Op op) {
    enter(api);
    if (!eng().fp32) failf(api, "a 16-bit DST: the emulator models the integer SFPU ops on a 32-bit DST only");
    require_sfpu(api, kind, true, init);
    check_idst(api, idst);
    Section& s = math_section(api);
    for (uint32_t face : sfpu_faces(api, mode, iterations)) {
        for (uint32_t k : sfpu_face_datums(iterations)) {
            uint32_t i = face * kFaceElems + k;
            uint32_t bits = dst_cleared(s, idst, i) ? 0u : f2u(dst_get(s, idst, i));
            dst_put(s, idst, i, u2f(op(bits)));
        }
    }
}
}  // namespace

// calculate_add_int32: one SFPIADD a datum (two's complement, wrapping).
void add_int32_scalar_tile(uint32_t idst, uint32_t scalar, VecMode mode, int iterations) {
    sfpu_int_pass("add_unary_tile_int32", SfpuKind::BinopScalar, "binop_with_scalar_tile_init()", idst, mode, iterations, [scalar](uint32_t bits) { return bits + scalar; });
}

void bitwise_and_tile_init() {
    const char* api = "bitwise_and_tile_init";
    enter(api);
    SfpuCfg c;
    c.kind = SfpuKind::BitwiseAnd;
    c.desc = "bitwise_and_tile_init()";
    eng().sfpu = c;
}

// calculate_sfpu_unary_bitwise<.., AND, Int32>: one SFPAND a datum.
void bitwise_and_scalar_tile(uint32_t idst, uint32_t value, VecMode mode, int iterations) {
    sfpu_int_pass("bitwise_and_tile", SfpuKind::BitwiseAnd, "bitwise_and_tile_init()", idst, mode, iterations,
                  [value](uint32_t bits) { return bits & value; });
}

// The LLK's accurate log, log_tile<fast_and_approx=false> (ckernel_sfpu_log.h calculate_log, Norbert
// Juffa's log1p polynomial on the reduced mantissa plus e ln 2): fp32 DST path accurate to an ulp or
// two, modelled as log in double rounded to fp32; its special cases kept: 0 (and -0, denormals)
// -> -inf, +inf -> +inf, negative or NaN -> NaN. bfloat16 DST: the same, rounded to bfloat16.
void log_tile_init(bool approx, bool is_fp32_dest_acc_en) {
    const char* api = "log_tile_init";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    if (approx) failf(api, "fast_and_approx (the fast log) is not supported by the emulator");
    SfpuCfg c;
    c.kind = SfpuKind::Log;
    c.log_fp32 = is_fp32_dest_acc_en;
    c.desc = std::string("log_tile_init<false, ") + (is_fp32_dest_acc_en ? "true" : "false") + ">()";
    eng().sfpu = c;
}

void log_tile(bool approx, bool is_fp32_dest_acc_en, uint32_t idst, VecMode mode, int iterations) {
    const char* api = "log_tile";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    if (approx) failf(api, "fast_and_approx (the fast log) is not supported by the emulator");
    require_sfpu(api, SfpuKind::Log, eng().sfpu.log_fp32 == is_fp32_dest_acc_en,
                 std::string("log_tile_init<false, ") + (is_fp32_dest_acc_en ? "true" : "false") + ">()");
    check_idst(api, idst);
    Section& s = math_section(api);
    for (uint32_t face : sfpu_faces(api, mode, iterations)) {
        for (uint32_t k : sfpu_face_datums(iterations)) {
            uint32_t i = face * kFaceElems + k;
            float x = dst_cleared(s, idst, i) ? 0.0f : dst_get(s, idst, i);
            if (std::fpclassify(x) == FP_SUBNORMAL || x == 0.0f) x = 0.0f;
            float y = x == 0.0f ? -std::numeric_limits<float>::infinity()
                                : static_cast<float>(std::log(static_cast<double>(x)));
            dst_put(s, idst, i, is_fp32_dest_acc_en ? y : round_bf16(y));
        }
    }
}

namespace {
void sfpu_binary_init(const char* api, SfpuKind kind) {
    enter(api);
    SfpuCfg c;
    c.kind = kind;
    c.desc = std::string(api) + "()";
    eng().sfpu = c;
}

// calculate_sfpu_binary<.., ADD / SUB / MUL, ..>: DST[odst] = DST[idst0] op DST[idst1], one fp32 operation a
// datum, then the store (a bf16 DST truncates; the wheel rounds to nearest even only for ADD / SUB /
// RSUB with DstRoundingMode::NearestEven, not the default).
template <typename Op>
void sfpu_binary(const char* api, SfpuKind kind, const char* init, uint32_t idst0, uint32_t idst1, uint32_t odst, VecMode mode,
                 int iterations, Op op) {
    enter(api);
    require_sfpu(api, kind, true, init);
    check_idst(api, idst0, "idst0");
    check_idst(api, idst1, "idst1");
    check_idst(api, odst, "odst");
    Section& s = math_section(api);
    for (uint32_t face : sfpu_faces(api, mode, iterations)) {
        for (uint32_t k : sfpu_face_datums(iterations)) {
            uint32_t i = face * kFaceElems + k;
            float a = dst_cleared(s, idst0, i) ? 0.0f : dst_get(s, idst0, i);
            float b = dst_cleared(s, idst1, i) ? 0.0f : dst_get(s, idst1, i);
            dst_put(s, odst, i, sfpu_store(op(a, b)));
        }
    }
}
}  // namespace

void add_binary_tile_init() { sfpu_binary_init("add_binary_tile_init", SfpuKind::BinaryAdd); }

void add_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, VecMode mode, int iterations) {
    sfpu_binary("add_binary_tile", SfpuKind::BinaryAdd, "add_binary_tile_init()", idst0, idst1, odst, mode, iterations,
                [](float a, float b) { return a + b; });
}

void sub_binary_tile_init() { sfpu_binary_init("sub_binary_tile_init", SfpuKind::BinarySub); }

void sub_binary_tile(uint32_t idst0, uint32_t idst1, uint32_t odst, VecMode mode, int iterations) {
    sfpu_binary("sub_binary_tile", SfpuKind::BinarySub, "sub_binary_tile_init()", idst0, idst1, odst, mode, iterations,
                [](float a, float b) { return a - b; });
}

void mul_binary_tile_init() { sfpu_binary_init("mul_binary_tile_init", SfpuKind::BinaryMul); }

void mul_binary_tile(bool is_fp32_dest_acc_en, uint32_t idst0, uint32_t idst1, uint32_t odst, VecMode mode, int iterations) {
    check_dest_acc("mul_binary_tile", is_fp32_dest_acc_en);
    sfpu_binary("mul_binary_tile", SfpuKind::BinaryMul, "mul_binary_tile_init()", idst0, idst1, odst, mode, iterations,
                [](float a, float b) { return a * b; });
}

// =============================================================================================
// Pack.

void pack_tile(bool out_of_order, bool is_fp32_dest_acc_en, uint32_t idst, uint32_t cb, uint32_t tile_index) {
    const char* api = "pack_tile";
    enter(api);
    check_dest_acc(api, is_fp32_dest_acc_en);
    check_idst(api, idst);
    Section& s = pack_section(api);
    uint32_t page_index = out_of_order ? tile_index : pack_cursor(cb);
    PageRef p = back_page(cb, page_index);
    if (p.page_bytes < tile_bytes(p.format))
        failf(api, cbn(cb) + " page size " + std::to_string(p.page_bytes) + " B is smaller than a 32x32 " +
                       fmt_name(p.format) + " tile");
    check_format(api, "packer", eng().pack, cb, p.format, "pack_reconfig_data_format");
    if (p.format != DataFormat::Float32 && p.format != DataFormat::Float16_b)
        failf(api, "packing to " + fmt_name(p.format) + " (" + cbn(cb) +
                       ") is not supported by the emulator: it packs Float32 and Float16_b; Bfp8_b and Bfp4_b "
                       "are decode-only");
    const bool mask = eng().reduce_mask;
    for (uint32_t i = 0; i < kTileElems; ++i) {
        float v = dst_cleared(s, idst, i) ? 0.0f : dst_get(s, idst, i);
        if (mask && (i % 16) != 0) v = 0.0f;       // REDUCE_ROW edge mask: column 0 only
        if (mask && ((i / kFaceElems) & 1)) v = 0.0f;  // faces 1 and 3 hold columns 16..31
        if (p.format == DataFormat::Float32) {
            std::memcpy(p.bytes + 4 * i, &v, 4);
        } else {
            uint16_t b = float_to_bf16_rne(v);
            std::memcpy(p.bytes + 2 * i, &b, 2);
        }
    }
    if (!out_of_order) pack_cursor(cb) += 1;
}

// =============================================================================================
// Data-format reconfiguration.

namespace {
// The LLK reconfigures only when the formats differ: with an `old` operand, a call whose old and
// new CBs share a format leaves the unit as it was (even if it was configured for another format).
// Each reconfiguration that reprograms a unit is counted (CoreStats.format_reconfigs) under `unit_key`.
void reconfig_unit(const char* api, UnpackerFmt& unit, uint32_t old_cb, uint32_t new_cb, const char* unit_key) {
    if (old_cb != kNoCb) {
        std::optional<DataFormat> fo = cb_format_of(old_cb), fn = cb_format_of(new_cb);
        if (fo && fn && *fo == *fn) return;
    }
    unit.cb = new_cb;
    unit.by = api;
    count_work(unit_key, 1);
}

void reconfig(const char* api, UnpackerFmt& unit, uint32_t old_cb, uint32_t new_cb, const char* unit_key) {
    enter(api);
    reconfig_unit(api, unit, old_cb, new_cb, unit_key);
}
}  // namespace

void reconfig_srca(const char* api, uint32_t old_cb, uint32_t new_cb) {
    reconfig(api, eng().srca, old_cb, new_cb, "reconfig/srca");
}
void reconfig_srcb(const char* api, uint32_t old_cb, uint32_t new_cb) {
    reconfig(api, eng().srcb, old_cb, new_cb, "reconfig/srcb");
}
void pack_reconfig(const char* api, uint32_t old_cb, uint32_t new_cb) {
    reconfig(api, eng().pack, old_cb, new_cb, "reconfig/pack");
}

void reconfig_both(const char* api, uint32_t a_old, uint32_t a_new, uint32_t b_old, uint32_t b_new) {
    enter(api);
    reconfig_unit(api, eng().srca, a_old, a_new, "reconfig/srca");
    reconfig_unit(api, eng().srcb, b_old, b_new, "reconfig/srcb");
}

}  // namespace emu::compute
