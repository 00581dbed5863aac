// SFPI stand-in (ttnn-flashdecode silicon check): the sfpi:: API, declared from its call sites.
//
// The ttnn wheel's LLK headers include "sfpi.h" (SFPI: Tenstorrent's C++ interface to the Tensix
// SFPU vector unit), which the wheel does not ship. Where no SFPI install exists, the silicon
// check's per-thread compute check (-fsyntax-only over each logged TRISC compile line) finds this
// file instead. It was written for this project, without SFPI's sources, from how the wheel's
// Wormhole B0 and Blackhole LLK headers (tt-llk, hw/ckernels/*/metal/llk_api/llk_sfpu) use SFPI:
// every name, type, operator and signature here is one those call sites need.
//
// What it checks: that the kernel and the LLK code it instantiates name, construct, combine and
// pass SFPI values in ways these declarations accept -- vFloat and the integer vectors never
// convert into each other implicitly (that takes as<T>() or convert<T>()), there is no vector
// division, v_if / v_elseif / v_else / v_endif nest as blocks and v_and works only inside a v_if,
// Blackhole-only instructions (approx_recip, fractional_mul, ShiftMode::Arithmetic) are refused
// on Wormhole. Between vInt and vUInt, conversions are implicit both ways, as the wheel's LLK code
// relies on (a Wormhole vInt >> n is a logical shift of the bits as a vUInt).
//
// What it cannot see: everything SFPI's compiler does past parsing (register allocation and
// pressure, v_if lowering to condition codes, immediate-operand ranges, instruction scheduling,
// code size) -- nothing here generates SFPU code, every function body is an empty placeholder. The
// declarations are guesses where the call sites leave room (which implicit conversions exist,
// which overloads, the default of an optional argument), so a wrong guess gives a false error
// (real SFPI accepts it) or a false pass (real SFPI refuses it). The instruction-modifier
// constants (SFP*_MOD*) carry the Tensix ISA's encodings as far as the wheel's own comments and
// enums state them and this stand-in's best reading of the ISA otherwise; a syntax check never
// encodes them.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensix_builtins.h"

// SFPI's spelling for "always inline this small wrapper" (LLK headers use it on their own helpers).
#define sfpi_inline inline __attribute__((always_inline))

