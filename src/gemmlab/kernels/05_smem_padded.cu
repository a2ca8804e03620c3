// Rung 5 — shared-memory tiling, padded rows.              seeds: 000 gemm_32x32_v4, Alcanderian sgemm_2
//
// What changes against rung 4 (shared-memory tiling): ONLY the row length of the two shared
// tiles, BK + 1 = 33 floats instead of 32 (000 v4's `sA[TILE_WIDTH][TILE_WIDTH | 1]`). Loads,
// barriers, inner loop and epilogue are rung 4's, line for line.
// Why it is faster: shared memory has 32 banks of 4 bytes; word w lives in bank w % 32. In rung 4
// the warp's inner-loop read Bs[tx][k] (tx = lane) hit addresses tx*32 + k, all in bank k: a
// 32-way conflict that replays every LDS 32 times. With 33-float rows the addresses are
// tx*33 + k, in banks (tx + k) % 32 — 32 different banks, one wavefront per LDS. The same holds
// for the column stores of the tile loads (Bs[tx][ty] for row-major B, As[tx][ty] for
// column-major A). As[ty][k] stays a broadcast. (The 132-byte rows are no longer 16-byte aligned,
// so the reads are scalar LDS instead of rung 4's LDS.128: more instructions, but per 4 k-steps
// 4 + 4 wavefronts (A + B) instead of 1 + 32.) The price: 32 unused floats per tile (8448 bytes
// of shared memory per block instead of 8192).
// Seed figures (docs/journal/ladder.md): in 000 the padding alone made v4 several times faster
// than v3; Alcanderian sgemm_2 (padded, __restrict__) was likewise several times faster than
// sgemm_3 (same, unpadded).
//
// Geometry: THREADS = BM * BN, BM = BN = BK; thread t -> tx = t % BN (lane-fast, column of C),
// ty = t / BN (row of C); it computes C(row0 + ty, col0 + tx).
#include "common.cuh"

static_assert(BM == BN && BN == BK && THREADS == BM * BN, "rung 5: square tiles, one thread per element of C");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
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
        // ---- load: global -> shared, one element of each tile per thread ---------------------
        // The lane (tx) walks the operand's contiguous dimension, so the global loads are
        // coalesced in every layout; out-of-matrix elements are stored as 0.
#if GL_A_COL
        As[tx][ty] = gl_load_a(A, lda, M, K, row0 + tx, k0 + ty);   // lane along m (column store)
#else
        As[ty][tx] = gl_load_a(A, lda, M, K, row0 + ty, k0 + tx);   // lane along k (row store)
#endif
#if GL_B_COL
        Bs[ty][tx] = gl_load_b(B, ldb, K, N, k0 + tx, col0 + ty);   // lane along k (row store)
#else
        Bs[tx][ty] = gl_load_b(B, ldb, K, N, k0 + ty, col0 + tx);   // lane along n (column store)
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
