// Flash-decode attention, reader (data movement): gathers the group's query rows into one staged
// tile, fetches the constants each request needs, and streams the live K/V position tiles into the
// double-buffered K and V circular buffers, one block at a time.
//
// Compile-time args: positional = TensorAccessorArgs of Q, K, V, CONST, OUT (chained, in that
// order, same list for all three kernels); named = dim_tiles, block_tiles, tile_bytes.
// Runtime args: request count, then 16 parameter-block words per request (attention_protocol.hpp).
//
// Per request it pushes: QSTAGE dim_tiles pages; CONST 4 pages; then for each of the
// padded_tiles / block_tiles blocks, K and V block_tiles*dim_tiles pages each. Only live position
// tiles are read from DRAM: the pages of dead tiles are pushed unread because compute never
// unpacks them, so the padding costs no DRAM bandwidth.
#include <cstdint>

#include "api/dataflow/dataflow_api.h"
#include "api/debug/kernel_profiler.hpp"
#include "attention_protocol.hpp"

using namespace flashdecode;

namespace {

constexpr uint32_t kDimTiles = get_named_compile_time_arg_val("dim_tiles");
constexpr uint32_t kBlockTiles = get_named_compile_time_arg_val("block_tiles");
constexpr uint32_t kTileBytes = get_named_compile_time_arg_val("tile_bytes");
constexpr uint32_t kBlockPages = kBlockTiles * kDimTiles;
static_assert(kTileBytes == 2048, "the reader gathers bfloat16 tile rows");
constexpr uint32_t kQueryChunkBytes = 64;
static_assert(2 * kDimTiles * kQueryChunkBytes <= kTileBytes, "one CB Q page lands every chunk of a head");

// A tile row is two 16-element face rows: faces 0/1 hold rows 0..15, faces 2/3 rows 16..31.

// QSTAGE row g = row `query_row` of Q head (group_first_head + g), for every dim tile. Only the
// row is fetched: each 32-byte face row comes in the 64-byte DRAM-aligned chunk around it (64 B is
// Blackhole's DRAM read alignment and a multiple of Wormhole's 32), lands in CB Q, and is copied
// into place over the core's own NoC, so source and destination alignment always match.
template <typename Accessor>
void gather_query(const Params& p, const Accessor& q_reader) {
    DeviceZoneScopedN("fd-reader-query");
    cb_reserve_back(kCbQStage, kDimTiles);
    cb_reserve_back(kCbQ, 1);
    const uint32_t stage = get_write_ptr(kCbQStage);
    const uint32_t landing = get_write_ptr(kCbQ);
    for (uint32_t g = 0; g < p.q_rows; ++g) {
        for (uint32_t d = 0; d < kDimTiles; ++d) {
            for (uint32_t half = 0; half < 2; ++half) {
                const uint32_t offset = face_row_offset(p.query_row, half);
                const uint32_t slot = landing + (d * 2 + half) * kQueryChunkBytes;
                const uint32_t page = p.q.first_page() + g * kDimTiles + d;
                noc_async_read(q_reader.get_noc_addr(page, offset & ~(kQueryChunkBytes - 1)), slot, kQueryChunkBytes);
            }
        }
        noc_async_read_barrier();
        for (uint32_t d = 0; d < kDimTiles; ++d) {
            for (uint32_t half = 0; half < 2; ++half) {
                const uint32_t offset = face_row_offset(p.query_row, half);
                const uint32_t src = landing + (d * 2 + half) * kQueryChunkBytes + offset % kQueryChunkBytes;
                noc_async_read(get_noc_addr(src), stage + d * kTileBytes + face_row_offset(g, half), kFaceRowBytes);
            }
        }
        noc_async_read_barrier();
    }
    cb_push_back(kCbQStage, kDimTiles);
}

// CONST pages: scaler, scale, this request's tail mask (when its last live tile is partial).
template <typename Accessor>
void fetch_constants(const Params& p, const Accessor& const_reader) {
    cb_reserve_back(kCbConst, kConstPages);
    const uint32_t pages = get_write_ptr(kCbConst);
    const uint32_t first = p.constants.first_page();
    noc_async_read_page(first + kConstScalerTile, const_reader, pages + kConstPageScaler * kTileBytes);
    noc_async_read_page(first + kConstScaleTile, const_reader, pages + kConstPageScale * kTileBytes);
    const uint32_t tail_mask = p.mask_tile(p.live_tiles() - 1);
    if (tail_mask != kNoMask) {
        noc_async_read_page(first + tail_mask, const_reader, pages + kConstPageTailMask * kTileBytes);
    }
    noc_async_read_barrier();
    cb_push_back(kCbConst, kConstPages);
}

// One K or V block: the live tiles of block `block`, position-major then dim (cache tile order).
template <typename Accessor>
void read_block(uint32_t cb, const Operand& region, const Accessor& reader, uint32_t block, uint32_t live) {
    const uint32_t pages = get_write_ptr(cb);
    const uint32_t first = region.first_page() + block * kBlockPages;
    for (uint32_t page = 0; page < live * kDimTiles; ++page) {
        noc_async_read_page(first + page, reader, pages + page * kTileBytes);
    }
}

}  // namespace

void kernel_main() {
    constexpr auto q_args = TensorAccessorArgs<0>();
    constexpr auto k_args = TensorAccessorArgs<q_args.next_compile_time_args_offset()>();
    constexpr auto v_args = TensorAccessorArgs<k_args.next_compile_time_args_offset()>();
    constexpr auto const_args = TensorAccessorArgs<v_args.next_compile_time_args_offset()>();

    const uint32_t requests = get_arg_val<uint32_t>(kArgRequestCount);
    for (uint32_t r = 0; r < requests; ++r) {
        const Params p = read_request([](uint32_t i) { return get_arg_val<uint32_t>(i); }, r);
        if (!p.valid_for(kDimTiles, kBlockTiles)) {
            continue;  // refused (the host refuses it first); all three kernels skip it alike
        }
        const auto q_reader = TensorAccessor(q_args, p.q.base, kTileBytes);
        const auto k_reader = TensorAccessor(k_args, p.k.base, kTileBytes);
        const auto v_reader = TensorAccessor(v_args, p.v.base, kTileBytes);
        const auto const_reader = TensorAccessor(const_args, p.constants.base, kTileBytes);

        gather_query(p, q_reader);
        fetch_constants(p, const_reader);

        DeviceZoneScopedN("fd-reader-kv");
        for (uint32_t block = 0; block < p.blocks(); ++block) {
            const uint32_t live = p.live_tiles_in_block(block);
            cb_reserve_back(kCbK, kBlockPages);
            cb_reserve_back(kCbV, kBlockPages);
            read_block(kCbK, p.k, k_reader, block, live);
            read_block(kCbV, p.v, v_reader, block, live);
            noc_async_read_barrier();
            cb_push_back(kCbK, kBlockPages);
            cb_push_back(kCbV, kBlockPages);
        }
    }
}
