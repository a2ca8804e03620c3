// ws_epi32.cuh — the epilogue part of the warp-specialized WGMMA rungs for an FP32 C (TC = float):
// rung 22 (TF32 and 3xTF32), and rung 21 where 16-bit operands give an FP32 output (out_dtype
// float32). Each consumer thread stores its accumulators' pairs straight to C (store_tile), or its
// warpgroup passes 64 x 32 chunks through shared buffers to TMA stores (store_tile_tma). Every
// value goes through epilogue.cuh's functor (alpha, beta, bias, activation). It never defers: an
// FP32 tile held beside the accumulators would need as many registers again.
// The includer defines, before including: BN, MI, WM, WGS (hopper.cuh), REG_A (true where the
// consumers read A into registers in acc_row's order: rung 22's MN-major A), EPI_TMA,
// GL_TMA_STORE_ONLY and EPI_BUDGET_B (the staging bytes the registry gives the block beside its
// stages). What it gives its rung's consumers: ws_epi16.cuh's list.
// GL_C_COL (rung 22's register-A path): C column-major, stored as the kernel's transposed problem.
#pragma once
#if GL_C_DTYPE != 0
#error "ws_epi32.cuh stores an FP32 C: a 16-bit C takes ws_epi16.cuh"
#endif
#ifndef GL_TMA_STORE_ONLY
#define GL_TMA_STORE_ONLY 0
#endif
#ifndef GL_C_COL
#define GL_C_COL 0
#endif
// The part is one type, GlWsEpi32 (as ws_epi16.cuh's GlWsEpi16).
// The TMA store's staging (EPI_TMA, see store_tile_tma): per consumer warpgroup EPI_BUFS chunk
// buffers of 64 rows x 32 columns of FP32 (8 KB, two boxes of 32 x 32 in TMA's 128-byte swizzle): two
// where the budget holds them (rung 22: 32 KB, which with 4 stages of 128x256x32 (192 KB) fits a
// block's 227 KB, as in cuBLAS's TF32 kernel: 226 KB of shared memory, its stages and a staging for
// its TMA stores), one where it holds only that (rung 21's BN = 64 tiles).
struct GlWsEpi32 {
    static constexpr bool TMA_STORE = EPI_TMA && GL_VEC_C;
    static constexpr int CHUNK_N = GL_ROW_B / 4;               // columns of a chunk: one swizzle row of FP32
    static constexpr int BOX_B = 32 * GL_ROW_B;                // a box: 32 swizzle rows (core/tensormaps.py's store box)
    static constexpr int CHUNK_B = 2 * BOX_B;                  // 64 rows x 32 columns of FP32: two boxes
    static constexpr int EPI_BUFS = EPI_BUDGET_B >= WGS * 2 * CHUNK_B ? 2 : 1;
    static constexpr int EPI_B = TMA_STORE ? WGS * EPI_BUFS * CHUNK_B : 0;
    static constexpr bool DEFERRED = false;
    static_assert(EPI_B <= EPI_BUDGET_B, "the staging fits what the registry gives it");
    static_assert(BN % CHUNK_N == 0, "a tile is whole chunks");
    static_assert(!GL_TMA_STORE_ONLY || TMA_STORE, "the store twin is built only where the TMA store is (EPI_TMA=1, GL_VEC_C)");
    // a warpgroup's rows start at wg * WM (each thread's rows: acc_row), and it owns EPI_BUFS chunk buffers
    static __device__ __forceinline__ int epi_row(int wg, int warp) { return wg * WM; }
    static __device__ __forceinline__ unsigned epi_stage(unsigned epi, int wg, int warp) { return epi + wg * EPI_BUFS * CHUNK_B; }

