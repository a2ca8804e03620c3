// decode.cuh — what the decode rungs (24 decode: 16-bit; 28 decode_fp8: FP8) share after their main
// loops: the block's k-warps' partial tiles summed in shared memory, and a cluster split's slices
// summed through distributed shared memory, each in a fixed order (the result has the same bits on
// every run). Included after the rung's geometry: THIN_N (N is the thin side), NS and BR (the
// thin and wide sides of the tile), TILE (BR x NS outputs), WK (warps along K), THREADS.
#pragma once

// The tile's element (w, j) (wide, thin) in C's orientation: row-major [BR][NS] when N is thin
// (C's rows are P's), [NS][BR] when M is thin.
__device__ __forceinline__ int tile_index(int w, int j) { return THIN_N ? w * NS + j : j * BR + w; }

// The WK k-warps' partial tiles (red[z * TILE + e], z = the k-warp) added in order (z ascending);
// then out(e, i, j, sum) for each of the tile's elements e, at C's row i and column j.
template <class Out>
__device__ __forceinline__ void decode_sum_warps(const float* red, int row0, int col0, Out&& out) {
    constexpr int COLS = THIN_N ? NS : BR;
    for (int e = threadIdx.x; e < TILE; e += THREADS) {
        float s = red[e];
#pragma unroll
        for (int z = 1; z < WK; ++z) s += red[z * TILE + e];
        out(e, row0 + e / COLS, col0 + e % COLS, s);
    }
}

#if GL_SPLITK_CLUSTER
// The cluster's slices summed: block `rank` adds the rank-th 1/S of the tile over the S blocks'
// shared tiles (ascending), then out(i, j, sum) for each of its elements (C's row i, column j).
template <class Out>
__device__ __forceinline__ void decode_cluster_sum(const float* tile, int row0, int col0, Out&& out) {
    constexpr int S = GL_SPLITK_CLUSTER;
    constexpr int PART = GL_CEIL_DIV(TILE, S);
    constexpr int COLS = THIN_N ? NS : BR;
    gl_cluster_sync();                             // every block's partial tile written
    const unsigned rank = gl_cluster_rank();
    const unsigned local = (unsigned)__cvta_generic_to_shared(tile);
    const int first = (int)rank * PART, last = min(TILE, first + PART);
    // no per-slice arrays: the sum runs through the slices in order, each peer's address mapped
    // where it is read (an array of S values spilled 8 bytes under one ptxas for S = 3)
    for (int e = first + (int)threadIdx.x; e < last; e += THREADS) {
        float sum = 0.0f;
#pragma unroll
        for (int z = 0; z < S; ++z) {
            unsigned peer;
            float v;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(peer) : "r"(local + 4u * (unsigned)e), "r"(z));
            asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(peer));
            sum = z == 0 ? v : sum + v;
        }
        out(row0 + e / COLS, col0 + e % COLS, sum);
    }
    gl_cluster_sync_relaxed();                     // no block leaves while its tile is read
}
#endif