namespace sfpi {

// --- instruction modifiers, for the TTI_SFP* macros in ckernel_ops.h ------------------------------

constexpr unsigned SFPLOADI_MOD0_FLOATB = 0;  // bf16 immediate -> fp32
constexpr unsigned SFPLOADI_MOD0_FLOATA = 1;  // fp16 immediate -> fp32
constexpr unsigned SFPLOADI_MOD0_USHORT = 2;  // zero-extended 16-bit integer
constexpr unsigned SFPLOADI_MOD0_SHORT = 4;   // sign-extended 16-bit integer
constexpr unsigned SFPLOADI_MOD0_UPPER = 8;   // upper 16 bits, lower kept
constexpr unsigned SFPLOADI_MOD0_LOWER = 10;  // lower 16 bits, upper kept
constexpr unsigned SFPLOAD_MOD0_FMT_SRCB = 0;  // as InstrModLoadStore::DEFAULT
constexpr unsigned SFPLOAD_MOD0_FMT_FP16B = 2;
constexpr unsigned SFPSTORE_MOD0_FMT_SRCB = 0;
constexpr unsigned SFPSTORE_MOD0_FMT_FP16B = 2;
constexpr unsigned SFPMAD_MOD1_OFFSET_NONE = 0;
constexpr unsigned SFPABS_MOD1_INT = 0;
constexpr unsigned SFPIADD_MOD1_ARG_LREG_DST = 0;
constexpr unsigned SFPIADD_MOD1_ARG_IMM = 1;
constexpr unsigned SFPIADD_MOD1_ARG_2SCOMP_LREG_DST = 2;
constexpr unsigned SFPIADD_MOD1_CC_LT0 = 0;
constexpr unsigned SFPIADD_MOD1_CC_NONE = 4;
constexpr unsigned SFPIADD_MOD1_CC_GTE0 = 8;
constexpr unsigned SFPSETCC_MOD1_LREG_LT0 = 0;
constexpr unsigned SFPSETCC_MOD1_LREG_NE0 = 2;
constexpr unsigned SFPSETCC_MOD1_LREG_GTE0 = 4;
constexpr unsigned SFPSETCC_MOD1_LREG_EQ0 = 6;
constexpr unsigned SFPENCC_IMM12_BOTH = 3;
constexpr unsigned SFPENCC_MOD1_EU_R1 = 0;
constexpr unsigned SFPENCC_MOD1_EI_RI = 2;
constexpr unsigned SFPEXEXP_MOD1_SET_CC_SGN_EXP = 2;
constexpr unsigned SFPEXEXP_MOD1_SET_CC_COMP_EXP = 8;
constexpr unsigned SFPEXMAN_MOD1_PAD9 = 1;
constexpr unsigned SFPSWAP_MOD1_SWAP = 0;
constexpr unsigned SFPSWAP_MOD1_VEC_MIN_MAX = 1;
constexpr unsigned SFPSHFT2_MOD1_SUBVEC_SHFLROR1 = 3;
constexpr unsigned SFPSHFT2_MOD1_SUBVEC_SHFLSHR1 = 4;
constexpr unsigned SFPSHFT2_MOD1_SHFT_LREG = 5;
constexpr unsigned SFPSHFT2_MOD1_SHFT_IMM = 6;
constexpr unsigned SFPSTOCHRND_RND_EVEN = 0;
constexpr unsigned SFPSTOCHRND_MOD1_FP32_TO_FP16B = 1;
constexpr unsigned SFPSTOCHRND_MOD1_FP32_TO_UINT8 = 2;
constexpr unsigned SFPSTOCHRND_MOD1_FP32_TO_INT8 = 3;
constexpr unsigned SFPSTOCHRND_MOD1_FP32_TO_UINT16 = 6;
constexpr unsigned SFPSTOCHRND_MOD1_FP32_TO_INT16 = 7;
constexpr unsigned SFPCAST_MOD1_INT32_TO_FP32_RNE = 0;
constexpr unsigned SFPCAST_MOD1_SM32_TO_FP32_RNE = 0;
constexpr unsigned SFPLZ_MOD1_CC_NE0 = 2;
#if __riscv_xtttensixbh
constexpr unsigned SFPARECIP_MOD1_RECIP = 0;
constexpr unsigned SFPMUL24_MOD1_LOWER = 0;
constexpr unsigned SFPMUL24_MOD1_UPPER = 1;
#endif
// Dst rows one dst_reg index step moves (dst_reg[i] addresses row SFP_DESTREG_STRIDE * i).
constexpr unsigned SFP_DESTREG_STRIDE = 2;

// --- option enums (only the enumerators the wheel names; a function's default is an overload) ----

// How dst_reg[i].mode<L>() loads and stores a Dst row.
enum class DataLayout : std::uint8_t { Default, FSrcB, F32, I32, U32, U16, SM32, M32 };
enum class RoundMode : std::uint8_t { Nearest, NearestAway, NearestStochastic };
enum class ExponentMode : std::uint8_t { Biased };  // exexp(v) alone is the unbiased exponent
enum class MantissaMode : std::uint8_t { ImplicitOne };  // exman(v) alone is the fraction bits only
enum class ShiftMode : std::uint8_t {
    Logical,
#if __riscv_xtttensixbh
    Arithmetic,  // Blackhole's SFPSHFT shifts arithmetically too
#endif
};
enum class LutSign : std::uint8_t { Retain, Update };
#if __riscv_xtttensixbh
enum class FractionalHalf : std::uint8_t { Low, High };
#endif
enum class LRegs : std::uint8_t { LReg0, LReg1, LReg2, LReg3, LReg4, LReg5, LReg6, LReg7 };

// --- scalar immediates ------------------------------------------------------------------------

// M(X, I) for every integer type an immediate may have (narrower ones promote to int). Plain
// overloads rather than a constrained template: a failed call then lists candidates without the
// substitution-failure "error:" lines GCC prints for enable_if.
#define SFPI_STANDIN_EACH_INTEGER(M, X) \
    M(X, int) M(X, unsigned) M(X, long) M(X, unsigned long) M(X, long long) M(X, unsigned long long)
#define SFPI_STANDIN_BITS_CONSTRUCTOR(Class, I) \
    constexpr explicit Class(I bits) : bits_(static_cast<std::uint16_t>(bits)) {}
#define SFPI_STANDIN_SCALAR_CONSTRUCTOR(Class, I) \
    constexpr Class(I) {}

// A 16-bit float (bf16) immediate: from a float (truncated), or its bit pattern as an integer.
class sFloat16b {
public:
    constexpr explicit sFloat16b(float) {}
    constexpr explicit sFloat16b(double) {}
    SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_BITS_CONSTRUCTOR, sFloat16b)
    constexpr std::uint32_t get() const { return bits_; }

private:
    std::uint16_t bits_ = 0;
};

