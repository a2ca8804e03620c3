// epilogue.cuh — the epilogue functor every rung applies to its outputs (included by common.cuh):
//
//   C(i, j) <- act(alpha * acc + beta * C(i, j) + bias)        (beta == 0: C is not read)
//
// One definition of each activation and of where the bias comes from, so that a rung's stores
// (common.cuh's gl_store_c*, rung 21's staging, the split-K reduction) all compute the same thing;
// adding an activation is one entry of core/activations.py, which generates gl_act.
// Defines given by the host (core/variant.py, from core/epilogue.py's Epilogue):
//   GL_ACT       0 none, else the code of an activation of core/activations.py
//   GL_BIAS      0 none, 1 a vector of T, 2 a vector of float, 3 a vector of TC (FP8 operands, whose
//                bias is of the output's type); the kernel then takes one argument
//                more, last: the vector's pointer (GL_EPI_PARAMS)
//   GL_BIAS_ROW  1 when the bias runs along the rows C is stored in: a column-major C, which the
//                kernels store as the row-major C^T, so the user's columns are its rows
//   GL_AUX       1: the stores also write the pre-activation z = alpha * acc + beta * C + bias to
//                an auxiliary output of C's type, layout and leading dimension (the saved input of
//                the activation's backward, as cuBLASLt's GELU_AUX); its pointer is the kernel's
//                last argument, after the bias's. Only with an activation (the host's check).
// Without bias and activation GlEpi is alpha and beta, and every rung compiles to the code it had
// before the functor existed (the SASS guards hold it to that).
#pragma once

#ifndef GL_ACT
#define GL_ACT 0
#endif
#ifndef GL_BIAS
#define GL_BIAS 0
#endif
#ifndef GL_BIAS_ROW
#define GL_BIAS_ROW 0
#endif
#ifndef GL_AUX
#define GL_AUX 0
#endif
// The split-K variant (GL_SPLITK) writes FP32 partial sums to its workspace with alpha 1 and beta
// 0: the bias and the activation wait for the reduction (splitk_reduce.cu), which applies them once.
#define GL_EPI_PLAIN (GL_SPLITK || (GL_ACT == 0 && GL_BIAS == 0))
// The stores that write the auxiliary output: not the split-K partial kernel's (the reduction's)
#define GL_EPI_AUX (GL_AUX && !GL_SPLITK)

// gl_act(x): the activation GL_ACT names, generated from core/activations.py (one definition of each
// activation, its CUDA beside its reference and derivative); core/compile.py supplies the header.
#include "activations.cuh"

#if GL_BIAS == 2
typedef float GlBiasT;
#elif GL_BIAS == 3
typedef TC GlBiasT;
#else
typedef T GlBiasT;
#endif

