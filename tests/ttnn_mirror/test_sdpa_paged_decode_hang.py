"""Mirror of tt-metal's nightly ``tests/ttnn/nightly/unit_tests/operations/sdpa/test_sdpa_paged_decode_hang.py``
(stored version at commit 6f9e2644; tt-metal #42917, gpt-oss-120b's paged decode hang), through our
paged drop-in on the emulator.

The peer's call, production shapes per chip: B=32 users, 8 Q heads, 1 KV head, head_dim 64,
block_size 64, k_chunk_size 128, cur_pos 643 (a partial last page) for every user, 12 pages, every
user's page table ``arange(12)`` (all users read the same pages, whose K/V are identical across
users), zeros past cur_pos, ``SDPAProgramConfig((8, 8), q_chunk_size=8, k_chunk_size=128)``, HiFi4
with bf16 DST, bfloat16, DRAM; then the call again and again (a trace replayed, 20 iterations by
default). The peer asserts only that the iterations complete. The mirror also checks every
iteration against our float64 reference, with the bar of its sibling regression test (same
issue): PCC 0.99, and the rel-L2 bar of the compute config (mirror.py).

Not mirrored: trace capture / replay (``ttnn.begin_trace_capture``: a device feature; the calls
are made directly), the Galaxy mesh mode (``--device-mode galaxy``) and the peer's command-line
options. The default run makes 2 iterations; the peer's 20 are in the long sweep. Poison twin: NaN
/ +-Inf instead of zeros past cur_pos.
"""

from __future__ import annotations

import numpy as np
import pytest
import ttnn

from mirror import check, compute_config, host, long_sweep, poison_outside, positions, program_config, reference
from mirror import rel_l2_bar, stored
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode

B, NH, NKV, D, BLOCK_SIZE, K_CHUNK, CUR_POS = 32, 8, 1, 64, 64, 128, 643
NUM_PAGES = CUR_POS // BLOCK_SIZE + 2


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", [pytest.param(False, id="clean"), pytest.param(True, id="poison")])
@pytest.mark.parametrize("iterations", [2, pytest.param(20, marks=long_sweep)])
def test_sdpa_paged_decode_hang(iterations, poison):
    rng = np.random.default_rng(42)
    q = rng.standard_normal((1, B, NH, D), dtype=np.float32)
    one = np.zeros((2, NKV, NUM_PAGES * BLOCK_SIZE, D), np.float32)
    one[:, :, :CUR_POS + 1] = rng.standard_normal((2, NKV, CUR_POS + 1, D), dtype=np.float32)
    k, v = np.repeat(one[:1], B, axis=0), np.repeat(one[1:], B, axis=0)  # identical across users
    want = reference(stored(q, ttnn.bfloat16), stored(k, ttnn.bfloat16), stored(v, ttnn.bfloat16), first=[0] * B,
                     last=[CUR_POS] * B, scale=D ** -0.5)
    if poison:
        for u in range(B):
            poison_outside(k, u, 0, CUR_POS, 0)
            poison_outside(v, u, 0, CUR_POS, 1)
    pages = lambda a: a.reshape(B, NKV, NUM_PAGES, BLOCK_SIZE, D).transpose(0, 2, 1, 3, 4).reshape(-1, NKV, BLOCK_SIZE, D)
    table = np.broadcast_to(np.arange(NUM_PAGES, dtype=np.int32), (B, NUM_PAGES)).copy()
    tt_q, tt_k, tt_v = host(q), host(pages(k)), host(pages(v))
    tt_pt = ttnn.Tensor(table, ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT)
    tt_cp = positions([CUR_POS] * B)
    compute = compute_config("HiFi4")
    config = program_config(ttnn.CoreCoord(8, 8), NH, K_CHUNK)
    for iteration in range(iterations):
        out = paged_scaled_dot_product_attention_decode(tt_q, tt_k, tt_v, cur_pos_tensor=tt_cp, page_table_tensor=tt_pt,
                                                        scale=D ** -0.5, program_config=config,
                                                        compute_kernel_config=compute,
                                                        memory_config=ttnn.DRAM_MEMORY_CONFIG)
        check(out, want, min_pcc=0.99, max_rel_l2=rel_l2_bar(compute), label=f"hang repro iteration {iteration}")
