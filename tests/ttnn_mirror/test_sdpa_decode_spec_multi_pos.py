"""Mirror of tt-metal's ``tests/ttnn/unit_tests/operations/sdpa/test_sdpa_decode_spec_multi_pos.py``
(stored version at commit 28f5de04: single-row and batch-group sweeps), through our paged drop-in on
the emulator.

The peer's claim: ``spec_multi_pos_tiles=T`` (T speculative candidates folded onto one batch row
``[1, B, Tg*32, 256]``, each candidate's causal bound from ``cur_pos``) computes what the legacy
call computes with B*Tg pseudo-users on aliased page tables; both against a float32 per-candidate
reference at PCC 0.99, spec vs legacy at 0.9999 / 0.999 (straddling a k-chunk) and bit-exact where
the reduction trees match. Shapes: 1 KV head, 6 live Q heads per candidate (rows 6..31 padding),
head_dim 256, block_size 64, shuffled blocks, ``SDPAProgramConfig(the device's grid (8x8),
q_chunk_size=32, k_chunk_size, exp_approx_mode=False, max_cores_per_head_batch)``. The mirror
keeps every parametrisation and bar, our float64 reference in place of the peer's float32 one,
plus the rel-L2 bar of the op's default compute config (1e-2, tests/bars.py) against it.

Every case runs (issue 20) as one scan of each group's cache (a request of a row tile per candidate,
docs/design.md "Row-tile users"), bit for bit the legacy call's where the peer says so (the
candidates' bounds in one position tile: the same reduction tree), every one at the default config's rel-L2 bar, T=11's one-tile blocks on
one core at 30k (938 blocks) too: the running O and L are rounded to TF32 before each block reads
them back (attention_compute.cpp ``round_state_to_tf32``). Truncated instead, as the source
registers do, they drifted apart by ~1e-4 of rel-L2 a block (T=7 at 30k: 1.25e-2, T=11: up to
~3e-2). The peer's ``test_rejects_sliding_window`` is replaced: ttnn
refuses a window with spec positions, this op computes it (tests/test_spec_multi_pos.py). The
validation tests (``test_rejects_*``) expect a refusal of the bad call (ttnn raises
RuntimeError; the mirror takes RuntimeError or ValueError, without ttnn's message text).
Poison twins: ``test_spec_multi_pos_matches_batched`` with NaN / +-Inf past the last candidate's
position. Long sweep: the 32k-position cases (``s32k``, ``long_context*``) and, of
``test_spec_multi_pos_matches_batched``, T=7 and T=11 but their 8k straddling clean case (CI's budget). Scaled down: none.
Not mirrored: the ``use_module_device`` / ``expect_error`` fixtures (device housekeeping).
"""

from __future__ import annotations

import numpy as np
import pytest
import ttnn

from bars import MAX_RELATIVE_L2
from mirror import BF16 as NP_BF16, check, host, long_sweep, poison_outside, positions, program_config, reference
from mirror import to_numpy
from ttnn_flashdecode.op.reference import pcc, relative_l2
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode

BLOCK_SIZE, HEAD_DIM, NUM_Q_HEADS, TILE = 64, 256, 6, 32
SCALE = HEAD_DIM ** -0.5
SPEC_CONFIG = {4: (16, 128), 7: (4, 64), 11: (1, 32)}  # T: (max_cores_per_head_batch, k_chunk_size)
GROUP_CHUNK = 128
pytestmark = [pytest.mark.usefixtures("mock_cluster")]


def _config(max_cores, k_chunk_size):
    return program_config((8, 8), 32, k_chunk_size, exp_approx_mode=False, max_cores_per_head_batch=max_cores)


