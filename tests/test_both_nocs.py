"""K/V reads on both NoCs (issue 35, item 3; tt-metal #55898: a DRAM endpoint accepts about one read
request per 16.4 cycles per NoC on Blackhole, 6.8 on Wormhole, so small K/V pages on one NoC reach
only part of a channel). The program runs both data-movement kernels in DM_DYNAMIC_NOC and the
reader alternates its K/V reads between the NoCs (``attention_dataflow.hpp`` ``kv_read_noc``).

Measured on the emulator, per request kind: the K/V read requests (those issued inside the reader's
``fd-reader-kv`` zone, ``CoreStats.zone_noc_reads``) split 40-60% over the two NoCs, and the output
is bit for bit the one-NoC program's (the same kernels in DM_DEDICATED_NOC, where every read stays on
the reader's NoC): which NoC carries a read must not change a bit."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import ttnn

from bars import run_quiet
from ttnn_flashdecode import attention, last_report
from ttnn_flashdecode.op import plan as plan_module
from ttnn_flashdecode.op import program_factory

KV_ZONE = "fd-reader-kv"


def _bf16(rng, shape):
    return rng.standard_normal(shape, dtype=np.float32).astype(ml_dtypes.bfloat16)


def _one_noc_config(role: str):
    """The reader and writer as ttnn's Reader/WriterConfigDescriptor place them, dedicated mode."""
    return ttnn.ReaderConfigDescriptor() if role == "reader" else ttnn.WriterConfigDescriptor()


def _kv_reads_per_noc(report) -> dict[int, int]:
    """NoC -> K/V read requests of the whole run (reads issued inside the reader's K/V zone)."""
    reads = {0: 0, 1: 0}
    for stats in report.cores.values():
        for key, count in stats.zone_noc_reads.items():
            zone, noc = key.rsplit("/", 1)
            if zone == KV_ZONE:
                reads[int(noc)] += count
    return reads


def _run_both_ways(monkeypatch, call):
    """``call()``'s output and K/V reads per NoC as built (both NoCs), then its output with the one-NoC
    config; the program cache is cleared around the swap so each run builds its own descriptor."""
    plan_module.program_for.cache_clear()
    out = np.asarray(call())
    reads = _kv_reads_per_noc(last_report())
    with monkeypatch.context() as patch:
        patch.setattr(program_factory, "data_movement_config", _one_noc_config)
        plan_module.program_for.cache_clear()
        one_noc = np.asarray(call())
        one_noc_reads = _kv_reads_per_noc(last_report())
    plan_module.program_for.cache_clear()
    assert one_noc_reads[1] == 0 and one_noc_reads[0] == sum(reads.values()), (one_noc_reads, reads)
    return out, one_noc, reads


def _assert_split(reads: dict[int, int], what: str) -> None:
    total = reads[0] + reads[1]
    assert total > 0, what
    for noc in (0, 1):
        assert 0.4 <= reads[noc] / total <= 0.6, f"{what}: K/V reads per NoC {reads}"
    print(f"\n{what}: K/V read requests NoC 0 {reads[0]}, NoC 1 {reads[1]} ({100 * reads[1] / total:.1f}% on NoC 1)")


def _assert_same_bits(a: np.ndarray, b: np.ndarray, what: str) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype, what
    assert a.tobytes() == b.tobytes(), f"{what}: the output changed with the NoC choice"


def test_gqa_bfloat16_reads_kv_on_both_nocs(monkeypatch):
    rng = np.random.default_rng(1)
    q, k, v = _bf16(rng, (1, 1, 2, 8 * 128)), _bf16(rng, (2, 2, 2048, 128)), _bf16(rng, (2, 2, 2048, 128))
    out, one_noc, reads = _run_both_ways(monkeypatch, lambda: run_quiet(attention, q, k, v, cur_pos=[700, 2047], split=1))
    _assert_split(reads, "GQA bfloat16")
    _assert_same_bits(out, one_noc, "GQA bfloat16")


