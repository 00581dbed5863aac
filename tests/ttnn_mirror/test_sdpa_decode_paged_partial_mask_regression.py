"""Mirror of tt-metal's nightly
``tests/ttnn/nightly/unit_tests/operations/sdpa/test_sdpa_decode_paged_partial_mask_regression.py``
(stored version at commit 2244d7cd; tt-metal #42917: a split-K worker core skipped the causal mask
on the partial last page), through our paged drop-in on the emulator.

The peer's calls: B=1, one KV head, 8 Q heads, head_dim 128, block_size 64, bfloat16, an identity
page table, ``scale=d**-0.5``, DRAM. The worker-node case: cur_pos 131 in a 4-page cache filled
with random K/V everywhere (past cur_pos too), ``SDPAProgramConfig((8, 4), q_chunk_size=8,
k_chunk_size=64, max_cores_per_head_batch=3)`` (three slices, the last page's on a worker), no
compute config. The parametric cases: cur_pos 131 / 128 / 159 / 643, zeros past cur_pos, no
program or compute config. Bar: the peer's PCC 0.99 and no NaN, plus the rel-L2 bar of the op's
default compute config (fp32 DST, HiFi4: 1e-2, tests/bars.py). Poison twins: NaN / +-Inf instead
of the random values / zeros past cur_pos. Scaled down: none; all in the default run.
"""

from __future__ import annotations

import numpy as np
import pytest
import ttnn

from bars import MAX_RELATIVE_L2
from mirror import check, host, poison_outside, positions, program_config, reference, stored
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode

B, NKV, NH, D = 1, 1, 8, 128
POISON = [pytest.param(False, id="clean"), pytest.param(True, id="poison")]


def _run(cur_pos, block_size, num_pages, *, fill_past, poison, config, seed):
    rng = np.random.default_rng(seed)
    s = num_pages * block_size
    q = rng.standard_normal((1, B, NH, D), dtype=np.float32)
    k = rng.standard_normal((B, NKV, s, D), dtype=np.float32)
    v = rng.standard_normal((B, NKV, s, D), dtype=np.float32)
    if not fill_past:
        k[:, :, cur_pos + 1:] = 0.0
        v[:, :, cur_pos + 1:] = 0.0
    want = reference(stored(q, ttnn.bfloat16), stored(k, ttnn.bfloat16), stored(v, ttnn.bfloat16), first=[0],
                     last=[cur_pos], scale=D ** -0.5)
    if poison:
        poison_outside(k, 0, 0, cur_pos, 0)
        poison_outside(v, 0, 0, cur_pos, 1)
    # [B, nkv, pages, bs, d] -> [B * pages, nkv, bs, d], page table arange(pages)
    pages = lambda a: a.reshape(B, NKV, num_pages, block_size, D).transpose(0, 2, 1, 3, 4).reshape(-1, NKV, block_size, D)
    table = ttnn.Tensor(np.arange(num_pages, dtype=np.int32).reshape(1, num_pages), ttnn.int32)
    keywords = {} if config is None else {"program_config": config}
    out = paged_scaled_dot_product_attention_decode(host(q), host(pages(k)), host(pages(v)),
                                                    cur_pos_tensor=positions([cur_pos] * B), page_table_tensor=table,
                                                    scale=D ** -0.5, memory_config=ttnn.DRAM_MEMORY_CONFIG, **keywords)
    check(out, want, min_pcc=0.99, max_rel_l2=MAX_RELATIVE_L2, label=f"partial page cur_pos={cur_pos}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
def test_sdpa_decode_paged_partial_mask_worker_node_regression(poison):
    config = program_config(ttnn.CoreCoord(8, 4), NH, 64, max_cores_per_head_batch=3)
    _run(2 * 64 + 3, 64, 4, fill_past=True, poison=poison, config=config, seed=1234)


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
@pytest.mark.parametrize("cur_pos, block_size", [(131, 64), (128, 64), (159, 64), (643, 64)],
                         ids=["4_valid_of_64_in_last_page", "1_valid_of_64_in_last_page",
                              "32_valid_of_64_last_page_tile_boundary", "gpt_oss_120b_exact_hang_position"])
def test_sdpa_decode_paged_partial_mask_parametric(cur_pos, block_size, poison):
    _run(cur_pos, block_size, cur_pos // block_size + 2, fill_past=False, poison=poison, config=None,
         seed=42 + cur_pos)