def _inputs(T, p, seq_len, seed, poison=False):
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((1, 1, seq_len, HEAD_DIM), dtype=np.float32).astype(NP_BF16).astype(np.float32)
    v = rng.standard_normal((1, 1, seq_len, HEAD_DIM), dtype=np.float32).astype(NP_BF16).astype(np.float32)
    cur_pos = [p + j for j in range(T)]
    want_k, want_v = k.astype(np.float64), v.astype(np.float64)
    if poison:
        poison_outside(k, 0, 0, cur_pos[-1], 0)
        poison_outside(v, 0, 0, cur_pos[-1], 1)
    blocks = seq_len // BLOCK_SIZE
    page_row = rng.permutation(blocks).astype(np.int32)
    paged_k = np.zeros((blocks, 1, BLOCK_SIZE, HEAD_DIM), np.float32)
    paged_v = np.zeros_like(paged_k)
    for virtual, physical in enumerate(page_row):
        paged_k[physical] = k[0, :, virtual * BLOCK_SIZE:(virtual + 1) * BLOCK_SIZE]
        paged_v[physical] = v[0, :, virtual * BLOCK_SIZE:(virtual + 1) * BLOCK_SIZE]
    q_heads = rng.standard_normal((T, NUM_Q_HEADS, HEAD_DIM), dtype=np.float32).astype(NP_BF16).astype(np.float32)
    q_batched = np.zeros((1, T, TILE, HEAD_DIM), np.float32)
    q_batched[0, :, :NUM_Q_HEADS] = q_heads
    # float64 per candidate: candidate j attends 0 .. cur_pos[j]
    want = np.concatenate([reference(q_heads[j].reshape(1, 1, NUM_Q_HEADS, HEAD_DIM), want_k, want_v, first=[0],
                                     last=[cur_pos[j]], scale=SCALE) for j in range(T)], axis=1)[0]
    return dict(k=host(paged_k), v=host(paged_v), page_row=page_row, q_batched=q_batched, cur_pos=cur_pos, want=want)


def _call(inp, q, rows, config, **keywords):
    table = np.repeat(inp["page_row"][None], rows, axis=0)
    out = paged_scaled_dot_product_attention_decode(host(q), inp["k"], inp["v"],
                                                    page_table_tensor=ttnn.Tensor(table, ttnn.int32),
                                                    cur_pos_tensor=positions(inp["cur_pos"]), scale=SCALE,
                                                    program_config=config, **keywords)
    return np.asarray(to_numpy(out), np.float64)


def _spec(inp, B, Tg, config):
    T = B * Tg
    out = _call(inp, inp["q_batched"].reshape(1, B, Tg * TILE, HEAD_DIM), B, config, spec_multi_pos_tiles=Tg)
    assert out.shape == (1, B, Tg * TILE, HEAD_DIM)
    return out.reshape(T, TILE, HEAD_DIM)[:, :NUM_Q_HEADS]


def _legacy(inp, T, config):
    out = _call(inp, inp["q_batched"], T, config)
    assert out.shape == (1, T, TILE, HEAD_DIM)
    return out[0, :, :NUM_Q_HEADS]


def _against(got, want, min_pcc, label, max_rel_l2=MAX_RELATIVE_L2):
    figures = pcc(got, want), relative_l2(got, want)
    assert np.isfinite(got).all() and figures[0] >= min_pcc and figures[1] <= max_rel_l2, f"{label}: {figures}"