// alpha, beta and, with GL_BIAS, the bias vector and its length (the stored rows or columns it runs
// along: reads past it give 0, so a tile's padding columns, computed and clipped by TMA, read nothing).
struct GlEpi {
    float alpha, beta;
#if GL_BIAS
    const GlBiasT* __restrict__ bias;
    int bias_n;
#endif
#if GL_AUX
    TC* __restrict__ aux;   // the pre-activation, at C's own offsets
#endif
    // The bias at stored position (i, j) (0 without one).
    __device__ __forceinline__ float bias_at(int i, int j) const {
#if GL_BIAS
        const int at = GL_BIAS_ROW ? i : j;
        return at < bias_n ? gl_to_float(__ldg(bias + at)) : 0.0f;
#else
        return 0.0f;
#endif
    }
    // act(v + bias) for v = alpha * acc + beta * C (the caller's, in whatever order it rounds).
    __device__ __forceinline__ float finish(float v, int i, int j) const {
#if GL_EPI_PLAIN
        return v;
#else
        return gl_act(v + bias_at(i, j));
#endif
    }
    // finish(v, i, j) for the output at offset o of C (inside C): with GL_AUX the pre-activation
    // v + bias goes to the auxiliary output's offset o first, rounded to C's type.
    __device__ __forceinline__ float finish_at(float v, int i, int j, size_t o) const {
#if GL_EPI_AUX
        const float z = v + bias_at(i, j);
        aux[o] = gl_c_from_float(z);
        return gl_act(z);
#else
        return finish(v, i, j);
#endif
    }
    // The two halves of finish for the stores that write several outputs at once (and their
    // pre-activations with one vector store): pre(v, i, j) = v + bias, then post(z) = act(z).
    __device__ __forceinline__ float pre(float v, int i, int j) const {
#if GL_EPI_PLAIN
        return v;
#else
        return v + bias_at(i, j);
#endif
    }
    __device__ __forceinline__ float post(float z) const {
#if GL_EPI_PLAIN
        return z;
#else
        return gl_act(z);
#endif
    }
    // A caller that stores several rows of the same columns, or several columns of the same rows,
    // loads the bias once: bias_col(j) is the bias of column j where it runs along the columns,
    // bias_row(i) that of row i where it runs along the rows, each 0 otherwise (no load); apply(v, b)
    // finishes v with b, the one of the two the build has (rung 21's EpiBias::at).
    __device__ __forceinline__ float bias_col(int j) const {
#if GL_BIAS && !GL_BIAS_ROW && !GL_EPI_PLAIN
        return bias_at(0, j);
#else
        return 0.0f;
#endif
    }
    __device__ __forceinline__ float bias_row(int i) const {
#if GL_BIAS && GL_BIAS_ROW && !GL_EPI_PLAIN
        return bias_at(i, 0);
#else
        return 0.0f;
#endif
    }
    // The column bias at j and j + 1 (zeros past its end and without a column bias): a warp's lanes
    // take 64 consecutive columns so and pass them to the lanes that need them (rung 21's epi_bias).
    __device__ __forceinline__ float2 bias_pair(int j) const {
#if GL_BIAS && !GL_BIAS_ROW && !GL_EPI_PLAIN
        return make_float2(bias_at(0, j), bias_at(0, j + 1));
#else
        return make_float2(0.0f, 0.0f);
#endif
    }
    // The bias lines a tile of `rows` x `cols` stored outputs from (i0, j0) reads, fetched into L2 by
    // lanes 0, 1, ... (one 128-byte line each; the last lane named takes the range's last element, so
    // a range that starts inside a line is covered too). A rung calls it as a tile's main loop
    // starts, so that its epilogue's loads, after the main loop, wait for L2 instead of DRAM: a tile
    // whose bias comes from DRAM waits for that round trip with the tensor cores idle.
    __device__ __forceinline__ void prefetch_bias(int i0, int j0, int rows, int cols, int lane) const {
#if GL_BIAS && !GL_EPI_PLAIN
        constexpr int LINE = 128 / (int)sizeof(GlBiasT);
        const int at = GL_BIAS_ROW ? i0 : j0, n = min(GL_BIAS_ROW ? rows : cols, bias_n - at);
        if (n > 0 && lane <= n / LINE) {
            const int e = at + min(lane * LINE, n - 1);
            asm volatile("prefetch.global.L2 [%0];\n" :: "l"(bias + e));
        }
#endif
    }
    __device__ __forceinline__ float apply(float v, float b) const {
#if GL_EPI_PLAIN
        return v;
#else
        return gl_act(v + b);
#endif
    }
};

// Kernel side: the extra parameter (last in every rung's list) and the functor from the kernel's
// arguments (M and N name the stored C's rows and columns in every rung's entry).
#if GL_BIAS
#define GL_EPI_BIAS_PARAM , const void* __restrict__ gl_bias_arg
#define GL_EPI_BIAS_INIT(rows, cols) , static_cast<const GlBiasT*>(gl_bias_arg), GL_BIAS_ROW ? (rows) : (cols)
#else
#define GL_EPI_BIAS_PARAM
#define GL_EPI_BIAS_INIT(rows, cols)
#endif
#if GL_AUX
#define GL_EPI_AUX_PARAM , void* __restrict__ gl_aux_arg
#define GL_EPI_AUX_INIT , static_cast<TC*>(gl_aux_arg)
#else
#define GL_EPI_AUX_PARAM
#define GL_EPI_AUX_INIT
#endif
#define GL_EPI_PARAMS GL_EPI_BIAS_PARAM GL_EPI_AUX_PARAM
#define GL_EPI_MAKE(alpha, beta, rows, cols) GlEpi{(alpha), (beta) GL_EPI_BIAS_INIT(rows, cols) GL_EPI_AUX_INIT}
#define GL_EPI(alpha, beta) GL_EPI_MAKE(alpha, beta, M, N)
