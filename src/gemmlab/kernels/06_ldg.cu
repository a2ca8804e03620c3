// Rung 6 — read-only data path (__ldg).                     seeds: 003 "ldg", Alcanderian sgemm_3
//
// What changes against rung 5 (padded shared tiling): A and B become `const float* __restrict__`
// and the tile loads go through __ldg(), which compiles to PTX ld.global.nc ("non-coherent") and
// SASS LDG.E...CONSTANT: the load is served by the read-only path of the unified L1/texture cache.
// Tiling, padding, barriers, inner loop and epilogue are rung 5's, line for line.
// Why it can be faster: the read-only path promises the hardware that the data cannot change
// during the kernel, so it needs no coherence with writes and (on Kepler, where the seed's slides
// come from) used the separate 48 KB texture cache instead of competing with L1 traffic. On Volta
// and later L1 and the texture cache are one unit and ordinary global loads are cached in it
// too, so the expected gain on an H100 is small to none: this rung exists to show that the lever
// used to matter and to let the benchmark measure whether it still does.
// (Here each element is loaded once per tile into shared memory, so caching hardly matters.)
// Seed figures: 003 shows the ldg version beside "vanilla" (PTX ld.global.nc, SASS LDG with
// TEXDEPBAR waits) without a separate number; in 000's table Alcanderian sgemm_3 (__restrict__,
// unpadded) ran no faster than sgemm_1 without it, while padding (sgemm_2) made it several times
// faster (docs/journal/ladder.md): the read-only path is a small lever next to bank conflicts.
//
// Geometry: THREADS = BM * BN, BM = BN = BK; thread t -> tx = t % BN (lane-fast, column of C),
// ty = t / BN (row of C); it computes C(row0 + ty, col0 + tx).
#include "common.cuh"

#if GL_DTYPE != 0
#error "rung 6 is fp32 only (__ldg of float)"
#endif

// Bounds-checked loads through the read-only path (ld.global.nc); 0 outside the matrix.
__device__ __forceinline__ float ldg_a(const float* __restrict__ A, int lda, int M, int K, int i, int k) {
    return (i < M && k < K) ? __ldg(A + gl_a_off(i, k, lda)) : 0.0f;
}
__device__ __forceinline__ float ldg_b(const float* __restrict__ B, int ldb, int K, int N, int k, int j) {
    return (k < K && j < N) ? __ldg(B + gl_b_off(k, j, ldb)) : 0.0f;
}

static_assert(BM == BN && BN == BK && THREADS == BM * BN, "rung 6: square tiles, one thread per element of C");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
     float beta, T* C, int ldc GL_EPI_PARAMS)
{
    __shared__ float As[BM][BK + 1];   // [BM rows m][BK k's + 1 pad]: As[m][k] = A(row0+m, k0+k)
    __shared__ float Bs[BN][BK + 1];   // [BN cols n][BK k's + 1 pad]: Bs[n][k] = B(k0+k, col0+n), transposed, PADDED

    const int tid = threadIdx.x;
    const int tx = tid % BN;       // lane-fast: column of C
    const int ty = tid / BN;       // row of C
    const int row0 = GL_TILE_ROW * BM;
    const int col0 = blockIdx.x * BN;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- load: global -> shared through __ldg (LDG.E.CONSTANT), one element per tile ------
        // The lane (tx) walks the operand's contiguous dimension, so the global loads are
        // coalesced in every layout; out-of-matrix elements are stored as 0.
#if GL_A_COL
        As[tx][ty] = ldg_a(A, lda, M, K, row0 + tx, k0 + ty);   // lane along m (column store)
#else
        As[ty][tx] = ldg_a(A, lda, M, K, row0 + ty, k0 + tx);   // lane along k (row store)
#endif
#if GL_B_COL
        Bs[ty][tx] = ldg_b(B, ldb, K, N, k0 + tx, col0 + ty);   // lane along k (row store)
#else
        Bs[tx][ty] = ldg_b(B, ldb, K, N, k0 + ty, col0 + tx);   // lane along n (column store)
#endif
        __syncthreads();

        // ---- main loop: 32 FMAs from shared memory; Bs[tx][k] now hits 32 different banks --
#pragma unroll
        for (int k = 0; k < BK; ++k)
            acc = fmaf(As[ty][k], Bs[tx][k], acc);
        __syncthreads();   // the tiles are consumed before the next K-step overwrites them
    }

    // ---- epilogue: coalesced store, one row segment of C per warp -------------------------------
    gl_store_c_checked(C, ldc, M, N, row0 + ty, col0 + tx, acc, GL_EPI(alpha, beta));
}
