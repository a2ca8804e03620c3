// decode.cuh — what the decode rungs (24 decode: 16-bit; 28 decode_fp8: FP8) share: the tile's
// geometry (a wide operand P streamed against a thin one Q), the 16-byte copy into their rings in
// shared memory, and after their main loops the block's k-warps' partial tiles summed in shared
// memory and a cluster split's slices summed through distributed shared memory, each in a fixed
// order (the result has the same bits on every run). Included after common.cuh; the rung's
// defines BM, BN, WK, THREADS (and L2PF) say the tile.
#pragma once
#ifndef L2PF
#define L2PF 0
#endif

// ---- geometry (the registry's constraints, core/decode.py's tile_constraints, restated) ---------
constexpr bool THIN_N = BN <= BM;                  // N thin: P = A (wide index m), Q = B
constexpr int NS = THIN_N ? BN : BM;               // the thin side of the tile: Q's columns
constexpr int BR = THIN_N ? BM : BN;               // the wide side: P's rows
constexpr int NT = NS / 8;                         // mma n-tiles
constexpr int WR = BR / 64;                        // warps along the rows (64 rows each)
constexpr int WARPS = THREADS / 32;
constexpr int TILE = BR * NS;                      // outputs of a block
static_assert(NS == 8 || NS == 16 || NS == 32, "the thin side min(BM, BN) must be 8, 16 or 32");
static_assert(BR % 64 == 0 && BR >= 64, "the wide side max(BM, BN) must be a multiple of 64 (64 rows per warp)");
static_assert(WARPS == WR * WK, "THREADS must be 32 * (max(BM, BN) / 64) * WK");

// The block's view of the problem: P (the wide operand, A when N is thin) and Q, their leading
// dimensions and extents, the tile's first row and column of C, of P (wide0) and of Q (thin0), and
// its slice of K, [k_first, k_end): all of K, or with a split (common.cuh) the block's slice.
struct DecodeView {
    const T* __restrict__ P;
    const T* __restrict__ Q;
    int ldp, ldq, n_wide, n_thin, row0, col0, wide0, thin0, k_first = 0, k_end;
    __device__ __forceinline__ DecodeView(int M, int N, int K, const T* A, int lda, const T* B, int ldb)
        : P(THIN_N ? A : B), Q(THIN_N ? B : A), ldp(THIN_N ? lda : ldb), ldq(THIN_N ? ldb : lda),
          n_wide(THIN_N ? M : N), n_thin(THIN_N ? N : M), row0(GL_TILE_ROW * BM), col0((int)blockIdx.x * BN),
          wide0(THIN_N ? row0 : col0), thin0(THIN_N ? col0 : row0), k_end(K) {
#if GL_SPLITK || GL_SPLITK_CLUSTER
        gl_splitk_bounds(k_end, k_first, BK);
#endif
    }
};

// One 16-byte unit to shared memory, `bytes` of it read (0..16), the rest zero: P's streamed past
// L1 (.cg, common.cuh's gl_cp; L2PF=1: the L2 fetches the 256 bytes around it, the rest of the
// run on its way), Q's kept in L1 (.ca: the warps along the rows of a block read the same Q).
template <bool STREAM>
__device__ __forceinline__ void cp16(unsigned dst, const T* src, int bytes) {
    if constexpr (!STREAM)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
    else if constexpr (L2PF)
        asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
    else
        gl_cp<16>(dst, src, bytes);
}

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
