// Emulator version of api/debug/dprint.h: DPRINT << a << b << ENDL(); collects the text and hands
// each ENDL-terminated line to the run's log (RunReport.log), prefixed with core and kernel.
#pragma once

#include <sstream>
#include <string>

#include "emu/kernel_prelude.h"

namespace emu_dprint {
struct Endl {};
struct Stream {
    std::ostringstream os;
    ~Stream() {
        if (!os.str().empty()) emu::dprint(os.str());
    }
    template <typename T>
    Stream& operator<<(const T& v) {
        if constexpr (std::is_same_v<T, Endl>) {
            emu::dprint(os.str());
            os.str("");
        } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
            os << static_cast<int>(v);
        } else {
            os << v;
        }
        return *this;
    }
};
}  // namespace emu_dprint

inline emu_dprint::Endl ENDL() { return {}; }
#define DPRINT (emu_dprint::Stream{})
#define DPRINT_DATA0(x) x
#define DPRINT_DATA1(x) x
#define DPRINT_MATH(x) x
#define DPRINT_PACK(x) x
#define DPRINT_UNPACK(x) x
