"""Mutation check: each deliberate small change must turn its slice of the tests red.

Copies ``kernels/`` to a temporary folder, applies ONE mutation, and runs a small slice of the
tests (``TEST_SLICE``, the attention tests, unless the mutation names its own ``tests``) against
the mutated copy (through ``TTNN_FLASHDECODE_KERNEL_DIR``). A mutation of a host module
(``site`` a file under ``ttnn_flashdecode/``) mutates a copy of the package instead, which the
slice imports first (``PYTHONPATH``; ``python -P`` keeps the checkout's own package off the
front of ``sys.path``). A mutation that leaves its slice green means the tests cannot see that
bug: the check fails.

A kernel mutation is anchored on a named site, not on a line: the function (or constant) it changes,
found by its definition in whichever kernel file holds it, and a snippet that occurs once in that
definition, whatever the whitespace. Moving code, re-wrapping lines or splitting files keeps every
anchor; renaming the function or rewriting the snippet's own code is what re-anchors one
(``--check-anchors`` lists those in a second, without running tests).

Usage: ``python scripts/mutation_check.py [--only NAME] [--check-anchors]``; exit status 0 iff every
mutation is caught (or, with ``--check-anchors``, anchored).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
# Cases that exercise a tail mask, several blocks, the correction factor and a multi-tile row; a
# CHUNK from a tile-aligned start (the causal tile) and from mid-tile (two tiles of gathered row
# masks); ROWS with several heads and rows per KV group (the staircase); split-K with 7 slices,
# with random scores and with one position ~100 above the rest in a slice other than 0 (the max
# pass: without the request's true max, exp() overflows); a forced split with empty slices and
# every score in [-120, -100] (an empty slice's max must be MASK_VALUE, or every exp() underflows).
TEST_SLICE = ["tests/test_attention.py::test_attention_seed_shapes[1000]", "tests/test_attention.py::test_attention_seed_shapes[2048]",
              "tests/test_attention.py::test_attention_split_counts[7]",
              "tests/test_attention.py::test_attention_split_with_one_dominant_position[5001-7-3-8-False]",
              "tests/test_attention.py::test_attention_split_with_one_dominant_position[4096-32-13-None-True]",
              "tests/test_attention_modes.py::test_chunk_lengths_and_starts[7-tile-edge64]",
              "tests/test_attention_modes.py::test_chunk_lengths_and_starts[32-mid-tile45]",
              "tests/test_attention_modes.py::test_rows_every_valid_positions[ratio3-P10]",
              # Adversarial numerics (issue 14): a forced split with empty slices, every live score in [-120, -100].
              "tests/test_attention_adversarial.py::test_attention_forced_splits_with_empty_slices_and_low_scores[decode-0-3]"]


# The fused append's bit-for-bit tests: contiguous split-K and paged decode, ROWS across a tile edge.
APPEND_SLICE = ("tests/test_fused_append.py::test_decode_append_equals_update_then_attend_contiguous",
                "tests/test_fused_append.py::test_paged_append_through_a_shuffled_page_table",
                "tests/test_fused_append.py::test_rows_append_spanning_a_tile_edge")
# The bfloat8_b append's: packing (edge rows) and cache bytes against ttnn's host packer.
BFP8_APPEND_SLICE = ("tests/test_fused_append_bfp8.py",)
# The bfloat4_b append's: 3-bit packing (edge rows), the 16-byte write-back pieces, cache bytes.
BFP4_APPEND_SLICE = ("tests/test_fused_append_bfp4.py",)

PACKAGE = "ttnn_flashdecode"

_USERS_CASE = "tests/test_accurate_scores.py::test_the_users_case_is_within_the_bar_with_accurate_scores_and_not_without[1]"
"""Issue 35 item 4's case: ROWS 2 across an attention chunk of 64 under a dominant sink, with accurate_scores."""

SLICE_PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:xdist", "-p", "no:random_order")
"""pytest plugins a slice's run leaves unloaded: none serves one serial slice (hypothesis's ``@given``
works without its plugin), and loading them is ~0.6 CPU-s of each of ~90 runs."""


@dataclasses.dataclass(frozen=True)
class Mutation:
    name: str
    site: str  # a kernel function or constant by name ("scores", "kRoundState"; "attention_writer.cpp:kernel_main"
    #            where several kernel files define the name), or a host file ("ttnn_flashdecode/op/schedule.py")
    original: str  # a snippet the site holds exactly once (any run of whitespace matches any other)
    mutated: str
    bug: str
    tests: tuple[str, ...] = ()  # the slice that must turn red; () = TEST_SLICE

    @property
    def slice(self) -> list[str]:
        return list(self.tests or TEST_SLICE)

    @property
    def host(self) -> bool:
        """True when the mutation edits the Python package (or the emulator) rather than a kernel."""
        return self.site.startswith(PACKAGE + "/")


# ----------------------------------------------------------------------------- anchors (module docstring)
_NOT_DEFINITIONS = {"if", "for", "while", "switch", "return", "sizeof", "catch", "static_assert", "decltype",
                    "alignof", "constexpr", "defined"}
_NAME_AND_PAREN = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_QUALIFIER = re.compile(r"\s*(?:const|noexcept|override|final)\b")
_CONSTANT = re.compile(r"constexpr[^;={}()]*?\b([A-Za-z_]\w*)\s*=[^;]*;")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def _closing(code: str, i: int) -> int:
    """Offset just past the bracket that closes the one at ``code[i]``."""
    opening = code[i]
    closing = {"(": ")", "{": "}"}[opening]
    depth = 0
    for j in range(i, len(code)):
        depth += (code[j] == opening) - (code[j] == closing)
        if depth == 0:
            return j + 1
    raise SystemExit(f"unbalanced {opening} at offset {i}")


def cpp_definitions(text: str) -> dict[str, list[tuple[int, int]]]:
    """Where C++ ``text`` defines each name: {name: [(start, end), ...]}, a span from the name to the
    end of its body for a function (or a constructor), to the ``;`` for a ``constexpr`` constant."""
    code = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)  # offsets kept
    found: dict[str, list[tuple[int, int]]] = {}
    for m in _NAME_AND_PAREN.finditer(code):
        if m.group(1) in _NOT_DEFINITIONS or code[:m.start()].rstrip().endswith((".", "->")):
            continue
        end = _closing(code, m.end() - 1)
        while (q := _QUALIFIER.match(code, end)) is not None:
            end = q.end()
        rest = code[end:].lstrip()
        body = len(code) - len(rest)
        if rest.startswith(":") and not rest.startswith("::") and code[:m.start()].rstrip()[-1:] in ("", ";", "{", "}"):
            body = code.index("{", body)  # a constructor, past its initialiser list
        elif not rest.startswith("{"):
            continue  # a call or a declaration
        found.setdefault(m.group(1), []).append((m.start(), _closing(code, body)))
    for m in _CONSTANT.finditer(code):
        found.setdefault(m.group(1), []).append((m.start(), m.end()))
    return found


def snippet_pattern(snippet: str) -> re.Pattern:
    """``snippet`` as a regex in which any run of whitespace matches any other."""
    return re.compile(r"\s+".join(re.escape(token) for token in snippet.split()))


def locate(mutation: Mutation, kernels: pathlib.Path, package_root: pathlib.Path) -> tuple[pathlib.Path, int, int]:
    """(file, start, end) of ``mutation.original`` in its site, in the kernels of ``kernels`` or, for a
    host mutation, under ``package_root``.

    Raises:
        SystemExit: the site is not defined exactly once, or does not hold the snippet exactly once.
    """
    if mutation.host:
        path = package_root / mutation.site
        spans = [(path, 0, len(path.read_text()))]
    else:
        file, _, name = mutation.site.rpartition(":")
        paths = [kernels / file] if file else sorted(p for p in kernels.iterdir() if p.suffix in (".cpp", ".hpp"))
        spans = [(path, start, end) for path in paths
                 for start, end in cpp_definitions(path.read_text()).get(name, [])]
        if len(spans) != 1:
            where = ", ".join(f"{path.name}@{start}" for path, start, _ in spans) or "nowhere"
            raise SystemExit(f"{mutation.name}: expected one definition of {mutation.site!r} in kernels/, found {where}")
    path, start, end = spans[0]
    hits = list(snippet_pattern(mutation.original).finditer(path.read_text(), start, end))
    if len(hits) != 1:
        raise SystemExit(f"{mutation.name}: expected its snippet once in {mutation.site} ({path.name}), found it "
                         f"{len(hits)} times: {mutation.original!r}")
    return path, hits[0].start(), hits[0].end()