    // ---- epilogue: straight from the accumulators -------------------------------------------------------
    // Two outputs adjacent in memory, C[o * ldc + in] and C[o * ldc + in + 1] <- the epilogue functor of
    // alpha * (x, y) + beta * C
    // (o: the outer index, a row of a row-major C or a column of a column-major one, below n_outer; in:
    // the inner one, below n_inner): one 8-byte store when C allows 16-byte access (then `in`, even, is
    // 8-byte aligned) and both are inside; else element by element.
    static __device__ __forceinline__ void store_pair(TC* C, int ldc, int n_outer, int n_inner, int o, int in, float x, float y,
                                               const GlEpi& ep) {
        if (o >= n_outer) return;
#if GL_VEC_C
        if (in + 1 < n_inner) {
            float2* p = reinterpret_cast<float2*>(C + gl_c_off(o, in, ldc));
            float2 v = make_float2(ep.alpha * x, ep.alpha * y);
            if (ep.beta != 0.0f) {
                const float2 c = *p;
                v.x = fmaf(ep.beta, c.x, v.x);
                v.y = fmaf(ep.beta, c.y, v.y);
            }
#if GL_EPI_AUX
            v = make_float2(ep.pre(v.x, o, in), ep.pre(v.y, o, in + 1));
            *reinterpret_cast<float2*>(ep.aux + gl_c_off(o, in, ldc)) = v;   // the pre-activations, one 8-byte store
            *p = make_float2(ep.post(v.x), ep.post(v.y));
#else
            *p = make_float2(ep.finish(v.x, o, in), ep.finish(v.y, o, in + 1));
#endif
            return;
        }
#endif
        if (in < n_inner) gl_store_c(C, ldc, o, in, x, ep);
        if (in + 1 < n_inner) gl_store_c(C, ldc, o, in + 1, y, ep);
    }

    // The tile rows (within its m64 block) of a consumer thread's accumulator rows g (h = 0) and
    // g + 8 (h = 1) of its warp's 16 (g = lane / 4, w = the warp within its warpgroup). K-major A: the
    // wgmma's own, 16 w + g + 8 h. Register A: any one-to-one map will do, as the thread loads the
    // fragment rows it names (a row of A is a row of C), and this one makes the LDS conflict-free and
    // 8 bytes wide: rows g and g + 8 are the adjacent m, m + 1 of the panel's row (one LDS.64 each
    // for k = t and k = t + 4), and a half-warp's 16 pairs fall in 32 distinct banks. Bits of the row:
    // 0 h, 1 g&1 (the word in its 16-byte chunk), 2 g>>2, 3 w&1, 4 (g>>1)&1 (the chunk: a half-warp's
    // g>>1 and its four t, whose swizzle XORs t into the chunk's low two bits, make 8 chunks), 5 w>>1
    // (the 32-row panel).
    static __device__ __forceinline__ int acc_row(int w, int lane, int h) {
        const int g = lane / 4;
        if constexpr (REG_A) return h | (g & 1) << 1 | (g >> 2) << 2 | (w & 1) << 3 | ((g >> 1) & 1) << 4 | (w >> 1) << 5;
        else return 16 * w + g + 8 * h;
    }