def _check(T, p, seq_len, *, seed=0, config=None, pcc_ref_vs_spec=None, B=1, poison=False):
    Tg = T // B
    chunk = config.k_chunk_size if config is not None else SPEC_CONFIG[T][1]
    config = config if config is not None else _config(*SPEC_CONFIG[T])
    straddles = any((p + b * Tg) // max(chunk, 1) != (p + (b + 1) * Tg - 1) // max(chunk, 1) for b in range(B))
    pcc_ref_vs_spec = pcc_ref_vs_spec or (0.999 if straddles else 0.9999)
    inp = _inputs(T, p, seq_len, seed, poison)
    spec = _spec(inp, B, Tg, config)
    legacy = _legacy(inp, T, config)
    where = f"T={T} B={B} p={p} seq_len={seq_len}"
    assert pcc(legacy, spec) >= pcc_ref_vs_spec and np.allclose(legacy, spec, rtol=2e-2, atol=2e-2), where
    _against(spec, inp["want"], 0.99, f"spec vs float64 ({where})")
    _against(legacy, inp["want"], 0.99, f"legacy vs float64 ({where})")
    return spec, legacy


MATCHES = [((2048, 1024), "s2k_p1024"), ((2048, 1055), "s2k_p1055"), ((2048, 1023), "s2k_p1023"),
           ((2048, 1021), "s2k_p1021_straddle"), ((8192, 4093), "s8k_p4093_straddle")]


def _matches():
    """Every (T, seq_len, p, poison) of the peer's sweep; the default run keeps all of T=4 and, of T=7
    T=11 the 8k straddling case (T=11's one-tile-block bar), the rest in the long sweep (CI's
    25-minute budget)."""
    cases = []
    for T in (4, 7, 11):
        for (seq_len, p), name in MATCHES:
            for poison in (False, True):
                kept = T == 4 or (T == 11 and name == "s8k_p4093_straddle" and not poison)
                cases.append(pytest.param(T, seq_len, p, poison, id=f"T{T}-{name}-{'poison' if poison else 'clean'}",
                                          marks=() if kept else long_sweep))
    return cases


@pytest.mark.parametrize("T, seq_len, p, poison", _matches())
def test_spec_multi_pos_matches_batched(T, seq_len, p, poison):
    _check(T, p, seq_len, poison=poison)


@pytest.mark.parametrize("seq_len, p", [pytest.param(2048, 1024, id="s2k"),
                                        pytest.param(8192, 5000, id="s8k", marks=long_sweep)])
@pytest.mark.parametrize("T", [4, pytest.param(7, marks=long_sweep), 11], ids=["T4", "T7", "T11"])
def test_spec_multi_pos_is_bit_exact(T, seq_len, p):
    inp = _inputs(T, p, seq_len, seed=23)
    config = _config(*SPEC_CONFIG[T])
    spec = _spec(inp, 1, T, config)
    assert np.array_equal(spec, _legacy(inp, T, config))


@pytest.mark.parametrize("p", [pytest.param(30000, id="p30000", marks=long_sweep),
                               pytest.param(32639, id="p32639_straddle", marks=long_sweep)])
@pytest.mark.parametrize("T", [4, 7], ids=["T4", "T7"])
def test_spec_multi_pos_long_context(T, p):
    _check(T, p, 32768, seed=1)


@pytest.mark.parametrize("p", [pytest.param(30000, id="p30000", marks=long_sweep),
                               pytest.param(32639, id="p32639_straddle", marks=long_sweep)])
def test_spec_multi_pos_long_context_single_core(p):
    inp = _inputs(11, p, 32768, seed=17)
    config = _config(*SPEC_CONFIG[11])
    spec = _spec(inp, 1, 11, config)
    legacy = _legacy(inp, 11, config)
    assert pcc(legacy, spec) >= 0.9999 and np.allclose(legacy, spec, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("seq_len, p", [pytest.param(2048, 1024, id="s2k"),
                                        pytest.param(8192, 5000, id="s8k"),
                                        pytest.param(32768, 30000, id="s32k", marks=long_sweep)])
def test_spec_multi_pos_wide_reduction_split(seq_len, p):
    spec, legacy = _check(4, p, seq_len, seed=19, config=_config(64, 128), pcc_ref_vs_spec=0.999)
    want = _inputs(4, p, seq_len, 19)["want"]
    assert np.abs(spec - want).max() <= np.abs(legacy - want).max() * 1.5 + 1e-6


def test_spec_multi_pos_short_context():
    _check(4, 40, 512, seed=7)


def test_spec_multi_pos_first_block():
    _check(7, 5, 512, seed=11)


def test_spec_multi_pos_dynamic_chunk():
    _check(4, 1024, 2048, seed=13, config=_config(64, 0), pcc_ref_vs_spec=0.999)


def _reject(**change):
    T = 4
    inp = _inputs(T, 100, 512, seed=3)
    table_rows = change.pop("rows", 1)
    if "cur_pos" in change:
        inp["cur_pos"] = change.pop("cur_pos")
    _refused(lambda: _call(inp, inp["q_batched"].reshape(1, 1, T * TILE, HEAD_DIM), table_rows,
                           _config(*SPEC_CONFIG[T]), spec_multi_pos_tiles=change.pop("tiles", T), **change))


def _refused(call):
    """``call`` refuses its arguments (RuntimeError or ValueError); a NotImplementedError (a
    RuntimeError) is the keyword's refusal, not the check's, and propagates."""
    try:
        call()
    except NotImplementedError:
        raise
    except (RuntimeError, ValueError):
        return
    pytest.fail("the call was not refused")


def test_rejects_page_table_batch_mismatch():
    _reject(rows=4)


def test_rejects_q_row_count_mismatch():
    _reject(tiles=5)


def test_rejects_cur_pos_length_mismatch():
    _reject(cur_pos=[100, 101])


# The peer's test_rejects_sliding_window: ttnn refuses a window with spec_multi_pos_tiles; this op
# computes it (each candidate's window from its own bound): tests/test_spec_multi_pos.py's
# test_spec_with_a_sliding_window checks it against float64.


def test_legacy_path_unaffected():
    T = 4
    inp = _inputs(T, 1000, 2048, seed=5)
    _against(_legacy(inp, T, _config(*SPEC_CONFIG[T])), inp["want"], 0.99, "legacy path")


GROUPS = [((2048, 1024), "s2k_p1024"), ((2048, 1025), "s2k_p1025"), ((2048, 1054), "s2k_p1054"),
          ((2048, 1055), "s2k_p1055"), ((2048, 1020), "s2k_p1020_split_scan"), ((2048, 1021), "s2k_p1021_straddle"),
          ((8192, 4095), "s8k_p4095_straddle"), ((8192, 5000), "s8k_p5000"), ((32768, 30000), "s32k_p30000"),
          ((32768, 32700), "s32k_p32700")]


def _group_params(table, longest=8192):
    """CI keeps the caches up to ``longest`` positions; longer ones are in the long sweep."""
    return [pytest.param(*v, id=i, marks=long_sweep if v[0] > longest else ()) for v, i in table]


@pytest.mark.parametrize("seq_len, p", _group_params(GROUPS, longest=2048))  # 8k: in test_spec_multi_pos_groups_16_cores
def test_spec_multi_pos_groups_matches_batched(seq_len, p):
    _check(8, p, seq_len, seed=31, B=2, config=_config(55, GROUP_CHUNK), pcc_ref_vs_spec=0.999)


@pytest.mark.parametrize("seq_len, p", _group_params([((2048, 1024), "s2k"), ((2048, 1021), "s2k_straddle"),
                                                      ((8192, 5000), "s8k")]))
def test_spec_multi_pos_groups_16_cores(seq_len, p):
    _check(8, p, seq_len, seed=37, B=2, config=_config(16, GROUP_CHUNK))


@pytest.mark.parametrize("seq_len, p", _group_params([((2048, 1024), "s2k"), ((8192, 5000), "s8k"),
                                                      ((32768, 30000), "s32k")]))
def test_spec_multi_pos_groups_is_bit_exact(seq_len, p):
    inp = _inputs(8, p, seq_len, seed=43)
    config = _config(8, GROUP_CHUNK)
    spec = _spec(inp, 2, 4, config)
    assert np.array_equal(spec, _legacy(inp, 8, config))


def test_spec_multi_pos_groups_dynamic_chunk():
    _check(8, 60, 512, seed=47, B=2, config=_config(16, 0), pcc_ref_vs_spec=0.999)


def test_spec_multi_pos_groups_first_block():
    _check(8, 5, 512, seed=53, B=2, config=_config(16, GROUP_CHUNK))


@pytest.mark.parametrize("B, Tg", [pytest.param(4, 2, id="B4_Tg2"), pytest.param(2, 7, id="B2_Tg7")])
def test_spec_multi_pos_group_shapes(B, Tg):
    _check(B * Tg, 1024, 2048, seed=59, B=B, config=_config(4, 64), pcc_ref_vs_spec=0.999)


@pytest.mark.parametrize("k_chunk_size", [0, 128], ids=["B3_Tg4_dyn_chunk", "B3_Tg4_chunk128"])
@pytest.mark.parametrize("seq_len, p", _group_params([((2048, 1024), "s2k_p1024"), ((2048, 1020), "s2k_p1020_split_scan"),
                                                      ((2048, 1021), "s2k_p1021_straddle"),
                                                      ((32768, 30000), "s32k_p30000")]))
def test_spec_groups_b3_tg4_full_grid(seq_len, p, k_chunk_size):
    _check(12, p, seq_len, seed=67, B=3, config=_config(36, k_chunk_size), pcc_ref_vs_spec=0.999)


def test_rejects_group_cur_pos_length():
    B, Tg = 2, 4
    inp = _inputs(B * Tg, 100, 512, seed=61)
    inp["cur_pos"] = list(range(Tg))
    _refused(lambda: _call(inp, inp["q_batched"].reshape(1, B, Tg * TILE, HEAD_DIM), B, _config(16, GROUP_CHUNK),
                           spec_multi_pos_tiles=Tg))
