// Rung 3 — naive with warp-shuffle broadcast.                                seeds: 004 sgemm_naive
//
// What changes against rung 2 (naive, coalesced): the block (THREADS = 256, 8 warps) walks K in
// 32-wide slices. A 32 x 32 slice of A and of B is first staged in shared memory with coalesced
// loads, then every lane takes ONE value of A — lane l holds A(i, k0 + l) — and the warp hands
// it to all lanes with __shfl_sync, register to register, while each lane reads its own column of
// B. Each warp does this for BM / 8 = 4 rows of C; the partial sums of each slice are added into
// an output tile that lives in shared memory (Cs), as in the seed.
// Why it is faster: in rung 2 every lane issued its own global load of A(i, k) and of B(k, j) per
// FMA (32 load instructions per 32 FMAs for A alone, each a trip through L1/L2). Here each A and B
// element is read from global memory once per block, and the 32 A values a lane needs per slice
// arrive through 32 shuffles (SHFL.IDX) instead of 32 loads. What it still pays: one LDS of B and
// one SHFL per FMA, and a read-modify-write of Cs per row and slice — the seed measured the
// shared-memory pipe (Stall MIO Throttle) and long/short scoreboard stalls as its limit; rung 8
// moves the accumulators into registers.
// Adaptation to gemmlab's row-major C: the seed (column-major) needs its shared output tile to
// transpose C before a coalesced store, and rotates the shuffle source lane ((lane + j) % 32) so
// its sub_b[n][k] reads avoid bank conflicts. With row-major C, lane -> column j is already the
// coalesced store order and Bs is kept as [k][n], so the shuffle can broadcast lane kk to all
// lanes in plain k order and Bs[kk][lane] is conflict-free; Cs stays as the accumulator tile
// (each element is read and written only by the thread that owns it, so it needs no barrier).
// Seed figure (docs/journal/ladder.md): 004 sgemm_naive stayed far behind cuBLAS, with shared and
// DRAM traffic both many times cuBLAS'.
//
// Geometry: warp w = tid / 32, lane = tid % 32 -> C(row0 + w + t*NWARPS, col0 + lane),
// t = 0 .. BM/NWARPS-1. K is walked in slices of KS = 32 (the warp width: one A value per lane);
// the last slice is zero-filled in shared memory, so any K works.
#include "common.cuh"

#define KS 32                          // K-slice width = warp width (one A value per lane)
#define NWARPS (THREADS / 32)

static_assert(BM == 32 && BN == 32, "rung 3: lane -> column (BN = 32) and lane -> row of the A slice (BM = 32)");
static_assert(THREADS % 32 == 0 && BM % NWARPS == 0 && KS % NWARPS == 0, "the warps must split the 32 rows evenly");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    __shared__ float As[BM][KS + 1];   // [BM rows][KS k's] A slice; +1: column-major A stores a column, conflict-free
    __shared__ float Bs[KS][BN + 1];   // [KS k's][BN cols] B slice; +1: column-major B stores a column, conflict-free
    __shared__ float Cs[BM][BN];       // [BM rows][BN cols] output tile: the accumulators, in shared memory

    const int tid = threadIdx.x;
    const int warp = tid / 32;         // this warp's rows: warp, warp + NWARPS, ...
    const int lane = tid % 32;         // this lane's column of C
    const int row0 = GL_TILE_ROW * BM;
    const int col0 = blockIdx.x * BN;

    // zero this thread's own accumulators (no other thread touches them: no barrier needed)
#pragma unroll
    for (int t = 0; t < BM / NWARPS; ++t) Cs[warp + t * NWARPS][lane] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += KS) {
        // ---- load: global -> shared, one element of A and of B per thread and row step --------
        // The lane walks the operand's contiguous dimension (coalesced in either layout);
        // elements outside the matrix are stored as 0 (partial tiles and the K tail).
#pragma unroll
        for (int t = 0; t < KS / NWARPS; ++t) {
            const int r = warp + t * NWARPS;
#if GL_A_COL
            As[lane][r] = gl_load_a(A, lda, M, K, row0 + lane, k0 + r);   // lane along m
#else
            As[r][lane] = gl_load_a(A, lda, M, K, row0 + r, k0 + lane);   // lane along k
#endif
#if GL_B_COL
            Bs[lane][r] = gl_load_b(B, ldb, K, N, k0 + lane, col0 + r);   // lane along k
#else
            Bs[r][lane] = gl_load_b(B, ldb, K, N, k0 + r, col0 + lane);   // lane along n
#endif
        }
        __syncthreads();

        // ---- main loop: each lane holds one A value of the slice, the warp broadcasts it ------
#pragma unroll
        for (int t = 0; t < BM / NWARPS; ++t) {
            const int r = warp + t * NWARPS;
            const float a = As[r][lane];                  // lane l holds A(row0 + r, k0 + l)
            float sum = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; ++kk)               // A(row0 + r, k0 + kk) from lane kk
                sum = fmaf(__shfl_sync(0xffffffffu, a, kk), Bs[kk][lane], sum);
            Cs[r][lane] += sum;                           // accumulate in the shared output tile
        }
        __syncthreads();   // As/Bs are consumed before the next slice overwrites them
    }

    // ---- epilogue: each warp stores its rows, one coalesced row segment of C each ---------------
#pragma unroll
    for (int t = 0; t < BM / NWARPS; ++t) {
        const int r = warp + t * NWARPS;
        gl_store_c_checked(C, ldc, M, N, row0 + r, col0 + lane, Cs[r][lane], GL_EPI(alpha, beta));
    }
}
