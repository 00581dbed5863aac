"""Issue 25 item 2: every launch fills each core's whole L1 with a NaN pattern, so a kernel that reads
L1 it never wrote sees NaN, never what an earlier run (or an earlier test) left there."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ttnn = pytest.importorskip("ttnn")

from ttnn_flashdecode.emulator import Emulator, EmulatorError, tensor_accessor_compile_time_args  # noqa: E402

KERNELS = Path(__file__).parent / "kernels"
TILE_BYTES = 2048
CORE = (0, 0)
L1_POISON = 0xFFC1  # documented value: bf16 NaN (sign 1, exponent 255, mantissa 0x41)
IN_FLIGHT_POISON = 0xFFAD

# Fills CB 0's first page with DRAM page 0 and L1 [l1_addr, +2048) with DRAM page 1: the bytes the
# poison reader below reads, left behind for the next run.
DIRTY = r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    const InterleavedAddrGen<true> src{.bank_base_address = get_arg_val<uint32_t>(0), .page_size = 2048};
    const uint32_t l1_addr = get_arg_val<uint32_t>(1);
    cb_reserve_back(0, 1);
    noc_async_read(src.get_noc_addr(0), get_write_ptr(0), 2048);
    noc_async_read(src.get_noc_addr(1), l1_addr, 2048);
    noc_async_read_barrier();
    cb_push_back(0, 1);
}
"""


def _crs(*cores):
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(*c), ttnn.CoreCoord(*c)) for c in cores])


def _cb(cores=(CORE,)):
    fmt = ttnn.CBFormatDescriptor(buffer_index=0, data_format=ttnn.bfloat16, page_size=TILE_BYTES)
    return ttnn.CBDescriptor(total_size=2 * TILE_BYTES, core_ranges=_crs(*cores), format_descriptors=[fmt])


def _high_l1(emu):
    """An L1 range far above every CB of these programs: the last page of L1."""
    return emu.spec.l1_bytes - TILE_BYTES


def _dirty_program(emu, src, cores=(CORE,)):
    k = ttnn.KernelDescriptor(kernel_source=DIRTY, source_type=ttnn.KernelDescriptor.SourceType.SOURCE_CODE,
                              core_ranges=_crs(*cores), runtime_args=[(c, [src.address, _high_l1(emu)]) for c in cores],
                              config=ttnn.ReaderConfigDescriptor())
    return ttnn.ProgramDescriptor(kernels=[k], cbs=[_cb(cores)], semaphores=[])


def _unwritten_program(emu, dst):
    k = ttnn.KernelDescriptor(kernel_source=str(KERNELS / "writer_unwritten.cpp"), core_ranges=_crs(CORE),
                              compile_time_args=tensor_accessor_compile_time_args(dst),
                              named_compile_time_args=[("cb", 0)],
                              runtime_args=[(CORE, [dst.address, _high_l1(emu)])],
                              config=ttnn.WriterConfigDescriptor())
    return ttnn.ProgramDescriptor(kernels=[k], cbs=[_cb()], semaphores=[])


def _read_unwritten(emu, stale_byte):
    """Run the poison reader into a DRAM buffer pre-filled with ``stale_byte``; its two pages as uint16."""
    dst = emu.allocate_dram(2, TILE_BYTES)
    try:
        emu.write_pages(dst, np.full(2 * TILE_BYTES, stale_byte, dtype=np.uint8))
        emu.run(_unwritten_program(emu, dst))
        return emu.read_pages(dst).view(np.uint16).reshape(2, -1)
    finally:
        emu.free(dst)


def test_the_poison_halves_are_nan_as_bf16_and_as_fp32():
    emu = Emulator(arch="wormhole_b0")
    assert (emu.l1_poison, emu.in_flight_poison) == (L1_POISON, IN_FLIGHT_POISON)
    for half in (emu.l1_poison, emu.in_flight_poison):
        as_bf16 = np.array([half], dtype=np.uint32) << 16
        assert np.isnan(as_bf16.view(np.float32)).all()
        assert np.isnan(np.array([half, half], dtype=np.uint16).view(np.float32)).all()


