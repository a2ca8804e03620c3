// splitk_reduce.cu — the second kernel of a split-K GEMM (not a rung of the ladder).
//
// The split-K variant of a rung (GL_SPLITK, kernels/common.cuh) leaves S FP32 partial products in
// the workspace W[S][M][N] (row-major, row length N, C's orientation inside the kernels). This
// kernel finishes the GEMM:  C(i, j) <- alpha * (W[0](i, j) + W[1](i, j) + ... + W[S-1](i, j))
// + beta * C(i, j), converted to T; with beta == 0, C is not read (gl_store_c).
// Determinism: each output is summed by one thread, in the order z = 0, 1, ..., S-1, from slices
// that each partial kernel block wrote alone: the same bits on every run, whatever the schedule.
// Work: one thread per output column j of a block's 128 (coalesced reads of W and writes of C)
// and GL_REDUCE_ROWS rows i0 + r, row groups i0 strided by gridDim.y * GL_REDUCE_ROWS (the host
// caps grid.y at 65535, so any M fits). Each slice's ROWS loads are independent, so a thread has
// ROWS (and, unrolled over z, up to 4 * ROWS) reads in flight where one row per thread had one or
// two: at 127x4097 with 2 slices the one-row kernel took 5.5 us for 6 MB (ncu, 4191 blocks in two
// waves, each thread waiting out one load's latency). It reads S*M*N*4 bytes: memory-bound.
#include "common.cuh"

#define GL_REDUCE_THREADS 128
#define GL_REDUCE_ROWS 4

extern "C" __global__ void __launch_bounds__(GL_REDUCE_THREADS)
splitk_reduce(int M, int N, int S, const float* __restrict__ W, float alpha, float beta, T* __restrict__ C, int ldc)
{
    const int j = blockIdx.x * GL_REDUCE_THREADS + threadIdx.x;
    if (j >= N) return;
    const size_t slice = (size_t)M * (size_t)N;
    for (int i0 = blockIdx.y * GL_REDUCE_ROWS; i0 < M; i0 += gridDim.y * GL_REDUCE_ROWS) {
        const int rows = min(GL_REDUCE_ROWS, M - i0);
        const float* w = W + (size_t)i0 * N + j;
        float sum[GL_REDUCE_ROWS];
#pragma unroll
        for (int r = 0; r < GL_REDUCE_ROWS; ++r) sum[r] = r < rows ? __ldg(w + (size_t)r * N) : 0.0f;
#pragma unroll 4
        for (int z = 1; z < S; ++z) {                                  // fixed order: z ascending
#pragma unroll
            for (int r = 0; r < GL_REDUCE_ROWS; ++r)
                if (r < rows) sum[r] += __ldg(w + z * slice + (size_t)r * N);
        }
#pragma unroll
        for (int r = 0; r < GL_REDUCE_ROWS; ++r)
            if (r < rows) gl_store_c(C, ldc, i0 + r, j, sum[r], alpha, beta);
    }
}
