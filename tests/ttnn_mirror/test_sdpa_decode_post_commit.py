"""Mirror of tt-metal's post-commit ``tests/ttnn/unit_tests/operations/sdpa/test_sdpa_decode.py``
(stored version at commit 03725f26; "a representative subset" of the nightly file), through our
drop-ins on the emulator (runners.py, mirror.py). Each test function has its counterpart of the
same name with the peer's parametrisations and a ``poison`` twin (NaN / +-Inf in every cache slot
outside each row's range).

Scaled down: test_sdpa_decode_ignore_users (below). The cases the nightly mirror's default run
already makes with the same call (test_sdpa_decode llama3.1-8b, the sharded b=1 case) and the
paged sweep run in the long sweep only; so does the clean sliding-window case (its poison twin,
the same positions and window, stays in the default run). The peer's paged position sweep (133
calls) is thinned in the default run to every 16th start plus the last; the whole sweep runs in
the long sweep, with the cases that cost more than the default budget carries
(``[8, 8, 1, 32768]`` at 16k positions, ~25 s; the program-cache calls, 16 users x 8k).

Sharded Q / output memory configs are honoured (the emulator places L1 height shards in the cores'
L1). Not mirrored as written: ``num_program_cache_entries`` / ``cache_entries_counter`` assertions (a device
feature); the ``reset_seeds`` / ``requires_fresh_device`` fixtures (device housekeeping);
test_sdpa_decode_broadcast_mask_batch's helper is not in the stored sdpa_test_utils.py: mirrored
from the nightly docstring (issue #39910: one batch-1 mask read by every user).

test_sdpa_decode_ignore_users: s 32768 -> 4096 in the default run (only positions 0..100 are read;
the cost, ~60 s, was host-side: building a 32 x 32768 x 128 cache); the peer's s in the long sweep.

The broadcast mask in bfloat4_b (a host block-float mask with 8 heads) runs since issue 20.
"""

from __future__ import annotations

import numpy as np
import pytest
import ttnn

from mirror import (check, compute_config, default_part, fa_rand, host, long_sweep, program_config,
                    reference, rel_l2_bar, stored)
from runners import paged_sweep_positions, run_paged, run_single_iter, thin, window_positions
from ttnn_flashdecode.transformer import scaled_dot_product_attention_decode

BF16, BFP8, BFP4 = ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b
POISON = [pytest.param(False, id="clean"), pytest.param(True, id="poison")]


def _both(values, name, keep=True):
    return [pytest.param(*values, False, id=f"{name}-clean", marks=() if keep else long_sweep),
            pytest.param(*values, True, id=f"{name}-poison", marks=() if keep else long_sweep)]


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("b, nh, nkv, s, d, grid_size, cur_pos_tensor, poison",
                         _both((8, 8, 1, 32768, 128, (8, 6), False), "llama2-70b", keep=False)
                         + _both((4, 32, 8, 8192, 128, (8, 8), True), "llama3.1-8b", keep=False))
def test_sdpa_decode(b, nh, nkv, s, d, grid_size, cur_pos_tensor, poison):
    run_single_iter(b, nh, nkv, s, d, BFP8, grid_size, BF16, cur_pos_tensor, poison=poison,
                    label=f"decode {b}x{nh}/{nkv} s={s}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
def test_sdpa_decode_non_tile_aligned_heads(poison):
    """Whisper-large: 20 heads (not a multiple of 32), MHA; the output keeps 20 heads."""
    run_single_iter(2, 20, 20, 512, 64, BFP8, (8, 8), BF16, True, poison=poison, label="non-tile-aligned heads")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("b, nh, nkv, s, d, grid_size", [(1, 64, 8, 2048, 128, (8, 8))])
def test_sdpa_decode_non_causal(b, nh, nkv, s, d, grid_size):
    for _ in range(2):
        run_single_iter(b, nh, nkv, s, d, BFP8, grid_size, BF16, causal=False, label="non-causal")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
@pytest.mark.parametrize("s", [pytest.param(32768, marks=long_sweep), pytest.param(4096, id="scaled_s4096")])
def test_sdpa_decode_ignore_users(s, poison):
    start = [100 if u % 2 == 0 else -1 for u in range(32)]
    run_single_iter(32, 8, 1, s, 128, BF16, (8, 6), BF16, True, start_indices=start, poison=poison,
                    label="ignore users")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", POISON)
@pytest.mark.parametrize("full", [pytest.param(False, id="thinned", marks=long_sweep),
                                  pytest.param(True, id="full", marks=long_sweep)])
def test_sdpa_decode_paged_attention(full, poison):
    sweep = paged_sweep_positions(4096, 8)
    run_paged(8, 16, 4, 4096, 128, BFP8, (8, 2), BF16, True, 64, sweep=sweep if full else thin(sweep), poison=poison,
              label="paged llama3.1-a bs=64")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", [pytest.param(False, id="clean", marks=long_sweep),
                                    pytest.param(True, id="poison", marks=long_sweep)])
