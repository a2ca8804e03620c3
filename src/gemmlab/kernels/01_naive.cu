// Rung 1 — naive, non-coalesced.                       seeds: 002 gemm_v00, 000 gemm_32x32_v0
//
// What it is: the textbook triple loop, one thread per element of C. It is the baseline every
// other rung is measured against.
// Why it is slow: threadIdx.x (the fastest-varying index inside a warp) walks the ROWS of C.
// With row-major B and C, the 32 lanes of a warp then touch B(k, j) for one j but C(i..i+31, j):
// 32 different rows, 32 memory transactions per warp-wide store, and A(i..i+31, k) 32 rows apart
// for every k. Nothing is reused from on-chip memory: every FMA needs two global loads.
// Seed figures: docs/journal/ladder.md (the seeds' own figures).
#include "common.cuh"

static_assert(THREADS == BM * BN, "rung 1 uses one thread per element of the BM x BN tile");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    // block = BM x BN threads in a 1-D block; lane-fast index -> row (the "wrong" one)
    const int i = GL_TILE_ROW * BM + threadIdx.x % BM;   // row of C
    const int j = blockIdx.x * BN + threadIdx.x / BM;   // column of C
    if (i >= M || j >= N) return;

    // ---- main loop: K FMAs, two global loads each ------------------------------------------
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc = fmaf(gl_to_float(A[gl_a_off(i, k, lda)]), gl_to_float(B[gl_b_off(k, j, ldb)]), acc);

    // ---- epilogue ------------------------------------------------------------------------------
    gl_store_c(C, ldc, i, j, acc, GL_EPI(alpha, beta));
}