MUTATIONS = [
    # The WORK table (issue 19, host path): each core finds its row by its logical coordinates.
    Mutation("work-slot-transposed", "work_slot",
             "return y * grid_x + x;",
             "return x * grid_x + y;",
             "cores beyond the first row read another core's work row: requests run twice or never",
             tests=("tests/test_attention.py::test_attention_split_counts[7]",)),
    Mutation("writer-reads-compute-copy-count", "attention_writer.cpp:kernel_main",
             "    const uint32_t requests = served_requests(l1_word(row, kRowRequestCount));",
             "    const uint32_t requests = served_requests(l1_word(row, kRowRequestCount)) - 1;",
             "the writer serves one request fewer than the reader and compute: the last request's output is never written",
             tests=("tests/test_attention.py::test_attention_seed_shapes[1000]",)),
    # Sliding windows (issue 20, item 1): the window's tiles only, its first tile masked and cleaned.
    Mutation("window-slices-from-tile-0", "first_tile",
             "return window_start(0) / kTilePositions;",
             "return 0;",
             "the slices cover the whole history, not the window: the tiles before it are read and attended",
             tests=("tests/test_sliding_window.py::test_all_negative_large_scores_and_a_dominant_leak_before_the_window[decode-1]",)),
    Mutation("window-start-off-by-one", "window_start",
             "        uint32_t start = window != 0 && end > window ? end - window : 0;",
             "        uint32_t start = window != 0 && end > window ? end - window + 1 : 0;",
             "every row's window starts one position late: W - 1 positions attended",
             tests=("tests/test_sliding_window.py::test_decode_window_at_tile_edges_with_poison_outside[33-1]",)),
    Mutation("window-mask-not-added", "apply_score_modifiers",
             "reconfigured |= add_window_mask(p, tile);",
             "",
             "the window's first tile is attended whole: its columns before the window start leak in",
             tests=("tests/test_sliding_window.py::test_decode_window_at_tile_edges_with_poison_outside[33-1]",)),
    Mutation("window-mask-row-by-head", "fill_window_masks",
             "p.window_dead(tile, p.stage_row(s))",
             "p.window_dead(tile, p.stage_head(s))",
             "ROWS: a window-mask row takes its head's index for its row's, so rows start at the wrong positions",
             tests=("tests/test_sliding_window.py::test_rows_each_row_its_own_window[7-10-3-1]",)),
    Mutation("window-stale-v-rows-kept", "stream_kv",
             "        zero_rows_before_window(kCbV, p, block);\n",
             "",
             "V's slots before the window start in its first tile keep the cache's NaN/Inf: P = 0 times NaN",
             tests=("tests/test_sliding_window.py::test_decode_window_at_tile_edges_with_poison_outside[33-1]",)),
    # Chunked-local attention and the logit softcap (issue 21, items 1 and 2).
    Mutation("chunk-edge-off-by-one", "window_start",
             "            const uint32_t chunk_first = (end - 1) / attention_chunk * attention_chunk;",
             "            const uint32_t chunk_first = end / attention_chunk * attention_chunk;",
             "the row at a chunk's last position (p = C - 1) is taken for the next chunk's first",
             tests=("tests/test_chunked_local.py::test_decode_chunk_edges_with_poison_outside[64-1]",)),
    Mutation("softcap-stage-skipped", "apply_score_modifiers",
             "bool reconfigured = cap_scores();",
             "bool reconfigured = false;",
             "the scores are never capped: a score far past the cap takes the whole softmax",
             tests=("tests/test_logit_softcap.py::test_scores_far_past_the_cap[decode-50.0-1]",)),
    # SFPU on live rows only (issue 35 item 3): VectorMode::R when every stage row is in rows 0..15,
    # and on those faces the iterations of the live rows (two per four).
    Mutation("sfpu-rows-mode-for-17-rows", "ttnn_flashdecode/op/shape.py",
             "return -(-stage_rows // 4) * 4 if stage_rows <= 16 else 32",
             "return min(16, -(-stage_rows // 4) * 4) if stage_rows <= 17 else 32",
             "a 17-row group runs the SFPU on faces 0-1: live row 16 is never exponentiated",
             tests=("tests/test_sfpu_live_faces.py::test_sixteen_rows_take_faces_0_and_1_and_seventeen_take_all_four[17-4]",)),
    Mutation("sfpu-rows-kind-ignores-positions", "ttnn_flashdecode/op/shape.py",
             'stage_rows = self.request_q_rows * (self.rows if self.kind == "rows" else 1)',
             "stage_rows = self.request_q_rows",
             "ROWS with 6 heads of 3 positions (18 stage rows) counted as 6: rows 16 and 17 are never exponentiated",
             tests=("tests/test_sfpu_live_faces.py::test_chunk_and_rows_requests_count_their_stage_rows[rows-3-6-4]",)),
    Mutation("sfpu-rows-mode-always", "kLiveFaces",
             "kLiveRows <= 16 ? VectorMode::R : VectorMode::RC",
             "VectorMode::R",
             "the kernel runs the SFPU on faces 0-1 whatever the host says: rows 16..31 of a 32-head group are wrong",
             tests=("tests/test_sfpu_live_faces.py::test_sixteen_rows_take_faces_0_and_1_and_seventeen_take_all_four[32-4]",)),
    Mutation("sfpu-column-faces", "kLiveFaces",
             "kLiveRows <= 16 ? VectorMode::R : VectorMode::RC",
             "kLiveRows <= 16 ? VectorMode::C : VectorMode::RC",
             "faces 0 and 2 (VectorMode::C) for rows 0..15: the live rows' columns 16..31 keep S - M, un-exponentiated",
             tests=("tests/test_sfpu_live_faces.py::test_sixteen_rows_take_faces_0_and_1_and_seventeen_take_all_four[16-2]",)),
    Mutation("sfpu-max-left-on-all-faces", "live_max_tile",
             "odst, kLiveFaces)",
             "odst, VectorMode::RC)",
             "the running max stays on all four faces: its SFPU work does not halve",
             tests=("tests/test_sfpu_live_faces.py::test_face_ops_halve_and_the_output_is_bit_identical[gqa8-long]",)),
    Mutation("sfpu-iterations-a-quad-short", "kLiveIterations",
             "static_cast<int>(kLiveRows / 2)",
             "static_cast<int>(kLiveRows / 2) - 2",
             "an 8-row group's SFPU runs the iterations of rows 0..3 only: rows 4..7 are never exponentiated",
             tests=("tests/test_sfpu_live_faces.py::test_face_ops_halve_and_the_output_is_bit_identical[gqa8-long]",)),
    Mutation("sfpu-iterations-even-columns-only", "kLiveIterations",
             "static_cast<int>(kLiveRows / 2)",
             "static_cast<int>(kLiveRows / 2) - 1",
             "the last live quad's odd columns are skipped (an iteration takes 4 rows' even or odd columns)",
             tests=("tests/test_sfpu_live_faces.py::test_face_ops_halve_and_the_output_is_bit_identical[gqa4-hifi2-split]",)),
    Mutation("sfpu-iterations-rows-not-rounded-to-a-quad", "ttnn_flashdecode/op/shape.py",
             "return -(-stage_rows // 4) * 4 if stage_rows <= 16 else 32",
             "return stage_rows if stage_rows <= 16 else 32",
             "6 live rows ask for 3 iterations a face: rows 4..5's odd columns are never computed (the kernel refuses it)",
             tests=("tests/test_sfpu_live_faces.py::test_face_ops_halve_and_the_output_is_bit_identical[gqa6-split]",)),
    Mutation("sfpu-approximate-exp-asked-for-live-iterations", "kExpIterations",
             "kExpApprox ? 8 : kLiveIterations",
             "kLiveIterations",
             "the approximate exp is asked for the live rows' iterations, which its LLK ignores (whole faces)",
             tests=("tests/test_sfpu_live_faces.py::test_face_ops_halve_and_the_output_is_bit_identical[gqa4-approx-exp]",)),
    Mutation("sfpu-tanh-left-on-all-faces", "live_tanh_tile",
             "idst, kLiveFaces));",
             "idst, VectorMode::RC));",
             "the softcap's tanh stays on all four faces (the LLK call's vector mode)",
             tests=("tests/test_sfpu_live_faces.py::test_face_ops_halve_and_the_output_is_bit_identical[gqa8-softcap-large]",)),
    # Fewer data-format reconfigs (issue 35 item 3): each unit's CB remembered, conditional reconfigs.
    Mutation("format-tracker-forgets-srcb", "unpack_formats",
             "    g_formats.srcb = srcb;\n",
             "",
             "SrcB's CB is not remembered: a later step skips a reconfig it needs and unpacks with another CB's format"),
    Mutation("format-old-cb-wrong", "pack_format",
             "pack_reconfig_data_format(g_formats.pack, out);",
             "pack_reconfig_data_format(out, out);",
             "the conditional pack reconfig is given the new CB as the old: it never reprograms the packer",
             tests=("tests/test_format_reconfigs.py::test_reconfigs_per_block_only_where_formats_change[HiFi4 fp32 DST]",)),
    # return_lse (issue 21, item 3): LSE = M + log L on the normalising core, one 4-byte write a row.
    Mutation("lse-max-not-added", "log_sum_exp",
             "        live_add_tiles(0, 1, 0);\n",
             "",
             "the LSE is log L alone, relative to the running max: off by the row's max score",
             tests=("tests/test_lse.py::test_decode_lse_matches_float64[4]",)),
    Mutation("lse-every-head-at-the-first", "write_lse",
             "                                                     (first_head + p.stage_head(s)) * sizeof(float));",
             "                                                     first_head * sizeof(float));",
             "every Q head of a group writes its LSE into the group's first head: the others stay unwritten",
             tests=("tests/test_lse.py::test_decode_lse_matches_float64[1]",)),
    # Attention sinks (issue 20, item 2): each head's sink, folded in once with the max over it.
    Mutation("sink-of-the-first-head", "gather_sinks",
             "                const uint32_t head = first + tile.stage_head(s);",
             "                const uint32_t head = first;",
             "every Q head of a group takes the group's first head's sink",
             tests=("tests/test_attention_sink.py::test_decode_with_sinks_every_head_its_own[1]",)),
    Mutation("sink-head-rows-ignore-query-row", "first_q_head",
             "            return q.first_page() / dim_tiles % row_tiles * kTilePositions + query_row;",
             "            return q.first_page() / dim_tiles % row_tiles * kTilePositions;",
             "ttnn's heads layout: a KV group's first Q head is taken as its row tile's first head, so every "
             "group but the first takes the wrong sinks",
             tests=("tests/test_attention_sink.py::test_drop_ins_scale_the_sink_as_ttnn_does",)),
    Mutation("sink-weight-not-exponentiated", "fold_sink",
             "sub_tiles(kCbConst, m_sink, sink, row, 0); live_exp_tile(0);",
             "sub_tiles(kCbConst, m_sink, sink, row, 0);",
             "folding the sink adds sink - max(M, sink) to L instead of exp() of it",
             tests=("tests/test_attention_sink.py::test_decode_with_sinks_every_head_its_own[1]",)),
    Mutation("hifi2-correction-in-srcb", "times_correction",
             "if constexpr (kRowScalingOnSfpu) {",
             "if constexpr (false) {",
             "at HiFi2 O and L are rescaled by a C truncated in SrcB: earlier blocks lose weight at every rescale",
             tests=("tests/test_attention_adversarial.py::test_hifi2_rescales_by_an_untruncated_correction",)),
    Mutation("hifi2-reciprocal-in-srcb", "normalise_row",
             "    cb_reserve_back(kCbOut, kDimTiles);\n    if constexpr (kRowScalingOnSfpu) {",
             "    cb_reserve_back(kCbOut, kDimTiles);\n    if constexpr (false) {",
             "at HiFi2 O is normalised by a 1 / L truncated in SrcB: every output row scaled down alike",
             tests=("tests/test_attention_adversarial.py::test_hifi2_multiplies_by_the_row_factors_untruncated",)),
    Mutation("hifi2-scale-in-srcb", "scale_query",
             "    cb_wait_front(kCbQStage, kQsPages);\n    if constexpr (kRowScalingOnSfpu) {",
             "    cb_wait_front(kCbQStage, kQsPages);\n    if constexpr (false) {",
             "at HiFi2 the query is scaled by a scale truncated in SrcB: every score too small alike",
             tests=("tests/test_attention_adversarial.py::test_hifi2_multiplies_by_the_row_factors_untruncated",)),
    # The correction C as a full tile, in SrcA for O and L alike (issue 20).
    Mutation("correction-not-broadcast", "pack_correction",
             "    pack_to(kCbC, 1);\n    if constexpr (!kRowScalingOnSfpu) {",
             "    pack_to(kCbC, 1);\n    if constexpr (false) {",
             "C is packed with its factor in column 0 only (1 elsewhere): O's other columns are never rescaled",
             tests=("tests/test_attention_adversarial.py::test_many_rescales_leave_the_output_unbiased_and_accurate",)),
    Mutation("o-rescaled-from-srca", "rescale_output",
             "        formats(kCbC, kCbO, kCbO);\n        tile_regs_acquire();\n"
             "        times_correction(kCbO, count);  // old O pages of this chunk are at the front",
             "        formats(kCbO, kCbC, kCbO);\n        tile_regs_acquire();\n"
             "        mul_init(kCbO, kCbC); for (uint32_t i = 0; i < count; ++i) mul_tiles(kCbO, kCbC, i, 0, i);",
             "O is rescaled from SrcA, whose lowest TF32 bit the multiplier drops, L from SrcB: O shrinks against L "
             "at every block",
             tests=("tests/test_attention_adversarial.py::test_many_rescales_leave_the_output_unbiased_and_accurate",)),
    Mutation("state-truncated", "kRoundState",
             "constexpr bool kRoundState = DST_ACCUM_MODE;",
             "constexpr bool kRoundState = false;",
             "O and L are packed unrounded: the next block's SrcB read truncates them to TF32, each element by "
             "its own mantissa, and the old blocks' weights drift apart block by block",
             tests=("tests/test_attention_adversarial.py::test_many_rescales_leave_the_output_unbiased_and_accurate",)),
    Mutation("tf32-rounding-truncates", "kTf32HalfUlp",
             "constexpr uint32_t kTf32HalfUlp = 0x1000u;",
             "constexpr uint32_t kTf32HalfUlp = 0x0u;",
             "the TF32 rounding adds nothing before it clears the 13 low bits: it truncates, and the state drifts "
             "block by block as if it were not rounded",
             tests=("tests/test_attention_adversarial.py::test_many_rescales_leave_the_output_unbiased_and_accurate",)),
    Mutation("tf32-rounding-first-tile-only", "live_round_to_tf32",
             "    for (uint32_t i = first; i < first + count; ++i) {\n        MATH(SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_add_int32,",
             "    for (uint32_t i = first; i < first + 1; ++i) {\n        MATH(SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, calculate_add_int32,",
             "only a chunk's first state tile gets the half-ulp add: the others are truncated by the AND and drift",
             tests=("tests/test_attention_adversarial.py::test_many_rescales_leave_the_output_unbiased_and_accurate",)),
    # L1-sharded tensors on the emulator (issue 20): a height-sharded Q is read from the cores' L1.
    Mutation("sharded-bank-halves-swapped", "ttnn_flashdecode/emulator/include/api/tensor/tensor_accessor_args.h",
             "        return bank % 2 ? word >> 16 : word & 0xffffu;",
             "        return bank % 2 ? word & 0xffffu : word >> 16;",
             "the emulator's TensorAccessor takes bank 2i+1's coordinates for bank 2i: Q's shards read from the "
             "wrong cores",
             tests=("tests/emulator/test_emulator_sharded.py::test_a_height_sharded_host_q_is_read_from_l1",)),
    Mutation("sharded-args-halves-swapped", "ttnn_flashdecode/emulator/__init__.py",
             "    coords = [halves[i] | halves[i + 1] << 16 for i in range(0, len(halves), 2)]",
             "    coords = [halves[i + 1] | halves[i] << 16 for i in range(0, len(halves), 2)]",
             "the bank coordinates are packed high half first: not the layout ttnn's TensorAccessorArgs gives",
             tests=("tests/emulator/test_emulator_sharded.py::test_sharded_accessor_args_are_ttnns",)),
    Mutation("sharded-q-interleaved", "ttnn_flashdecode/op/emulator_backend.py",
             'shards = {"q": _height_shards(q.memory_config() if isinstance(q, ttnn.Tensor) else None, shape,',
             'shards = {"q": None and _height_shards(q.memory_config() if isinstance(q, ttnn.Tensor) else None, shape,',
             "a height-sharded host Q is silently read as DRAM interleaved",
             tests=("tests/emulator/test_emulator_sharded.py::test_a_height_sharded_host_q_is_read_from_l1",)),
    # Split-K with Q row tiles (issue 20 item 6): the combine runs a round per row tile.
    Mutation("combine-rounds-share-row-0-max", "combine",
             "rescale_state(m_own, rounds.m_request, rounds.first_step(), rounds.request_max_page(row));",
             "rescale_state(m_own, rounds.m_request, rounds.first_step(), 0);",
             "slice 0 rescales every row tile's state by row tile 0's request max, while its children's partials "
             "are relative to their own row tile's",
             tests=("tests/test_wide_gqa.py::test_large_negative_scores_every_row_tile[4]",)),
    Mutation("max-first-rounds-share-row-0-max", "attend_block_after_max",
             "probabilities(live, rounds.m_request, rounds.request_max_page(row));",
             "probabilities(live, rounds.m_request, 0);",
             "slice 0's max-first rounds exponentiate every row tile against row tile 0's request max",
             tests=("tests/test_wide_gqa.py::test_mla_like_128_heads_per_kv_head[sink-3]",)),
    Mutation("combine-round-adds-to-the-wrong-row-tile", "CombineRounds",
             "between(kRowTiles > 1 ? StateTo::kTemp : StateTo::kState)",
             "between(StateTo::kState)",
             "a round's rescaled state goes to the back of the state CBs, so its children's partials are added to "
             "the next row tile's state at the front (combine and max-first rounds alike)",
             tests=("tests/test_wide_gqa.py::test_large_negative_scores_every_row_tile[4]",
                    "tests/test_wide_gqa.py::test_mla_like_128_heads_per_kv_head[sink-3]")),
    Mutation("split-slices-copy-one-row-tile-of-q", "attention_reader.cpp:kernel_main",
             "            read_bytes(core_noc_addr(parent, stage_base), stage, kRowTiles * kDimTiles * kTileBytes);",
             "            read_bytes(core_noc_addr(parent, stage_base), stage, kDimTiles * kTileBytes);",
             "slices 1.. copy only row tile 0 of the parent's staged Q: the other row tiles score stale L1",
             tests=("tests/test_wide_gqa.py::test_mla_like_128_heads_per_kv_head[sink-3]",)),
    # Row-tile users (issue 20 item 4): spec_multi_pos_tiles candidates against one scan of the cache.
    Mutation("row-tile-users-share-the-request-mask", "add_tail_mask",
             "const uint32_t mask_page = kRowTileUsers",
             "const uint32_t mask_page = false",
             "every candidate takes the request's (the furthest candidate's) masks: the others attend positions "
             "past their own bound",
             tests=("tests/test_spec_multi_pos.py::test_spec_candidates_far_apart_lse_and_sinks[1]",)),
    Mutation("row-tile-users-idle-candidate-not-zeroed", "normalise",
             "        normalise_row(m, idle || row_kv_positions(p, row) == 0);",
             "        normalise_row(m, idle);",
             "an idle candidate (-1) in a live group writes the mean of the killed columns' V, not zeros",
             tests=("tests/test_spec_multi_pos.py::test_spec_candidates_far_apart_lse_and_sinks[1]",)),
    Mutation("row-tile-users-tail-masks-of-candidate-0", "fetch_row_tile_masks",
             "            const uint32_t own = p.kv_positions_at(static_cast<int32_t>(l1_word(positions, row_tile_user(p.user, r, true))));",
             "            const uint32_t own = p.kv_positions_at(static_cast<int32_t>(l1_word(positions, row_tile_user(p.user, 0, true))));",
             "the reader builds every candidate's tail mask from candidate 0's bound",
             tests=("tests/test_spec_multi_pos.py::test_spec_candidates_far_apart_lse_and_sinks[8]",)),
    Mutation("row-tile-users-read-to-the-first-bound", "read_positions",
             "        for (uint32_t t = 0; t < (kRowTileUsers ? kRowTiles : 1); ++t) {",
             "        for (uint32_t t = 0; t < 1; ++t) {",
             "the reader reads only up to the group's first candidate's bound, not its furthest",
             tests=("tests/test_spec_multi_pos.py::test_spec_candidates_far_apart_lse_and_sinks[8]",)),
    # bf16 DST (issue 20): a block's row sums accumulate in row_sum_groups DST tiles, then are added.
    Mutation("row-sums-in-one-chain", "block_row_sums",
             "    const uint32_t groups = live < kRowSumGroups ? (live == 0 ? 1 : live) : kRowSumGroups;",
             "    const uint32_t groups = 1;",
             "a bf16 DST sums a long block's row sums in one chain of bfloat16 steps: each row's L off by ~1%",
             tests=("tests/test_attention_adversarial.py::test_bf16_dst_row_sums_of_a_long_block[0]",)),
    Mutation("row-sums-group-dropped", "block_row_sums",
             "    for (uint32_t g = 1; g < groups; ++g) {",
             "    for (uint32_t g = 2; g < groups; ++g) {",
             "one group's share of the block row sum is never added: L too small, the output too large",
             tests=("tests/test_attention_adversarial.py::test_bf16_dst_row_sums_of_a_long_block[0]",)),
    # Several Q row tiles per request (issue 20 item 6, issue 22): one K/V read serves every row tile.
    Mutation("row-tile-reads-row-tile-0-query", "block_scores",
             "scores(p, live, p.block_first_tile(block), row * kDimTiles, row_kv_positions(p, row));",
             "scores(p, live, p.block_first_tile(block), 0, row_kv_positions(p, row));",
             "every row tile of a wide KV group scores row tile 0's query: heads 32.. take heads 0..31's attention",
             tests=("tests/test_wide_gqa.py::test_decode_heads_past_one_tile_row[1-64-1]",)),
    Mutation("row-tile-kv-freed-after-the-first", "last_row",
             "return row + 1 == kRowTiles;",
             "return row == 0;",
             "K and V are freed after the first row tile: the others read the next block (or wait for one never sent; "
             "a max-first slice, the padding block)",
             tests=("tests/test_wide_gqa.py::test_large_negative_scores_every_row_tile",
                    "tests/test_wide_gqa.py::test_mla_like_128_heads_per_kv_head[sink-3]")),
    Mutation("row-tile-pages-one-head-apart", "row_tile_pages",
             "return head_rows() ? dim_tiles : kTilePositions * dim_tiles; }",
             "return dim_tiles; }",
             "Q's activation layout: row tile r of a group reads and writes heads r.. instead of 32 r..",
             tests=("tests/test_wide_gqa.py::test_wide_group_reads_its_kv_once[64-1]",)),
    Mutation("row-tile-sink-of-row-tile-0", "fold_sink",
             "    const uint32_t sink = kConstPageSink + row;",
             "    const uint32_t sink = kConstPageSink;",
             "every row tile of a wide group folds in row tile 0's sinks",
             tests=("tests/test_wide_gqa.py::test_mla_like_128_heads_per_kv_head[sink-1]",)),
    # Values from keys (issue 22, MLA): one tensor as K and V is read once, P . V from CB K.
    Mutation("values-from-keys-pv-waits-on-cb-v", "kCbValues",
             "constexpr uint32_t kCbValues = kValuesFromKeys ? kCbK : kCbV;",
             "constexpr uint32_t kCbValues = kCbV;",
             "P . V waits on CB V, which the reader never fills when V is K",
             tests=("tests/test_mla.py::test_mla_decode_drop_in_deepseek_heads[positions0]",)),
    Mutation("values-from-keys-k-freed-before-pv", "block_scores",
             "if (last_row(row) && !kValuesFromKeys) {",
             "if (last_row(row)) {",
             "K is freed after the last row tile's scores, before P . V reads it as V: the reader refills it "
             "(max-first split slices alike)",
             tests=("tests/test_mla.py::test_mla_attention_form_split_and_unsplit_with_large_logits[1]",
                    "tests/test_mla.py::test_mla_decode_drop_in_deepseek_heads[positions1]")),
    Mutation("values-from-keys-reads-v-anyway", "stream_kv",
             "            continue;  // V is this K block (compute reads it from CB K)",
             "            (void)0;  // V is this K block (compute reads it from CB K)",
             "the reader still reads V when V is K: twice the latent's bytes",
             tests=("tests/test_mla.py::test_mla_latent_dram_bytes_against_the_minimum",)),
    # Whole-tile Q (issue 22): 32 heads of one user in the heads layout are read as tiles, once.
    Mutation("whole-tile-query-never-taken", "query_is_whole_tiles",
             "        if (tile.query_row_of(s) != s || ",
             "        if (tile.query_row_of(s) != s + 1 || ",
             "the heads layout's whole row tiles are gathered row by row: Q's bytes twice",
             tests=("tests/test_mla.py::test_mla_latent_dram_bytes_against_the_minimum",)),
    Mutation("whole-tile-query-reads-dim-tile-0", "gather_query",
             "noc_async_read_page(tile.q.first_page() + tile.query_page(0, d, kQWidthTiles), q_reader, pages + d * kTileBytes);",
             "noc_async_read_page(tile.q.first_page() + tile.query_page(0, 0, kQWidthTiles), q_reader, pages + d * kTileBytes);",
             "every dim tile of a whole-tile Q is its dim tile 0",
             tests=("tests/test_mla.py::test_mla_decode_drop_in_deepseek_heads[positions0]",)),
    # The scaler and scale tiles made in L1 from their distinct rows (issue 20: window bytes).
    Mutation("scale-row-not-replicated", "fetch_constants",
             "    for (uint32_t row = 1; row < kTilePositions; ++row) {",
             "    for (uint32_t row = kTilePositions; row < kTilePositions; ++row) {",
             "the scale tile keeps only its row 0 (Q's scale is its [0, 0]), so the zero tiles an idle or "
             "empty request makes from it (scale - scale) carry L1's NaN poison",
             tests=("tests/test_wide_gqa.py::test_ttnn_heads_layout_paged_with_an_idle_user[8]",)),
    Mutation("scaler-not-zeroed", "fetch_constants",
             "        l1_set_word(scaler, word, 0);\n",
             "",
             "the reduce scaler's rows other than 0 and 16 keep L1's poison: row max and row sum go NaN",
             tests=("tests/test_sliding_window.py::test_decode_window_at_tile_edges_with_poison_outside[33-1]",)),
    # Circular caches (issue 20, item 1: cache_position_modulo): the page-table lookup wraps.
    Mutation("circular-cache-not-wrapped", "cache_slot_tile",
             "return wrap_tiles == 0 ? tile : tile % wrap_tiles; }",
             "return tile; }",
             "a circular cache is read at the logical position's tile: past the first wrap, entries past the slots",
             tests=("tests/test_circular_cache.py::test_decode_wraps_at_every_edge[1-129]",)),
    Mutation("circular-cache-wraps-a-tile-late", "cache_slot_tile",
             "return wrap_tiles == 0 ? tile : tile % wrap_tiles; }",
             "return wrap_tiles == 0 ? tile : tile % (wrap_tiles + 1); }",
             "the slots wrap one tile late: positions read from the wrong slots once the cache has wrapped",
             tests=("tests/test_circular_cache.py::test_decode_wraps_at_every_edge[3-901]",)),
    # Blocks of 16 positions (issue 20, item 6): two blocks' top halves per position tile.
    Mutation("half-blocks-swapped", "read_half_blocks",
             "dst + d * kKvTileBytes + half * kKvTileBytes / 2,",
             "dst + d * kKvTileBytes + (1 - half) * kKvTileBytes / 2,",
             "blocks of 16: each block's rows land in the other half of the position tile",
             tests=("tests/test_small_blocks.py::test_decode_on_blocks_of_16[1-positions1]",)),
    Mutation("half-blocks-one-entry", "half_block_entry",
             "return 2 * tile + half;",
             "return tile + half;",
             "blocks of 16: position tile t read from entries t and t+1, not 2t and 2t+1",
             tests=("tests/test_small_blocks.py::test_decode_on_blocks_of_16[1-positions2]",)),
    # Users sharing a page-table row (issue 20 item 4: spec_multi_pos_tiles's candidates).
    Mutation("spec-candidates-own-table-row", "stream_kv",
             "    PageTableRow table(p.user / kUsersPerTableRow, table_page);",
             "    PageTableRow table(p.user, table_page);",
             "each speculative candidate reads page-table row of its own index, not its group's",
             tests=("tests/test_spec_multi_pos.py::test_two_groups_independent_bounds_and_an_idle_candidate",)),
    # Attention masks (issue 20, item 3): each head's mask rows, clamped, added once per block.
    Mutation("mask-not-added", "apply_score_modifiers",
             "reconfigured |= add_attn_mask(t);",
             "",
             "the attention mask is read but never added to the scores",
             tests=("tests/test_attention_mask.py::test_mask_any_values_every_user_or_one_for_all[1-1]",)),
    Mutation("mask-not-clamped", "clamp_mask_word",
             "    return clamp_mask_half(word & 0xFFFFu) | clamp_mask_half(word >> 16) << 16;",
             "    return word;",
             "-inf and NaN mask entries reach the scores: a K block masked whole for a row gives exp(-inf + inf) = NaN",
             tests=("tests/test_attention_mask.py::test_mask_any_values_every_user_or_one_for_all[1-1]",)),
    Mutation("mask-row-of-the-first-head", "attn_mask_row",
             "        return (first_q_head(q_width_tiles) + stage_head(s)) % kTilePositions;",
             "        return first_q_head(q_width_tiles) % kTilePositions;",
             "every Q head of a group takes the group's first head's mask row",
             tests=("tests/test_attention_mask.py::test_mask_any_values_every_user_or_one_for_all[1-1]",)),
    Mutation("mask-of-user-0", "attn_mask_page",
             "        return ((user % mask_users) * head_tiles + head / kTilePositions) * capacity_tiles + tile;",
             "        return (head / kTilePositions) * capacity_tiles + tile;",
             "every user takes user 0's mask",
             tests=("tests/test_attention_mask.py::test_mask_any_values_every_user_or_one_for_all[3-1]",)),
    # ttnn's decode layout (issue 13, item 4): Q and output [1, b, nh, dh], a user's heads on rows.
    Mutation("head-rows-tile-stride-q-width", "query_page",
             "            return (query_row_of(s) / kTilePositions) * dim_tiles + d;",
             "            return (query_row_of(s) / kTilePositions) * q_width_tiles + d;",
             "a group whose heads straddle a row tile reads (and writes) its second tile's rows in the wrong page",
             tests=("tests/test_transformer_dropin.py::test_heads_layout_groups_may_straddle_a_row_tile",)),
    Mutation("head-rows-ignored", "query_row_of",
             "return query_row + (head_rows() ? stage_head(s) : stage_row(s));",
             "return query_row + stage_row(s);",
             "every head of a group reads row query_row: the heads layout is addressed like one row per user",
             tests=("tests/test_transformer_dropin.py::test_decode_step_with_the_drop_in_matches_float64",)),
    # Block-float K/V (issue 13, item 2): tiles of the cache's size and layout.
    Mutation("kv-dim-tile-stride-bfloat16", "read_block",
             "            noc_async_read_page(first + d, reader, dst + d * kKvTileBytes, 0, kv_read_noc(first + d));",
             "            noc_async_read_page(first + d, reader, dst + d * kTileBytes, 0, kv_read_noc(first + d));",
             "a block-float K/V tile lands at a bfloat16 tile's stride in the CB",
             tests=("tests/test_block_float_kv.py::test_decode_on_a_block_float_cache[bfloat8_b-1]",)),
    Mutation("v-unpacker-left-on-bfloat16", "weighted_values",
             "    formats(kCbValues, kCbScratch, kCbO);",
             "    formats(kCbScratch, kCbScratch, kCbO);",
             "P.V unpacks a block-float V with SrcA still configured for bfloat16 (on a card: garbage values)",
             tests=("tests/test_block_float_kv.py::test_decode_on_a_block_float_cache[bfloat8_b-1]",)),
    Mutation("kv-stale-rows-bfloat16-layout", "zero_rows",
             "kv_face_row_offset(row, half, kKvTileBytes);",
             "face_row_offset(row, half);",
             "a block-float tile's stale rows are zeroed where a bfloat16 tile keeps them: poison stays",
             tests=("tests/test_block_float_kv.py::test_poison_past_each_position_never_reaches_the_output",)),
    # Paged KV caches (issue 13, item 1): every position tile through the user's page-table row.
    Mutation("page-table-entry-ignored", "cache_tile_page",
             ": cache_block * cache_block_pages + first_page + (tile % cache_block_tiles) * dim_tiles;",
             ": first_page + tile * dim_tiles;",
             "a paged cache is read as if contiguous: the page table is never followed",
             tests=("tests/test_paged_kv.py::test_decode_through_a_random_page_table[64-1]",)),
    Mutation("page-table-chunk-never-reloaded", "entry_at",
             "        if (entry - first_ >= count_) {",
             "        if (count_ == 0) {",
             "only the first 256-entry chunk of a long page-table row is ever loaded",
             tests=("tests/test_paged_kv.py::test_long_page_table_crosses_reader_chunks",)),
    Mutation("page-table-row-of-user-0", "stream_kv",
             "    PageTableRow table(p.user / kUsersPerTableRow, table_page);",
             "    PageTableRow table(0, table_page);",
             "every request walks user 0's page-table row",
             tests=("tests/test_paged_kv.py::test_decode_through_a_random_page_table[64-1]",)),
    Mutation("bad-page-table-entry-followed", "cache_block_valid",
             "    return entry >= 0 && uint32_t(entry) < cache_blocks;",
             "    return true;",
             "a device-side page-table entry outside the cache is followed: the reader reads past the cache",
             tests=("tests/test_paged_kv.py::test_reader_never_follows_an_entry_outside_the_cache",)),
    # Poisoned caches (issue 13, item 3): the stale rows of the last live tile are zeroed.
    Mutation("stale-v-rows-kept", "stream_kv",
             "        zero_stale_rows(kCbV, p, block);\n",
             "",
             "V's slots past the position keep the cache's NaN/Inf: P = 0 times NaN poisons the row",
             tests=("tests/test_poisoned_cache.py::test_decode_ignores_poison_past_each_position[cur_pos0-1]",)),
    # Trace-safe decode (issue 12): positions are read on device, per request, per replay.
    Mutation("positions-entry-of-user-0", "read_positions",
             "const uint32_t user = row_tile_user(p.user, t, kRowTileUsers);",
             "const uint32_t user = row_tile_user(0, t, kRowTileUsers);",
             "every request reads user 0's POSITIONS entry (the reader; compute still reads its own)",
             tests=("tests/test_trace_safe.py::test_replay_same_program_over_tokens_matches_float64[decode-1-1-None]",)),
    Mutation("idle-slot-normalised", "normalise_row",
             "    if (idle) {\n        zero_dst(0);\n    } else {",
             "    if (false) {\n        zero_dst(0);\n    } else {",
             "an idle slot's empty state is normalised: 0 * (1 / 0) is NaN in its output rows",
             tests=("tests/test_trace_safe.py::test_idle_slots_read_no_kv_and_give_zero_rows[1]",)),
    Mutation("position-past-cache-not-clamped", "kv_positions_at",
             "return uint32_t(live < low ? low : live > high ? high : live);",
             "return uint32_t(live < low ? low : live);",
             "a device-side position past the cache is not clamped: the reader walks off the end of the cache",
             tests=("tests/test_trace_safe.py::test_replay_clamps_and_reports_positions_the_host_never_saw",)),
    Mutation("wrong-mask-index", "attention_protocol.hpp:mask_tile",
             "return kConstTailMaskTile + first_row;",
             "return kConstTailMaskTile + first_row - 1;",
             "the tail tile loses its last live position"),
    Mutation("wrong-causal-tile", "attention_protocol.hpp:mask_tile",
             "return kConstCausalMaskTile + rows_per_head() - 1;",
             "return kConstCausalMaskTile + rows_per_head() - 2;",
             "CHUNK: a tile-aligned chunk takes causal mask C-2, so its last row misses its own position"),
    Mutation("before-last-tile-unmasked", "mask_page",
             "return tile + 1 == live_tiles() ? kConstPageMask : kConstPageMaskBefore;",
             "return tile + 1 == live_tiles() ? kConstPageMask : kNoMask;",
             "CHUNK/ROWS: the tile before the last live one is not masked, so early rows see later positions"),
    Mutation("wrong-staircase-width", "row_width",
             "const uint32_t live = kv_positions - rows_per_head() + row + 1;  // this row's live positions",
             "const uint32_t live = kv_positions - rows_per_head() + 2 * row + 1;  // this row's live positions",
             "ROWS/CHUNK: the staircase steps two positions per row, so later rows see positions past their own"),
    Mutation("mask-row-by-head", "fetch_masks",
             "const uint32_t width = p.row_width(tile, p.stage_row(s));",
             "const uint32_t width = p.row_width(tile, p.stage_head(s));",
             "ROWS: a gathered mask row takes its head's index for its row's, so the staircase is wrong"),
    Mutation("correction-factor-not-exponentiated", "correction",
             "sub_tiles(m_old, m_new, 0, row, 0);\n    live_exp_tile(0);",
             "sub_tiles(m_old, m_new, 0, row, 0);",
             "C = M_OLD - M_NEW instead of exp(M_OLD - M_NEW)"),
    Mutation("stale-init-for-correction", "correction",
             "sub_tiles(m_old, m_new, 0, row, 0);",
             "sub_tiles(m_new, m_new, 0, row, 0);",
             "C = exp(0) = 1 and the subtraction runs on CBs its init was not for (the emulator refuses it)"),
    Mutation("off-by-one-tiles-read", "read_block",
             "    for (uint32_t t = 0; t < p.live_tiles_in_block(block); ++t) {",
             "    for (uint32_t t = 0; t + 1 < p.live_tiles_in_block(block); ++t) {",
             "the last live position tile of each block is never fetched"),
    Mutation("wrong-scale", "fetch_constants",
             ": RowCopy{first + kConstScaleTile, 0, scale, 0};",
             ": RowCopy{first + kConstScalerTile, 0, scale, 0};",
             "Q is scaled by the reduce scaler (1.0) instead of 1/sqrt(head_dim)"),
    Mutation("combine-adds-wrong-row-sum", "add_children",
             "add_tiles(l, kCbPartials, 0, l_j, 0);",
             "add_tiles(l, kCbPartials, 0, o_j, 0);",
             "the split-K sum pass adds a child's first O tile to L instead of its row sums"),
    Mutation("max-pass-ignores-children", "share_max",
             "copy_tile(kCbMaxInbox, j, 1);\n        live_max_tile(0, 1, 0);",
             "copy_tile(kCbMaxInbox, j, 1);",
             "the split-K max pass keeps each slice's own max, so a larger max elsewhere overflows exp()"),
    Mutation("max-first-uses-own-max", "attend_block_after_max",
             "probabilities(live, rounds.m_request, rounds.request_max_page(row));",
             "probabilities(live, kCbMA, 0);",
             "a one-block split slice exponentiates against its own max, so partials on different scales are summed"),
    Mutation("combine-keeps-own-max", "combine",
             "rescale_state(m_own, rounds.m_request,",
             "rescale_state(m_own, rounds.root ? rounds.m_request : m_own,",
             "split-K slices 1.. rescale by exp(own M - own M) = 1, so partials on different scales are summed"),
    Mutation("unnormalised-output", "normalise_row",
             "recip_tile(0);",
             "",
             "OUT = O * l instead of O / l"),
    # Adversarial numerics (issue 14): bugs that unit-normal scores never reach -- only scores far
    # from 0 (all below -88, or block maxima far apart) make exp() underflow or overflow float32.
    Mutation("kill-mask-word-zero", "kKillMaskWord",
             "constexpr uint32_t kKillMaskWord = 0xF14AF14Au;",
             "constexpr uint32_t kKillMaskWord = 0x00000000u;",
             "the kill mask the reader fills for an empty slice is 0, not MASK_VALUE: its M is 0, so with every live "
             "score below -100 the request's max is 0 and every exp() underflows"),
    Mutation("empty-slice-max-not-masked", "empty_state",
             "copy_pages(kCbConst, kConstPageMask, 1, m_state);",
             "copy_pages(kCbConst, kConstPageScale, 1, m_state);",
             "an empty split-K slice's running max is the scale (~0) instead of MASK_VALUE: with every live score "
             "below -100 the request's max is ~0 and every exp() underflows (l = 0, NaN output)"),
    # NoC ordering (issue 14)
    Mutation("gather-landing-barrier-dropped", "gather_row_chunks",
             "        }\n        wait_for_reads();\n        for (uint32_t j = 0; j < n; ++j) {",
             "        }\n        for (uint32_t j = 0; j < n; ++j) {",
             "the Q rows are copied out of the landing page before their DRAM reads have arrived"),
    Mutation("gather-copy-barrier-dropped", "gather_row_chunks",
             "kFaceRowBytes);\n            }\n        }\n        wait_for_reads();",
             "kFaceRowBytes);\n            }\n        }",
             "the next landing round overwrites the landing page while the previous round's local copies read it"),
    Mutation("partial-signalled-before-write-barrier", "send_to_parent",
             "    noc_async_write_barrier();\n    signal_core(parent, kSemArrived + p.tree_slot());",
             "    signal_core(parent, kSemArrived + p.tree_slot());\n    noc_async_write_barrier();",
             "split-K: a slice tells its parent its max / partial has arrived before the write is flushed"),
    Mutation("max-fetched-signalled-before-read-barrier", "fetch_request_max",
             "    wait_for_reads();\n    signal_core(parent, kSemMaxFetched);",
             "    signal_core(parent, kSemMaxFetched);\n    wait_for_reads();",
             "split-K: a slice tells its parent it has copied the request's max while the copy is still in flight"),
    Mutation("query-fetched-signalled-before-read-barrier", "attention_reader.cpp:kernel_main",
             "            wait_for_reads();\n            signal_core(parent, kSemFetched);",
             "            signal_core(parent, kSemFetched);\n            wait_for_reads();",
             "split-K: a slice tells its parent it has copied Q and CONST while the copies are still in flight"),
    # Both NoCs for K/V (issue 35, item 3; tt-metal #55898).
    Mutation("kv-barrier-on-own-noc-only", "kv_read_barrier",
             "        noc_async_read_barrier(1 - noc_index);",
             "        (void)0;",
             "a K/V block is pushed while its reads on the other NoC are still in flight (a barrier covers one NoC)",
             tests=("tests/test_both_nocs.py::test_gqa_bfloat16_reads_kv_on_both_nocs",)),
    Mutation("kv-reads-on-one-noc", "kv_read_noc",
             "        return (turn & 1) != 0 ? 1 - noc_index : noc_index;",
             "        return noc_index;",
             "every K/V read stays on the reader's NoC: #55898's per-NoC request rate caps small pages",
             tests=("tests/test_both_nocs.py::test_mla_values_from_keys_reads_the_latent_on_both_nocs",)),
    Mutation("kv-noc-by-page-parity", "kv_read_noc",
             "NUM_DRAM_BANKS % 2 == 0 ? page + page / NUM_DRAM_BANKS : page;",
             "page;",
             "K/V NoCs alternate by page parity alone: with an even bank count every bank is read on one NoC",
             tests=("tests/test_both_nocs.py::test_every_dram_bank_hears_both_nocs",)),
    Mutation("kv-both-nocs-in-dedicated-mode", "kv_read_noc",
             "    if constexpr (noc_mode != DM_DYNAMIC_NOC) {\n        return noc_index;\n    } else {",
             "    {",
             "the reader alternates NoCs even when built DM_DEDICATED_NOC (on a card: the other kernel's command "
             "buffers and barrier counters)",
             tests=("tests/test_both_nocs.py::test_paged_reads_kv_on_both_nocs[64]",)),
    Mutation("program-dedicated-noc-mode", "ttnn_flashdecode/op/data_movement.py",
             "        noc_mode=ttnn.NOC_MODE.DM_DYNAMIC_NOC,",
             "        noc_mode=ttnn.NOC_MODE.DM_DEDICATED_NOC,",
             "the program builds its data-movement kernels in dedicated mode: every K/V read on one NoC",
             tests=("tests/test_both_nocs.py::test_split_k_reads_kv_on_both_nocs",)),
    Mutation("partial-other-noc-not-awaited", "send_to_parent",
             "        noc_async_write_barrier(1 - noc_index);\n",
             "",
             "the parent's arrival semaphore rises before the partial's other-NoC half has landed",
             tests=("tests/test_both_nocs.py::test_split_k_partials_go_up_the_tree_on_both_nocs[gqa-d128]",)),
    Mutation("partial-other-noc-half-misplaced", "send_to_parent",
             "noc_async_write(get_read_ptr(from) + own, destination + own, bytes - own, 1 - noc_index);",
             "noc_async_write(get_read_ptr(from) + own, destination, bytes - own, 1 - noc_index);",
             "the partial's second half lands over its first in the parent's inbox",
             tests=("tests/test_both_nocs.py::test_split_k_partials_go_up_the_tree_on_both_nocs[gqa-d128]",)),
    Mutation("partial-one-noc", "own_noc_bytes",
             "return noc_mode == DM_DYNAMIC_NOC && pages > 1 ? (pages + 1) / 2 * page_bytes : pages * page_bytes;",
             "return pages * page_bytes;",
             "the partials stay on the writer's NoC: a combine level's transfer on one link",
             tests=("tests/test_both_nocs.py::test_split_k_partials_go_up_the_tree_on_both_nocs[gqa-d128]",)),
    Mutation("emulator-barrier-lands-every-noc", "ttnn_flashdecode/emulator/src/runtime.cpp",
             "        return f.owner == &k && read == reads && f.noc == noc;",
             "        return f.owner == &k && read == reads;",
             "the emulator's barrier clears the other NoC's transfers from L1's in-flight ranges too: a push after a "
             "one-NoC barrier passes",
             tests=("tests/emulator/test_emulator_nocs.py::test_barrier_on_one_noc_leaves_the_other_nocs_reads_in_flight",)),
    Mutation("emulator-dedicated-noc-unchecked", "ttnn_flashdecode/emulator/src/runtime.cpp",
             "    if (k.noc_mode == 0 && noc != k.noc)",
             "    if (false && noc != k.noc)",
             "the emulator lets a DM_DEDICATED_NOC kernel issue on the other NoC",
             tests=("tests/emulator/test_emulator_nocs.py::test_dedicated_kernel_on_the_other_noc_is_refused",)),
    # Scheduler and pair (issue 14)
    Mutation("schedule-counts-round-down", "ttnn_flashdecode/op/schedule.py",
             "return [min(cap, max(1, -(-t // load))) for t, cap in zip(live, caps)]",
             "return [min(cap, max(1, t // load)) for t, cap in zip(live, caps)]",
             "slices per request round down, so a request of 1.9 loads stays whole on one core at 1.9x the load",
             tests=("tests/test_schedule_balance.py",)),
    # The fused cache append (issue 37 part 2, kernels/attention_append.hpp)
    Mutation("append-row-at-wrong-position", "patch_appended_rows",
             "dst + d * kv_tile_bytes, position % kTilePositions};",
             "dst + d * kv_tile_bytes, (position + 1) % kTilePositions};",
             "the new row lands one row late in the K/V page: the poisoned old row is attended and written back",
             tests=APPEND_SLICE),
    Mutation("append-written-to-the-other-face", "patch_appended_rows",
             "cache.get_noc_addr(page + d, offset)",
             "cache.get_noc_addr(page + d, offset ^ kFaceBytes)",
             "the patched face rows go to the other face of the DRAM tile (left half of the row to the right)",
             tests=APPEND_SLICE),
    Mutation("append-stale-row-attended", "patch_appended_rows",
             "            gather(rows_reader,",
             "            if (false) gather(rows_reader,",
             "the new rows never reach the L1 page: attention reads the cache's old row (poison) and writes it back",
             tests=APPEND_SLICE),
    Mutation("append-rows-of-another-user", "append_page",
             "(j * batch + user) * head_tiles",
             "(j * batch + (user + 1) % batch) * head_tiles",
             "each user appends the next user's rows",
             tests=APPEND_SLICE),
    Mutation("append-stage-never-handed-to-the-writer", "stream_kv",
             "    stage.push();",
             "",
             "the reader keeps the request's write-backs: the writer waits for them forever (or, after the "
             "first request, the reader does), and the cache is never written",
             tests=APPEND_SLICE),
    # The fused append into bfloat8_b caches (pack_block_float_face_row<7>: ttnn's host packing, on the reader)
    Mutation("append-bfp8-exponent-not-updated", "pack_block_float_face_row",
             "l1_set_byte(tile + exponent, shared);",
             "",
             "the new row's data are packed under its shared exponent but the tile keeps the old row's exponent",
             tests=BFP8_APPEND_SLICE),
    Mutation("append-bfp8-mantissa-truncated", "block_float_datum",
             "if (rest > kHalf || (rest == kHalf && (mantissa & 1u) != 0)) {",
             "if (false) {",
             "mantissas truncated instead of rounded to nearest (ttnn's host packer rounds)",
             tests=BFP8_APPEND_SLICE),
    Mutation("append-bfp8-ties-away-from-even", "block_float_datum",
             "(rest == kHalf && (mantissa & 1u) != 0)",
             "(rest == kHalf)",
             "a tie rounds up instead of to even",
             tests=BFP8_APPEND_SLICE),
    Mutation("append-bfp8-denormals-kept", "block_float_datum",
             "if ((bits & 0x7F800000u) == 0) {",
             "if ((bits & 0x7FFFFFFFu) == 0) {",
             "a bfloat16 denormal packed with a hidden bit instead of flushed to 0 as ttnn's packer does",
             tests=BFP8_APPEND_SLICE),
    Mutation("append-bfp8-exponents-not-written-back", "patch_appended_rows",
             "stage.add(dst + d * kv_tile_bytes + exponents, cache.get_noc_addr(page + d, exponents));",
             "",
             "the face's exponents are patched in L1 (attention is right) but never written to the cache in DRAM",
             tests=BFP8_APPEND_SLICE),
    # The fused append into bfloat4_b caches (pack_block_float_face_row<3>; 16-byte read-modify-write pieces)
    Mutation("append-bfp4-nibbles-swapped", "pack_block_float_face_row",
             "<< (kDatum * b);",
             "<< (kDatum * (kPerWord - 1 - b));",
             "the data of a word packed in the wrong order (bfloat4_b: datum 0 of a byte in the high nibble)",
             tests=BFP4_APPEND_SLICE),
    Mutation("append-bfp4-ties-away-from-even", "block_float_datum",
             "(rest == kHalf && (mantissa & 1u) != 0)",
             "(rest == kHalf)",
             "a 3-bit tie rounds up instead of to even",
             tests=BFP4_APPEND_SLICE),
    Mutation("append-bfp4-top-not-clamped", "block_float_datum",
             "mantissa = mantissa > kTop ? kTop : mantissa;",
             "",
             "a magnitude rounded past 7 (1.875 and up) overflows into the sign bit instead of clamping at 7",
             tests=BFP4_APPEND_SLICE),
    Mutation("append-bfp4-denormals-kept", "block_float_datum",
             "if ((bits & 0x7F800000u) == 0) {",
             "if ((bits & 0x7FFFFFFFu) == 0) {",
             "a bfloat16 denormal packed into a bfloat4_b row with a hidden bit instead of flushed to 0",
             tests=BFP4_APPEND_SLICE),
    Mutation("append-bfp4-exponent-not-updated", "pack_block_float_face_row",
             "l1_set_byte(tile + exponent, shared);",
             "",
             "the bfloat4_b row's data are packed under its shared exponent but the tile keeps the old exponent",
             tests=BFP4_APPEND_SLICE),
    Mutation("append-bfp4-neighbour-zeroed-before-staging", "stream_kv",
             "patch_appended_rows(kCbK, p, block, table, 0, stage, gather_append);\n        }\n"
             "        zero_stale_rows(kCbK, p, block);",
             "zero_stale_rows(kCbK, p, block);\n            patch_appended_rows(kCbK, p, block, table, 0, stage, "
             "gather_append);\n        }",
             "K's stale rows (past cur_pos) zeroed in L1 before the append stages its pieces: a bfloat4_b piece's "
             "other face row, past cur_pos, is written back to the cache as zeros (the read-modify-write's hazard)",
             tests=BFP4_APPEND_SLICE),
    # The drop-ins' fused append (op/transformer.py, op/mla.py)
    Mutation("append-dropin-paged-rows-dropped", "ttnn_flashdecode/op/transformer.py",
             "append_k=append_k, append_v=append_v,\n                           return_lse=return_lse)\n"
             "    if not candidates:",
             "return_lse=return_lse)\n    if not candidates:",
             "the paged drop-in drops append_k / append_v: the cache is not updated and the old rows are attended",
             tests=("tests/test_fused_append_dropins.py",)),
    Mutation("append-dropin-latent-dropped", "ttnn_flashdecode/op/mla.py",
             'keywords = keywords | {"append_k": append_latent}',
             "keywords = keywords",
             "the MLA drop-ins drop append_latent silently",
             tests=("tests/test_fused_append_dropins.py",)),
    Mutation("noc-y-low-byte", "core_noc_y",
             "return word >> 16;",
             "return (word >> 16) & 0xFFu;",
             "the NoC table's y coordinate keeps its low byte, so a core at y >= 256 is addressed at y - 256 "
             "(every grid the attention tests run is below that)",
             tests=("tests/test_protocol_pair.py::test_header_free_function_matches_its_twin",)),
    # accurate_scores (issue 35 item 4): a float32 S CB, each score rounded to TF32 to nearest.
    Mutation("accurate-scores-cb-bfloat16", "ttnn_flashdecode/op/residency.py",
             "if residency.fp32_scores and cb == CB.S:",
             "if False and residency.fp32_scores and cb == CB.S:",
             "accurate_scores packs S as bfloat16 despite the mode (the kernel still rounds to TF32 first)",
             tests=(_USERS_CASE,)),
    Mutation("accurate-scores-not-rounded", "kAccurateScores",
             "constexpr bool kAccurateScores = args::accurate_scores() != 0;",
             "constexpr bool kAccurateScores = false;",
             "the float32 scores are packed unrounded: every read through SrcA truncates them to TF32, so each "
             "weight exp(S - M) is biased low by up to an ulp of |S|",
             tests=(_USERS_CASE,)),
    Mutation("accurate-scores-rounding-truncates", "round_scores_to_tf32",
             "        live_round_to_tf32(0, 1);\n        return true;",
             "        bitwise_and_tile_init();\n        MATH(SFPU_UNARY_CALL(DST_SYNC_MODE, DST_ACCUM_MODE, "
             "calculate_sfpu_unary_bitwise, (APPROX, ckernel::sfpu::UnaryBitwiseOp::AND, DataFormat::Int32, 8), 0, "
             "kLiveFaces, kTf32KeptBits));\n        return true;",
             "the scores are truncated to TF32 (the AND without the half-ulp add): each weight biased low again",
             tests=(_USERS_CASE,)),
    Mutation("accurate-scores-rounded-after-the-tail-mask", "apply_score_modifiers",
             "reconfigured |= round_scores_to_tf32();\n    reconfigured |= add_tail_mask(p, tile, qs, own);",
             "reconfigured |= add_tail_mask(p, tile, qs, own);\n    reconfigured |= round_scores_to_tf32();",
             "S is rounded after the tail mask, whose add has already moved it through SrcA and truncated it",
             tests=(_USERS_CASE,)),
    Mutation("accurate-scores-mask-sum-not-rounded", "apply_score_modifiers",
             "if constexpr (kMaskUsers != 0) {\n        round_scores_to_tf32();\n    }",
             "",
             "S + an attention mask's bias is packed unrounded, so SrcA truncates it and biases the weights",
             tests=("tests/test_accurate_scores.py::test_an_attention_mask_is_added_and_rounded_again",)),
    Mutation("accurate-scores-on-a-bfloat16-dst", "ttnn_flashdecode/op/compute_options.py",
             'if as_bool("accurate_scores", accurate_scores) and not fp32_dest_acc_en:',
             'if as_bool("accurate_scores", accurate_scores) and False:',
             "the mode is accepted with a bfloat16 DST, which has rounded S to bfloat16 before it is packed",
             tests=("tests/test_accurate_scores.py::test_bad_accurate_scores_are_refused_by_name",
                    "tests/test_accurate_scores.py::test_the_compute_options_refuse_the_mode_on_a_bfloat16_dst")),
    # Sparse decode (issue 37): a user's list compacted, its rows gathered into a virtual sequence.
    Mutation("sparse-padding-kept", "sparse_index_live",
             "return index >= 0 && index <= last;",
             "return index >= -1 && index <= last;",
             "-1 padding is kept as a listed position (position -1: a row outside the cache)",
             tests=("tests/test_sparse.py::test_sparse_mla_decode_matches_float64[2-512-100-positions0]",)),
    Mutation("sparse-device-mask-dropped", "sparse_index_live",
             "return index >= 0 && index <= last;",
             "return index >= 0;",
             "a device list's entries past cur_pos are attended (the host never saw them)",
             tests=("tests/test_sparse.py::test_sparse_device_mask_drops_entries_past_cur_pos",)),
    Mutation("sparse-gather-at-cache-row", "gather_sparse_tile",
             "const uint32_t target = tile_dst + kv_face_row_offset(j, half, kSparseTileBytes);",
             "const uint32_t target = tile_dst + kv_face_row_offset(at.row, half, kSparseTileBytes);",
             "a gathered row lands in its cache row's slot, not its virtual row's: rows collide, others stay stale",
             tests=("tests/test_sparse.py::test_sparse_gqa_with_its_own_values",)),
    Mutation("sparse-gather-one-face-row", "gather_sparse_tile",
             "for (uint32_t half = 0; half < 2; ++half) {\n                const uint64_t source",
             "for (uint32_t half = 0; half < 1; ++half) {\n                const uint64_t source",
             "only the first 16 columns of each gathered row are read",
             tests=("tests/test_sparse.py::test_sparse_gqa_with_its_own_values",)),
    Mutation("sparse-positions-not-rewritten", "sparse_virtual_positions",
             "l1_set_word(page, sparse_count_word(r), kv_positions[r] - 1);",
             "(void)page;",
             "compute is told the user's cur_pos, not the virtual sequence's length: tail masks and slices disagree "
             "with the reader's",
             tests=("tests/test_sparse.py::test_sparse_mla_decode_matches_float64[2-512-100-positions0]",)),
    Mutation("sparse-child-list-not-copied", "sparse_list_from_parent",
             "read_bytes(core_noc_addr(parent, page), page, kSparsePageBytes);",
             "(void)parent;",
             "a split slice uses its own uninitialised list instead of its parent's",
             tests=("tests/test_sparse.py::test_sparse_split_slices_share_the_list",)),
    Mutation("sparse-paged-tile-in-block", "sparse_cache_row",
             "within / kTilePositions * kDimTiles",
             "within / kTilePositions",
             "a paged position past a block's first tile is read from the wrong dim tile's page",
             tests=("tests/test_sparse.py::test_sparse_paged_latent_through_a_shuffled_page_table",)),
    Mutation("sparse-host-past-cur-pos-allowed", "ttnn_flashdecode/op/sparse.py",
             "past = np.argwhere(values[b] > position)",
             "past = np.argwhere(values[b] > position + 1)",
             "the host lets an entry one past cur_pos through (the device drops it silently)",
             tests=("tests/test_sparse.py::test_sparse_refuses_by_name",)),
    # Sparse decode on bfloat8_b caches and with a list per KV head (issue 37's two gaps).
    Mutation("sparse-bfp8-exponent-not-copied", "attention_sparse.hpp:flush",
             "l1_set_byte(destination_[i] + 16 * face, l1_byte(landed + 16 * face));",
             "",
             "a gathered bfloat8_b row keeps the exponents its virtual row's slot held (poison, another row's)",
             tests=("tests/test_sparse_formats.py::test_sparse_bfp8_latent_matches_float64[False]",)),
    Mutation("sparse-bfp8-exponent-one-face", "attention_sparse.hpp:flush",
             "for (uint32_t face = 0; face < 2; ++face) {",
             "for (uint32_t face = 0; face < 1; ++face) {",
             "only the left face row's exponent of a gathered bfloat8_b row is copied: the right half keeps a stale one",
             tests=("tests/test_sparse_formats.py::test_sparse_bfp8_latent_matches_float64[False]",)),
    Mutation("sparse-bfp8-exponent-of-row-0", "sparse_exponent_offset",
             "return (row / 16) * 32 + row % 16;",
             "return (row / 16) * 32;",
             "every gathered bfloat8_b row takes the exponents of its half's first row",
             tests=("tests/test_sparse_formats.py::test_sparse_bfp8_latent_matches_float64[True]",)),
    Mutation("sparse-phase-hole-not-advanced", "pair_by_phase",
             "l1_set_word(l1_, j, l1_word(scratch, next[c]++));",
             "l1_set_word(l1_, j, l1_word(scratch, next[c]));",
             "a virtual row no entry of its phase is left for takes the same leftover entry as the next: one entry "
             "counts twice, another is lost",
             tests=("tests/test_sparse_formats.py::test_sparse_bfp8_latent_matches_float64[False]",)),
    Mutation("sparse-bfp8-unpaired", "kPairByPhase",
             "constexpr bool kPairByPhase = kSparsePhases > 1;",
             "constexpr bool kPairByPhase = false;",
             "bfloat8_b entries stay in list order: about half the 16-byte data rows land through 32-byte reads",
             tests=("tests/test_sparse_formats.py::test_sparse_bfp8_bytes_at_2048_of_32k",)),
    Mutation("sparse-per-head-list-of-head-0", "sparse_list_page",
             "return p.user * kSparseLists + p.first_q_head(kQWidthTiles) / kSparseGqa;",
             "return p.user * kSparseLists;",
             "every KV head of a user attends head 0's list",
             tests=("tests/test_sparse_formats.py::test_sparse_lists_per_kv_head[attention-bfloat16]",)),
    Mutation("sparse-count-word-shared", "sparse_count_word",
             "return r;",
             "return 0;",
             "a core's requests leave their counts in one word: compute runs each with the last one's count",
             tests=("tests/test_sparse_formats.py::test_sparse_lists_per_kv_head[attention-one-core-bfloat16]",)),
    Mutation("sparse-per-head-lists-as-users", "ttnn_flashdecode/op/validate.py",
             "sparse_heads=1 if sparse is None else sparse.heads",
             "sparse_heads=1",
             "the program reads a list per user from lists laid out per KV head: user 1 attends user 0's head 1 list",
             tests=("tests/test_sparse_formats.py::test_sparse_lists_per_kv_head[sdpa_decode-bfloat16]",)),
]