    // One consumer warp's outputs of the tile: row0 = its warpgroup's first row, col0 the tile's first
    // column. Accumulator d[j][e]: row acc_row(w, lane, e / 2) of m64 block mi, column 8 j + 2 (lane %
    // 4) + e % 2. Row-major C pairs (e, e + 1) along a row; a column-major C (register A only, where
    // rows h = 0, 1 are adjacent) pairs (e, e + 2) down a column.
    static __device__ __forceinline__ void store_tile(const float (&acc)[MI][BN / 8][4], int w, int lane, TC* C, int ldc, int M, int N,
                                               int row0, int col0, const GlEpi& ep) {
        const int c = col0 + 2 * (lane % 4);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const int r0 = row0 + 64 * mi + acc_row(w, lane, 0), r1 = row0 + 64 * mi + acc_row(w, lane, 1);
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
#if GL_C_COL
                store_pair(C, ldc, N, M, c + 8 * j, r0, acc[mi][j][0], acc[mi][j][2], ep);
                store_pair(C, ldc, N, M, c + 8 * j + 1, r0, acc[mi][j][1], acc[mi][j][3], ep);
#else
                store_pair(C, ldc, M, N, r0, c + 8 * j, acc[mi][j][0], acc[mi][j][1], ep);
                store_pair(C, ldc, M, N, r1, c + 8 * j, acc[mi][j][2], acc[mi][j][3], ep);
#endif
            }
        }
    }

    // ---- epilogue by TMA (tma_store_now): one consumer warpgroup's rows, chunk by chunk ----------------
    // A chunk is an m64 block's 64 rows x 32 columns (8 KB): alpha * acc goes into one of the
    // warpgroup's two chunk buffers by 8-byte st.shared, in the layout TMA's 128-byte swizzle reads
    // (16-byte piece p of swizzle row r at piece p ^ (r % 8)); every thread fences its writes for the
    // async proxy, the warpgroup meets at its named barrier, and its first thread issues the chunk's two
    // box stores (cp.async.bulk.tensor, one bulk group per chunk; TMA clips at M and N) and goes on.
    // Before a buffer is written again that thread waits until at most one group (the other buffer's)
    // is still reading shared memory, counted across tiles alike (a tile is an even number of chunks).
    // Row-major C: a box is 32 rows x 32 columns, swizzle row = C row. Column-major C (the register-A
    // path's transposed problem): a box is 32 columns x 32 rows, swizzle row = C column, and a thread's
    // rows r, r + 1 (acc_row) are one 8-byte word.
    // Bank conflicts: an STS.64 is served a half-warp (16 lanes, 128 bytes) per wavefront, so 2
    // wavefronts at best. Stored in the accumulators' own order, every layout met 2-way in each
    // half-warp (4 wavefronts; Nsight Compute at 8192^3, column-major C,
    // h100_profile_wgmma_tf32_epi1_8192.json): the half-warp's 16 pieces fell on 8 slots
    // (bank group x 8-byte half). So lanes store their fragments in a permuted order, the order bit
    // being a lane bit that did not reach the slot: column-major C, lanes with t >= 2 store their
    // column pair's second column first; row-major C, lanes of one half of the half-warp store the
    // chunk's fragments jj ^ 2 (t >= 2 for a K-major A, g & 2 for register A). Each half-warp then
    // covers all 16 slots (an exhaustive count over the lanes; the selects cost 2 FSEL a store).
    // Against store_tile (64 8-byte st.global per thread at 128x256, all 132 SMs' 128 KB tiles at once):
    // the stores leave the consumers' path, which then waits only for shared memory to be read.
    static __device__ __forceinline__ void gl_wg_sync(int wg) {     // the named barrier of consumer warpgroup wg
        asm volatile("bar.sync %0, %1;\n" :: "r"(1 + wg), "n"(GL_WARPGROUP) : "memory");
    }
    static __device__ __forceinline__ void gl_sts64(unsigned addr, float x, float y) {
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" :: "r"(addr), "f"(x), "f"(y) : "memory");
    }
    // With an auxiliary output (GL_AUX) every store is a direct pair (store_pair writes both).
    static __device__ __forceinline__ bool tma_store_now(int M, int N, float beta) {
        return !GL_AUX && (GL_TMA_STORE_ONLY || (TMA_STORE && beta == 0.0f && (GL_C_COL ? M : N) % 4 == 0));   // rows of whole 16-byte pieces
    }
    static_assert(!(GL_AUX && GL_TMA_STORE_ONLY), "the store twin stores by TMA only: no auxiliary output");
    static __device__ __forceinline__ void store_tile_tma(const float (&acc)[MI][BN / 8][4], unsigned stage, int wg, int warp,
                                                   int lane, const GlTensorMap* tmC, int M, int N, int row0, int col0, int z,
                                                   const GlEpi& ep) {
        const int w = warp % 4;
        const bool issuer = w == 0 && lane == 0;
        // the whole functor (beta == 0 here) of alpha * x at the kernel's (row kr, column kc); the stored
        // C's coordinates are those, or with GL_C_COL the other way round
        auto fin = [&](float x, int kr, int kc) {
            return ep.finish(ep.alpha * x, GL_C_COL ? kc : kr, GL_C_COL ? kr : kc);
        };
        const int t = lane % 4;
        const int r = acc_row(w, lane, 0);              // rows r and acc_row(w, lane, 1) of the m64 block
#if GL_C_COL
        const bool swap = t >= 2;                       // this lane stores column 2 t + 1 before 2 t
        const unsigned at = (r / 32) * BOX_B + 4 * (r % 4), rx = (r % 32) / 4;     // r even: r, r + 1 one word
        unsigned at_e[2];                               // the k-th store's address in the chunk, jj = 0
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const unsigned col = 2 * t + (k ^ (int)swap);   // < 8: its own swizzle phase
            at_e[k] = at + col * GL_ROW_B + ((rx ^ col) << 4);
        }
#else
        const bool swap = REG_A ? ((lane / 4) & 2) != 0 : t >= 2;    // this lane stores fragment jj ^ 2 at step jj
        const int r1 = acc_row(w, lane, 1);             // r + 8 (K-major A) or r + 1 (register A)
        const unsigned at0 = r * GL_ROW_B + 8 * (t % 2), at1 = r1 * GL_ROW_B + 8 * (t % 2);