def test_sdpa_decode_sharded(poison):
    """The peer's three calls: Q L1 height-sharded, the output, both (the emulator places the shards in
    the cores' L1 and reads / writes them there)."""
    for sharded_in, sharded_out in ((True, False), (False, True), (True, True)):
        run_single_iter(1, 8, 1, 32768, 128, BFP8, (8, 8), BFP8, poison=poison, sharded_in=sharded_in,
                        sharded_out=sharded_out, label=f"sharded all_bfp8 in={sharded_in} out={sharded_out}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", [pytest.param(False, id="clean", marks=long_sweep),
                                    pytest.param(True, id="poison", marks=long_sweep)])
def test_sdpa_decode_program_cache(poison):
    b, s = 16, 8192
    start = np.random.default_rng(213919).integers(0, s - 1, b).tolist()
    start[0] = s - 1
    for cur_pos_tensor in (True, False):
        run_single_iter(b, 8, 1, s, 128, BFP8, (8, 6), BFP8, cur_pos_tensor, start_indices=start, poison=poison,
                        label=f"program cache tensor={cur_pos_tensor}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("poison", [pytest.param(False, id="clean", marks=long_sweep), pytest.param(True, id="poison")])
def test_sdpa_decode_sliding_window(poison):
    b, s, w = 4, 1024, 128
    for cur_pos in window_positions(w, s):
        run_single_iter(b, 8, 1, s, 128, BFP8, (8, 4), BF16, True, start_indices=[cur_pos + i for i in range(b)],
                        sliding_window_size=w, poison=poison, seed=cur_pos, label=f"window p={cur_pos}")


@pytest.mark.usefixtures("mock_cluster")
@pytest.mark.parametrize("mask_dtype", [BF16, BFP4], ids=["mask_bf16", "mask_bfp4"])
def test_sdpa_decode_broadcast_mask_batch(mask_dtype):
    b, nh, nkv, s, d = 32, 8, 1, 2048, 128
    rng = np.random.default_rng(39910)
    q, k, v = fa_rand(rng, 1, b, nh, d), fa_rand(rng, b, nkv, s, d), fa_rand(rng, b, nkv, s, d)
    mask = (rng.random((1, 1, nh, s)) < 0.25) * np.float32(np.finfo(np.float32).min)
    mask[..., 0] = 0.0
    compute = compute_config("HiFi2")
    want = reference(stored(q, BF16), stored(k, BFP8), stored(v, BFP8), first=[0] * b, last=[s - 1] * b,
                     scale=d ** -0.5, mask=stored(mask, mask_dtype)[:, 0])
    out = scaled_dot_product_attention_decode(host(q), host(k, BFP8), host(v, BFP8), is_causal=False,
                                              attn_mask=host(mask, mask_dtype), scale=d ** -0.5,
                                              program_config=program_config((8, 8), 32, 512, exp_approx_mode=False),
                                              compute_kernel_config=compute, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    check(out, want, min_pcc=0.99, max_rel_l2=rel_l2_bar(compute), label=f"broadcast mask {mask_dtype}")