// A 16-bit float (fp16, "float A") immediate, from its bit pattern only (no float constructor).
class sFloat16a {
public:
    SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_BITS_CONSTRUCTOR, sFloat16a)
    constexpr std::uint32_t get() const { return bits_; }

private:
    std::uint16_t bits_ = 0;
};

// --- vector values ------------------------------------------------------------------------------

namespace standin {
using Lanes = ::sfpi_standin_lanes;

// What every SFPI vector type is underneath: one SFPU register's lanes (get() hands them to a
// builtin; every vector type is constructible from a builtin's result).
class Vector {
public:
    constexpr Vector() = default;
    constexpr Vector(Lanes lanes) : lanes_(lanes) {}
    constexpr Lanes get() const { return lanes_; }

private:
    Lanes lanes_{};
};

template <class T>
inline constexpr bool is_vector = std::is_base_of_v<Vector, T>;
}  // namespace standin

class vInt;
class vUInt;
class vMag;
class vBool;

// 32-bit IEEE floats, one per lane.
class vFloat : public standin::Vector {
public:
    constexpr vFloat() = default;
    constexpr vFloat(standin::Lanes lanes) : Vector(lanes) {}
    constexpr vFloat(float) {}
    constexpr vFloat(sFloat16a) {}
    constexpr vFloat(sFloat16b) {}
    vFloat& operator+=(vFloat) { return *this; }
    vFloat& operator-=(vFloat) { return *this; }
    vFloat& operator*=(vFloat) { return *this; }
};

// A vFloat rounded to fp16 (A) or bf16 (B) and held as fp32: what convert<vFloat16[ab]> returns.
class vFloat16a : public vFloat {
public:
    using vFloat::vFloat;
};
class vFloat16b : public vFloat {
public:
    using vFloat::vFloat;
};

// 32-bit two's-complement integers.
class vInt : public standin::Vector {
public:
    constexpr vInt() = default;
    constexpr vInt(standin::Lanes lanes) : Vector(lanes) {}
    SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_SCALAR_CONSTRUCTOR, vInt)
    constexpr explicit vInt(const vUInt& bits);
    constexpr operator vUInt() const;  // implicit both ways (see the top of this file)
    vInt& operator+=(vInt) { return *this; }
    vInt& operator-=(vInt) { return *this; }
    vInt& operator&=(vInt) { return *this; }
    vInt& operator|=(vInt) { return *this; }
    vInt& operator^=(vInt) { return *this; }
    vInt& operator<<=(unsigned) { return *this; }
#if __riscv_xtttensixbh
    vInt& operator>>=(unsigned) { return *this; }
#endif
    vInt& operator++() { return *this; }
    vInt operator++(int) { return *this; }
    vInt& operator--() { return *this; }
    vInt operator--(int) { return *this; }
};

// 32-bit unsigned integers.
class vUInt : public standin::Vector {
public:
    constexpr vUInt() = default;
    constexpr vUInt(standin::Lanes lanes) : Vector(lanes) {}
    SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_SCALAR_CONSTRUCTOR, vUInt)
    constexpr explicit vUInt(vInt bits) : Vector(bits.get()) {}
    constexpr operator vInt() const { return vInt(get()); }
    vUInt& operator+=(vUInt) { return *this; }
    vUInt& operator-=(vUInt) { return *this; }
    vUInt& operator&=(vUInt) { return *this; }
    vUInt& operator|=(vUInt) { return *this; }
    vUInt& operator^=(vUInt) { return *this; }
    vUInt& operator<<=(unsigned) { return *this; }
    vUInt& operator>>=(unsigned) { return *this; }
    vUInt& operator++() { return *this; }
    vUInt operator++(int) { return *this; }
    vUInt& operator--() { return *this; }
    vUInt operator--(int) { return *this; }
};

constexpr vInt::vInt(const vUInt& bits) : Vector(bits.get()) {}
constexpr vInt::operator vUInt() const { return vUInt(get()); }