def test_unwritten_l1_reads_as_poison_in_consecutive_runs_whatever_ran_before():
    emu = Emulator(arch="wormhole_b0")
    src = emu.allocate_dram(2, TILE_BYTES)
    data = np.random.default_rng(25).integers(0, 256, 2 * TILE_BYTES, dtype=np.uint8)
    emu.write_pages(src, data)
    cb0 = emu.spec.unreserved_base  # CB 0 is the first CB in both programs: the same L1 bytes

    # An earlier run leaves its data exactly where the poison reader will look ...
    emu.run(_dirty_program(emu, src))
    np.testing.assert_array_equal(emu.peek_l1(CORE, cb0, TILE_BYTES), data[:TILE_BYTES])
    np.testing.assert_array_equal(emu.peek_l1(CORE, _high_l1(emu), TILE_BYTES), data[TILE_BYTES:])

    # ... and two consecutive launches still read only the poison, each into a fresh stale buffer.
    for stale_byte in (0x00, 0x5A):
        pages = _read_unwritten(emu, stale_byte)
        assert pages.shape == (2, TILE_BYTES // 2)
        assert set(pages.ravel().tolist()) == {L1_POISON}
        assert np.isnan(pages.view(np.float32)).all()
        assert np.isnan((pages.astype(np.uint32) << 16).view(np.float32)).all()  # every bf16 is NaN
    # The last launch wrote no L1 and set no semaphore: all of it, firmware region included, is poison.
    assert set(emu.peek_l1(CORE, 0, emu.spec.l1_bytes).view(np.uint16).tolist()) == {L1_POISON}
    emu.free(src)


def test_semaphores_keep_their_initial_values_over_the_poison():
    """The runtime's own placements are written after the poison: a semaphore reads its initial value."""
    emu = Emulator(arch="wormhole_b0")
    out = emu.allocate_dram(1, 32)
    k = ttnn.KernelDescriptor(
        kernel_source=r"""
#include "api/dataflow/dataflow_api.h"
void kernel_main() {
    const InterleavedAddrGen<true> dst{.bank_base_address = get_arg_val<uint32_t>(0), .page_size = 32};
    noc_async_write(get_semaphore(1), dst.get_noc_addr(0), 32);  // slot 1 (16 bytes) and slot 2
    noc_async_write_barrier();
}
""", source_type=ttnn.KernelDescriptor.SourceType.SOURCE_CODE, core_ranges=_crs(CORE),
        runtime_args=[(CORE, [out.address])], config=ttnn.WriterConfigDescriptor())
    sem = ttnn.SemaphoreDescriptor(id=1, core_ranges=_crs(CORE), initial_value=0x12345678)
    for _ in range(2):
        emu.write_pages(out, np.zeros(32, dtype=np.uint8))
        emu.run(ttnn.ProgramDescriptor(kernels=[k], cbs=[], semaphores=[sem]))
        words = emu.read_pages(out).view(np.uint32)
        assert words[0] == 0x12345678
        assert set(words[1:].tolist()) == {L1_POISON << 16 | L1_POISON}  # rest of slot 1, slot 2: never set


def test_poison_off_zeroes_l1_at_every_launch():
    """Emulator(poison_l1=False): the same reads give zeros, again never an earlier run's data."""
    emu = Emulator(arch="wormhole_b0", poison_l1=False)
    src = emu.allocate_dram(2, TILE_BYTES)
    emu.write_pages(src, np.full(2 * TILE_BYTES, 0x77, dtype=np.uint8))
    emu.run(_dirty_program(emu, src))
    assert set(emu.peek_l1(CORE, emu.spec.unreserved_base, TILE_BYTES).tolist()) == {0x77}
    for stale_byte in (0x5A, 0xA5):
        assert set(_read_unwritten(emu, stale_byte).ravel().tolist()) == {0}
    emu.free(src)


def test_peek_l1_refuses_a_core_the_last_run_did_not_use():
    """A core of an earlier, larger run keeps its pooled L1 buffer, but peek_l1 no longer shows it."""
    emu = Emulator(arch="wormhole_b0")
    src = emu.allocate_dram(2, TILE_BYTES)
    emu.write_pages(src, np.full(2 * TILE_BYTES, 0x33, dtype=np.uint8))
    emu.run(_dirty_program(emu, src, cores=[(0, 0), (1, 0)]))
    assert set(emu.peek_l1((1, 0), _high_l1(emu), TILE_BYTES).tolist()) == {0x33}
    emu.run(_dirty_program(emu, src))  # core (0, 0) only
    with pytest.raises(EmulatorError, match=r"L1 of core \(1, 0\) .*the core was not in the last run"):
        emu.peek_l1((1, 0), _high_l1(emu), TILE_BYTES)
    emu.free(src)
