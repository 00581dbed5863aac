// C++ unit tests of the compute engine against the single-threaded fake runtime
// (fake_runtime.cpp). Built twice by test_emulator_compute.py: EMU_DST_ACCUM_MODE=0 and =1.
// Prints "PASS <name>" / "FAIL <name>: <why>" per test; exits 1 on any failure.
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/compute/bcast.h"
#include "api/compute/binary_max_min.h"
#include "api/compute/compute_kernel_api.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/eltwise_binary.h"
#include "api/compute/eltwise_binary_sfpu.h"
#include "api/compute/eltwise_unary/binop_with_scalar.h"
#include "api/compute/eltwise_unary/bitwise.h"
#include "api/compute/eltwise_unary/exp.h"
#include "api/compute/eltwise_unary/recip.h"
#include "api/compute/matmul.h"
#include "api/compute/reduce.h"
#include "api/compute/tile_move_copy.h"

namespace fake {
void reset();
void setup_cb(uint32_t id, emu::DataFormat f, uint32_t pages);
void host_push(uint32_t id, const void* tile);
void host_pop(uint32_t id, void* out);
extern emu::ComputeConfig config;
extern std::map<std::string, int> counts;
}  // namespace fake

using CbFormat = emu::DataFormat;  // a CB's format (the global DataFormat is the LLK's)
using Tile = std::vector<double>;  // 32x32, (r, c) row-major

constexpr bool FP32 = DST_ACCUM_MODE;
// One bf16 ulp relative to the value: 2^-7 (7 explicit mantissa bits); half of that for RNE.
constexpr double BF16_ULP = 1.0 / 128;
// fp32 DST: results carry fp32 rounding (2^-24) plus TF32 unpack truncation of fp32 inputs (2^-10).
constexpr double FP32_REL = 1e-6;

static uint32_t eidx(uint32_t r, uint32_t c) { return ((r / 16) * 2 + c / 16) * 256 + (r % 16) * 16 + (c % 16); }
static float bf16r(double v) {
    uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(v));
    u += 0x7fffu + ((u >> 16) & 1u);
    return std::bit_cast<float>(u & 0xffff0000u);
}
static std::vector<uint8_t> to_bytes(const Tile& t, CbFormat f) {
    std::vector<uint8_t> b(f == CbFormat::Float32 ? 4096 : 2048);
    for (uint32_t r = 0; r < 32; ++r)
        for (uint32_t c = 0; c < 32; ++c) {
            float v = static_cast<float>(t[r * 32 + c]);
            if (f == CbFormat::Float32) {
                std::memcpy(&b[4 * eidx(r, c)], &v, 4);
            } else {
                uint16_t h = static_cast<uint16_t>(std::bit_cast<uint32_t>(bf16r(v)) >> 16);
                std::memcpy(&b[2 * eidx(r, c)], &h, 2);
            }
        }
    return b;
}
static Tile from_bytes(const std::vector<uint8_t>& b, CbFormat f) {
    Tile t(1024);
    for (uint32_t r = 0; r < 32; ++r)
        for (uint32_t c = 0; c < 32; ++c) {
            if (f == CbFormat::Float32) {
                float v;
                std::memcpy(&v, &b[4 * eidx(r, c)], 4);
                t[r * 32 + c] = v;
            } else {
                uint16_t h;
                std::memcpy(&h, &b[2 * eidx(r, c)], 2);
                t[r * 32 + c] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
            }
        }
    return t;
}
static std::mt19937 rng(1234);
static Tile rand_tile(double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    Tile t(1024);
    for (auto& v : t) v = bf16r(d(rng));  // exactly representable in bf16
    return t;
}
static void push(uint32_t cb, const Tile& t, CbFormat f) { fake::host_push(cb, to_bytes(t, f).data()); }
static Tile pop(uint32_t cb, CbFormat f) {
    std::vector<uint8_t> b(f == CbFormat::Float32 ? 4096 : 2048);
    fake::host_pop(cb, b.data());
    return from_bytes(b, f);
}
static void require(bool ok, const std::string& why) {
    if (!ok) throw std::logic_error(why);
}
static void close(const Tile& got, const Tile& want, const Tile& scale, double rel, const char* what) {
    for (int i = 0; i < 1024; ++i) {
        double tol = rel * scale[i] + 1e-30;
        if (!(std::fabs(got[i] - want[i]) <= tol)) {
            char m[256];
            std::snprintf(m, sizeof m, "%s: element (%d,%d) got %.9g want %.9g tol %.3g", what, i / 32, i % 32, got[i],
                          want[i], tol);
            throw std::logic_error(m);
        }
    }
}
// Standard setup: c_0, c_1 inputs (bf16), c_2 scaler/extra input, c_16 output (fp32 so DST is seen).
static void setup(CbFormat in = CbFormat::Float16_b, CbFormat out = CbFormat::Float32) {
    fake::reset();
    fake::config = emu::ComputeConfig{FP32, false, false, 4};
    fake::setup_cb(0, in, 4);
    fake::setup_cb(1, in, 4);
    fake::setup_cb(2, in, 4);
    fake::setup_cb(3, CbFormat::Float32, 4);
    fake::setup_cb(16, out, 4);
    emu::compute::compute_thread_begin();
}
// Packs DST tile `idst` of the current math section to c_16 and returns it.
static Tile commit_pack(uint32_t idst = 0, CbFormat out = CbFormat::Float32) {
    tile_regs_commit();
    tile_regs_wait();
    cb_reserve_back(16, 1);
    pack_tile(idst, 16);
    cb_push_back(16, 1);
    tile_regs_release();
    return pop(16, out);
}
static Tile scaler_tile(double v) {
    Tile s(1024, 0.0);
    for (int r : {0, 16})
        for (int c = 0; c < 32; ++c) s[r * 32 + c] = v;
    return s;
}
static double rel_out() { return FP32 ? FP32_REL : BF16_ULP; }