def _mutated_copy(mutation: Mutation, into: pathlib.Path) -> pathlib.Path:
    """Copy kernels/ (and, for a host mutation, the package) into ``into``, mutate, return kernels/."""
    target = into / "kernels"
    shutil.copytree(KERNELS, target)
    if mutation.host:
        shutil.copytree(ROOT / PACKAGE, into / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    path, start, end = locate(mutation, target, into)
    text = path.read_text()
    # The match starts at the snippet's first token, after the line's indentation: so does the edit
    # (Python's indentation is its syntax).
    path.write_text(text[:start] + mutation.mutated.strip() + text[end:])
    return target


def run(mutation: Mutation) -> tuple[bool, float, str]:
    """Run the slice against ``mutation``; returns (caught, seconds, last lines of output)."""
    with tempfile.TemporaryDirectory() as tmp:
        kernels = _mutated_copy(mutation, pathlib.Path(tmp))
        env = dict(os.environ, TTNN_FLASHDECODE_KERNEL_DIR=str(kernels))
        if mutation.host:
            env["PYTHONPATH"] = os.pathsep.join([tmp, *filter(None, [os.environ.get("PYTHONPATH")])])
            # The copy's conftest names the copy's mock cluster; the parent's would make mock-device tests skip.
            env.pop("TT_METAL_MOCK_CLUSTER_DESC_PATH", None)
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-P", "-m", "pytest", "-x", "-q", *SLICE_PLUGINS_OFF, *mutation.slice],
                                cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    # tt-metal's log lines (its mock cluster's teardown) follow pytest's summary: keep pytest's own.
    lines = [line for line in (result.stdout + result.stderr).strip().splitlines() if " | " not in line]
    failures = [line for line in lines if line.startswith("FAILED ")]
    tail = "\n".join(failures[:1] or lines[-3:])
    # pytest exit 1 = tests failed; anything else (usage error, nothing collected) is not a catch.
    return result.returncode == 1, seconds, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run one mutation by name")
    parser.add_argument("--check-anchors", action="store_true", help="only check every mutation finds its snippet")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.only in (None, m.name)]
    if not chosen:
        parser.error(f"--only: expected one of {[m.name for m in MUTATIONS]}, got {args.only!r}")
    if args.check_anchors:
        unanchored = []
        for mutation in chosen:
            try:
                locate(mutation, KERNELS, ROOT)
            except SystemExit as why:
                print(why)
                unanchored.append(mutation.name)
        print(f"{len(chosen) - len(unanchored)} of {len(chosen)} mutations anchored")
        return 1 if unanchored else 0
    missed = []
    for mutation in chosen:
        caught, seconds, tail = run(mutation)
        print(f"{'CAUGHT' if caught else 'MISSED'}  {mutation.name:36s} {seconds:5.1f}s  ({mutation.bug})")
        if caught:
            print(f"    {tail[:160]}")
        if not caught:
            print("    " + tail.replace("\n", "\n    "))
            missed.append(mutation.name)
    print(f"{len(chosen) - len(missed)} of {len(chosen)} mutations caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
