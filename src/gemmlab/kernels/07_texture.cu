// Rung 7 — texture objects (tex1Dfetch<float>).                             seeds: 003 "texture"
//
// What changes against rung 5 (padded shared tiling): A and B are read through 1-D texture
// objects over linear memory, tex1Dfetch<float>(tex, index), instead of pointers: the SASS has a
// texture load TLD (TLD.LZ on sm_90, TLD.SCR.LZ on sm_80; Kepler's slides show TEX + TEXDEPBAR)
// instead of LDG. Tiling, padding, barriers, inner loop and epilogue are rung 5's, line for line
// (rung 6's __ldg is the other way to the same cache; this rung branches from rung 5).
// Why it can be faster: before Kepler's __ldg (sm_35), the texture path was the only way to
// reach the read-only texture cache from CUDA C; the seed's slides compare both. (A fetch
// outside the texture also returns 0 instead of faulting; this kernel never relies on it.)
// On Volta and later, textures and L1 share one unit and a TEX fetch has a longer latency than
// an LDG, so the expected result on an H100 is "no faster, maybe slower" — measured, not
// assumed, by the benchmark.
// Host contract (gemmlab/core/textures.py): texA / texB are cudaTextureObject_t for a 1-D
// linear float texture (1 channel, point filtering, element read mode) whose base is the
// operand's pointer aligned DOWN to the texture alignment; offA / offB are the element offsets
// of A / B from that base. The A / B pointer arguments are still passed (same launch contract as
// every rung) but not read. tex1Dfetch takes an int index: the host refuses operands wider than
// the device's 1-D linear texture limit (CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH,
// 2^27 or 2^28 texels), which keeps offX + offset below 2^31. Out-of-matrix elements are never
// fetched (bounds checks before the fetch).
// Seed figures: 003 shows the texture version (SASS TEXDEPBAR waits after the fetches) beside
// vanilla and __ldg, without a separate number; its float4 variant was the fastest of the five.
//
// Geometry: THREADS = BM * BN, BM = BN = BK; thread t -> tx = t % BN (lane-fast, column of C),
// ty = t / BN (row of C); it computes C(row0 + ty, col0 + tx).
#include "common.cuh"

#if GL_DTYPE != 0
#error "rung 7 is fp32 only (tex1Dfetch<float>)"
#endif

// Bounds-checked fetches through the texture unit; 0 outside the matrix (nothing fetched).
__device__ __forceinline__ float tex_a(cudaTextureObject_t tex, long long off0, int lda, int M, int K, int i, int k) {
    return (i < M && k < K) ? tex1Dfetch<float>(tex, (int)(off0 + (long long)gl_a_off(i, k, lda))) : 0.0f;
}
__device__ __forceinline__ float tex_b(cudaTextureObject_t tex, long long off0, int ldb, int K, int N, int k, int j) {
    return (k < K && j < N) ? tex1Dfetch<float>(tex, (int)(off0 + (long long)gl_b_off(k, j, ldb))) : 0.0f;
}

static_assert(BM == BN && BN == BK && THREADS == BM * BN, "rung 7: square tiles, one thread per element of C");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc,
     unsigned long long texA, long long offA, unsigned long long texB, long long offB GL_EPI_PARAMS)
{
    __shared__ float As[BM][BK + 1];   // [BM rows m][BK k's + 1 pad]: As[m][k] = A(row0+m, k0+k)
    __shared__ float Bs[BN][BK + 1];   // [BN cols n][BK k's + 1 pad]: Bs[n][k] = B(k0+k, col0+n), transposed, PADDED

    (void)A; (void)B;              // read through the textures below, not through the pointers
    const cudaTextureObject_t tA = (cudaTextureObject_t)texA;
    const cudaTextureObject_t tB = (cudaTextureObject_t)texB;

    const int tid = threadIdx.x;
    const int tx = tid % BN;       // lane-fast: column of C
    const int ty = tid / BN;       // row of C
    const int row0 = GL_TILE_ROW * BM;
    const int col0 = blockIdx.x * BN;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- load: texture fetch (TEX) -> shared, one element of each tile per thread -------
        // The lane (tx) walks the operand's contiguous dimension, so a warp fetches consecutive
        // texels in every layout; out-of-matrix elements are stored as 0.
#if GL_A_COL
        As[tx][ty] = tex_a(tA, offA, lda, M, K, row0 + tx, k0 + ty);   // lane along m (column store)
#else
        As[ty][tx] = tex_a(tA, offA, lda, M, K, row0 + ty, k0 + tx);   // lane along k (row store)
#endif
#if GL_B_COL
        Bs[ty][tx] = tex_b(tB, offB, ldb, K, N, k0 + tx, col0 + ty);   // lane along k (row store)
#else
        Bs[tx][ty] = tex_b(tB, offB, ldb, K, N, k0 + ty, col0 + tx);   // lane along n (column store)
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
