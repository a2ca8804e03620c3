// Rung 14 — double buffering: ping-pong shared tiles + register prefetch, one barrier per tile.
//                                  seeds: 001 (128x128x8 sgemm with prefetch), 000 TWO_BUFFER
//
// What changes against rung 13 (register-blocked 128x128): rung 13 loads a tile, waits at a
// barrier, computes, and waits at a second barrier before it may overwrite the tile, so every
// global-load latency (~600 cycles on the H100) is exposed once per BK step and two barriers
// drain the pipeline. Here shared memory holds TWO tiles:
//   * at the top of tile t, each thread issues the global loads of tile t+1 into registers;
//   * it then computes tile t from shared buffer t&1 while those loads are in flight;
//   * it writes the prefetched registers into the OTHER buffer (t+1)&1 and meets ONE barrier.
// No thread can still be reading buffer (t+1)&1 then: it was last read during tile t-1, and
// every thread passed the barrier that ended tile t-1 after finishing it. So one barrier per tile
// is enough (001's point), and the load latency hides behind BK*TM*TN = 512 FMAs per thread.
// Thread layout as rung 13: a thread's TM x TN = 8x8 outputs are 2x2 blocks of 4x4 spaced BM/2
// and BN/2 apart, so the fragments are two LDS.128 of A and two of B per k.
// Seed figures (docs/journal/ladder.md): 001 comes close to cuBLAS on a V100 with bm=bn=128,
// bk=8, rm=rn=8; on the H100 the public ladders' double-buffered rungs lose to their
// single-buffered ones: the prefetch must not
// cost registers or spills, which the static guard (no local memory) enforces here.
#include "common.cuh"

#define SUBM (TM / 4)              // 4x4 blocks per thread along M
#define SUBN (TN / 4)              // ... along N
#define TY (BM / TM)               // threads along M
#define TX (BN / TN)               // threads along N
#define PAD_A 4                    // As row stride BM+4: the transposing stores hit distinct banks
#define PAD_B 4

static_assert(THREADS == TY * TX, "THREADS must be (BM/TM)*(BN/TN)");
static_assert(BM % TM == 0 && BN % TN == 0, "TM/TN must divide BM/BN");
static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "4x4 blocks need TM, TN, BK multiples of 4");

extern "C" __global__ void __launch_bounds__(THREADS, 2)
gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
     float beta, T* __restrict__ C, int ldc GL_EPI_PARAMS)
{
    __shared__ __align__(16) float As[2][BK][BM + PAD_A];   // [buffer][k][m]  A tile, transposed
    __shared__ __align__(16) float Bs[2][BK][BN + PAD_B];   // [buffer][k][n]

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    const int row0 = GL_TILE_ROW * BM, col0 = blockIdx.x * BN;

    GlATileLoader<BM, BK, THREADS, PAD_A> a_ld;
    GlBTileLoader<BK, BN, THREADS, PAD_B> b_ld;

    float acc[TM][TN];   // [4*SUBM rows][4*SUBN cols] register tile
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    // ---- prologue: tile 0 -> buffer 0 -----------------------------------------------------------
    const int tiles = GL_CEIL_DIV(K, BK);
    a_ld.load(A, lda, M, K, row0, 0, tid);
    b_ld.load(B, ldb, K, N, 0, col0, tid);
    a_ld.store(As[0], tid);
    b_ld.store(Bs[0], tid);
    __syncthreads();

    // ---- main loop: prefetch tile t+1 into registers, compute tile t, then publish t+1 ----------
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        const bool has_next = t + 1 < tiles;
        if (has_next) {
            a_ld.load(A, lda, M, K, row0, (t + 1) * BK, tid);
            b_ld.load(B, ldb, K, N, (t + 1) * BK, col0, tid);
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a_frag[TM], b_frag[TN];   // one column of A's and one row of B's thread tile
#pragma unroll
            for (int s = 0; s < SUBM; ++s)
                *reinterpret_cast<float4*>(&a_frag[4 * s]) =
                    *reinterpret_cast<const float4*>(&As[cur][k][s * (BM / SUBM) + ty * 4]);
#pragma unroll
            for (int s = 0; s < SUBN; ++s)
                *reinterpret_cast<float4*>(&b_frag[4 * s]) =
                    *reinterpret_cast<const float4*>(&Bs[cur][k][s * (BN / SUBN) + tx * 4]);
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
        const int row = row0 + (i / 4) * (BM / SUBM) + ty * 4 + (i % 4);
#pragma unroll
        for (int s = 0; s < SUBN; ++s) {
            const int col = col0 + s * (BN / SUBN) + tx * 4;
            gl_store_c4(C, ldc, M, N, row, col,
                        make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]), GL_EPI(alpha, beta));
        }
    }
}
