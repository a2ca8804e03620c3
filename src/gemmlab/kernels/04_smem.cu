// Rung 4 — shared-memory tiling 32 x 32.     seeds: 000 gemm_32x32_v3, 002 gemm_v02, Alcanderian sgemm_1
//
// What changes against rung 3 (warp shuffle): the classic tiled GEMM with one thread per element
// of C (1024 threads, 32 x 32 tile, BK = 32). Per K-step the block stages a 32 x 32 tile of A and
// of B in shared memory (each thread loads one element of each), synchronizes, and every thread
// runs 32 FMAs reading both operands from shared memory; the accumulator is a register.
// Why it is faster than the naive rungs: every element of A and B staged in shared memory is
// reused by 32 threads, so global/L2 traffic per FMA falls by 32x (rung 2 issued two global loads
// per FMA). Rung 3 already staged slices, but paid a shuffle plus a shared read-modify-write of
// its output tile; here the inner loop is just LDS + LDS + FFMA.
//
// THE DELIBERATE FLAW (removed by rung 5): the B tile is stored TRANSPOSED, Bs[n][k], with rows
// of exactly 32 floats, as 000 gemm_32x32_v3 stores its tile. In the inner loop the 32 lanes of a
// warp (tx = 0..31, one row ty of C) read Bs[tx][k]: a COLUMN of Bs, addresses tx*32 + k, which
// all fall into bank k % 32 — a 32-way bank conflict, so each of the 32 LDS per K-step is
// replayed 32 times. (As[ty][k] is one address for the whole warp: a broadcast, no conflict.)
// The tile stores conflict the same way whenever the lane walks the second index: Bs[tx][ty] for
// row-major B, As[tx][ty] for column-major A.
// SASS note: because the unpadded rows are 128 bytes (16-byte aligned), nvcc merges four k-steps
// of each read into one LDS.128. That does not save it: a 128-bit shared load is served a
// quarter-warp (8 lanes) at a time, and the 8 lanes' Bs[tx][k..k+3] all sit in banks k..k+3, an
// 8-way conflict per quarter — 32 wavefronts per LDS.128 where 4 would do.
// Why B and not A as in the seed: 000 is column-major with lane -> row of C, so its lanes read a
// column of its A tile. gemmlab's C is row-major with lane -> column of C (coalesced, rung 2);
// through C^T = B^T A^T the seed's A tile IS our B tile, read the same way. The A read of our
// warp is a broadcast, and no layout of As can make a broadcast conflict.
// Seed figures (docs/journal/ladder.md): 000 v3 ran SLOWER than the untiled v2, exactly because
// of these conflicts; the conflict-free 002 v02 was faster than its untiled v01; Alcanderian
// sgemm_1 (unpadded, lane -> row) was slow like 000 v3.
//
// Geometry: THREADS = BM * BN, BM = BN = BK; thread t -> tx = t % BN (lane-fast, column of C),
// ty = t / BN (row of C); it computes C(row0 + ty, col0 + tx).
#include "common.cuh"

static_assert(BM == BN && BN == BK && THREADS == BM * BN, "rung 4: square tiles, one thread per element of C");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    __shared__ float As[BM][BK];   // [BM rows m][BK k's]: As[m][k] = A(row0+m, k0+k)
    __shared__ float Bs[BN][BK];   // [BN cols n][BK k's]: Bs[n][k] = B(k0+k, col0+n), TRANSPOSED, unpadded

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

        // ---- main loop: 32 FMAs from shared memory; Bs[tx][k] is a 32-way bank conflict -------
#pragma unroll
        for (int k = 0; k < BK; ++k)
            acc = fmaf(As[ty][k], Bs[tx][k], acc);
        __syncthreads();   // the tiles are consumed before the next K-step overwrites them
    }

    // ---- epilogue: coalesced store, one row segment of C per warp -------------------------------
    gl_store_c_checked(C, ldc, M, N, row0 + ty, col0 + tx, acc, GL_EPI(alpha, beta));
}
