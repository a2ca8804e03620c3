// splitk_reduce.cu — the second kernel of a split-K GEMM (not a rung of the ladder).
//
// The split-K variant of a rung (GL_SPLITK, kernels/common.cuh) leaves S FP32 partial products in
// the workspace W[S][M][N] (row-major, row length N, C's orientation inside the kernels). This
// kernel finishes the GEMM:  C(i, j) <- alpha * (W[0](i, j) + W[1](i, j) + ... + W[S-1](i, j))
// + beta * C(i, j), converted to C's type (TC), with the bias and the activation of the rung's epilogue (its
// GL_BIAS, GL_ACT: the partial products have neither); with beta == 0, C is not read (gl_store_c).
// Determinism: each output is summed by one thread, in the order z = 0, 1, ..., S-1, from slices
// that each partial kernel block wrote alone: the same bits on every run, whatever the schedule.
// Work: one thread per output column j of a block's 128 (coalesced reads of W and writes of C),
// rows i strided by gridDim.y (the host caps grid.y at 65535, so any M fits). It reads S*M*N*4
// bytes: a few microseconds at the shapes split-K is for (few output tiles), memory-bound.
// Launch: on sm_90 with programmatic stream serialization (core/launch.py, _pdl_config), so the
// driver may schedule it while the partial kernel finishes; gl_pdl_wait holds every thread until
// that grid has completed and its partials are visible (its launch latency overlaps the partial
// kernel's tail: benchmarks/results/h100_pdl_reduce.json).
#include "common.cuh"

#define GL_REDUCE_THREADS 128

extern "C" __global__ void __launch_bounds__(GL_REDUCE_THREADS)
splitk_reduce(int M, int N, int S, const float* __restrict__ W, float alpha, float beta, TC* __restrict__ C, int ldc
              GL_EPI_PARAMS)
{
    gl_pdl_wait();   // launched early (programmatic serialization): the partial products complete first
    const int j = blockIdx.x * GL_REDUCE_THREADS + threadIdx.x;
    if (j >= N) return;
    const size_t slice = (size_t)M * (size_t)N;
    for (int i = blockIdx.y; i < M; i += gridDim.y) {
        const float* w = W + (size_t)i * N + j;
        float sum = __ldg(w);
        for (int z = 1; z < S; ++z) sum += __ldg(w + z * slice);   // fixed order: z ascending
        gl_store_c(C, ldc, i, j, sum, GL_EPI(alpha, beta));
    }
}
