// Force-included first into every kernel the emulator builds: the prelude and the standard headers
// the kernel API includes, which are most of a kernel's front-end time. build.py precompiles this
// header once per compiler and flags (emulator cache, pch/); with the flags it was built for, g++
// reads the .gch instead, else this text. Nothing here depends on a kernel's args or role.
#pragma once

#include "emu/kernel_prelude.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
