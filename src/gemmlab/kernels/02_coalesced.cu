// Rung 2 — naive, coalesced.                 seeds: 002 gemm_v01, 000 gemm_32x32_v1 / v2
//
// What changes against rung 1 (naive, non-coalesced): only the thread -> element mapping.
// threadIdx.x % BN (the lane-fast index) now walks the COLUMNS j of C, threadIdx.x / BN the rows.
// Why it is faster: with row-major B and C, the 32 lanes of a warp now read B(k, j..j+31) — one
// contiguous 128-byte row segment, a single coalesced transaction — and store C(i, j..j+31) the
// same way, while A(i, k) is the same address for the whole warp (one broadcast load). Rung 1
// needed 32 transactions for every warp-wide access of C and of A. The arithmetic is unchanged:
// still two global loads per FMA, nothing reused from on-chip memory (that is rung 4's job).
// 000 v2 is v1 with threadIdx.x hoisted into a local variable, which changed what nvcc 10
// generated for the inner loop; here the index is computed once into `tid` anyway.
// Seed figures (docs/journal/ladder.md): in 000 and 002 coalescing alone made the naive kernel
// several times faster.
//
// Geometry: THREADS = BM * BN threads, thread t -> C(row0 + t / BN, col0 + t % BN).
#include "common.cuh"

static_assert(THREADS == BM * BN, "rung 2 uses one thread per element of the BM x BN tile");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    // lane-fast index -> column of C (the "right" one for row-major B and C)
    const int tid = threadIdx.x;
    const int i = GL_TILE_ROW * BM + tid / BN;   // row of C
    const int j = blockIdx.x * BN + tid % BN;   // column of C
    if (i >= M || j >= N) return;               // no barriers in this kernel: early exit is safe

    // ---- main loop: K FMAs, two global loads each (A broadcast, B coalesced) --------------------
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc = fmaf(gl_to_float(A[gl_a_off(i, k, lda)]), gl_to_float(B[gl_b_off(k, j, ldb)]), acc);

    // ---- epilogue: coalesced store of one row segment of C per warp ----------------------------
    gl_store_c(C, ldc, i, j, acc, GL_EPI(alpha, beta));
}
