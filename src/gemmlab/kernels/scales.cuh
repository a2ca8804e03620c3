// scales.cuh — the scales of a scaled matmul (rung 25, FP8): the persistent consumers' part that
// turns a tile's accumulated products of FP8 codes into products of the values they stand for,
//
//   C(i, j) <- act(alpha * s(i, j) * acc(i, j) + beta * C(i, j) + bias)
//
//   GL_SCALE 1 (tensor-wise): s = scale_a[0] * scale_b[0], folded into alpha as the kernel starts (the
//                             grouped rung 27: scale_a[0] there, its group's scale_b[g] per tile);
//   GL_SCALE 2 (row-wise):    s = scale_a[i] * scale_b[j], scale_a one float per row of A (M),
//                             scale_b one per column of B (N), applied to a tile's accumulators after
//                             its main loop (and its stream-K fixup), before the epilogue part
//                             (promoted, scale_a by the mainloop part as it adds each k tile);
//   GL_SCALE 3 (block-wise, DeepGEMM's): s = scale_a[i][kb] * scale_b[kb][j / 128] per k block kb of
//                             128, applied by the mainloop part to each k tile's partial sums
//                             (mainloop.cuh, GlMainloopBlockScaled): the pointers and strides only, here.
// The scales are device pointers, the kernel's last two arguments (GL_SCALE_PARAMS): a launch never
// reads them on the host, so a call needs no synchronization and a CUDA graph captures it, as
// cuBLASLt's scale pointers do. GL_SCALE 0 (every other rung): no arguments, GlScales is empty and
// its members are the identity.
#pragma once
#ifndef GL_SCALE
#define GL_SCALE 0
#endif
#if GL_SCALE == 3   // block scales: each one's strides (elements) too, so either layout of each reads in place
#define GL_SCALE_PARAMS , const float* __restrict__ gl_scale_a, const float* __restrict__ gl_scale_b, \
                        int gl_sa_m, int gl_sa_k, int gl_sb_k, int gl_sb_n
#define GL_SCALE_ARGS gl_scale_a, gl_scale_b, gl_sa_m, gl_sa_k, gl_sb_k, gl_sb_n
#elif GL_SCALE
#define GL_SCALE_PARAMS , const float* __restrict__ gl_scale_a, const float* __restrict__ gl_scale_b
#define GL_SCALE_ARGS gl_scale_a, gl_scale_b
#else
#define GL_SCALE_PARAMS
#define GL_SCALE_ARGS
#endif
#if GL_SCALE < 0 || GL_SCALE > 3
#error "GL_SCALE: 0 none, 1 tensor-wise, 2 row-wise, 3 block-wise"
#endif

