"""Mirror of tt-metal's nightly
``tests/ttnn/nightly/unit_tests/operations/sdpa/test_paged_sdpa_decode_batch_collapse.py``
(stored version at commit 3459346e; OLMo-3.1-32B's paged decode giving different outputs to
identical users), through our paged drop-in on the emulator.

Mirrored: ``test_paged_sdpa_decode_batch_identity_dram_single_device``: 8 users with bit-identical
Q and K/V (one user's cache repeated, paged through a shuffled page table), 8 Q heads, 1 KV head,
head_dim 128, block_size 64, 256 positions, every user at 130, ``SDPAProgramConfig(the device's
grid, exp_approx_mode=False, q_chunk_size=0, k_chunk_size=0)`` (0: the op chooses), HiFi4 with bf16
DST, Q L1 height-sharded (``in_cfg``: one user's 32 padded head rows a shard on
``num_to_corerange(8)``; the emulator places the shards in those cores' L1), DRAM output. The peer's assertion: every user's output bit-identical to user 0's (atol 0).
The mirror adds our float64 reference (PCC 0.99, the bar of the sibling decode tests, and the
rel-L2 bar of the compute config) and a poison twin (NaN / +-Inf past position 130).

Device-only (not mirrored): the ``l1_small_size`` device parameter, and both Galaxy tests
(``test_paged_sdpa_decode_olmo_tg_batch_identity`` and ``..._rect_grid``): an 8x4 mesh of 32 chips
(``mesh_device``, ``ShardTensor2dMesh``, ``ReplicateTensorToMesh``; the op runs such meshes since issue 23,
but a Galaxy is not mocked here: docs/multi_chip.md), with the output height-sharded on a 50- / 60-core
sub-core grid of a 7x10 chip.
"""

from __future__ import annotations

import numpy as np
import pytest
import ttnn

from mirror import check, compute_config, fa_rand, height_sharded, host, host_sharded, poison_outside, positions
from mirror import program_config, reference
from mirror import rel_l2_bar, stored, to_numpy
from ttnn_flashdecode.transformer import paged_scaled_dot_product_attention_decode

B_LOCAL, N_Q, N_KV, D, BLOCK_SIZE, MAX_SEQ, CUR_POS = 8, 8, 1, 128, 64, 256, 130


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", [pytest.param(False, id="clean"), pytest.param(True, id="poison")])
def test_paged_sdpa_decode_batch_identity_dram_single_device(poison):
    rng = np.random.default_rng(42)
    k = np.repeat(fa_rand(rng, 1, N_KV, MAX_SEQ, D), B_LOCAL, axis=0)
    v = np.repeat(fa_rand(rng, 1, N_KV, MAX_SEQ, D), B_LOCAL, axis=0)
    q = np.repeat(fa_rand(rng, 1, 1, N_Q, D), B_LOCAL, axis=1)
    want = reference(stored(q, ttnn.bfloat16), stored(k, ttnn.bfloat16), stored(v, ttnn.bfloat16),
                     first=[0] * B_LOCAL, last=[CUR_POS] * B_LOCAL, scale=D ** -0.5)
    if poison:
        for u in range(B_LOCAL):
            poison_outside(k, u, 0, CUR_POS, 0)
            poison_outside(v, u, 0, CUR_POS, 1)
    per_user = MAX_SEQ // BLOCK_SIZE
    permutation = rng.permutation(B_LOCAL * per_user)
    table = np.argsort(permutation).reshape(B_LOCAL, per_user).astype(np.int32)
    pages = lambda a: a.reshape(B_LOCAL, N_KV, per_user, BLOCK_SIZE, D).transpose(0, 2, 1, 3, 4).reshape(
        -1, N_KV, BLOCK_SIZE, D)[permutation]
    compute = compute_config("HiFi4")
    config = program_config((8, 8), 0, 0, exp_approx_mode=False)
    in_cfg = height_sharded(B_LOCAL, 32, D)
    out = paged_scaled_dot_product_attention_decode(host_sharded(q, ttnn.bfloat16, in_cfg), host(pages(k)), host(pages(v)),
                                                    ttnn.Tensor(table, ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT),
                                                    cur_pos_tensor=positions([CUR_POS] * B_LOCAL), scale=D ** -0.5,
                                                    program_config=config, compute_kernel_config=compute,
                                                    memory_config=ttnn.DRAM_MEMORY_CONFIG)
    got = np.asarray(to_numpy(out))[0]
    for user in range(1, B_LOCAL):
        assert np.array_equal(got[user], got[0]), f"user {user}'s output differs from user 0's: " \
                                                  f"max diff {np.abs(got[user] - got[0]).max():.3e}"
    check(out, want, min_pcc=0.99, max_rel_l2=rel_l2_bar(compute), label="batch identity")