// 31-bit magnitudes (non-negative integers, a kind of vUInt): abs(vInt), exman(), and the narrow
// unsigned results of convert<vUInt16 / vUInt8>.
class vMag : public vUInt {
public:
    using vUInt::vUInt;
};
class vUInt16 : public vMag {
public:
    using vMag::vMag;
};
class vUInt8 : public vMag {
public:
    using vMag::vMag;
};

// Sign-magnitude integers (what SFPSTOCHRND's integer results and SFPCAST's inputs are).
class vSMag : public standin::Vector {
public:
    constexpr vSMag() = default;
    constexpr vSMag(standin::Lanes lanes) : Vector(lanes) {}
    constexpr vSMag(vMag magnitude) : Vector(magnitude.get()) {}
};
class vSMag16 : public vSMag {
public:
    using vSMag::vSMag;
};
class vSMag8 : public vSMag {
public:
    using vSMag::vSMag;
};

// Look-up-table operands for lut(): three 8-bit slope/intercept pairs (vLut8si), or the six-entry
// form's 16-bit slopes (vLut16ss) and intercepts (vLut16ii), two per register.
class vLut8si : public standin::Vector {
public:
    constexpr vLut8si() = default;
    constexpr vLut8si(standin::Lanes lanes) : Vector(lanes) {}
    constexpr vLut8si(float slope, float intercept) { (void)slope, (void)intercept; }
};
class vLut16ss : public standin::Vector {
public:
    constexpr vLut16ss() = default;
    constexpr vLut16ss(standin::Lanes lanes) : Vector(lanes) {}
    constexpr vLut16ss(float slope0, float slope1) { (void)slope0, (void)slope1; }
};
class vLut16ii : public standin::Vector {
public:
    constexpr vLut16ii() = default;
    constexpr vLut16ii(standin::Lanes lanes) : Vector(lanes) {}
    constexpr vLut16ii(float intercept0, float intercept1) { (void)intercept0, (void)intercept1; }
};

// A per-lane condition: what comparisons return and v_if / v_elseif / v_and take.
class vBool {
public:
    struct Made {};  // only comparisons and predicates make one
    constexpr explicit vBool(Made) {}
    constexpr vBool(vInt) {}   // lanes that are non-zero
    constexpr vBool(vUInt) {}  // lanes that are non-zero
};

// --- operators ----------------------------------------------------------------------------------

namespace standin {
constexpr vBool made_bool() { return vBool(vBool::Made{}); }
}  // namespace standin

sfpi_inline vFloat operator+(vFloat a) { return a; }
sfpi_inline vFloat operator-(vFloat a) { return a; }
sfpi_inline vFloat operator+(vFloat a, vFloat) { return a; }
sfpi_inline vFloat operator-(vFloat a, vFloat) { return a; }
sfpi_inline vFloat operator*(vFloat a, vFloat) { return a; }

sfpi_inline vInt operator-(vInt a) { return a; }
sfpi_inline vInt operator~(vInt a) { return a; }
sfpi_inline vInt operator+(vInt a, vInt) { return a; }
sfpi_inline vInt operator-(vInt a, vInt) { return a; }
sfpi_inline vInt operator&(vInt a, vInt) { return a; }
sfpi_inline vInt operator|(vInt a, vInt) { return a; }
sfpi_inline vInt operator^(vInt a, vInt) { return a; }
sfpi_inline vInt operator<<(vInt a, unsigned) { return a; }
sfpi_inline vInt operator<<(vInt a, vInt) { return a; }
sfpi_inline vInt operator<<(vInt a, vUInt) { return a; }
#if __riscv_xtttensixbh
sfpi_inline vInt operator>>(vInt a, unsigned) { return a; }
sfpi_inline vInt operator>>(vInt a, vInt) { return a; }
sfpi_inline vInt operator>>(vInt a, vUInt) { return a; }
#endif

sfpi_inline vUInt operator~(vUInt a) { return a; }
sfpi_inline vUInt operator-(vUInt a) { return a; }
sfpi_inline vUInt operator+(vUInt a, vUInt) { return a; }
sfpi_inline vUInt operator-(vUInt a, vUInt) { return a; }
sfpi_inline vUInt operator&(vUInt a, vUInt) { return a; }
sfpi_inline vUInt operator|(vUInt a, vUInt) { return a; }
sfpi_inline vUInt operator^(vUInt a, vUInt) { return a; }
sfpi_inline vUInt operator<<(vUInt a, unsigned) { return a; }
sfpi_inline vUInt operator>>(vUInt a, unsigned) { return a; }
sfpi_inline vUInt operator<<(vUInt a, vUInt) { return a; }
sfpi_inline vUInt operator>>(vUInt a, vUInt) { return a; }

