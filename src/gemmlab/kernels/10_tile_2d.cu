// Rung 10 — 2D thread tiling.               seeds: 002 gemm_v04, 004 2x2 tile, 003 BEAST THR_M x THR_N
//
// What changes against rung 9 (1D thread tiling): each thread owns a TM x TN = 8 x 8 register
// tile of C instead of a TM x 1 column, and the block tile grows to 128 x 128 (256 threads).
// Per k the thread copies TM values of A (its rows) and TN values of B (its columns) from shared
// memory into register fragments and forms their outer product: TM + TN = 16 shared loads feed
// TM * TN = 64 FMAs (rung 9: 9 loads for 8 FMAs). The preset "2x2" is seed 004's kernel: a
// 32 x 32 block tile, BK = 32, a 2 x 2 register tile per thread, 256 threads.
// Why it is faster: the FMA : LDS ratio goes from ~1 to 4, so the shared-memory pipe (MIO) stops
// being the limit and the FMA pipe can stay busier; the bigger block tile also halves the
// global/L2 traffic per FLOP again (each staged element of A is reused BN = 128 times, of B
// BM = 128 times). Global loads stay scalar and A stays row-major in shared memory: making
// those vector-friendly is the next rung.
// Seed figures: docs/journal/ladder.md (the seeds' own figures).
//
// Registers matter here: the loader's index math is unsigned (division by the power-of-2 tile
// sizes becomes shifts the compiler can fold across the unrolled loads); with signed ints NVRTC
// gave the kernel 145 registers, which leaves room for one block of 256 threads per SM instead
// of two (`gemmlab inspect tile_2d` shows the registers and the occupancy; the speed of this rung
// on the H100 is in benchmarks/results/h100_fp32.json).
//
// Geometry: THREADS = (BM/TM) * (BN/TN); thread t -> tx = t % (BN/TN) (column group, lane-fast),
// ty = t / (BN/TN) (row group); it computes rows ty*TM .. +TM-1, columns tx*TN .. +TN-1.
#include "common.cuh"

static_assert(THREADS == (BM / TM) * (BN / TN), "THREADS must be (BM/TM)*(BN/TN)");
static_assert(BM % TM == 0 && BN % TN == 0, "TM/TN must divide BM/BN");
static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0, "tiles must split evenly over the threads");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    __shared__ float As[BM][BK];   // [BM rows of the block][BK k's]: A tile, not transposed
    __shared__ float Bs[BK][BN];   // [BK k's][BN columns of the block]

    const int tid = threadIdx.x;
    const int tx = (int)(threadIdx.x % (BN / TN));   // column group: columns tx*TN .. tx*TN+TN-1
    const int ty = (int)(threadIdx.x / (BN / TN));   // row group:    rows    ty*TM .. ty*TM+TM-1
    const int row0 = GL_TILE_ROW * BM;
    const int col0 = blockIdx.x * BN;

    float acc[TM][TN];             // [TM][TN] register tile of C
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float a[TM];                   // [TM] fragment: A(ty*TM + i, k)
    float b[TN];                   // [TN] fragment: B(k, tx*TN + j)

    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- load: global -> shared, scalar, bounds-checked (zeros outside the matrix) ------
        // Consecutive threads walk the operand's contiguous dimension (coalesced either layout).
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

        // ---- main loop: fragments from shared memory, TM x TN outer product ---------------
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[ty * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();   // the tile is consumed before the next iteration overwrites it
    }

    // ---- epilogue: scalar, bounds-checked --------------------------------------------------
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            gl_store_c_checked(C, ldc, M, N, row0 + ty * TM + i, col0 + tx * TN + j, acc[i][j], GL_EPI(alpha, beta));
}
