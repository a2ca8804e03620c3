// Rung 15 — warp tiling.                                              seed: 002 gemm_v06
//
// What changes against rung 14 (double buffering): only WHICH outputs a thread owns. Rung 14
// lays the 256 threads out as a 16 x 16 grid over the block tile, so one warp (2 rows x 16
// columns of threads) spans all 128 columns of B's tile: its B fragment reads touch 16 distinct
// float4 (2 shared-memory wavefronts per LDS.128). Here the block tile is first cut into warp
// tiles (WM x WN = 64 x 32 for 8 warps as 2 x 4), and the 32 lanes of a warp are laid out
// 8 x 4 inside their warp tile, each lane owning TM x TN = 8x8 outputs as 2x2 blocks of 4x4
// spaced 32 rows / 16 columns apart. A warp's LDS.128 of A then reads 8 distinct float4 and of B
// 4 distinct float4 (one wavefront each, the rest broadcast): 4 wavefronts per k instead of 6,
// and a warp's working set of shared memory and of C is compact (better locality), which is the
// block -> warp -> thread hierarchy of CUTLASS that seed 002's v06 teaches.
// Double buffering with register prefetch and one barrier per tile is kept from rung 14.
// Seed figures: docs/journal/ladder.md (the best public ladder figures on the H100).
// Split-K (SPLITK > 1, kernels/common.cuh): the loads start at this block's slice of K and the
// epilogue writes the FP32 partial tile to the workspace (alpha = 1, beta = 0); splitk_reduce.cu
// finishes. A and B stay kernel parameters: this rung has no register to spare for moved pointers.
#include "common.cuh"

#define SUBM (TM / 4)               // 4x4 blocks per thread along M
#define SUBN (TN / 4)               // ... along N
#define LY (WM / TM)                // lanes of a warp along M
#define LX (WN / TN)                // lanes of a warp along N
#define WARPS_N (BN / WN)           // warps along N
#define PAD_A 4                     // As row stride BM+4: the transposing stores hit distinct banks
#define PAD_B 4
static_assert(LY * LX == 32, "a warp tile must hold exactly 32 lanes of TM x TN outputs");
static_assert(BM % WM == 0 && BN % WN == 0 && WM % TM == 0 && WN % TN == 0, "the tiles must nest evenly");
static_assert(THREADS == 32 * (BM / WM) * (BN / WN), "THREADS must be one warp per WM x WN warp tile");

extern "C" __global__ void __launch_bounds__(THREADS, 2)
gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
     float beta, T* __restrict__ C, int ldc GL_EPI_PARAMS)
{
    __shared__ __align__(16) float As[2][BK][BM + PAD_A];   // [buffer][k][m]  A tile, transposed
    __shared__ __align__(16) float Bs[2][BK][BN + PAD_B];   // [buffer][k][n]

    // split-K: this block's slice of K is [k_first, K); C becomes its FP32 workspace slice, which
    // takes the partial sums as they are (alpha = 1, beta = 0: the reduction kernel applies the
    // caller's). A and B stay kernel parameters (no pointer registers: this rung sits at its
    // 128-register bound of two blocks per SM), the loads start at k_first instead.
    int k_first = 0;
#if GL_SPLITK
    C = gl_splitk_range(K, k_first, C, M, ldc, BK);
    alpha = 1.0f;
    beta = 0.0f;
#endif
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    // first row/column of this lane's outputs inside the block tile (sub-blocks add BM_SUB/BN_SUB)
    const int m_lane = (warp / WARPS_N) * WM + (lane / LX) * 4;
    const int n_lane = (warp % WARPS_N) * WN + (lane % LX) * 4;
    const int row0 = GL_TILE_ROW * BM, col0 = blockIdx.x * BN;

    GlATileLoader<BM, BK, THREADS, PAD_A> a_ld;
    GlBTileLoader<BK, BN, THREADS, PAD_B> b_ld;

    float acc[TM][TN];   // [4*SUBM rows][4*SUBN cols] register tile
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    // ---- prologue: tile 0 -> buffer 0 -----------------------------------------------------------
    const int tiles = GL_CEIL_DIV(K - k_first, BK);
    a_ld.load(A, lda, M, K, row0, k_first, tid);
    b_ld.load(B, ldb, K, N, k_first, col0, tid);
    a_ld.store(As[0], tid);
    b_ld.store(Bs[0], tid);
    __syncthreads();

    // ---- main loop: prefetch tile t+1 into registers, compute tile t, then publish t+1 ----------
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        const bool has_next = t + 1 < tiles;
        if (has_next) {
            a_ld.load(A, lda, M, K, row0, k_first + (t + 1) * BK, tid);
            b_ld.load(B, ldb, K, N, k_first + (t + 1) * BK, col0, tid);
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a_frag[TM], b_frag[TN];   // one column of A's and one row of B's thread tile
#pragma unroll
            for (int s = 0; s < SUBM; ++s)
                *reinterpret_cast<float4*>(&a_frag[4 * s]) =
                    *reinterpret_cast<const float4*>(&As[cur][k][m_lane + s * (LY * 4)]);
#pragma unroll
            for (int s = 0; s < SUBN; ++s)
                *reinterpret_cast<float4*>(&b_frag[4 * s]) =
                    *reinterpret_cast<const float4*>(&Bs[cur][k][n_lane + s * (LX * 4)]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        if (has_next) {
            a_ld.store(As[cur ^ 1], tid);
            b_ld.store(Bs[cur ^ 1], tid);
        }
        __syncthreads();
    }

    // ---- epilogue: alpha/beta, 128-bit stores where the row allows ------------------------------
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + m_lane + (i / 4) * (LY * 4) + (i % 4);
#pragma unroll
        for (int s = 0; s < SUBN; ++s) {
            const int col = col0 + n_lane + s * (LX * 4);
            gl_store_c4(C, ldc, M, N, row, col,
                        make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]), GL_EPI(alpha, beta));
        }
    }
}