// Mixed signedness: the unsigned side wins; a magnitude added to a vInt stays a vInt.
sfpi_inline vUInt operator-(vUInt a, vInt) { return a; }
sfpi_inline vUInt operator&(vUInt a, vInt) { return a; }
sfpi_inline vUInt operator|(vUInt a, vInt) { return a; }
sfpi_inline vUInt operator^(vUInt a, vInt) { return a; }
sfpi_inline vUInt operator&(vInt, vUInt b) { return b; }
sfpi_inline vUInt operator|(vInt, vUInt b) { return b; }
sfpi_inline vUInt operator^(vInt, vUInt b) { return b; }
sfpi_inline vInt operator+(vInt a, vMag) { return a; }
sfpi_inline vInt operator+(vMag, vInt b) { return b; }
sfpi_inline vInt operator-(vInt a, vMag) { return a; }
sfpi_inline vInt operator-(vMag, vInt b) { return b; }
sfpi_inline vUInt operator+(vUInt a, vMag) { return a; }
sfpi_inline vUInt operator+(vMag, vUInt b) { return b; }
sfpi_inline vUInt operator-(vUInt a, vMag) { return a; }
sfpi_inline vUInt operator-(vMag, vUInt b) { return b; }

sfpi_inline vMag operator>>(vMag a, unsigned) { return a; }
sfpi_inline vMag operator&(vMag a, vMag) { return a; }
sfpi_inline vMag operator&(vMag a, unsigned) { return a; }

// An integer vector with an integer scalar (either side): the scalar is the immediate, and these
// exact matches keep `v + 1` from being ambiguous between the vInt / vUInt / vMag overloads.
#define SFPI_STANDIN_SCALAR_ARITHMETIC(V, I)                     \
    sfpi_inline V operator+(V a, I) { return a; }               \
    sfpi_inline V operator+(I, V b) { return b; }               \
    sfpi_inline V operator-(V a, I) { return a; }               \
    sfpi_inline V operator-(I, V b) { return b; }               \
    sfpi_inline V operator&(V a, I) { return a; }               \
    sfpi_inline V operator&(I, V b) { return b; }               \
    sfpi_inline V operator|(V a, I) { return a; }               \
    sfpi_inline V operator|(I, V b) { return b; }               \
    sfpi_inline V operator^(V a, I) { return a; }               \
    sfpi_inline V operator^(I, V b) { return b; }
SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_SCALAR_ARITHMETIC, vInt)
SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_SCALAR_ARITHMETIC, vUInt)
#undef SFPI_STANDIN_SCALAR_ARITHMETIC

#define SFPI_STANDIN_COMPARISONS(T)                                        \
    sfpi_inline vBool operator==(T, T) { return standin::made_bool(); } \
    sfpi_inline vBool operator!=(T, T) { return standin::made_bool(); } \
    sfpi_inline vBool operator<(T, T) { return standin::made_bool(); }  \
    sfpi_inline vBool operator<=(T, T) { return standin::made_bool(); } \
    sfpi_inline vBool operator>(T, T) { return standin::made_bool(); }  \
    sfpi_inline vBool operator>=(T, T) { return standin::made_bool(); }
#define SFPI_STANDIN_SCALAR_COMPARISONS(T, I)                               \
    sfpi_inline vBool operator==(T, I) { return standin::made_bool(); } \
    sfpi_inline vBool operator!=(T, I) { return standin::made_bool(); } \
    sfpi_inline vBool operator<(T, I) { return standin::made_bool(); }  \
    sfpi_inline vBool operator<=(T, I) { return standin::made_bool(); } \
    sfpi_inline vBool operator>(T, I) { return standin::made_bool(); }  \
    sfpi_inline vBool operator>=(T, I) { return standin::made_bool(); }
#define SFPI_STANDIN_SCALAR_EQUALITY(T, I)                                  \
    sfpi_inline vBool operator==(T, I) { return standin::made_bool(); } \
    sfpi_inline vBool operator!=(T, I) { return standin::made_bool(); }