@pytest.mark.usefixtures("mock_cluster")  # ttnn's block-float packer needs tt-metal's context
def test_gqa_bfloat8_b_reads_kv_on_both_nocs(monkeypatch):
    rng = np.random.default_rng(2)
    cache = [ttnn.Tensor(rng.standard_normal((2, 2, 1024, 128), dtype=np.float32), ttnn.bfloat8_b,
                         layout=ttnn.TILE_LAYOUT) for _ in range(2)]
    q = ttnn.Tensor(_bf16(rng, (1, 1, 2, 8 * 128)).astype(np.float32), ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT)
    out, one_noc, reads = _run_both_ways(monkeypatch, lambda: _host(run_quiet(attention, q, *cache, cur_pos=[33, 1000])))
    _assert_split(reads, "GQA bfloat8_b")
    _assert_same_bits(out, one_noc, "GQA bfloat8_b")


def _host(tensor):
    from ttnn_flashdecode.op.operation import to_numpy

    return to_numpy(tensor) if isinstance(tensor, ttnn.Tensor) else tensor


@pytest.mark.parametrize("block_size", [16, 64])
def test_paged_reads_kv_on_both_nocs(monkeypatch, block_size):
    """Blocks of 64 positions, and of 16 (each position tile read as two half tiles)."""
    rng = np.random.default_rng(block_size)
    batch, capacity = 2, 512
    k, v = _bf16(rng, (batch, 2, capacity, 64)), _bf16(rng, (batch, 2, capacity, 64))
    per_user = capacity // block_size
    table = rng.permutation(batch * per_user).reshape(batch, per_user).astype(np.int32)
    paged = []
    for cache in (k, v):
        blocks = np.zeros((batch * per_user, 2, block_size, 64), ml_dtypes.bfloat16)
        for b in range(batch):
            for e in range(per_user):
                blocks[table[b, e]] = cache[b, :, e * block_size:(e + 1) * block_size]
        paged.append(blocks)
    q = _bf16(rng, (1, 1, batch, 8 * 64))
    out, one_noc, reads = _run_both_ways(monkeypatch, lambda: run_quiet(
        attention, q, *paged, cur_pos=[200, 511], page_table_tensor=table, split=1))
    _assert_split(reads, f"paged, blocks of {block_size}")
    _assert_same_bits(out, one_noc, f"paged, blocks of {block_size}")


def test_mla_values_from_keys_reads_the_latent_on_both_nocs(monkeypatch):
    """MLA: V is the latent K (read once, into CB K), so the split must come from K's own reads."""
    rng = np.random.default_rng(3)
    q = _bf16(rng, (1, 1, 32, 576))
    latent = _bf16(rng, (1, 1, 256, 576))
    out, one_noc, reads = _run_both_ways(monkeypatch, lambda: run_quiet(
        attention, q, latent, None, cur_pos=[255], q_layout="heads", head_dim_v=512, split=1))
    assert last_report().plan.residency.values_from_keys
    _assert_split(reads, "MLA (values from keys)")
    _assert_same_bits(out, one_noc, "MLA")


def test_split_k_reads_kv_on_both_nocs(monkeypatch):
    """Split-K over several cores: every slice alternates, the combine's L1 copies stay on the reader's NoC."""
    rng = np.random.default_rng(4)
    q, k, v = _bf16(rng, (1, 1, 1, 8 * 128)), _bf16(rng, (1, 1, 4096, 128)), _bf16(rng, (1, 1, 4096, 128))
    out, one_noc, reads = _run_both_ways(monkeypatch, lambda: run_quiet(attention, q, k, v, cur_pos=[4000], split=5))
    assert last_report().plan.split
    _assert_split(reads, "split-K x5")
    _assert_same_bits(out, one_noc, "split-K")


def test_rows_request_reads_kv_on_both_nocs(monkeypatch):
    """ROWS (speculative rows of one user against one K/V walk)."""
    rng = np.random.default_rng(5)
    q, k, v = _bf16(rng, (1, 1, 2 * 4, 4 * 64)), _bf16(rng, (2, 2, 512, 64)), _bf16(rng, (2, 2, 512, 64))
    out, one_noc, reads = _run_both_ways(monkeypatch, lambda: run_quiet(attention, q, k, v, cur_pos=[70, 500], rows=4))
    _assert_split(reads, "ROWS")
    _assert_same_bits(out, one_noc, "ROWS")


