// Emulator host version of api/compute/common.h.
#pragma once
#ifndef COMPILE_FOR_TRISC
#error "api/compute/common.h is for compute kernels only (COMPILE_FOR_TRISC is not defined)"
#endif

#include "api/compute/common_globals.h"
#include "emu/kernel_args.h"  // get_arg_val / get_common_arg_val, as the real common.h declares them
#include "api/compute/reg_api.h"
#include "api/compute/pack.h"
#include "api/compute/reconfig_data_format.h"
#include "api/compute/cb_api.h"
#include "api/compute/compute_kernel_hw_startup.h"
