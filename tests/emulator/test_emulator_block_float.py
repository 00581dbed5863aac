"""Block-float CBs (Bfp8_b, Bfp4_b) through the driver: pages packed by ttnn decode in the emulator to
exactly ttnn's own dequantized values, and misuse is refused.

Reader (DRAM -> c_0 in the block-float format) -> compute_copy_tiles.cpp (copy_tile through DST) ->
writer (c_16, Float32) on one emulated core. The hardware edge cases the packer never emits
(sign-only datum, exponent wrap) are in compute_unit.cpp's block_float_decode_follows_the_unpacker.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ttnn = pytest.importorskip("ttnn")

from ttnn_flashdecode.op import tiles  # noqa: E402
from ttnn_flashdecode.emulator import Emulator, EmulatorError, tensor_accessor_compile_time_args  # noqa: E402

KERNELS = Path(__file__).parent / "kernels"
DTYPES = {"bfloat8_b": ttnn.bfloat8_b, "bfloat4_b": ttnn.bfloat4_b}


@pytest.fixture(scope="module")
def emu():
    return Emulator(arch="wormhole_b0")


def _crs(core=(0, 0)):
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(*core), ttnn.CoreCoord(*core))])


def _hard_values(seed: int = 11) -> np.ndarray:
    """[64, 96] float32 (6 tiles). Face rows (16 data sharing one exponent) hold the hard cases."""
    rng = np.random.default_rng(seed)
    # Rows 32..63: every element its own binade in [2^-30, 2^30): most of a face row flushes.
    x = (rng.standard_normal((64, 96)) * np.exp2(rng.integers(-30, 30, (64, 96)))).astype(np.float32)
    x[0, :16] = 3.0 * 2.0 ** -np.arange(16)  # 16 binades in one face row: bfp8 keeps 7, bfp4 3
    x[0, 16:32] = -x[0, :16]
    x[1, :] = 0.0  # a row of zeros: exponent 0
    x[2, :16] = [-0.0, -1e-3, -1e-30, -1.0, 0.0, -2.0**-7, -2.0**-8, 5.0, -5.0, 0, 0, -0.0, 1e-9, -1e-9, 4.0, -4.0]
    x[3, :] = rng.uniform(-3.4e38, 3.4e38, 96)  # near float max (exponent 254)
    x[4, :16] = 2.0**-126 * (1 + np.arange(16) / 16)  # smallest normals (exponent 1)
    x[5, :16] = [1.999, 1.0, 0.999, 1.9, 1.99, 0.5, 0.25, 1.5, -1.999, -1.0, 1.25, 1.75, 1.875, 1.9375, 0.0, 1.0]
    x[6, :] = 1.0 + (np.arange(96) % 16 + 0.5) * 2.0**-6  # exact RNE ties for bfp8
    x[7, :16] = 1e-39  # float denormals: the packer flushes them
    x[7, 16:32] = -1e-40
    return x


def _run_copy(emu, pages: np.ndarray, dtype, *, fp32: bool, startup_cb: int = 0) -> np.ndarray:
    """Copies the block-float `pages` through the emulator; returns c_16's Float32 pages [n, 4096] uint8."""
    core, cores = (0, 0), _crs()
    n, page = pages.shape
    src = emu.allocate_dram(num_pages=n, page_bytes=page)
    dst = emu.allocate_dram(num_pages=n, page_bytes=4096)
    emu.write_pages(src, pages)
    reader = ttnn.KernelDescriptor(
        kernel_source=str(KERNELS / "reader_copy.cpp"), core_ranges=cores,
        compile_time_args=tensor_accessor_compile_time_args(src), named_compile_time_args=[("cb", 0), ("block", 1)],
        runtime_args=[(core, [src.address, n])], config=ttnn.ReaderConfigDescriptor())
    writer = ttnn.KernelDescriptor(
        kernel_source=str(KERNELS / "writer_copy.cpp"), core_ranges=cores,
        compile_time_args=tensor_accessor_compile_time_args(dst), named_compile_time_args=[("cb", 16), ("block", 1)],
        runtime_args=[(core, [dst.address, n])], config=ttnn.WriterConfigDescriptor())
    cc = ttnn.ComputeConfigDescriptor()
    cc.fp32_dest_acc_en = fp32
    compute = ttnn.KernelDescriptor(
        kernel_source=str(KERNELS / "compute_copy_tiles.cpp"), core_ranges=cores,
        named_compile_time_args=[("n", n), ("startup_cb", startup_cb)], config=cc)

    def cb(i, fmt, size, pages=2):
        f = ttnn.CBFormatDescriptor(buffer_index=i, data_format=fmt, page_size=size)
        return ttnn.CBDescriptor(total_size=pages * size, core_ranges=cores, format_descriptors=[f])

    cbs = [cb(0, dtype, page), cb(1, ttnn.bfloat16, 2048, pages=1), cb(16, ttnn.float32, 4096)]
    try:
        emu.run(ttnn.ProgramDescriptor(kernels=[reader, compute, writer], cbs=cbs, semaphores=[]))
        return emu.read_pages(dst)
    finally:
        emu.free(src)
        emu.free(dst)


@pytest.mark.parametrize("fp32", [False, True], ids=["bf16_dst", "fp32_dst"])
@pytest.mark.parametrize("name", sorted(DTYPES))
def test_emulator_decodes_ttnn_pages_like_ttnn(emu, mock_cluster, name, fp32):
    """Every datum, bit for bit (sign of zero included), equals ttnn.Tensor(x, dtype).to_numpy()."""
    x = _hard_values()
    tensor = ttnn.Tensor(x, DTYPES[name], layout=ttnn.TILE_LAYOUT)
    want = tensor.to_numpy()
    # The inputs are as hard as intended: flushes, zero rows, huge values, RNE ties.
    assert (want[0, 10:16] == 0).all() and (want[1] == 0).all() and (want[7, :32] == 0).all()
    assert np.abs(want[3]).max() > 1e38
    got = tiles.from_tile_bytes(_run_copy(emu, tiles.to_block_float_tile_bytes(tensor, name), DTYPES[name], fp32=fp32),
                                x.shape, np.float32)
    bad = np.argwhere(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, f"{len(bad)} data differ, first at {tuple(bad[0])}: emulator {got[tuple(bad[0])]!r}, ttnn {want[tuple(bad[0])]!r}"


def test_unpacker_format_mismatch_is_refused(emu, mock_cluster):
    """compute_kernel_hw_startup on a Float16_b CB, then copy_tile from the Bfp4_b CB without a reconfig."""
    pages = tiles.to_block_float_tile_bytes(_hard_values()[:32, :32], "bfloat4_b")
    with pytest.raises(EmulatorError) as ei:
        _run_copy(emu, pages, ttnn.bfloat4_b, fp32=False, startup_cb=1)
    msg = str(ei.value)
    for needle in ["core (0,0)", "copy_tile", "c_0 holds Bfp4_b", "configured for Float16_b",
                   "reconfig_data_format_srca(c_0)"]:
        assert needle in msg, msg
