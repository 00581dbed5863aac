// The named compile-time args, each declared once, in the order the program factory lists them
// (Plan.named_compile_time_args; tests/test_protocol_pair.py pins the two lists to each other).
//
// A kernel reads an arg by calling its accessor, `args::dim_tiles()`, into a constexpr. Accessors are
// templates, so one a kernel never calls is never looked up: the program factory gives each kernel
// only the args it calls (op/paths.py named_args_used), and an option only compute reads (the
// compute config, the softcap) does not rebuild the reader or the writer.
#pragma once

#include <cstdint>

#include "api/compile_time_args.h"

namespace flashdecode::args {

// Head dim in tiles (head_dim / 32).
template <int = 0> constexpr uint32_t dim_tiles() { return get_named_compile_time_arg_val("dim_tiles"); }
// Position tiles per K/V block.
template <int = 0> constexpr uint32_t block_tiles() { return get_named_compile_time_arg_val("block_tiles"); }
// Bytes of one bfloat16 tile of Q, CONST and the output.
template <int = 0> constexpr uint32_t tile_bytes() { return get_named_compile_time_arg_val("tile_bytes"); }
// DST tiles per acquire for the compute config.
template <int = 0> constexpr uint32_t dst_tiles() { return get_named_compile_time_arg_val("dst_tiles"); }
// The compute config's math_approx_mode (1: approximate exp). A named arg because tt-metal declares
// APPROX for the MATH and PACK threads only.
template <int = 0> constexpr uint32_t exp_approx() { return get_named_compile_time_arg_val("exp_approx"); }
// 1 at LoFi / HiFi2: the query scale and 1 / L multiply on the SFPU (attention_softmax.hpp).
template <int = 0> constexpr uint32_t row_scaling_on_sfpu() { return get_named_compile_time_arg_val("row_scaling_on_sfpu"); }
// DST tiles a block's row sums accumulate in before they are added (shape.py ComputeOptions.row_sum_groups).
template <int = 0> constexpr uint32_t row_sum_groups() { return get_named_compile_time_arg_val("row_sum_groups"); }
// Split-K inbox slots: ceil(log2(largest split)), 0 when nothing is split.
template <int = 0> constexpr uint32_t inbox_slots() { return get_named_compile_time_arg_val("inbox_slots"); }
// Tiles per row tile of Q and the output.
template <int = 0> constexpr uint32_t q_width_tiles() { return get_named_compile_time_arg_val("q_width_tiles"); }
// Bytes of the POSITIONS operand's one page: an int32 per user.
template <int = 0> constexpr uint32_t positions_bytes() { return get_named_compile_time_arg_val("positions_bytes"); }
// Bytes of one K/V tile in the cache's format (bfloat16, bfloat8_b or bfloat4_b).
template <int = 0> constexpr uint32_t kv_tile_bytes() { return get_named_compile_time_arg_val("kv_tile_bytes"); }
// Bytes of one work row (a WORK page).
template <int = 0> constexpr uint32_t work_row_bytes() { return get_named_compile_time_arg_val("work_row_bytes"); }
// The grid's width in cores (work_slot).
template <int = 0> constexpr uint32_t grid_x() { return get_named_compile_time_arg_val("grid_x"); }
// The KV cache's layout (attention_protocol.hpp "Paged KV cache"), all 0 for a contiguous cache:
// position tiles and pages per cache block, blocks, page-table entries per user, the circular
// cache's wrap in tiles, blocks of 16 positions (1), users sharing one page-table row.
template <int = 0> constexpr uint32_t cache_block_tiles() { return get_named_compile_time_arg_val("cache_block_tiles"); }
template <int = 0> constexpr uint32_t cache_block_pages() { return get_named_compile_time_arg_val("cache_block_pages"); }
template <int = 0> constexpr uint32_t cache_blocks() { return get_named_compile_time_arg_val("cache_blocks"); }
template <int = 0> constexpr uint32_t page_table_entries() { return get_named_compile_time_arg_val("page_table_entries"); }
template <int = 0> constexpr uint32_t cache_wrap_tiles() { return get_named_compile_time_arg_val("cache_wrap_tiles"); }
template <int = 0> constexpr uint32_t cache_half_blocks() { return get_named_compile_time_arg_val("cache_half_blocks"); }
template <int = 0> constexpr uint32_t users_per_table_row() { return get_named_compile_time_arg_val("users_per_table_row"); }
// The score modifiers' args, in their registry's order (op/modifiers: the order the kernel applies them).
// The logit softcap c and 1 / c as fp32 bits (computed on the host: kernels divide nothing), 0 for none.
template <int = 0> constexpr uint32_t softcap() { return get_named_compile_time_arg_val("softcap"); }
template <int = 0> constexpr uint32_t softcap_recip() { return get_named_compile_time_arg_val("softcap_recip"); }
// The sliding window in positions, 0 for none (attention_protocol.hpp "Sliding window").
template <int = 0> constexpr uint32_t window() { return get_named_compile_time_arg_val("window"); }
// The attention chunk in positions, 0 for none (attention_protocol.hpp "Chunked-local attention").
template <int = 0> constexpr uint32_t attention_chunk() { return get_named_compile_time_arg_val("attention_chunk"); }
// Users of the attention mask (1: broadcast over the batch), 0 without one ("Attention mask").
template <int = 0> constexpr uint32_t mask_users() { return get_named_compile_time_arg_val("mask_users"); }
// 1 when the call has attention sinks (attention_protocol.hpp "Attention sink").
template <int = 0> constexpr uint32_t sink() { return get_named_compile_time_arg_val("sink"); }
// 1 when the program writes the log-sum-exp (return_lse; attention_protocol.hpp "Log-sum-exp output").
template <int = 0> constexpr uint32_t lse() { return get_named_compile_time_arg_val("lse"); }
// Q row tiles per request, 1 normally (attention_protocol.hpp "Q row tiles").
template <int = 0> constexpr uint32_t row_tiles() { return get_named_compile_time_arg_val("row_tiles"); }
// 1 when V is K's block (MLA's latent; attention_protocol.hpp "Values from keys").
template <int = 0> constexpr uint32_t values_from_keys() { return get_named_compile_time_arg_val("values_from_keys"); }
// 1 when row tile r is user `user + r` (attention_protocol.hpp "Row-tile users").
template <int = 0> constexpr uint32_t row_tile_users() { return get_named_compile_time_arg_val("row_tile_users"); }
// 1 when CB S is float32 (accurate_scores): each score is rounded to TF32 before it is packed.
template <int = 0> constexpr uint32_t accurate_scores() { return get_named_compile_time_arg_val("accurate_scores"); }
// The fused cache append (attention_append.hpp): rows appended per user (0: none), the GQA ratio
// the KV heads and the batch (where a request's rows are in the APPEND operand).
template <int = 0> constexpr uint32_t append_rows() { return get_named_compile_time_arg_val("append_rows"); }
template <int = 0> constexpr uint32_t append_gqa() { return get_named_compile_time_arg_val("append_gqa"); }
template <int = 0> constexpr uint32_t append_kv_heads() { return get_named_compile_time_arg_val("append_kv_heads"); }
template <int = 0> constexpr uint32_t append_batch() { return get_named_compile_time_arg_val("append_batch"); }
// Entries per sparse index list, 0 for a dense call (attention_protocol.hpp "Sparse decode").
template <int = 0> constexpr uint32_t sparse_k() { return get_named_compile_time_arg_val("sparse_k"); }
// Sparse decode's index lists per user: 0 for a dense call, 1 (one list for every KV head) or
// n_kv_heads (a list per KV head); and the Q heads per KV head (a request's KV head is its first Q
// head / sparse_gqa).
template <int = 0> constexpr uint32_t sparse_lists() { return get_named_compile_time_arg_val("sparse_lists"); }
template <int = 0> constexpr uint32_t sparse_gqa() { return get_named_compile_time_arg_val("sparse_gqa"); }
// Rows of a row tile the SFPU must compute: every request's stage rows, rounded up to a multiple of
// 4 (an SFPU iteration's rows), 4..32 (attention_compute_sfpu.hpp; op/shape.py DecodeShape.live_rows).
template <int = 0> constexpr uint32_t live_rows() { return get_named_compile_time_arg_val("live_rows"); }

}  // namespace flashdecode::args
