"""The emulator's two NoCs: each data-movement kernel's NoC and mode come from its config, a barrier
covers only the NoC it names, and what tt-metal forbids is refused (a dedicated kernel on the other
NoC, two data-movement kernels of a core in different modes or, dedicated, on one NoC)."""

from __future__ import annotations

import pytest

ttnn = pytest.importorskip("ttnn")

from ttnn_flashdecode.emulator import Emulator, EmulatorError  # noqa: E402

TILE_BYTES = 2048

READ_ON_BOTH_NOCS = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    const uint32_t src = get_arg_val<uint32_t>(0);
    const InterleavedAddrGen<true> pages{.bank_base_address = src, .page_size = 2048};
    cb_reserve_back(0, 2);
    const uint32_t dst = get_write_ptr(0);
    noc_async_read(pages.get_noc_addr(0, 0, 0), dst, 2048, 0);
    noc_async_read(pages.get_noc_addr(1, 0, 1), dst + 2048, 2048, 1);
    noc_async_read_barrier(0);
#ifdef BARRIER_BOTH
    noc_async_read_barrier(1);
#endif
    cb_push_back(0, 2);
}
"""

EMPTY = "void kernel_main() {}\n"


@pytest.fixture(scope="module")
def emu():
    return Emulator(arch="wormhole_b0")


def _core():
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(0, 0))])


def _config(processor: int, noc: int, dynamic: bool):
    return ttnn.DataMovementConfigDescriptor(
        processor=ttnn.DataMovementProcessor.RISCV_1 if processor else ttnn.DataMovementProcessor.RISCV_0,
        noc=ttnn.NOC.NOC_1 if noc else ttnn.NOC.NOC_0,
        noc_mode=ttnn.NOC_MODE.DM_DYNAMIC_NOC if dynamic else ttnn.NOC_MODE.DM_DEDICATED_NOC)


def _program(emu, reader_config, *, defines=(), writer_config=None, writer_source=EMPTY):
    src = emu.allocate_dram(2, TILE_BYTES)
    kernels = [ttnn.KernelDescriptor(
        kernel_source=READ_ON_BOTH_NOCS, source_type=ttnn.KernelDescriptor.SourceType.SOURCE_CODE,
        core_ranges=_core(), compile_time_args=[], defines=list(defines), runtime_args=[((0, 0), [src.address])],
        config=reader_config)]
    if writer_config is not None:
        kernels.append(ttnn.KernelDescriptor(
            kernel_source=writer_source, source_type=ttnn.KernelDescriptor.SourceType.SOURCE_CODE,
            core_ranges=_core(), compile_time_args=[], runtime_args=[], config=writer_config))
    fmt = ttnn.CBFormatDescriptor(buffer_index=0, data_format=ttnn.bfloat16, page_size=TILE_BYTES)
    cbs = [ttnn.CBDescriptor(total_size=2 * TILE_BYTES, core_ranges=_core(), format_descriptors=[fmt])]
    return ttnn.ProgramDescriptor(kernels=kernels, cbs=cbs, semaphores=[]), src


def test_dynamic_kernel_reads_on_both_nocs_and_counts_each(emu):
    program, src = _program(emu, _config(1, 0, True), defines=[("BARRIER_BOTH", "1")],
                            writer_config=_config(0, 1, True))
    stats = emu.run(program).cores[(0, 0)]
    emu.free(src)
    assert stats.noc_read_requests == {0: 1, 1: 1}
    assert stats.noc_read_request_bytes == {0: TILE_BYTES, 1: TILE_BYTES}
    assert stats.calls["noc_async_read_barrier"] == 2


def test_barrier_on_one_noc_leaves_the_other_nocs_reads_in_flight(emu):
    program, src = _program(emu, _config(1, 0, True), writer_config=_config(0, 1, True))
    with pytest.raises(EmulatorError, match=r"cb_push_back\(cb=0, 2\) pushes L1 .* still filling .* expected this "
                                            r"kernel's noc_async_read_barrier before this \(the transfer travels on "
                                            r"NoC 1"):
        emu.run(program)
    emu.free(src)


def test_dedicated_kernel_on_the_other_noc_is_refused(emu):
    program, src = _program(emu, ttnn.ReaderConfigDescriptor(), defines=[("BARRIER_BOTH", "1")])
    with pytest.raises(EmulatorError, match=r"on NoC 1 from a DM_DEDICATED_NOC kernel on NoC 0"):
        emu.run(program)
    emu.free(src)


def test_mixed_noc_modes_on_a_core_are_refused(emu):
    program, src = _program(emu, _config(1, 0, True), defines=[("BARRIER_BOTH", "1")],
                            writer_config=_config(0, 1, False))
    with pytest.raises(EmulatorError, match=r"need the same noc_mode"):
        emu.run(program)
    emu.free(src)


def test_dedicated_kernels_sharing_a_noc_are_refused(emu):
    program, src = _program(emu, _config(1, 0, False), writer_config=_config(0, 0, False))
    with pytest.raises(EmulatorError, match=r"both DM_DEDICATED_NOC on NoC 0"):
        emu.run(program)
    emu.free(src)