SFPI_STANDIN_COMPARISONS(vFloat)
SFPI_STANDIN_COMPARISONS(vInt)
SFPI_STANDIN_COMPARISONS(vUInt)
SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_SCALAR_COMPARISONS, vInt)
SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_SCALAR_COMPARISONS, vUInt)
// A vInt against a magnitude compares as vInts.
sfpi_inline vBool operator==(vInt, vMag) { return standin::made_bool(); }
sfpi_inline vBool operator!=(vInt, vMag) { return standin::made_bool(); }
sfpi_inline vBool operator<(vInt, vMag) { return standin::made_bool(); }
sfpi_inline vBool operator<=(vInt, vMag) { return standin::made_bool(); }
sfpi_inline vBool operator>(vInt, vMag) { return standin::made_bool(); }
sfpi_inline vBool operator>=(vInt, vMag) { return standin::made_bool(); }
#undef SFPI_STANDIN_COMPARISONS
#undef SFPI_STANDIN_SCALAR_COMPARISONS
sfpi_inline vUInt operator&(vSMag a, unsigned) { return vUInt(a.get()); }

sfpi_inline vBool operator==(vSMag, vSMag) { return standin::made_bool(); }
sfpi_inline vBool operator!=(vSMag, vSMag) { return standin::made_bool(); }
SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_SCALAR_EQUALITY, vSMag)
#undef SFPI_STANDIN_SCALAR_EQUALITY

sfpi_inline vBool operator&&(vBool, vBool) { return standin::made_bool(); }
sfpi_inline vBool operator||(vBool, vBool) { return standin::made_bool(); }
sfpi_inline vBool operator!(vBool) { return standin::made_bool(); }

// --- registers ----------------------------------------------------------------------------------

namespace standin {

// One Dst row group as dst_reg[i] names it: reads as a vector, takes a vector or a scalar.
class DestSlot {
public:
    // The same row, loaded / stored with another layout (and optionally another address mode).
    template <DataLayout Layout>
    constexpr DestSlot mode(unsigned address_mode = 0) const {
        (void)address_mode;
        return *this;
    }
    // The same row and layout, with another address mode (ADDR_MOD_n).
    constexpr DestSlot mode(unsigned address_mode) const {
        (void)address_mode;
        return *this;
    }
    operator vFloat() const { return vFloat(); }
    operator vInt() const { return vInt(); }
    operator vUInt() const { return vUInt(); }
    const DestSlot& operator=(vFloat) const { return *this; }
    const DestSlot& operator=(vInt) const { return *this; }
    const DestSlot& operator=(vUInt) const { return *this; }
    const DestSlot& operator=(float) const { return *this; }
#define SFPI_STANDIN_STORE_SCALAR(Unused, I) \
    const DestSlot& operator=(I) const { return *this; }
    SFPI_STANDIN_EACH_INTEGER(SFPI_STANDIN_STORE_SCALAR, ~)
#undef SFPI_STANDIN_STORE_SCALAR
    const DestSlot& operator=(const DestSlot&) const { return *this; }
};

// The Dst register as the SFPU sees it: dst_reg[i] is i rows past the current base, and
// dst_reg++ / dst_reg += n move the base.
class DestRegisterFile {
public:
    constexpr DestSlot operator[](int) const { return DestSlot(); }
    void operator++(int) const {}
    void operator++() const {}
    void operator+=(int) const {}
};

// One SFPU local register (l_reg[LRegs::LRegN]): pins a value to that register, or reads it back.
class LocalSlot {
public:
    operator vFloat() const { return vFloat(); }
    operator vInt() const { return vInt(); }
    operator vUInt() const { return vUInt(); }
    operator vLut8si() const { return vLut8si(); }
    operator vLut16ss() const { return vLut16ss(); }
    operator vLut16ii() const { return vLut16ii(); }
    const LocalSlot& operator=(vFloat) const { return *this; }
    const LocalSlot& operator=(vInt) const { return *this; }
    const LocalSlot& operator=(vUInt) const { return *this; }
    const LocalSlot& operator=(vLut8si) const { return *this; }
    const LocalSlot& operator=(vLut16ss) const { return *this; }
    const LocalSlot& operator=(vLut16ii) const { return *this; }
    // Keeps the register's current contents alive (reserved) from here on.
    void in_use() const {}
};

class LocalRegisterFile {
public:
    constexpr LocalSlot operator[](LRegs) const { return LocalSlot(); }
};

// A constant register: reads as a V; assigning programs it (the programmable ones).
template <class V>
class ConstRegister {
public:
    constexpr explicit ConstRegister(unsigned lreg) : lreg_(lreg) {}
    operator V() const { return V(); }
    void operator=(V) const {}
    constexpr unsigned lreg() const { return lreg_; }

private:
    unsigned lreg_;
};

}  // namespace standin

