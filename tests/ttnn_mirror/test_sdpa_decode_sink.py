"""Mirror of tt-metal's nightly ``tests/ttnn/nightly/unit_tests/operations/sdpa/test_sdpa_decode_sink.py``
(stored version at commit 0cb8f4da; its runner ``run_sdpa_decode_sink_impl`` in sdpa_test_utils.py),
through our drop-in on the emulator.

The peer's call: Q ``[1, batch, nh, dim]`` (the last row of a random prefill), K / V ``[batch, nkv,
seq_len, dim]`` in ``dtype``, every user at ``seq_len - 1`` (``cur_pos_tensor``), ``scale=dim**-0.5``,
gpt-oss-like sinks (unit normal x 4 per Q head) passed as ttnn's ``[nh, 32]`` tile (column 0)
DIVIDED BY ``scale`` (ttnn multiplies the sink by ``scale``: tt-metal #55337), bfloat16;
``SDPAProgramConfig(grid = the device's (8x8), q_chunk_size=0, k_chunk_size=128,
exp_approx_mode=False)``, HiFi4 with bf16 DST. Bar: the peer's PCC (0.999; 0.98 for bfloat4_b
K/V) and the rel-L2 bar of that compute config (mirror.py). The reference: our float64 one, the
sink logit being ``scale * bfloat16(sink / scale)`` (what the tensor stores, times scale).

Poison twins: the peer's position (``seq_len - 1``) leaves no slot unread, so the twin places every
user at ``3 * seq_len // 4 - 5`` (a position inside a tile) with NaN / +-Inf in every slot past it.

Skipped as the peer skips: ``nkv > 1`` with a bfloat8_b Q (3 of 18). Scaled down: none. The default
run keeps the gpt-oss 20B shape ``(1, 256, 32, 4, 64)`` and ``(32, 128, 8, 8, 128)`` with
bfloat8_b K/V, clean and poisoned; every other case (each under a minute) is in the long sweep. Not mirrored: ``ttnn.plus_one`` on the positions and the program-cache count
(device features; the peer runs one iteration, so the maths is one call); ``skip_for_blackhole``.
"""

from __future__ import annotations

import numpy as np
import pytest
import ttnn

from mirror import BF16 as NP_BF16, check, compute_config, default_part, host, program_config, reference, rel_l2_bar
from mirror import poison_outside, positions, stored
from ttnn_flashdecode.transformer import scaled_dot_product_attention_decode

SHAPES = [(1, 256, 32, 4, 64), (64, 1024, 32, 8, 64), (16, 1024, 32, 1, 64), (32, 256, 32, 1, 128),
          (32, 128, 8, 1, 128), (32, 128, 8, 8, 128)]
DTYPES = [(ttnn.bfloat16, ttnn.bfloat8_b, "q_bf16-kv_bfp8"), (ttnn.bfloat16, ttnn.bfloat4_b, "q_bf16-kv_bfp4"),
          (ttnn.bfloat8_b, ttnn.bfloat8_b, "q_bfp8-kv_bfp8")]
HEAVY = {(64, 1024, 32, 8, 64), (16, 1024, 32, 1, 64)}


def _cases():
    cases, keep = [], set()
    for shape in SHAPES:
        for q_dtype, dtype, dtype_id in DTYPES:
            if shape[3] > 1 and q_dtype != ttnn.bfloat16:
                continue  # the peer: "Only bfloat16 is supported for multi-head queries"
            for poison in (False, True):
                name = f"{'x'.join(map(str, shape))}-{dtype_id}-{'poison' if poison else 'clean'}"
                cases.append(pytest.param(*shape, q_dtype, dtype, poison, id=name))
                if dtype_id == "q_bf16-kv_bfp8" and shape in {(1, 256, 32, 4, 64), (32, 128, 8, 8, 128)}:
                    keep.add(name)
    return default_part(cases, keep)


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("batch, seq_len, nh, nkv, dim, q_dtype, dtype, poison", _cases())
def test_sdpa_decode(batch, seq_len, nh, nkv, dim, q_dtype, dtype, poison):
    rng = np.random.default_rng(213919)
    q = rng.standard_normal((1, batch, nh, dim), dtype=np.float32)
    k = rng.standard_normal((batch, nkv, seq_len, dim), dtype=np.float32)
    v = rng.standard_normal((batch, nkv, seq_len, dim), dtype=np.float32)
    sink = rng.standard_normal(nh) * 4.0
    scale = dim ** -0.5
    tt_sink_in = np.zeros((nh, ttnn.TILE_SIZE), np.float32)
    tt_sink_in[:, 0] = sink / scale  # the peer: "GPT-OSS expects sink to not be scaled"
    logits = scale * tt_sink_in[:, 0].astype(NP_BF16).astype(np.float64)
    position = 3 * seq_len // 4 - 5 if poison else seq_len - 1
    want = reference(stored(q, q_dtype), stored(k, dtype), stored(v, dtype), first=[0] * batch,
                     last=[position] * batch, scale=scale, sink=logits)
    if poison:
        for u in range(batch):
            poison_outside(k, u, 0, position, u)
            poison_outside(v, u, 0, position, u + 1)
    compute = compute_config("HiFi4")
    out = scaled_dot_product_attention_decode(
        host(q, q_dtype), host(k, dtype), host(v, dtype), cur_pos_tensor=positions([position] * batch), scale=scale,
        attention_sink=host(tt_sink_in), program_config=program_config((8, 8), 0, 128, exp_approx_mode=False),
        compute_kernel_config=compute, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    check(out, want, min_pcc=0.98 if dtype == ttnn.bfloat4_b else 0.999, max_rel_l2=rel_l2_bar(compute),
          label=f"sink {batch}x{nh}/{nkv} s={seq_len} {dtype}")