struct GlScales {
#if GL_SCALE
    const float* __restrict__ sa;
    const float* __restrict__ sb;
#endif
#if GL_SCALE == 3
    int sa_m, sa_k, sb_k, sb_n;   // scale_a[i][kb] at sa[i sa_m + kb sa_k], scale_b[kb][nb] at sb[kb sb_k + nb sb_n]
#endif
    // alpha with the tensor-wise scales folded in (a grouped rung's: scale_a only, scale_b is its
    // groups', one value each, applied per tile by rows())
    __device__ __forceinline__ float alpha(float a) const {
#if GL_SCALE == 1 && GL_GROUPED == 1
        return a * __ldg(sa);
#elif GL_SCALE == 1
        return a * __ldg(sa) * __ldg(sb);
#else
        return a;
#endif
    }
#if GL_GROUPED == 1
    // The grouped rung 27: group g's scales, its experts' own scale_b (scale_a runs along all the rows,
    // the tokens', as A does): tensor-wise one value per group (G), row-wise one row of N per group
    // (G x N), block-wise one (kblocks x nblocks) block grid per group, densely in either of its
    // layouts (the strides say which).
    __device__ __forceinline__ GlScales group(int g, int N, int kblocks) const {
        GlScales s = *this;
#if GL_SCALE == 1
        s.sb += g;
#elif GL_SCALE == 2
        s.sb += (size_t)g * N;
#elif GL_SCALE == 3
        s.sb += (size_t)g * kblocks * GL_CEIL_DIV(N, 128);
#endif
        return s;
    }
#endif
    // Row-wise: the lines of the scales a consumer warp's part of the tile at (row0: its warpgroup's
    // first row, col0) reads, fetched into L1 as the tile's main loop starts (lanes 0.. take scale_b's
    // lines, lanes 31, 30, .. scale_a's of each m64 block), so that rows() after the main loop waits
    // for L1 instead of L2 or DRAM with the tensor cores idle.
    template <int MI, int BN_>
    __device__ __forceinline__ void prefetch(int row0, int col0, int warp, int lane, int M, int N) const {
#if GL_SCALE == 2
        const int c = col0 + 32 * lane, r = row0 + 16 * (warp % 4) + 64 * (31 - lane);
        if (lane < BN_ / 32 && c < N) asm volatile("prefetch.global.L1 [%0];\n" :: "l"(sb + c));
        if (lane >= 32 - MI && r < M) asm volatile("prefetch.global.L1 [%0];\n" :: "l"(sa + r));
#endif
    }
    // one accumulator fragment: rows (s[0], s[1]) x columns (b0, b1), or columns alone (A_DONE: the
    // mainloop part multiplied the rows' scales in as it added each k tile)
    template <bool A_DONE>
    static __device__ __forceinline__ void scale4(float (&d)[4], const float (&s)[2], float b0, float b1) {
        if constexpr (A_DONE) {
            d[0] *= b0;
            d[1] *= b1;
            d[2] *= b0;
            d[3] *= b1;
        } else {
            d[0] *= s[0] * b0;
            d[1] *= s[0] * b1;
            d[2] *= s[1] * b0;
            d[3] *= s[1] * b1;
        }
    }
    // Row-wise: a consumer warp's accumulators of the tile at rows row0 + .. (row0: its warpgroup's
    // first row) and columns col0 + .., in wgmma's accumulator layout (warp w = warp % 4 of the
    // warpgroup, g = lane / 4): d[mi][j][e] at row row0 + 64 mi + 16 w + g + 8 (e / 2), column
    // col0 + 8 j + 2 (lane % 4) + e % 2, times scale_a of its row and scale_b of its column (0 past
    // M or N: those outputs are never stored). Each column's scale is loaded once per tile and
    // used for all of the thread's rows. A_DONE: scale_a is in the accumulators already (the
    // promoted mainloop part's ROW_SCALED), scale_b alone is applied.
    template <bool A_DONE, int MI, int R>
    __device__ __forceinline__ void rows(float (&acc)[MI][R][4], int row0, int col0, int warp, int lane, int M,
                                         int N) const {
#if GL_SCALE == 1 && GL_GROUPED == 1   // the tile's group's tensor-wise scale_b (group())
        const float s = __ldg(sb);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int j = 0; j < R; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[mi][j][e] *= s;
#elif GL_SCALE == 2
        const int r = row0 + 16 * (warp % 4) + lane / 4, c = col0 + 2 * (lane % 4);
        float s[MI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                s[mi][h] = A_DONE ? 1.0f : r + 64 * mi + 8 * h < M ? __ldg(sa + r + 64 * mi + 8 * h) : 0.0f;
        // a tile wholly inside N (scale_b 8-byte aligned): a column pair per 8-byte load, no bounds, in
        // groups of 8 (the loads of a group in flight together, few registers beside the accumulators)
        if (col0 + 8 * R <= N && (reinterpret_cast<size_t>(sb) & 7) == 0) {
            constexpr int G = R < 8 ? R : 8;
#pragma unroll
            for (int j0 = 0; j0 < R; j0 += G) {
                float2 b[G];
#pragma unroll
                for (int j = 0; j < G; ++j) b[j] = __ldg(reinterpret_cast<const float2*>(sb + c + 8 * (j0 + j)));
#pragma unroll
                for (int j = 0; j < G; ++j)
#pragma unroll
                    for (int mi = 0; mi < MI; ++mi) scale4<A_DONE>(acc[mi][j0 + j], s[mi], b[j].x, b[j].y);
            }
            return;
        }
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const float b0 = c + 8 * j < N ? __ldg(sb + c + 8 * j) : 0.0f;
            const float b1 = c + 8 * j + 1 < N ? __ldg(sb + c + 8 * j + 1) : 0.0f;
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) scale4<A_DONE>(acc[mi][j], s[mi], b0, b1);
        }
#endif
    }
};
