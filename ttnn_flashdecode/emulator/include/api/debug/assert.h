// Emulator version of api/debug/assert.h: ASSERT(cond[, code]) is always checked (like a
// watcher-enabled build) and ends the run with an error naming the condition, file and line.
#pragma once

#include <string>

#include "emu/kernel_prelude.h"

#define ASSERT(condition, ...)                                                                     \
    do {                                                                                           \
        if (!(condition))                                                                          \
            emu::fail(std::string("ASSERT(" #condition ") failed at ") + __FILE__ + ":" +          \
                      std::to_string(__LINE__));                                                   \
    } while (0)
