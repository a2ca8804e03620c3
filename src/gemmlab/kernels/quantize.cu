// quantize.cu — FP8 quantization for gemmlab.scaled_mm (not a rung; core/quantize.py): x (rows x cols,
// row-major with leading dimension ldx; T = fp32, fp16 or bf16 by GL_DTYPE) to FP8 codes q (rows x
// cols, leading dimension ldq) and the scales scaled_mm takes, x ~= q * scale:
//   row-wise (quantize_rows, amax == nullptr): each row's scale = amax(|row|) / FP8_MAX, one block per
//     row (grid-stride): the row is read once from DRAM for its maximum, and its second read, for the
//     codes, hits the L1 or L2 that the first left it in;
//   tensor-wise: gl_amax first (every block's maximum, then an atomic max on the float's bits, which
//     order as unsigned integers for values >= 0), then quantize_rows with that one maximum (amax):
//     the maximum must be known before the first code, so x is read twice;
//   block-wise 1 x 128 (quantize_groups; an activation's, DeepSeek-V3's): a warp per group of 128 of a
//     row, four values per lane held in registers between its maximum and its codes: one read of x;
//     scale (rows x ceil(cols / 128)), row-major;
//   block-wise 128 x 128 (quantize_tiles; a weight's): a block per tile, each thread a column's 64
//     values of it; the tile's second read, for the codes, hits L1; scale (ceil(rows / 128) x
//     ceil(cols / 128)), row-major.
// The codes are e4m3 (GL_FP8_OUT 0, largest finite 448) or e5m2 (1, 57344), converted by the hardware
// (cvt.rn.satfinite, sm_89+): round to nearest even, values beyond the largest finite clamped to it,
// NaN kept. An all-zero row (or tensor) gets scale 1 and zero codes.
#include "common.cuh"

#if GL_DTYPE == 3
#error "quantize.cu reads fp32, fp16 or bf16 (GL_DTYPE 0, 1 or 2)"
#endif
#ifndef GL_FP8_OUT
#define GL_FP8_OUT 0
#endif
#if GL_FP8_OUT
#define GL_CVT_FP8X2 "cvt.rn.satfinite.e5m2x2.f32"
constexpr float GL_FP8_MAX = 57344.0f;
#else
#define GL_CVT_FP8X2 "cvt.rn.satfinite.e4m3x2.f32"
constexpr float GL_FP8_MAX = 448.0f;
#endif
#define GL_Q_THREADS 256