inline constexpr standin::DestRegisterFile dst_reg{};
inline constexpr standin::LocalRegisterFile l_reg{};

// LREG12..14: the programmable constants (as float or as int, the same registers); LREG15: the
// lane id.
inline constexpr standin::ConstRegister<vFloat> vConstFloatPrgm0{12};
inline constexpr standin::ConstRegister<vFloat> vConstFloatPrgm1{13};
inline constexpr standin::ConstRegister<vFloat> vConstFloatPrgm2{14};
inline constexpr standin::ConstRegister<vInt> vConstIntPrgm0{12};
inline constexpr standin::ConstRegister<vInt> vConstIntPrgm1{13};
inline constexpr standin::ConstRegister<vInt> vConstIntPrgm2{14};
inline constexpr standin::ConstRegister<vInt> vConstTileId{15};

// Declares high register pressure for its scope (a hint to SFPI's register allocator).
class lreg_pressure {
public:
    explicit lreg_pressure(bool high = true) : high_(high) {}
    ~lreg_pressure() {}

private:
    bool high_;
};

// --- predicated execution -------------------------------------------------------------------------

namespace standin {
// The lane-enable state of one v_if ... v_endif (or v_block ... v_endblock).
class ConditionScope {
public:
    ConditionScope() = default;
    ConditionScope(const ConditionScope&) = delete;
    ConditionScope& operator=(const ConditionScope&) = delete;
    void enter(vBool) {}
    void otherwise_if(vBool) {}
    void otherwise() {}
    void narrow(vBool) {}
};
}  // namespace standin

}  // namespace sfpi

#define v_if(condition)                                       \
    {                                                         \
        ::sfpi::standin::ConditionScope sfpi_standin_lanes_; \
        sfpi_standin_lanes_.enter(condition);                 \
        {
#define v_elseif(condition)                       \
    }                                             \
    sfpi_standin_lanes_.otherwise_if(condition); \
    {
#define v_else                       \
    }                                \
    sfpi_standin_lanes_.otherwise(); \
    {
#define v_endif \
    }           \
    }
