// Emulator version of api/debug/dprint.h (tt-metal 0.81): DPRINT(format, args...) with fmt-style
// "{}" placeholders (a "{:spec}" is printed as "{}"; "{{" / "}}" are literal braces), as the
// installed header's alias for DEVICE_PRINT. Each "\n"-terminated line goes to the run's log
// (RunReport.log), prefixed with core and kernel. The legacy stream style (`DPRINT << ...
// << ENDL()`) is gone from tt-metal (a static_assert there); here DPRINT is a function-like macro,
// so that style does not compile either.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

#include "emu/kernel_prelude.h"

namespace emu_dprint {

class Printer {
   public:
    ~Printer() { flush(); }
    template <typename... Args>
    void print(const char* format, const Args&... args) {
        std::string pieces[sizeof...(Args) + 1];
        std::size_t count = 0;
        ((pieces[count++] = text(args)), ...);
        std::size_t next = 0;
        for (const char* c = format; *c; ++c) {
            if (c[0] == '{' && c[1] == '{') {
                line_ += '{';
                ++c;
            } else if (c[0] == '}' && c[1] == '}') {
                line_ += '}';
                ++c;
            } else if (c[0] == '{') {
                const char* close = c;
                while (*close && *close != '}') ++close;
                if (!*close) emu::fail("DPRINT: unterminated '{' in the format string");
                if (next >= count) emu::fail("DPRINT: more '{}' placeholders than arguments");
                line_ += pieces[next++];
                c = close;
            } else if (c[0] == '\n') {
                emu::dprint(line_);
                line_.clear();
            } else {
                line_ += c[0];
            }
        }
        if (next != count) emu::fail("DPRINT: more arguments than '{}' placeholders");
    }

   private:
    template <typename T>
    static std::string text(const T& value) {
        std::ostringstream os;
        if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
            os << static_cast<int>(value);
        } else {
            os << value;
        }
        return os.str();
    }
    void flush() {
        if (!line_.empty()) emu::dprint(line_);
        line_.clear();
    }
    std::string line_;
};

}  // namespace emu_dprint

#define DPRINT(format, ...) (emu_dprint::Printer{}.print(format, ##__VA_ARGS__))
#define DPRINT_DATA0(format, ...) DPRINT(format, ##__VA_ARGS__)
#define DPRINT_DATA1(format, ...) DPRINT(format, ##__VA_ARGS__)
#define DPRINT_MATH(format, ...) DPRINT(format, ##__VA_ARGS__)
#define DPRINT_PACK(format, ...) DPRINT(format, ##__VA_ARGS__)
#define DPRINT_UNPACK(format, ...) DPRINT(format, ##__VA_ARGS__)
