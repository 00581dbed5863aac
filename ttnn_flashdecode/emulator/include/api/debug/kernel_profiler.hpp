// Emulator version of api/debug/kernel_profiler.hpp: DeviceZoneScopedN(name) opens an RAII zone
// that the runtime counts per core and name (RunReport.zones). No timestamps are kept.
#pragma once

#include "emu/kernel_prelude.h"

namespace kernel_profiler {
struct EmuZone {
    const char* name;
    explicit EmuZone(const char* n) : name(n) { emu::zone_enter(n); }
    ~EmuZone() { emu::zone_exit(name); }
    EmuZone(const EmuZone&) = delete;
    EmuZone& operator=(const EmuZone&) = delete;
};
}  // namespace kernel_profiler

#define EMU_ZONE_CAT2(a, b) a##b
#define EMU_ZONE_CAT(a, b) EMU_ZONE_CAT2(a, b)
#define DeviceZoneScopedN(name) ::kernel_profiler::EmuZone EMU_ZONE_CAT(emu_zone_, __LINE__)(name)
#define DeviceZoneScopedMainN(name) DeviceZoneScopedN(name)
#define DeviceZoneScopedMainChildN(name) DeviceZoneScopedN(name)
#define DeviceZoneScopedSumN1(name) DeviceZoneScopedN(name)
#define DeviceZoneScopedSumN2(name) DeviceZoneScopedN(name)
#define DeviceZoneSetCounter(counter) ((void)(counter))
