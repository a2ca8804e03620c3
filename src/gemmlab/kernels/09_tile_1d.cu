// Rung 9 — 1D thread tiling.                                             seed: 002 gemm_v03
//
// What changes against rung 8 (accumulators in registers): the block tile becomes BM x BN =
// 64 x 64 with a thin BK = 8 slice of K per step, and each thread owns TM = 8 vertically adjacent
// outputs of ONE column of C (rows tm*TM .. tm*TM+TM-1, column tn). In the inner loop the thread
// reads the B value B(k, tn) from shared memory ONCE into a register and reuses it for its TM
// rows: per k, TM + 1 shared loads feed TM FMAs instead of 2 shared loads per FMA.
// Why it is faster: the previous rungs are bound by shared-memory (MIO) throughput — every FMA
// needed its own LDS. Cutting shared loads per FMA from 2 to (TM+1)/TM ~ 1.1 (and the A reads of
// a warp are broadcasts: all 32 lanes of a warp share the same rows) relieves the LDS pipe, and
// the 512-thread block computes 4096 outputs from one 64x8 + 8x64 staging, i.e. 8x more outputs
// per global element staged than the one-output-per-thread rungs.
// Seed figures (docs/journal/ladder.md): 002 v03 was several times faster than v02.
//
// Geometry: THREADS = (BM/TM) * BN; thread t -> column tn = t % BN, row group tm = t / BN. A warp
// is 32 consecutive columns of one row group: coalesced C stores, conflict-free Bs reads,
// broadcast As reads.
#include "common.cuh"

static_assert(THREADS == (BM / TM) * BN, "THREADS must be (BM/TM)*BN");
static_assert(BM % TM == 0, "TM must divide BM");
static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0, "tiles must split evenly over the threads");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    __shared__ float As[BM][BK];   // [BM rows of the block][BK k's]: A tile as stored in row-major order
    __shared__ float Bs[BK][BN];   // [BK k's][BN columns of the block]

    const int tid = threadIdx.x;
    const int tn = (int)(threadIdx.x % BN);   // column inside the block tile
    const int tm = (int)(threadIdx.x / BN);   // row group: rows tm*TM .. tm*TM+TM-1
    const int row0 = GL_TILE_ROW * BM;
    const int col0 = blockIdx.x * BN;

    float acc[TM];                 // [TM] outputs C(row0 + tm*TM + i, col0 + tn)
#pragma unroll
    for (int i = 0; i < TM; ++i) acc[i] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- load: global -> shared, scalar, bounds-checked (zeros outside the matrix) ------
        // Consecutive threads walk the operand's contiguous dimension, so loads coalesce in
        // either layout.
#pragma unroll
        for (int p = 0; p < (BM * BK) / THREADS; ++p) {
            const unsigned e = (unsigned)tid + p * THREADS;   // unsigned: / and % are shifts/masks
#if GL_A_COL
            const int r = (int)(e % BM), c = (int)(e / BM);   // contiguous along m
#else
            const int r = (int)(e / BK), c = (int)(e % BK);   // contiguous along k
#endif
            As[r][c] = gl_load_a(A, lda, M, K, row0 + r, k0 + c);
        }
#pragma unroll
        for (int p = 0; p < (BK * BN) / THREADS; ++p) {
            const unsigned e = (unsigned)tid + p * THREADS;   // unsigned: / and % are shifts/masks
#if GL_B_COL
            const int r = (int)(e % BK), c = (int)(e / BK);   // contiguous along k
#else
            const int r = (int)(e / BN), c = (int)(e % BN);   // contiguous along n
#endif
            Bs[r][c] = gl_load_b(B, ldb, K, N, k0 + r, col0 + c);
        }
        __syncthreads();

        // ---- main loop: one B value in a register, reused TM times -------------------------
        // Unrolled by 2, not fully: with BK = 8 fully unrolled the compiler hoists the As reads
        // of all k's (44 registers -> 2 blocks of 512 threads per SM); by 2 it reads As as
        // LDS.64 pairs and needs 32 registers -> 4 blocks (64 warps) per SM, which hides the
        // global-load latency of this barrier-bound loop better (registers and occupancy:
        // `gemmlab inspect tile_1d`; its speed: benchmarks/results/h100_fp32.json).
#pragma unroll 2
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][tn];
#pragma unroll
            for (int i = 0; i < TM; ++i)
                acc[i] = fmaf(As[tm * TM + i][k], b, acc[i]);
        }
        __syncthreads();   // the tile is consumed before the next iteration overwrites it
    }

    // ---- epilogue: TM outputs of one column, bounds-checked ---------------------------------
#pragma unroll
    for (int i = 0; i < TM; ++i)
        gl_store_c_checked(C, ldc, M, N, row0 + tm * TM + i, col0 + tn, acc[i], GL_EPI(alpha, beta));
}
