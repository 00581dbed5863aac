// Emulator version of api/compile_time_args.h (TT-Metalium 0.81.1): same names and behaviour.
// KERNEL_COMPILE_TIME_ARGS comes from -DKERNEL_COMPILE_TIME_ARGS=v0,v1,...; the named map
// KERNEL_COMPILE_TIME_ARG_MAP ({"name", value} pairs) from the force-included generated header.
#ifndef TT_METAL_COMPILE_TIME_ARGS_H
#define TT_METAL_COMPILE_TIME_ARGS_H

#include <array>
#include <cstdint>
#ifdef KERNEL_COMPILE_TIME_ARG_MAP
#include <string_view>
#include <utility>
#endif

#ifndef FORCE_INLINE
#define FORCE_INLINE inline __attribute__((always_inline))
#endif

template <class T, class... Ts>
FORCE_INLINE constexpr std::array<T, sizeof...(Ts)> make_array(Ts... values) {
    return {T(values)...};
}

#ifndef KERNEL_COMPILE_TIME_ARGS
#define KERNEL_COMPILE_TIME_ARGS
#endif

constexpr auto kernel_compile_time_args = make_array<std::uint32_t>(KERNEL_COMPILE_TIME_ARGS);

template <uint32_t Idx>
constexpr uint32_t get_ct_arg() {
    static_assert(Idx < kernel_compile_time_args.size(), "Index out of range");
    return kernel_compile_time_args[Idx];
}

#ifdef KERNEL_COMPILE_TIME_ARG_MAP
namespace {
constexpr std::pair<std::string_view, uint32_t> named_args_map[] = {KERNEL_COMPILE_TIME_ARG_MAP};
}
namespace emu_detail {
// Not constexpr on purpose: reaching it in a constant expression is a compile error that names it.
inline uint32_t named_compile_time_arg_not_found_in_KERNEL_COMPILE_TIME_ARG_MAP() { return 0; }
}  // namespace emu_detail

constexpr uint32_t get_named_ct_arg(std::string_view name) {
    for (const auto& [arg_name, arg_value] : named_args_map) {
        if (name == arg_name) {
            return arg_value;
        }
    }
    return emu_detail::named_compile_time_arg_not_found_in_KERNEL_COMPILE_TIME_ARG_MAP();
}
constexpr uint32_t get_named_compile_time_arg_val(std::string_view name) { return get_named_ct_arg(name); }
#endif

#define get_compile_time_arg_val(arg_idx) get_ct_arg<arg_idx>()

#endif  // TT_METAL_COMPILE_TIME_ARGS_H