#endif
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int c = 0; c < BN / CHUNK_N; ++c) {
                const unsigned buf = stage + (mi * (BN / CHUNK_N) + c) % EPI_BUFS * CHUNK_B;
                if (issuer) gl_bulk_wait_read<EPI_BUFS - 1>();   // this buffer's last chunk read
                gl_wg_sync(wg);
#pragma unroll
                for (int jj = 0; jj < CHUNK_N / 8; ++jj) {
#if GL_C_COL
                    const float (&a)[4] = acc[mi][c * (CHUNK_N / 8) + jj];
#pragma unroll
                    for (int k = 0; k < 2; ++k) {         // column 8 jj + 2 t + e, e = k ^ swap: outputs e (row r), e + 2 (r + 1)
                        const float x = swap ? a[k ^ 1] : a[k], y = swap ? a[(k ^ 1) + 2] : a[k + 2];
                        const int kc = col0 + c * CHUNK_N + 8 * jj + 2 * t + (k ^ (int)swap), kr = row0 + 64 * mi + r;
                        gl_sts64(buf + at_e[k] + 8 * jj * GL_ROW_B, fin(x, kr, kc), fin(y, kr + 1, kc));
                    }
#else
                    const float (&p)[4] = acc[mi][c * (CHUNK_N / 8) + jj];
                    const float (&q)[4] = acc[mi][c * (CHUNK_N / 8) + (jj ^ 2)];
                    const int piece = 2 * (jj ^ (swap ? 2 : 0)) + t / 2;   // the fragment's columns 2 t, +1: its 16-byte piece
                    const int kc = col0 + c * CHUNK_N + 8 * (jj ^ (swap ? 2 : 0)) + 2 * t;
                    const int kr0 = row0 + 64 * mi + r, kr1 = row0 + 64 * mi + r1;
                    gl_sts64(buf + at0 + ((piece ^ (r % 8)) << 4), fin(swap ? q[0] : p[0], kr0, kc), fin(swap ? q[1] : p[1], kr0, kc + 1));
                    gl_sts64(buf + at1 + ((piece ^ (r1 % 8)) << 4), fin(swap ? q[2] : p[2], kr1, kc), fin(swap ? q[3] : p[3], kr1, kc + 1));
#endif
                }
                gl_fence_proxy_async();                   // the chunk's st.shared visible to the copy engine
                gl_wg_sync(wg);
                if (issuer) {
                    const int i = row0 + 64 * mi, j = col0 + c * CHUNK_N;
                    // the box of rows from `row` on: a column-major C's map has the row as its inner coordinate
                    auto box = [&](int row, unsigned src) {
                        const int c0 = GL_C_COL ? row : j, c1 = GL_C_COL ? j : row;
                        gl_tma_store_at(tmC, c0, c1, z, src);
                    };
                    if (j < N) {
                        if (i < M) box(i, buf);
                        if (i + 32 < M) box(i + 32, buf + BOX_B);
                    }
                    gl_bulk_commit();                     // one group per chunk, issued or not: the count above holds
                }
            }
    }


    // The tile stored by each thread's pairs (store_tile).
    static __device__ __forceinline__ void store_rows(const float (&acc)[MI][BN / 8][4], unsigned stage, int wg, int warp, int lane,
                                               TC* C, int ldc, int M, int N, int i0, int j0, const GlEpi& ep) {
        store_tile(acc, warp % 4, lane, C, ldc, M, N, i0, j0, ep);
    }
    // C's map is not prefetched: with the prefetch, rung 22's stream-K build reloaded N from the constant
    // bank at each of its pair stores (ptxas's register choice at 168 registers a thread)
    static __device__ __forceinline__ void epi_prefetch(bool, int, int, const GlTensorMap*) {}
    // every warpgroup's TMA stores complete before the block exits (its first thread issued them)
    static __device__ __forceinline__ void epi_drain(bool tma, int warp, int lane) {
        if (TMA_STORE && tma && warp % 4 == 0 && lane == 0) gl_bulk_wait<0>();
    }
    // This part never defers (DEFERRED is false): the consumers' deferred branches are dead code, and
    // these give them the names ws_epi16.cuh's deferred tile has.
    static constexpr int NBOX = 1, BOX_F = 2;
    static __device__ __forceinline__ void hold_tile(unsigned (&)[NBOX][BOX_F][2], const float (&)[MI][BN / 8][4], const GlEpi&, int,
                                              int, int) {}
    static __device__ __forceinline__ void hold_nothing(unsigned (&)[NBOX][BOX_F][2]) {}
    static __device__ __forceinline__ void write_held_box_tma(int, const unsigned (&)[BOX_F][2], unsigned, int, const GlTensorMap*,
                                                       int, int, int, int, int) {}
};
