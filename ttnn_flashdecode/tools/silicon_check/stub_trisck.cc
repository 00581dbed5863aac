// Stands in for a TRISC (compute) kernel object, which upstream GCC cannot build (SFPI builtins),
// so tt-metal's JIT can finish linking and its host pipeline goes on. The compute kernel itself is
// checked separately, per thread, with -fsyntax-only (ttnn_flashdecode.silicon_check.compute_syntax).
#include <cstdint>
volatile uint32_t silicon_check_stub_word;
extern "C" [[gnu::section(".start")]] uint32_t _start() { silicon_check_stub_word = 1; return silicon_check_stub_word; }