// Two floats to two FP8 codes: hi into the upper byte of the 16 bits, lo into the lower.
__device__ __forceinline__ unsigned short gl_fp8x2(float lo, float hi) {
    unsigned short r;
    asm("{\n.reg .b16 t;\n" GL_CVT_FP8X2 " t, %1, %2;\nmov.b16 %0, t;\n}\n" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}

// The block's maximum of v (every thread gets it).
__device__ __forceinline__ float gl_block_max(float v) {
    __shared__ float part[GL_Q_THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();                               // the previous call's readers are done with part
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    v = part[0];
#pragma unroll
    for (int w = 1; w < GL_Q_THREADS / 32; ++w) v = fmaxf(v, part[w]);
    return v;
}

extern "C" __global__ void __launch_bounds__(GL_Q_THREADS)
gl_amax(int rows, int cols, const T* __restrict__ x, int ldx, unsigned* __restrict__ amax)
{
    float m = 0.0f;
    for (int i = blockIdx.y; i < rows; i += gridDim.y)
        for (int j = blockIdx.x * GL_Q_THREADS + threadIdx.x; j < cols; j += gridDim.x * GL_Q_THREADS)
            m = fmaxf(m, fabsf(gl_to_float(x[(size_t)i * ldx + j])));
    m = gl_block_max(m);
    if (threadIdx.x == 0) atomicMax(amax, __float_as_uint(m));
}

extern "C" __global__ void __launch_bounds__(GL_Q_THREADS)
quantize_rows(int rows, int cols, const T* __restrict__ x, int ldx, unsigned char* __restrict__ q, int ldq,
              float* __restrict__ scale, const unsigned* __restrict__ amax)
{
    for (int i = blockIdx.x; i < rows; i += gridDim.x) {
        const T* row = x + (size_t)i * ldx;
        float m;
        if (amax != nullptr) {
            m = __uint_as_float(*amax);
        } else {
            m = 0.0f;
            for (int j = threadIdx.x; j < cols; j += GL_Q_THREADS) m = fmaxf(m, fabsf(gl_to_float(row[j])));
            m = gl_block_max(m);
        }
        const float s = m > 0.0f ? m / GL_FP8_MAX : 1.0f, inv = m > 0.0f ? GL_FP8_MAX / m : 1.0f;
        if (threadIdx.x == 0 && (amax == nullptr || i == 0)) scale[amax == nullptr ? i : 0] = s;
        unsigned char* out = q + (size_t)i * ldq;
        for (int j = 2 * threadIdx.x; j < cols; j += 2 * GL_Q_THREADS) {
            const float a = gl_to_float(row[j]) * inv, b = j + 1 < cols ? gl_to_float(row[j + 1]) * inv : 0.0f;
            const unsigned short c = gl_fp8x2(a, b);
            out[j] = (unsigned char)(c & 0xFF);
            if (j + 1 < cols) out[j + 1] = (unsigned char)(c >> 8);
        }
    }
}

#define GL_Q_BLOCK 128   // a block scale's side

// One warp's group of 128 values of a row (lane: its 4 from j0), its scale to *scale and its codes.
__device__ __forceinline__ void gl_quantize_group(const T* row, unsigned char* out, float* scale, int j0, int cols,
                                                  int lane) {
    float v[4], m = 0.0f;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        v[e] = j0 + e < cols ? gl_to_float(row[j0 + e]) : 0.0f;
        m = fmaxf(m, fabsf(v[e]));
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float s = m > 0.0f ? m / GL_FP8_MAX : 1.0f, inv = m > 0.0f ? GL_FP8_MAX / m : 1.0f;
    if (lane == 0) *scale = s;
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
        const unsigned short c = gl_fp8x2(v[e] * inv, v[e + 1] * inv);
        if (j0 + e < cols) out[j0 + e] = (unsigned char)(c & 0xFF);
        if (j0 + e + 1 < cols) out[j0 + e + 1] = (unsigned char)(c >> 8);
    }
}

// 1 x 128 groups: warp w of the block takes groups (rows blockIdx.y * 8 + w, + 8 gridDim.y, ..; columns
// blockIdx.x * 128 ..): rows past grid.y's limit by a grid-stride loop, whole warps (the shuffles' unit)
extern "C" __global__ void __launch_bounds__(GL_Q_THREADS)
quantize_groups(int rows, int cols, const T* __restrict__ x, int ldx, unsigned char* __restrict__ q, int ldq,
                float* __restrict__ scale)
{
    constexpr int WARPS = GL_Q_THREADS / 32;
    const int lane = threadIdx.x % 32, j0 = blockIdx.x * GL_Q_BLOCK + 4 * lane;
    for (int i = blockIdx.y * WARPS + threadIdx.x / 32; i < rows; i += gridDim.y * WARPS)
        gl_quantize_group(x + (size_t)i * ldx, q + (size_t)i * ldq, scale + (size_t)i * gridDim.x + blockIdx.x, j0, cols,
                          lane);
}

// 128 x 128 tiles: block (blockIdx.x, blockIdx.y) takes tile (rows blockIdx.y * 128 .., columns
// blockIdx.x * 128 ..); thread t its column t % 128 and every second row from t / 128
extern "C" __global__ void __launch_bounds__(GL_Q_THREADS)
quantize_tiles(int rows, int cols, const T* __restrict__ x, int ldx, unsigned char* __restrict__ q, int ldq,
               float* __restrict__ scale)
{
    constexpr int STEP = GL_Q_THREADS / GL_Q_BLOCK;
    const int j = blockIdx.x * GL_Q_BLOCK + threadIdx.x % GL_Q_BLOCK, i0 = blockIdx.y * GL_Q_BLOCK;
    const int i1 = min(rows, i0 + GL_Q_BLOCK);
    float m = 0.0f;
    if (j < cols)
        for (int i = i0 + threadIdx.x / GL_Q_BLOCK; i < i1; i += STEP) m = fmaxf(m, fabsf(gl_to_float(x[(size_t)i * ldx + j])));
    m = gl_block_max(m);
    const float s = m > 0.0f ? m / GL_FP8_MAX : 1.0f, inv = m > 0.0f ? GL_FP8_MAX / m : 1.0f;
    if (threadIdx.x == 0) scale[(size_t)blockIdx.y * gridDim.x + blockIdx.x] = s;
    if (j < cols)
        for (int i = i0 + threadIdx.x / GL_Q_BLOCK; i < i1; i += STEP)
            q[(size_t)i * ldq + j] = (unsigned char)(gl_fp8x2(gl_to_float(x[(size_t)i * ldx + j]) * inv, 0.0f) & 0xFF);
}