struct Case {
    const char* name;
    std::function<void()> body;
};
static void expect_fail(const std::function<void()>& f, const std::vector<std::string>& needles) {
    try {
        f();
    } catch (const std::runtime_error& e) {
        std::string m = e.what();
        for (const auto& n : needles)
            require(m.find(n) != std::string::npos, "message lacks '" + n + "': " + m);
        return;
    }
    throw std::logic_error("expected a refusal, the call succeeded");
}

int main() {
    std::vector<Case> cases = {
        {"copy_roundtrip_exact",
         [] {
             setup();
             Tile a = rand_tile(-3, 3);
             push(0, a, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 0, 16);
             copy_init(0);
             cb_wait_front(0, 1);
             tile_regs_acquire();
             copy_tile(0, 0, 0);
             Tile got = commit_pack();
             close(got, a, a, 0.0, "copy");
         }},
        {"matmul_both_orientations",
         [] {
             for (uint32_t tr : {0u, 1u}) {
                 setup();
                 Tile a = rand_tile(-1, 1), b = rand_tile(-1, 1);
                 push(0, a, CbFormat::Float16_b);
                 push(1, b, CbFormat::Float16_b);
                 compute_kernel_hw_startup<SrcOrder::Reverse>(0, 1, 16);
                 matmul_init(0, 1, tr);
                 cb_wait_front(0, 1);
                 cb_wait_front(1, 1);
                 tile_regs_acquire();
                 matmul_tiles(0, 1, 0, 0, 0);
                 Tile got = commit_pack();
                 Tile want(1024, 0.0), mag(1024, 0.0);
                 for (int r = 0; r < 32; ++r)
                     for (int c = 0; c < 32; ++c)
                         for (int k = 0; k < 32; ++k) {
                             double bv = tr ? b[c * 32 + k] : b[k * 32 + c];
                             want[r * 32 + c] += a[r * 32 + k] * bv;
                             mag[r * 32 + c] += std::fabs(a[r * 32 + k] * bv);
                         }
                 // bf16 DST: two roundings (one per 16-wide K half) of <= half an ulp of |sum| <= mag.
                 close(got, want, mag, FP32 ? FP32_REL : BF16_ULP, tr ? "matmul transposed" : "matmul");
             }
         }},
        {"reduce_row_max_and_sum",
         [] {
             for (auto pool : {PoolType::MAX, PoolType::SUM}) {
                 setup();
                 Tile a = rand_tile(-4, 4);
                 push(0, a, CbFormat::Float16_b);
                 double sv = pool == PoolType::SUM ? 0.5 : 1.0;
                 push(2, scaler_tile(sv), CbFormat::Float16_b);
                 compute_kernel_hw_startup(0, 2, 16);
                 cb_wait_front(0, 1);
                 cb_wait_front(2, 1);
                 tile_regs_acquire();
                 if (pool == PoolType::MAX) {
                     reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(0, 2, 16);
                     reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(0, 2, 0, 0, 0);
                 } else {
                     reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(0, 2, 16);
                     reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(0, 2, 0, 0, 0);
                 }
                 Tile got = commit_pack();
                 reduce_uninit();
                 Tile want(1024, 0.0), mag(1024, 0.0);
                 for (int r = 0; r < 32; ++r) {
                     double m = -1e300, s = 0, sa = 0;
                     for (int c = 0; c < 32; ++c) {
                         m = std::max(m, a[r * 32 + c]);
                         s += a[r * 32 + c] * sv;
                         sa += std::fabs(a[r * 32 + c] * sv);
                     }
                     want[r * 32] = pool == PoolType::MAX ? m : s;
                     mag[r * 32] = pool == PoolType::MAX ? 0.0 : sa;  // max is exact
                 }
                 close(got, want, mag, rel_out(), pool == PoolType::MAX ? "reduce max" : "reduce sum");
             }
         }},
        {"bcast_and_binary_ops",
         [] {
             struct Op {
                 const char* name;
                 std::function<void()> init;
                 std::function<void()> run;
                 std::function<double(double, double)> f;
                 int bcast;  // 0 none, 1 col, 2 scalar
             };
             std::vector<Op> ops = {
                 {"sub_bcast_cols", [] { sub_bcast_cols_init(0, 1); }, [] { sub_tiles_bcast_cols(0, 1, 0, 0, 0); },
                  [](double a, double b) { return a - b; }, 1},
                 {"mul_bcast_cols", [] { mul_bcast_cols_init(0, 1); }, [] { mul_tiles_bcast_cols(0, 1, 0, 0, 0); },
                  [](double a, double b) { return a * b; }, 1},
                 {"mul_bcast_scalar", [] { mul_bcast_scalar_init(0, 1); },
                  [] { mul_tiles_bcast_scalar(0, 1, 0, 0, 0); }, [](double a, double b) { return a * b; }, 2},
                 {"add", [] { add_init(0, 1); }, [] { add_tiles(0, 1, 0, 0, 0); },
                  [](double a, double b) { return a + b; }, 0},
                 {"sub", [] { sub_init(0, 1); }, [] { sub_tiles(0, 1, 0, 0, 0); },
                  [](double a, double b) { return a - b; }, 0},
                 {"mul", [] { mul_init(0, 1); }, [] { mul_tiles(0, 1, 0, 0, 0); },
                  [](double a, double b) { return a * b; }, 0},
             };
             for (auto& op : ops) {
                 setup();
                 Tile a = rand_tile(-2, 2), b = rand_tile(-2, 2);
                 push(0, a, CbFormat::Float16_b);
                 push(1, b, CbFormat::Float16_b);
                 compute_kernel_hw_startup(0, 1, 16);
                 op.init();
                 cb_wait_front(0, 1);
                 cb_wait_front(1, 1);
                 tile_regs_acquire();
                 op.run();
                 Tile got = commit_pack();
                 Tile want(1024), mag(1024);
                 for (int r = 0; r < 32; ++r)
                     for (int c = 0; c < 32; ++c) {
                         double bv = op.bcast == 1 ? b[r * 32] : op.bcast == 2 ? b[0] : b[r * 32 + c];
                         want[r * 32 + c] = op.f(a[r * 32 + c], bv);
                         mag[r * 32 + c] = std::fabs(want[r * 32 + c]);
                     }
                 // One FPU rounding into DST: <= half a bf16 ulp of the result (exact in fp32 DST).
                 close(got, want, mag, FP32 ? FP32_REL : BF16_ULP / 2, op.name);
             }
         }},
        {"add_reuse_dest_to_srca",
         [] {
             setup();
             Tile x = rand_tile(-2, 2), y = rand_tile(-2, 2);
             push(0, x, CbFormat::Float16_b);
             push(1, y, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 1, 16);
             cb_wait_front(0, 1);
             cb_wait_front(1, 1);
             tile_regs_acquire();
             copy_init(0);
             copy_tile(0, 0, 0);
             add_reuse_dest_init<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(1);
             add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(1, 0, 0);
             Tile got = commit_pack();
             Tile want(1024), mag(1024);
             for (int i = 0; i < 1024; ++i) want[i] = x[i] + y[i], mag[i] = std::fabs(want[i]);
             close(got, want, mag, FP32 ? FP32_REL : BF16_ULP / 2, "add_reuse_dest");
         }},
        {"sfpu_exp_approx",
         [] {
             // exp_tile<approx=true>: the LLK's Schraudolph exp (ckernel_sfpu_exp.h), values pinned from an
             // exact-arithmetic derivation: d = fp32(369.329925537109375 * x + 32500.818359375), i =
             // round-half-away(|d|) (ClampToNegative: x >= -88.5 first, |i| <= 65535; None: signed, <= 32767),
             // y = bits(i << 15): 2^((i >> 8) - 127) * (1 + (i & 255) / 256). A bf16 DST keeps i's top 15 bits.
             struct Pin {
                 double x, fp32, bf16;
             };
             const Pin clamp[] = {{0.0, 0.978515625, 0.9765625},
                                  {-1.0, 0.3779296875, 0.376953125},
                                  {-0.5, 0.6171875, 0.6171875},
                                  {-2.75, 0.0621337890625, 0.06201171875},
                                  {-10.0, 4.673004150390625e-05, 4.673004150390625e-05},
                                  {-86.0, 4.4264709148151764e-38, 4.4264709148151764e-38},
                                  {-87.5, 0.0, 0.0},  // i = 184 < 256: a denormal pattern, zero to the FPU
                                  {-100.0, 0.0, 0.0},  // clamped to -88.5 first
                                  {0.5, 1.67578125, 1.671875},
                                  {1.0, 2.796875, 2.796875}};
             const Pin none[] = {{-1.0, 0.3779296875, 0.376953125},
                                 {-100.0, -336.0 / 256 * std::ldexp(1.0, -110), -336.0 / 256 * std::ldexp(1.0, -110)},
                                 {1.0, 1.99609375, 1.9921875}};  // |i| saturates at 32767
             for (bool clamped : {true, false}) {
                 setup();
                 Tile x(1024, 0.0), want(1024, FP32 ? 0.978515625 : 0.9765625);  // the rest of the tile holds 0
                 int n = 0;
                 for (const Pin& p : clamped ? std::vector<Pin>(std::begin(clamp), std::end(clamp))
                                             : std::vector<Pin>(std::begin(none), std::end(none))) {
                     x[n] = p.x;
                     want[n++] = FP32 ? p.fp32 : p.bf16;
                 }
                 push(0, x, CbFormat::Float16_b);
                 compute_kernel_hw_startup(0, 0, 16);
                 cb_wait_front(0, 1);
                 tile_regs_acquire();
                 copy_init(0);
                 copy_tile(0, 0, 0);
                 if (clamped) {
                     exp_tile_init<true>();
                     exp_tile<true>(0);
                 } else {
                     exp_tile_init<true, 0x3F800000, InputClamping::None>();
                     exp_tile<true, false, InputClamping::None>(0);
                 }
                 Tile got = commit_pack();
                 for (int i = 0; i < 1024; ++i)
                     if (got[i] != want[i]) {  // exact: bit patterns, not a tolerance
                         char m[160];
                         std::snprintf(m, sizeof m, "approximate exp (%s): exp(%g) got %.17g want %.17g",
                                       clamped ? "ClampToNegative" : "None", x[i], got[i], want[i]);
                         throw std::logic_error(m);
                     }
             }
         }},
        {"sfpu_exp_recip_max",
         [] {
             setup();
             Tile x = rand_tile(-4, 1), y = rand_tile(0.5, 4), z = rand_tile(-2, 2);
             push(0, x, CbFormat::Float16_b);
             push(1, y, CbFormat::Float16_b);
             push(2, z, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 0, 16);
             cb_wait_front(0, 1);
             cb_wait_front(1, 1);
             cb_wait_front(2, 1);
             // exp
             tile_regs_acquire();
             copy_init(0);
             copy_tile(0, 0, 0);
             exp_tile_init();
             exp_tile(0);
             Tile got = commit_pack();
             Tile want(1024), mag(1024);
             for (int i = 0; i < 1024; ++i) want[i] = std::exp(x[i]), mag[i] = want[i];
             // bf16 DST: SFPSTORE truncates toward zero, error < 1 bf16 ulp.
             close(got, want, mag, FP32 ? FP32_REL : BF16_ULP, "exp");
             for (int i = 0; i < 1024 && !FP32; ++i) require(got[i] <= want[i], "exp: bf16 store must truncate");
             // recip
             reconfig_data_format_srca(1);
             copy_init(1);
             tile_regs_acquire();
             copy_tile(1, 0, 0);
             recip_tile_init();
             recip_tile(0);
             got = commit_pack();
             for (int i = 0; i < 1024; ++i) want[i] = 1.0 / y[i], mag[i] = std::fabs(want[i]);
             close(got, want, mag, FP32 ? FP32_REL : BF16_ULP, "recip");
             // binary max
             reconfig_data_format_srca(2);
             copy_init(2);
             tile_regs_acquire();
             copy_tile(2, 0, 0);
             copy_init(0);
             reconfig_data_format_srca(0);
             copy_tile(0, 0, 1);
             binary_max_tile_init();
             binary_max_tile(0, 1, 0);
             got = commit_pack();
             for (int i = 0; i < 1024; ++i) want[i] = std::max(z[i], x[i]);
             close(got, want, want, 0.0, "binary_max");
             // VectorMode::C touches faces 0 and 2 only.
             tile_regs_acquire();
             copy_init(0);
             copy_tile(0, 0, 0);
             exp_tile_init();
             exp_tile(0, VectorMode::C);
             got = commit_pack();
             for (int r = 0; r < 32; ++r)
                 for (int c = 0; c < 32; ++c) {
                     double w = c < 16 ? std::exp(x[r * 32 + c]) : x[r * 32 + c];
                     require(std::fabs(got[r * 32 + c] - w) <= BF16_ULP * std::fabs(w), "exp VectorMode::C");
                 }
         }},
        {"sfpu_mul_of_a_column_broadcast",
         [] {
             // unary_bcast<COL> copies column 0 across the row (exact: a bf16 datum, no multiply);
             // mul_binary_tile is one fp32 multiply, then the store (bf16 DST truncates).
             setup();
             Tile x = rand_tile(-3, 3), y = rand_tile(0.25, 4);
             push(0, x, CbFormat::Float16_b);
             push(1, y, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 1, 16);
             cb_wait_front(0, 1);
             cb_wait_front(1, 1);
             tile_regs_acquire();
             unary_bcast_init<BroadcastType::COL>(1);
             unary_bcast<BroadcastType::COL>(1, 0, 0);
             Tile got = commit_pack();
             for (int r = 0; r < 32; ++r)
                 for (int c = 0; c < 32; ++c) require(got[r * 32 + c] == y[r * 32], "unary_bcast<COL>: not column 0");
             tile_regs_acquire();
             copy_init(0);
             copy_tile(0, 0, 0);
             unary_bcast_init<BroadcastType::COL>(1);
             unary_bcast<BroadcastType::COL>(1, 0, 1);
             mul_binary_tile_init();
             mul_binary_tile(0, 1, 0);
             got = commit_pack();
             Tile want(1024), mag(1024);
             for (int i = 0; i < 1024; ++i) want[i] = x[i] * y[(i / 32) * 32], mag[i] = std::fabs(want[i]);
             close(got, want, mag, FP32 ? FP32_REL : BF16_ULP, "mul_binary_tile");
             for (int i = 0; i < 1024 && !FP32; ++i)
                 require(std::fabs(got[i]) <= std::fabs(want[i]), "mul_binary_tile: bf16 store must truncate");
         }},
        {"sfpu_sub_and_the_tf32_split",
         [] {
             // sub_binary_tile is one fp32 subtraction, then the store. With it, add_binary_tile and
             // mul_unary_tile, Veltkamp's split (c = 2x * 4096.5, c - (c - x)) rounds x * y, 16
             // significant bits, to TF32's 11, to nearest: the fp32 SFPU ops chained, each rounding once.
             setup();
             Tile x = rand_tile(-3, 3), y = rand_tile(0.25, 4);
             push(0, x, CbFormat::Float16_b);
             push(1, y, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 1, 16);
             cb_wait_front(0, 1);
             cb_wait_front(1, 1);
             auto load = [] {
                 tile_regs_acquire();
                 copy_init(0);
                 copy_tile(0, 0, 0);
                 copy_init(1);
                 copy_tile(1, 0, 1);
             };
             load();
             sub_binary_tile_init();
             sub_binary_tile(0, 1, 0);
             Tile got = commit_pack();
             Tile want(1024), mag(1024);
             for (int i = 0; i < 1024; ++i) want[i] = static_cast<float>(x[i]) - static_cast<float>(y[i]), mag[i] = std::fabs(want[i]);
             close(got, want, mag, FP32 ? 0.0 : BF16_ULP, "sub_binary_tile");
             if (!FP32) return;
             load();
             mul_binary_tile_init();
             mul_binary_tile(0, 1, 0);
             add_binary_tile_init();
             add_binary_tile(0, 0, 1);
             binop_with_scalar_tile_init();
             mul_unary_tile(1, 0x45800400u);
             sub_binary_tile_init();
             sub_binary_tile(1, 0, 0);
             sub_binary_tile(1, 0, 0);
             got = commit_pack();
             int rounded_away = 0;
             for (int i = 0; i < 1024; ++i) {
                 const float product = static_cast<float>(x[i]) * static_cast<float>(y[i]);
                 const uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(got[i]));
                 require((bits & 0x1fffu) == 0, "tf32 split: more than TF32's 10 mantissa bits left");
                 const double half_ulp = std::ldexp(1.0, std::ilogb(product) - 11);
                 require(std::fabs(got[i] - product) <= half_ulp, "tf32 split: not the nearest TF32 value");
                 rounded_away += std::fabs(got[i]) > std::fabs(product);
             }
             require(rounded_away > 100, "tf32 split: never rounds up (truncation, not rounding)");
         }},
        {"sfpu_integer_ops_round_fp32_bits_to_tf32",
         [] {
             // add_unary_tile_int32 and bitwise_and_tile<Int32> act on a 32-bit DST datum's bits (the I32
             // layout moves them unconverted): + 0x1000 then & ~0x1fff is the kernels' TF32 rounding
             // (attention_compute_sfpu.hpp live_round_to_tf32), to nearest, ties away from zero, for
             // either sign, a carry rounding up through the exponent. A 16-bit DST is refused.
             if (!FP32) return;
             setup();
             Tile x = rand_tile(-3, 3), y = rand_tile(0.25, 4);
             push(0, x, CbFormat::Float16_b);
             push(1, y, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 1, 16);
             cb_wait_front(0, 1);
             cb_wait_front(1, 1);
             tile_regs_acquire();
             copy_init(0);
             copy_tile(0, 0, 0);
             copy_init(1);
             copy_tile(1, 0, 1);
             mul_binary_tile_init();
             mul_binary_tile(0, 1, 0);
             binop_with_scalar_tile_init();
             add_unary_tile_int32(0, 0x1000u);
             bitwise_and_tile_init();
             bitwise_and_tile<DataFormat::Int32>(0, 0xffffe000u);
             Tile got = commit_pack();
             int rounded_away = 0;
             for (int i = 0; i < 1024; ++i) {
                 const float product = static_cast<float>(x[i]) * static_cast<float>(y[i]);
                 const uint32_t p = std::bit_cast<uint32_t>(product);
                 const uint32_t want = (p + 0x1000u) & 0xffffe000u;
                 require(std::bit_cast<uint32_t>(static_cast<float>(got[i])) == want,
                         "tf32 rounding: not (bits + 0x1000) & ~0x1fff");
                 const double half_ulp = std::ldexp(1.0, std::ilogb(product) - 11);
                 require(std::fabs(got[i] - product) <= half_ulp, "tf32 rounding: not the nearest TF32 value");
                 rounded_away += std::fabs(got[i]) > std::fabs(product);
             }
             require(rounded_away > 100, "tf32 rounding: never rounds up (truncation, not rounding)");
         }},
        {"sfpu_row_vector_mode_through_the_llk_calls",
         [] {
             // VectorMode::R through the LLK's SFPU call layer (SFPU_UNARY_CALL / SFPU_BINARY_CALL, which
             // the compute kernel uses for the ops whose API fixes RC): faces 0 and 1 (rows 0..15) are
             // computed, faces 2 and 3 keep what DST held.
             setup();
             Tile x = rand_tile(-3, 3);
             push(0, x, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 1, 16);
             cb_wait_front(0, 1);
             tile_regs_acquire();
             copy_init(0);
             copy_tile(0, 0, 0);
             copy_tile(0, 0, 1);
             binop_with_scalar_tile_init();
             SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_binop_with_scalar,
                             (APPROX, MUL_UNARY, 8, DST_ACCUM_MODE), 0, VectorMode::R, 0x40000000u);  // 2x
             add_binary_tile_init();
             SFPU_BINARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_sfpu_binary,
                              (APPROX, ckernel::BinaryOp::ADD, 8, DST_ACCUM_MODE), 0, 1, 0, VectorMode::R);  // + x
             Tile got = commit_pack();
             Tile want(1024), mag(1024);
             for (int i = 0; i < 1024; ++i) {
                 want[i] = i / 32 < 16 ? 3 * static_cast<float>(x[i]) : static_cast<float>(x[i]);
                 mag[i] = std::fabs(want[i]);
             }
             close(got, want, mag, FP32 ? 0.0 : BF16_ULP, "VectorMode::R: rows 0..15 3x, rows 16..31 x");
         }},
        {"sfpu_iterations_cover_four_rows_even_then_odd_columns",
         [] {
             // An SFPU iteration loads four consecutive DST rows, their even columns, then (the next,
             // Addr + 2) the same rows' odd columns (tt-isa-documentation SFPLOAD), on each face the
             // vector mode visits: ITERATIONS 1 on R doubles rows 0..3's even columns of faces 0 and 1
             // (columns 0, 2, .., 30); ITERATIONS 2 rows 0..3 whole; the rest keep what DST held.
             setup();
             Tile x = rand_tile(-3, 3);
             push(0, x, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 1, 16);
             cb_wait_front(0, 1);
             for (int iterations : {1, 2}) {
                 tile_regs_acquire();
                 copy_init(0);
                 copy_tile(0, 0, 0);
                 binop_with_scalar_tile_init();
                 if (iterations == 1) {
                     SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_binop_with_scalar,
                                     (APPROX, MUL_UNARY, 1, DST_ACCUM_MODE), 0, VectorMode::R, 0x40000000u);  // 2x
                 } else {
                     SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_binop_with_scalar,
                                     (APPROX, MUL_UNARY, 2, DST_ACCUM_MODE), 0, VectorMode::R, 0x40000000u);
                 }
                 Tile got = commit_pack();
                 Tile want(1024), mag(1024);
                 for (int i = 0; i < 1024; ++i) {
                     const int row = i / 32, col = i % 32;
                     const bool computed = row < 4 && (iterations == 2 || col % 2 == 0);
                     want[i] = computed ? 2 * static_cast<float>(x[i]) : static_cast<float>(x[i]);
                     mag[i] = std::fabs(want[i]);
                 }
                 close(got, want, mag, FP32 ? 0.0 : BF16_ULP,
                       iterations == 1 ? "ITERATIONS 1: rows 0..3, even columns" : "ITERATIONS 2: rows 0..3");
             }
         }},
        {"fp32_cb_unpacks_truncated",
         [] {
             setup();
             Tile a(1024);
             for (int i = 0; i < 1024; ++i) a[i] = 1.0 + i * 1e-4;
             fake::host_push(3, to_bytes(a, CbFormat::Float32).data());
             compute_kernel_hw_startup(3, 3, 16);
             copy_init(3);
             cb_wait_front(3, 1);
             tile_regs_acquire();
             copy_tile(3, 0, 0);
             Tile got = commit_pack();
             for (int i = 0; i < 1024; ++i) {
                 uint32_t u = std::bit_cast<uint32_t>(static_cast<float>(a[i]));
                 float t = std::bit_cast<float>(u & (FP32 ? 0xffffe000u : 0xffff0000u));
                 require(got[i] == t, "fp32 -> SrcA must truncate to TF32 / BF16");
             }
         }},
        {"refuse_dst_index_over_capacity",
         [] {
             setup();
             push(0, rand_tile(0, 1), CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 0, 16);
             copy_init(0);
             cb_wait_front(0, 1);
             tile_regs_acquire();
             uint32_t cap = FP32 ? 4 : 8;
             expect_fail([&] { copy_tile(0, 0, cap); },
                         {"copy_tile", "DST index " + std::to_string(cap), std::to_string(cap) + " tiles", "SyncHalf"});
         }},
        {"refuse_stale_init_matmul_after_add_init",
         [] {
             setup();
             push(0, rand_tile(0, 1), CbFormat::Float16_b);
             push(1, rand_tile(0, 1), CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 1, 16);
             add_init(0, 1);
             cb_wait_front(0, 1);
             cb_wait_front(1, 1);
             tile_regs_acquire();
             expect_fail([] { matmul_tiles(0, 1, 0, 0, 0); }, {"matmul_tiles", "configured for add_init(c_0, c_1",
                                                              "matmul_init(c_0, c_1"});
         }},
        {"refuse_init_for_other_cb",
         [] {
             setup();
             push(0, rand_tile(0, 1), CbFormat::Float16_b);
             push(1, rand_tile(0, 1), CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 1, 16);
             copy_init(0);
             cb_wait_front(1, 1);
             tile_regs_acquire();
             expect_fail([] { copy_tile(1, 0, 0); }, {"copy_tile", "configured for copy_init(c_0)", "copy_init(c_1)"});
         }},
        {"refuse_missing_reduce_uninit",
         [] {
             setup();
             push(0, rand_tile(0, 1), CbFormat::Float16_b);
             push(2, scaler_tile(1.0), CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 2, 16);
             reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(0, 2, 16);
             cb_wait_front(0, 1);
             cb_wait_front(2, 1);
             tile_regs_acquire();
             reduce_tile<PoolType::MAX, ReduceDim::REDUCE_ROW>(0, 2, 0, 0, 0);
             expect_fail([] { copy_init(0); }, {"copy_init", "reduce_uninit() was not called", "reduce_init<PoolType::MAX"});
         }},
        {"refuse_pack_outside_wait_release",
         [] {
             setup();
             push(0, rand_tile(0, 1), CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 0, 16);
             copy_init(0);
             cb_wait_front(0, 1);
             tile_regs_acquire();
             copy_tile(0, 0, 0);
             cb_reserve_back(16, 1);
             expect_fail([] { pack_tile(0, 16); }, {"pack_tile", "outside tile_regs_wait()..tile_regs_release()"});
         }},
        {"refuse_math_outside_acquire",
         [] {
             setup();
             push(0, rand_tile(0, 1), CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 0, 16);
             copy_init(0);
             cb_wait_front(0, 1);
             expect_fail([] { copy_tile(0, 0, 0); }, {"copy_tile", "outside tile_regs_acquire()"});
         }},
        {"refuse_before_hw_startup",
         [] {
             setup();
             expect_fail([] { copy_init(0); }, {"copy_init", "before compute_kernel_hw_startup"});
         }},
        {"refuse_sfpu_without_or_stale_init",
         [] {
             setup();
             push(0, rand_tile(0, 1), CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 0, 16);
             copy_init(0);
             cb_wait_front(0, 1);
             tile_regs_acquire();
             copy_tile(0, 0, 0);
             expect_fail([] { exp_tile(0); }, {"exp_tile", "no SFPU init"});
             exp_tile_init();
             recip_tile_init();
             expect_fail([] { exp_tile(0); }, {"exp_tile", "configured for recip_tile_init"});
             exp_tile_init();
             add_init(0, 0);  // FPU inits do not touch the SFPU configuration (ADDR_MOD_7, LREG constants)
             exp_tile(0);
         }},
        {"refuse_format_mismatch_without_reconfig",
         [] {
             setup();
             Tile a = rand_tile(0, 1);
             fake::host_push(3, to_bytes(a, CbFormat::Float32).data());
             push(0, a, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 0, 16);
             copy_init(0);
             cb_wait_front(3, 1);
             cb_wait_front(0, 1);
             tile_regs_acquire();
             copy_tile(0, 0, 1);
             copy_init(3);
             expect_fail([] { copy_tile(3, 0, 0); },
                         {"copy_tile", "c_3 holds Float32", "configured for Float16_b", "reconfig_data_format_srca(c_3)"});
             reconfig_data_format_srca(3);
             copy_tile(3, 0, 0);
         }},
        {"block_float_decode_follows_the_unpacker",
         [] {
             // Hand-made pages, decoded as the hardware does (isa FloatBitPatterns.md "Conversion
             // routines"); the pages ttnn packs are checked against ttnn in test_emulator_block_float.py.
             // Face 0 row r holds case r: {exponent, datum 0, datum 1, want 0, want 1}.
             const double inf = INFINITY;
             struct Row { uint8_t exp, d0, d1; double w0, w1; };
             const std::vector<Row> bfp8 = {
                 {0, 0x00, 0x80, 0.0, -inf},            // magnitude 0: +0; sign only: 0xff80
                 {200, 0x00, 0x00, 0.0, 0.0},           // magnitude 0 is 0 whatever the exponent
                 {127, 0x40, 0xc0, 1.0, -1.0},          // hidden bit in bit 6: value mag * 2^(exp-133)
                 {130, 0x7f, 0x01, 127.0 / 8, 1.0 / 8},
                 {2, 0x40, 0x01, std::ldexp(1.0, -125), std::ldexp(1.0, 125)},  // shift 6 > exp 2: wraps
                 {255, 0x40, 0x60, inf, NAN},           // exponent 255: BF16 inf / NaN patterns
                 {254, 0x7f, 0x3f, std::ldexp(127.0, 127 - 6), std::ldexp(63.0, 127 - 6)},
             };
             const std::vector<Row> bfp4 = {
                 {0, 0x0, 0x8, 0.0, -inf},
                 {200, 0x0, 0x0, 0.0, 0.0},
                 {127, 0x4, 0xc, 1.0, -1.0},            // hidden bit in bit 2: value mag * 2^(exp-129)
                 {130, 0x7, 0x1, 7.0 * 2, 2.0},
                 {0, 0x4, 0x1, 0.0, std::ldexp(1.0, 127)},  // BF16 exponent 0: +0; shift 2 > exp 0: wraps
                 {255, 0x4, 0x6, inf, NAN},
                 {254, 0x7, 0x3, std::ldexp(7.0, 127 - 2), std::ldexp(3.0, 127 - 2)},
             };
             for (CbFormat f : {CbFormat::Bfp8_b, CbFormat::Bfp4_b}) {
                 const bool is8 = f == CbFormat::Bfp8_b;
                 const auto& rows = is8 ? bfp8 : bfp4;
                 std::vector<uint8_t> page(is8 ? 1088 : 576, 0);
                 for (size_t r = 0; r < rows.size(); ++r) {
                     page[r] = rows[r].exp;
                     const uint32_t i = r * 16;  // datum index of face 0, row r, column 0
                     if (is8) {
                         page[64 + i] = rows[r].d0;
                         page[64 + i + 1] = rows[r].d1;
                     } else {
                         page[64 + i / 2] = static_cast<uint8_t>(rows[r].d0 | (rows[r].d1 << 4));  // datum 0 low
                     }
                 }
                 setup(f);
                 fake::host_push(0, page.data());
                 compute_kernel_hw_startup(0, 16);
                 copy_init(0);
                 cb_wait_front(0, 1);
                 tile_regs_acquire();
                 copy_tile(0, 0, 0);
                 Tile got = commit_pack();
                 for (size_t r = 0; r < rows.size(); ++r)
                     for (int c = 0; c < 2; ++c) {
                         double g = got[r * 32 + c], w = c ? rows[r].w1 : rows[r].w0;
                         bool same = std::isnan(w) ? std::isnan(g) : g == w && std::signbit(g) == std::signbit(w);
                         require(same, std::string(is8 ? "Bfp8_b" : "Bfp4_b") + " row " + std::to_string(r) +
                                           " datum " + std::to_string(c) + ": got " + std::to_string(g) +
                                           " want " + std::to_string(w));
                     }
                 for (uint32_t i = rows.size() * 32; i < 1024; ++i)
                     require(got[i] == 0.0 && !std::signbit(got[i]), "zero data must decode to +0");
             }
         }},
        {"refuse_block_float_format_mismatch_and_pack",
         [] {
             setup(CbFormat::Float16_b, CbFormat::Bfp4_b);
             fake::setup_cb(4, CbFormat::Bfp4_b, 2);
             fake::setup_cb(5, static_cast<CbFormat>(8), 2);  // Int32: a dataflow-only format
             std::vector<uint8_t> page(4096, 0);
             fake::host_push(4, page.data());
             fake::host_push(5, page.data());
             compute_kernel_hw_startup(0, 16);
             copy_init(4);
             cb_wait_front(4, 1);
             cb_wait_front(5, 1);
             tile_regs_acquire();
             expect_fail([] { copy_tile(4, 0, 0); },
                         {"copy_tile", "c_4 holds Bfp4_b", "configured for Float16_b", "reconfig_data_format_srca(c_4)"});
             reconfig_data_format_srca(4);
             copy_tile(4, 0, 0);
             copy_init(5);
             reconfig_data_format_srca(5);
             expect_fail([] { copy_tile(5, 0, 1); }, {"copy_tile", "c_5 holds DataFormat(8)", "cannot unpack"});
             tile_regs_commit();
             tile_regs_wait();
             cb_reserve_back(16, 1);
             expect_fail([] { pack_tile(0, 16); }, {"pack_tile", "packing to Bfp4_b (c_16)", "decode-only"});
         }},
        {"refuse_bad_scaler_layout",
         [] {
             setup();
             push(0, rand_tile(0, 1), CbFormat::Float16_b);
             Tile s = scaler_tile(1.0);
             s[5 * 32 + 3] = 1.0;  // a datum outside row 0 of its face
             push(2, s, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 2, 16);
             reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(0, 2, 16);
             cb_wait_front(0, 1);
             cb_wait_front(2, 1);
             tile_regs_acquire();
             expect_fail([] { reduce_tile<PoolType::SUM, ReduceDim::REDUCE_ROW>(0, 2, 0, 0, 0); },
                         {"reduce_tile", "not in tt-metal's reduce-scaler layout", "(5,3)"});
         }},
        {"release_clears_dst_and_counts_calls",
         [] {
             setup();
             Tile a = rand_tile(1, 2), b = rand_tile(1, 2);
             push(0, a, CbFormat::Float16_b);
             push(1, b, CbFormat::Float16_b);
             compute_kernel_hw_startup<SrcOrder::Reverse>(0, 1, 16);
             matmul_init(0, 1);
             cb_wait_front(0, 1);
             cb_wait_front(1, 1);
             for (int rep = 0; rep < 3; ++rep) {  // each acquire starts from a cleared section
                 tile_regs_acquire();
                 matmul_tiles(0, 1, 0, 0, 0);
                 Tile got = commit_pack();
                 double want = 0;
                 for (int k = 0; k < 32; ++k) want += a[k] * b[k * 32];
                 require(std::fabs(got[0] - want) <= (FP32 ? FP32_REL : BF16_ULP) * std::fabs(want),
                         "matmul after release must not accumulate the previous section");
             }
             require(fake::counts["matmul_tiles"] == 3, "matmul_tiles count");
             require(fake::counts["tile_regs_acquire"] == 3, "tile_regs_acquire count");
             require(fake::counts["pack_tile"] == 3, "pack_tile count");
         }},
        {"pack_rounds_to_nearest_even",
         [] {
             setup(CbFormat::Float16_b, CbFormat::Float16_b);
             Tile a(1024, 1.0), b(1024, 0.0);
             // 1 + 2^-8 is a bf16 tie between 1 and 1+2^-7: RNE gives 1; in bf16 DST the FPU already rounds.
             for (int i = 0; i < 1024; ++i) b[i] = std::ldexp(1.0, -8);
             push(0, a, CbFormat::Float16_b);
             push(1, b, CbFormat::Float16_b);
             compute_kernel_hw_startup(0, 1, 16);
             add_init(0, 1);
             cb_wait_front(0, 1);
             cb_wait_front(1, 1);
             tile_regs_acquire();
             add_tiles(0, 1, 0, 0, 0);
             Tile got = commit_pack(0, CbFormat::Float16_b);
             require(got[0] == 1.0, "RNE tie to even");
         }},
    };
    int failed = 0;
    for (auto& c : cases) {
        try {
            c.body();
            std::printf("PASS %s\n", c.name);
        } catch (const std::exception& e) {
            ++failed;
            std::printf("FAIL %s: %s\n", c.name, e.what());
        }
    }
    return failed ? 1 : 0;
}
