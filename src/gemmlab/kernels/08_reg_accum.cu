// Rung 8 — accumulators in registers.                                       seeds: 004 sgemm_shared
//
// What changes against rung 7 (texture) — really against the shared-tiling line of rungs 4-7,
// which this rung builds on with rung 5's plain global loads (no __ldg, no texture) and padded
// tiles — and against rung 3, whose output tile lived in shared memory: the block has 256 threads
// (8 warps) for a 32 x 32 tile of C, so each thread computes BM / 8 = 4 outputs, and it keeps
// them in a register array acc[4] (indexed only with compile-time indices, fully unrolled) for
// the whole K loop. Seed 004's mapping, "one output column per warp iteration", becomes in
// gemmlab's row-major C "one output ROW per warp iteration": lane -> column j of C, warp w ->
// rows w, w + 8, w + 16, w + 24 (seed: lane -> row, warp -> columns of its column-major C).
// Why it is faster: rung 3 read and wrote its shared output tile for every row and K-slice and
// paid a shuffle per FMA; rungs 4-7 use 1024 threads that each load two shared words per FMA.
// Here a B value Bs[k][lane] is loaded into a register once and feeds 4 FMAs (one per row),
// and the A value As[r][k] is a broadcast: 1.25 shared loads per FMA instead of 2, no shared
// traffic for the accumulators, and 4 independent FMA chains per thread (more ILP, fewer
// threads to keep resident). The seed's Nsight profile shows Stall MIO Throttle (the shared-
// memory pipe) dropping. Global traffic is unchanged (each element once per block).
// Padding: the seed's two tiles are unpadded because its layouts make every tile store a row
// store; gemmlab takes all four A/B layouts, so a thread walking the contiguous dimension of a
// column-major A (or B) stores a column of the tile — rows of 33 floats keep those stores
// conflict-free, as in rung 5. The inner-loop reads are conflict-free either way.
// Seed figure (docs/journal/ladder.md): 004 sgemm_shared was several times faster than
// sgemm_naive with the shared output tile; the seed's variant that caches A in a register array
// first made no difference.
//
// Geometry: warp w = tid / 32, lane = tid % 32; thread -> C(row0 + w + t*NWARPS, col0 + lane),
// t = 0 .. BM/NWARPS - 1. Tile loads: element e = tid + p*THREADS of each tile, the
// operand's contiguous dimension fastest (coalesced in every layout).
#include "common.cuh"

#define NWARPS (THREADS / 32)
#define RPW (BM / NWARPS)              // rows of C per warp = outputs per thread

static_assert(BN == 32, "rung 8: lane -> column of C, so BN must be the warp width");
static_assert(THREADS % 32 == 0 && BM % NWARPS == 0, "the warps must split the BM rows evenly");
static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0, "tiles must split evenly over the threads");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    __shared__ float As[BM][BK + 1];   // [BM rows m][BK k's + 1 pad]: As[m][k] = A(row0+m, k0+k)
    __shared__ float Bs[BK][BN + 1];   // [BK k's][BN cols n + 1 pad]: Bs[k][n] = B(k0+k, col0+n)

    const int tid = threadIdx.x;
    const int warp = tid / 32;         // this warp's rows: warp, warp + NWARPS, ...
    const int lane = tid % 32;         // this lane's column of C
    const int row0 = GL_TILE_ROW * BM;
    const int col0 = blockIdx.x * BN;

    float acc[RPW];                    // [RPW] register accumulators: C(row0 + warp + t*NWARPS, col0 + lane)
#pragma unroll
    for (int t = 0; t < RPW; ++t) acc[t] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- load: global -> shared, scalar, bounds-checked (zeros outside the matrix) --------
        // Consecutive threads walk the operand's contiguous dimension (coalesced either layout).
#pragma unroll
        for (int p = 0; p < (BM * BK) / THREADS; ++p) {
            const int e = tid + p * THREADS;
#if GL_A_COL
            const int m = e % BM, k = e / BM;   // contiguous along m
#else
            const int m = e / BK, k = e % BK;   // contiguous along k
#endif
            As[m][k] = gl_load_a(A, lda, M, K, row0 + m, k0 + k);
        }
#pragma unroll
        for (int p = 0; p < (BK * BN) / THREADS; ++p) {
            const int e = tid + p * THREADS;
#if GL_B_COL
            const int k = e % BK, n = e / BK;   // contiguous along k
#else
            const int k = e / BN, n = e % BN;   // contiguous along n
#endif
            Bs[k][n] = gl_load_b(B, ldb, K, N, k0 + k, col0 + n);
        }
        __syncthreads();

        // ---- main loop: one B value per k in a register, reused for the thread's RPW rows ------
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][lane];                          // row of Bs: conflict-free
#pragma unroll
            for (int t = 0; t < RPW; ++t)
                acc[t] = fmaf(As[warp + t * NWARPS][k], b, acc[t]);   // broadcast within the warp
        }
        __syncthreads();   // the tiles are consumed before the next K-step overwrites them
    }

    // ---- epilogue: straight from registers; each warp stores RPW coalesced row segments --------
#pragma unroll
    for (int t = 0; t < RPW; ++t)
        gl_store_c_checked(C, ldc, M, N, row0 + warp + t * NWARPS, col0 + lane, acc[t], GL_EPI(alpha, beta));
}