#define v_block \
    {           \
        ::sfpi::standin::ConditionScope sfpi_standin_lanes_;
#define v_endblock }
#define v_and(condition) sfpi_standin_lanes_.narrow(condition)

namespace sfpi {

// --- conversions --------------------------------------------------------------------------------

namespace standin {
constexpr Lanes lanes_of(const Vector& value) { return value.get(); }
template <class V>
Lanes lanes_of(const ConstRegister<V>& reg) {
    return V(reg).get();
}
}  // namespace standin

// The same bits, seen as another vector type (no instruction).
template <class To, class From>
sfpi_inline To as(const From& value) {
    static_assert(standin::is_vector<To>, "sfpi::as<T>: T must be an SFPI vector type");
    return To(standin::lanes_of(value));
}

// The value, converted to another vector type (rounding where it narrows).
template <class To, class From>
sfpi_inline To convert(const From& value) {
    static_assert(standin::is_vector<To> && standin::is_vector<From>, "sfpi::convert: vector types only");
    return To(value.get());
}
template <class To, class From>
sfpi_inline To convert(const From& value, RoundMode) {
    return convert<To>(value);
}

// --- functions ----------------------------------------------------------------------------------

sfpi_inline vFloat abs(vFloat v) { return v; }
sfpi_inline vMag abs(vInt v) { return vMag(v.get()); }

sfpi_inline vInt exexp(vFloat v) { return vInt(v.get()); }
sfpi_inline vInt exexp(vFloat v, ExponentMode) { return vInt(v.get()); }
sfpi_inline vMag exman(vFloat v) { return vMag(v.get()); }
sfpi_inline vMag exman(vFloat v, MantissaMode) { return vMag(v.get()); }

sfpi_inline vFloat setexp(vFloat v, int) { return v; }
sfpi_inline vFloat setexp(vFloat v, vInt) { return v; }
sfpi_inline vFloat setman(vFloat v, int) { return v; }
sfpi_inline vFloat setman(vFloat v, vInt) { return v; }
sfpi_inline vFloat setman(vFloat v, vUInt) { return v; }
sfpi_inline vFloat addexp(vFloat v, int) { return v; }
sfpi_inline vFloat copyman(vFloat v, vFloat) { return v; }

// Sign from an immediate (0 positive, 1 negative) or from another vector's sign bit.
template <class V, std::enable_if_t<standin::is_vector<V>, int> = 0>
sfpi_inline V setsgn(V v, int) {
    return v;
}
template <class V, class Sign, std::enable_if_t<standin::is_vector<V> && standin::is_vector<Sign>, int> = 0>
sfpi_inline V setsgn(V v, Sign) {
    return v;
}
sfpi_inline vFloat copysgn(vFloat v, vFloat) { return v; }
template <class V, class Sign, std::enable_if_t<standin::is_vector<V> && standin::is_vector<Sign>, int> = 0>
sfpi_inline V copysgn(V v, Sign) {
    return v;
}
// Sign from bit 0 of an integer vector.
template <class Bits, std::enable_if_t<standin::is_vector<Bits>, int> = 0>
sfpi_inline vFloat setsgn2(vFloat v, Bits) {
    return v;
}

sfpi_inline vInt shft(vInt v, vInt) { return v; }
sfpi_inline vInt shft(vInt v, int) { return v; }
sfpi_inline vInt shft(vInt v, vInt, ShiftMode) { return v; }
sfpi_inline vInt shft(vInt v, int, ShiftMode) { return v; }
sfpi_inline vUInt shft(vUInt v, vInt) { return v; }
sfpi_inline vUInt shft(vUInt v, int) { return v; }
sfpi_inline vUInt shft(vUInt v, vInt, ShiftMode) { return v; }
sfpi_inline vUInt shft(vUInt v, int, ShiftMode) { return v; }

sfpi_inline vFloat min(vFloat a, vFloat) { return a; }
sfpi_inline vFloat max(vFloat a, vFloat) { return a; }
sfpi_inline vInt min(vInt a, vInt) { return a; }
sfpi_inline vInt max(vInt a, vInt) { return a; }
sfpi_inline vSMag min(vSMag a, vSMag) { return a; }
sfpi_inline vSMag max(vSMag a, vSMag) { return a; }
template <class V>
struct MinMax {
    V min;
    V max;
};
sfpi_inline MinMax<vFloat> min_max(vFloat a, vFloat b) { return {a, b}; }
sfpi_inline vFloat clamp(vFloat v, vFloat, vFloat) { return v; }
sfpi_inline vFloat symmetric_clamp(vFloat v, vFloat) { return v; }

sfpi_inline vBool is_inf(vFloat) { return standin::made_bool(); }
sfpi_inline vBool is_nan(vFloat) { return standin::made_bool(); }
sfpi_inline vBool is_finite(vFloat) { return standin::made_bool(); }
sfpi_inline vBool is_pos(vFloat) { return standin::made_bool(); }
sfpi_inline vBool is_neg(vFloat) { return standin::made_bool(); }
// Marks an ordered compare whose operands are known to be close (< 2^31 apart).
sfpi_inline vBool nearby(vBool b) { return b; }

sfpi_inline vFloat lut(vFloat v, vLut8si, vLut8si, vLut8si) { return v; }
sfpi_inline vFloat lut(vFloat v, vLut8si, vLut8si, vLut8si, LutSign) { return v; }
sfpi_inline vFloat lut(vFloat v, vLut16ss, vLut16ii, vLut16ss, vLut16ii, vLut16ss, vLut16ii, LutSign) { return v; }

template <class V, std::enable_if_t<standin::is_vector<V>, int> = 0>
sfpi_inline V subvec_shflror1(V v) {
    return v;
}
template <class V, std::enable_if_t<standin::is_vector<V>, int> = 0>
sfpi_inline void subvec_transp(V&, V&, V&, V&) {}

#if __riscv_xtttensixbh
sfpi_inline vFloat approx_recip(vFloat v) { return v; }
sfpi_inline vInt fractional_mul(vInt a, vInt) { return a; }
sfpi_inline vInt fractional_mul(vInt a, vInt, FractionalHalf) { return a; }
#endif

}  // namespace sfpi
