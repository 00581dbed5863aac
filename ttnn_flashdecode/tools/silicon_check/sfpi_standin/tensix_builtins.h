// SFPI stand-in (ttnn-flashdecode silicon check): what SFPI's compiler provides before any header.
//
// Written for this project from how the ttnn wheel's LLK headers use SFPI; it is not SFPI's file.
// The per-thread compute check force-includes it (-include tensix_builtins.h), so it runs before
// every tt-metal header, as SFPI's GCC would have done its part by then:
//
//  * the Tensix target macro (__riscv_xtttensixwh / __riscv_xtttensixbh), which SFPI's GCC
//    predefines for -mcpu=tt-wh-tensix / tt-bh-tensix and upstream GCC does not; ckernel_ops.h
//    picks its TTI_* instruction form with it, and sfpi.h here its Blackhole-only functions.
//    Taken from tt-metal's ARCH_WORMHOLE / ARCH_BLACKHOLE (every logged TRISC compile has one).
//  * declarations of the __builtin_rvtt_* calls that LLK headers make themselves (sfpmad and sfpgt),
//    with signatures read off those call sites. Only declared: nothing here is ever
//    compiled to a real SFPU instruction, and the immediate-operand checks SFPI's compiler does on
//    these builtins are not made.
#pragma once

#if defined(ARCH_WORMHOLE) && !defined(__riscv_xtttensixwh)
#define __riscv_xtttensixwh 1
#endif
#if defined(ARCH_BLACKHOLE) && !defined(__riscv_xtttensixbh)
#define __riscv_xtttensixbh 1
#endif

#ifdef __cplusplus
// One SFPU vector register's contents as a builtin takes or returns it (SFPI's compiler has a
// native vector type; the stand-in only needs a distinct value type). sfpi.h's vector
// classes hand it out with get() and are constructed from it.
struct sfpi_standin_lanes {
    unsigned word;
};

// d = a * b + c on every lane; `mod` is an SFPMAD_MOD1_* value.
sfpi_standin_lanes __builtin_rvtt_sfpmad(sfpi_standin_lanes a, sfpi_standin_lanes b, sfpi_standin_lanes c,
                                         unsigned mod);
// a > b, lane by lane, as a register value and/or the lane enables (`mod`: SFPGT_MOD1_*).
sfpi_standin_lanes __builtin_rvtt_sfpgt(sfpi_standin_lanes a, sfpi_standin_lanes b, unsigned mod);
#endif