def test_the_program_runs_both_data_movement_kernels_in_dynamic_noc_mode():
    """tt-metal wants one NoC mode for both data-movement kernels of a core; the reader keeps ttnn's
    read NoC (0) and the writer its write NoC (1) as their default NoCs."""
    reader, writer = program_factory.data_movement_config("reader"), program_factory.data_movement_config("writer")
    assert reader.noc_mode == writer.noc_mode == ttnn.NOC_MODE.DM_DYNAMIC_NOC
    assert (reader.processor.value, reader.noc.value) == (1, 0)  # RISCV_1 on NoC 0 (NOC_0 is RISCV_0_default)
    assert (writer.processor.value, writer.noc.value) == (0, 1)


def test_every_dram_bank_hears_both_nocs():
    """#55898's rate is per DRAM endpoint per NoC, so each bank must be read on both NoCs. Page i
    lives in bank i % banks; with an even bank count (Wormhole 12, Blackhole 8), alternating by page
    parity alone would read every bank on one NoC (kv_read_noc also flips with each round of banks)."""
    rng = np.random.default_rng(6)
    q, k, v = _bf16(rng, (1, 1, 1, 4 * 128)), _bf16(rng, (1, 1, 2048, 128)), _bf16(rng, (1, 1, 2048, 128))
    run_quiet(attention, q, k, v, cur_pos=[2047], split=1)
    per_bank: dict[int, dict[int, int]] = {}
    for stats in last_report().cores.values():
        for key, count in stats.dram_bank_noc_reads.items():
            bank, noc = map(int, key.split("/"))
            per_bank.setdefault(bank, {0: 0, 1: 0})[noc] += count
    assert len(per_bank) == 12, per_bank  # Wormhole's banks
    for bank, reads in per_bank.items():
        share = reads[1] / (reads[0] + reads[1])
        assert 0.3 <= share <= 0.7, f"bank {bank}: reads per NoC {reads}"


PARTIAL_ZONE = "fd-writer-partial"


def _partial_bytes_per_noc(report) -> dict[int, int]:
    """NoC -> bytes of the split-K partials the writers sent up the combine tree (pass 2)."""
    written = {0: 0, 1: 0}
    for stats in report.cores.values():
        for key, count in stats.zone_noc_write_bytes.items():
            zone, noc = key.rsplit("/", 1)
            if zone == PARTIAL_ZONE:
                written[int(noc)] += count
    return written


@pytest.mark.parametrize("head_dim, heads, layout", [(128, 8, None), (576, 32, "heads")], ids=["gqa-d128", "mla-d576"])
def test_split_k_partials_go_up_the_tree_on_both_nocs(monkeypatch, head_dim, heads, layout):
    """A combine level's transfer is a child's partial (dim tiles + 1 float32 pages a row tile): its first
    half of pages on the writer's NoC, the rest on the other, so one link carries ~half (GQA d128: 3 of 5
    pages, MLA's 576: 10 of 19). Bit for bit the one-NoC program's output."""
    rng = np.random.default_rng(6)
    keywords = dict(q_layout=layout, head_dim_v=512) if layout else {}
    q = _bf16(rng, (1, 1, heads, head_dim) if layout else (1, 1, 1, heads * head_dim))
    k = _bf16(rng, (1, 1, 4096, head_dim))
    v = None if layout else _bf16(rng, (1, 1, 4096, head_dim))
    call = lambda: np.asarray(run_quiet(attention, q, k, v, cur_pos=[4000], split=5, **keywords))
    plan_module.program_for.cache_clear()
    out = call()
    split_written = _partial_bytes_per_noc(last_report())
    with monkeypatch.context() as patch:
        patch.setattr(program_factory, "data_movement_config", _one_noc_config)
        plan_module.program_for.cache_clear()
        one_noc = call()
        one_noc_written = _partial_bytes_per_noc(last_report())
    plan_module.program_for.cache_clear()
    pages = head_dim // 32 + 1
    assert max(split_written.values()) / sum(split_written.values()) == pytest.approx(-(-pages // 2) / pages)
    assert min(one_noc_written.values()) == 0 and sum(one_noc_written.values()) == sum(split_written.values())
    print(f"\npartials d{head_dim}: bytes per NoC {split_written} (one-NoC program: {one_noc_written})")
    _assert_same_bits(out, one_noc, f"split-K partials d{head_dim}")
