// Emulator host version of api/compute/compute_kernel_api.h. The real header holds the SFPU
// activations (sigmoid, silu, ...), none of which the emulator implements; it provides the
// common globals only. Unsupported calls fail to compile rather than run wrong.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/compute_kernel_api.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"
