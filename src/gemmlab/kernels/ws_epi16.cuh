// ws_epi16.cuh — the epilogue part of the warp-specialized WGMMA rungs for a 16-bit C (fp16 or
// bf16, TC; rung 21, whatever its operands): each consumer warp's outputs pass through its own
// shared staging (stmatrix, swizzled) and leave by 16-byte stores (store_tile), by TMA stores of
// 16 x 64 boxes (store_tile_tma), or held in registers and written during the next tile's main loop
// (DEFER=1: hold_tile, write_held_box_tma). Every value goes through epilogue.cuh's functor (alpha,
// beta, bias, activation) and is rounded once to TC. ws_epi32.cuh is the same part for an FP32 C.
// The includer defines, before including: BN, MI, WM, CWARPS (hopper.cuh), TMA_ONLY (both operands
// by TMA), EPI_TMA, DEFER, GL_TMA_STORE_ONLY and EPI_BUDGET_B (the staging bytes the registry gives
// the block beside its stages: core/families/hopper.py, ws_smem).
// What a ws epilogue part gives its rung's consumers, as static members (ws_epi32.cuh's GlWsEpi32 gives
// the same):
//   EPI_B, TMA_STORE, DEFERRED        its staging bytes, whether it stores by TMA, whether it defers;
//   epi_row(wg, warp), epi_stage(epi, wg, warp)
//                                     the first tile row a warp stores, and its staging;
//   tma_store_now(M, N, beta)         whether this launch stores by TMA;
//   store_tile_tma / store_rows (acc, stage, wg, warp, lane, tmC or C, ..., M, N, i0, j0, [z,] ep)
//                                     a tile's outputs from row i0 (the warp's first), column j0;
//   epi_prefetch(tma, warp, lane, tmC), epi_drain(tma, warp, lane)
//                                     C's map cached before the first store (or not); every TMA
//                                     store done before the block exits;
//   NBOX, BOX_F, hold_tile, hold_nothing, write_held_box_tma
//                                     the deferred tile, held by the consumers in unsigned
//                                     [NBOX][BOX_F][2] (a part that never defers names them too).
// The rung keeps the held tile in its own locals, not in a struct of this part: gathered into one
// (its boxes, row, column, element and next box), ptxas spilled 72 bytes at CLUSTER=1 with a
// stream-K tail where the locals spill nothing.
#pragma once
#if GL_C_DTYPE == 0
#error "ws_epi16.cuh stores a 16-bit C: an FP32 C takes ws_epi32.cuh"
#endif
// The part is one type, GlWsEpi16: its constants and functions are its static members, which a rung's
// consumers name through the rung's choice (`using Epilogue = GlWsEpi16;`).
struct GlWsEpi16 {
    // Epilogue staging, apart from the stages (the producer refills those for the next tile while the
    // consumers store this one): each consumer warp owns 16 rows x EPI_N outputs of the output type
    // (4 KB at EPI_N = 128), through which its 16 rows of each m64 block pass in BN / EPI_N column
    // passes. 128 columns, not 256: 32 KB in all keeps 4 stages of 128x256x64 (192 KB) within a
    // block's 227 KB; a whole 128x256 tile (64 KB) would cost a stage.
    static constexpr int EPI_N = BN < 128 ? BN : BN % 128 ? 64 : 128;   // 192 columns: three passes of 64
    static constexpr int EPI_WARP_B = 16 * EPI_N * 2;
    static constexpr int EPI_B = CWARPS * EPI_WARP_B;
    static_assert(EPI_B <= EPI_BUDGET_B, "the staging fits what the registry gives it");
    // The TMA store epilogue (store_tile_tma) uses the same staging as boxes of 16 rows x 64 outputs (one
    // 128-byte swizzle row each: 2 KB), EPI_BUFS of them per warp, each on the swizzle's 1024-byte period.
    static constexpr int BOX_N = GL_ROW_B / 2, BOX_B = 16 * GL_ROW_B;
    static constexpr int EPI_BUFS = EPI_WARP_B / BOX_B;
    static_assert(EPI_WARP_B % BOX_B == 0 && BN % BOX_N == 0,
                  "the staging holds whole 2 KB boxes on the swizzle's period, and a tile whole boxes");
    // The TMA store needs C describable by a tensor map (GL_VEC_C: 16-byte aligned base, row stride a
    // multiple of 16 bytes), beta == 0 (it writes C without reading it) and rows of whole 16-byte chunks
    // (N % 8 == 0: the copy engine writes whole chunks, and past a ragged row's end they would land in
    // the memory after it); the last two are the launch's (tma_store_now), the host's map follows them.
    static constexpr bool TMA_STORE = EPI_TMA && GL_VEC_C;
    static constexpr int STORE_CHUNK = 16 / (int)sizeof(TC);    // outputs per 16-byte chunk
    // With an auxiliary output (GL_AUX) every store goes by rows: gl_store_c8_rounded writes both.
    static __device__ __forceinline__ bool tma_store_now(int M, int N, float beta) {
        return !GL_AUX && (GL_TMA_STORE_ONLY || (TMA_STORE && beta == 0.0f && N % STORE_CHUNK == 0));
    }
    static_assert(!(GL_AUX && GL_TMA_STORE_ONLY), "the store twin stores by TMA only: no auxiliary output");
    static_assert(!GL_TMA_STORE_ONLY || TMA_STORE, "the store twin is built only where the TMA store is (EPI_TMA=1, GL_VEC_C)");
    // warp % 4 owns 16 rows of each m64 block of its warpgroup's WM (the C-fragment layout), and its own staging
    static __device__ __forceinline__ int epi_row(int wg, int warp) { return wg * WM + 16 * (warp % 4); }
    static __device__ __forceinline__ unsigned epi_stage(unsigned epi, int wg, int warp) { return epi + warp * EPI_WARP_B; }


    // ---- epilogue values: a fragment's four outputs, packed in pairs -----------------------------------
    // Fragment f of a warp's 16 rows from row i0 and its tile's columns from j0: a[0], a[1] at row
    // i0 + lane / 4, columns j0 + 8 f + 2 (lane % 4) + 0 / 1; a[2], a[3] eight rows below. fin: the
    // whole epilogue functor (the stored value is final: beta == 0), else alpha * acc alone (the
    // functor's rest is applied where beta * C is added, gl_store_c8_rounded). b: the fragment's bias
    // (EpiBias). Without bias and activation it is all dead code.
    template <int F>
    struct EpiBias {
        float col[F][2];    // this lane's two columns of each of F fragments, where the bias runs along columns
        float row[2];       // this lane's rows g and g + 8, where it runs along rows
        // value e of fragment f's bias: the one of the two directions the build has. Not their sum: the
        // other is a 0.0f that the compiler may not drop (x + 0.0f is not x for x = -0.0f), an add per
        // output
        __device__ __forceinline__ float at(int f, int e) const { return GL_BIAS_ROW ? row[e / 2] : col[f][e % 2]; }
    };
    template <int F>
    static __device__ __forceinline__ uint2 epi_pairs(const float (&a)[4], const GlEpi& ep, bool fin, const EpiBias<F>& b, int f) {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            v[e] = ep.alpha * a[e];
            if (!GL_EPI_PLAIN && fin) v[e] = GL_BIAS ? ep.apply(v[e], b.at(f, e)) : ep.post(v[e]);
        }
        return make_uint2(gl_pack2(v[0], v[1]), gl_pack2(v[2], v[3]));
    }
    // The bias of fragments f0 .. f0 + F - 1 of the warp's 16 rows from i0 (tile columns from j0), before
    // a pass stages them. A column bias is read once per warp: lane l loads columns 2 l and 2 l + 1 of each
    // 64, and the lanes that hold a fragment's columns (lane % 4 = t: 8 f + 2 t, +1) take them by shuffle.
    // Why: with each lane loading its own 2 F values, ptxas hoisted the loads of every pass to the
    // epilogue's start, beside the 128 accumulators (rung 21's 256x128 tile spilled 144 bytes), and left
    // beside the stmatrix of their pass (asm volatile with a memory clobber) they waited one L2 round
    // trip each, one after another. Zeros, and no loads, without a bias.
    // The loads (epi_bias_load: this lane's two columns of each 64, and its row of the warp's 16) apart
    // from the shuffles (epi_bias_share), so that a store of several boxes can issue every box's loads
    // before the first box's staging (whose asm statements the loads cannot cross) and wait once.
    template <int F>
    struct EpiBiasLoad {
        float2 mine[(F + 7) / 8];
        float row;
    };
    template <int F>
    static __device__ __forceinline__ EpiBiasLoad<F> epi_bias_load(const GlEpi& ep, int i0, int j0, int f0, int lane) {
        EpiBiasLoad<F> l;
#pragma unroll
        for (int g = 0; g < (F + 7) / 8; ++g) l.mine[g] = ep.bias_pair(j0 + 8 * f0 + 64 * g + 2 * lane);
        l.row = ep.bias_row(i0 + lane % 16);   // a row bias: lane l loads row l % 16 of the warp's 16
        return l;
    }
    template <int F>
    static __device__ __forceinline__ EpiBias<F> epi_bias_share(const EpiBiasLoad<F>& l, int lane) {
        EpiBias<F> b;
#pragma unroll
        for (int f = 0; f < F; ++f) {
            const int from = 4 * (f % 8) + lane % 4;
            b.col[f][0] = GL_BIAS && !GL_BIAS_ROW ? __shfl_sync(0xffffffffu, l.mine[f / 8].x, from) : 0.0f;
            b.col[f][1] = GL_BIAS && !GL_BIAS_ROW ? __shfl_sync(0xffffffffu, l.mine[f / 8].y, from) : 0.0f;
        }
        // rows g and g + 8 come from lanes g, g + 8
        b.row[0] = GL_BIAS && GL_BIAS_ROW ? __shfl_sync(0xffffffffu, l.row, lane / 4) : 0.0f;
        b.row[1] = GL_BIAS && GL_BIAS_ROW ? __shfl_sync(0xffffffffu, l.row, lane / 4 + 8) : 0.0f;
        return b;
    }
    template <int F>
    static __device__ __forceinline__ EpiBias<F> epi_bias(const GlEpi& ep, int i0, int j0, int f0, int lane) {
        return epi_bias_share<F>(epi_bias_load<F>(ep, i0, j0, f0, lane), lane);
    }

    // ---- epilogue staging: COLS columns of one warp's 16 rows of an m64 block, rounded (epi_pairs) ---
    // From fragment f0 on (8 columns each), by stmatrix (16 rows x 16 columns per instruction: matrices
    // 0 / 1 are rows 0-7 / 8-15 of 8 columns, 2 / 3 the next 8) into swizzled rows: lane l names row
    // l % 16, whose staging starts at row_at, and 16-byte chunk 2 jj + l / 16 of it, stored at chunk
    // (2 jj + l / 16) ^ (l % 8) = 2 jj ^ st_x (2 jj has no bit 0).
    template <int COLS>
    static __device__ __forceinline__ void stage_cols(const float (&acc)[BN / 8][4], int f0, unsigned row_at, int st_x,
                                               const GlEpi& ep, bool fin, const EpiBias<COLS / 8>& bias) {
#pragma unroll
        for (int jj = 0; jj < COLS / 16; ++jj) {
            const uint2 a = epi_pairs(acc[f0 + 2 * jj], ep, fin, bias, 2 * jj);
            const uint2 b = epi_pairs(acc[f0 + 2 * jj + 1], ep, fin, bias, 2 * jj + 1);
            gl_stmatrix_x4(row_at + ((2 * jj ^ st_x) << 4), a.x, a.y, b.x, b.y);
        }
    }

    // ---- epilogue: one consumer warp's 16 rows of each m64 block --------------------------------------
    // Per pass of EPI_N columns: alpha * acc rounded to T goes into the warp's staging by stmatrix
    // (stage_cols), then each lane reads 16-byte chunks of whole rows back and writes them to C, 8 outputs
    // per store (gl_store_c8_rounded: beta, ragged edges); a warp's store covers two rows of 256
    // contiguous bytes. A C without 16-byte access (GL_VEC_C = 0) takes scalar stores instead, lane l
    // on output l of 32 neighbours (gl_store_c1_rounded). The staging is swizzled like the operand
    // panels, 16-byte chunk c of row r at chunk c ^ (r % 8): the 8 rows of one stmatrix matrix, and the 8 chunks a quarter-warp reads,
    // fall on 8 distinct 16-byte bank groups (no conflicts, no padding). Only __syncwarp: the staging
    // is the warp's own. Against storing from the fragments (rung 21 before: 64 4-byte stores per
    // thread at BN = 256, each instruction touching 8 rows): 16 stores of 16 bytes, 16 stmatrix, 16
    // loads of 16 bytes, so both consumer warpgroups get back to the next tile's wgmmas sooner.
    // PASS_N (default EPI_N): the columns of a pass; DEFER=1 passes 64 (half the loads in flight: its held
    // tile is live here too, and with 8 in flight ptxas spilled 16 bytes).
    template <int PASS_N = EPI_N>
    static __device__ __forceinline__ void store_tile(const float (&acc)[MI][BN / 8][4], unsigned stage, int lane, TC* C, int ldc,
                                               int M, int N, int i0, int j0, const GlEpi& ep) {
        constexpr int ROW_B = PASS_N * 2, CHUNKS = PASS_N / 8;   // bytes and 16-byte chunks of a staged row
        static_assert(PASS_N <= EPI_N && BN % PASS_N == 0, "a pass fits the staging, and a tile is whole passes");
        // stmatrix (stage_cols): lane l names row l % 16 of the pass's staging
        const unsigned st_at = stage + (lane % 16) * ROW_B;
        const int st_x = (lane / 16) ^ (lane % 8);
        const bool fin = ep.beta == 0.0f && !GL_EPI_AUX;   // GL_AUX: the rest where the rows are stored
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int p = 0; p < BN / PASS_N; ++p) {
                const EpiBias<PASS_N / 8> bias = epi_bias<PASS_N / 8>(ep, i0 + mi * 64, j0, p * PASS_N / 8, lane);
                stage_cols<PASS_N>(acc[mi], p * PASS_N / 8, st_at, st_x, ep, fin, bias);
                __syncwarp();                             // the staged pass visible to the whole warp
#if !GL_VEC_C
                // C without 16-byte access: scalar stores, consecutive lanes on consecutive outputs of
                // a row (one store instruction covers 64 contiguous bytes, not 32 chunks 16 bytes apart)
#pragma unroll 8
                for (int q = 0; q < PASS_N / 2; ++q) {
                    const int v = lane + 32 * q, r = v / PASS_N, c = v % PASS_N;
                    const int i = i0 + mi * 64 + r, j = j0 + p * PASS_N + c;
                    const unsigned short h = gl_lds16(stage + r * ROW_B + (((c / 8) ^ (r % 8)) << 4) + 2 * (c % 8));
                    if (i < M && j < N) gl_store_c1_rounded(C, ldc, i, j, h, ep);
                }
                __syncwarp();                             // read before the next pass overwrites it
#else
                constexpr int PER = 16 * CHUNKS / 32;     // chunks per lane
                uint4 h[PER];
#pragma unroll
                for (int q = 0; q < PER; ++q) {           // all loads first: their latencies overlap
                    const int v = lane + 32 * q, r = v / CHUNKS, c = v % CHUNKS;
                    h[q] = gl_lds128(stage + r * ROW_B + ((c ^ (r % 8)) << 4));
                }
                __syncwarp();                             // read before the next pass overwrites it
#pragma unroll
                for (int q = 0; q < PER; ++q) {
                    const int v = lane + 32 * q, r = v / CHUNKS, c = v % CHUNKS;
                    gl_store_c8_rounded(C, ldc, M, N, i0 + mi * 64 + r, j0 + p * PASS_N + 8 * c, h[q], ep);
                }
#endif
            }
    }

    // ---- epilogue by TMA (tma_store_now): one consumer warp's 16 rows of each m64 block --------------
    // Per box of 16 rows x 64 columns: alpha * acc rounded to T goes into one of the warp's EPI_BUFS
    // box buffers by stmatrix, in the layout TMA's 128-byte swizzle reads (16-byte chunk c of row r at
    // chunk c ^ (r % 8) of a 128-byte row: conflict-free for stmatrix as in store_tile); each lane
    // fences its writes for the async proxy, and lane 0 issues the box's store (cp.async.bulk.tensor,
    // one bulk group per box; TMA clips rows past M and 16-byte chunks past N) and goes on. Before a
    // buffer is written again, lane 0 waits until at most EPI_BUFS - 1 groups are still reading shared
    // memory (the box that last used it has been read), counted across passes and tiles alike. Against
    // store_tile: no LDS.128, no STG.128, no per-row bounds arithmetic; the consumers return to the
    // next tile's wgmmas while the copy engine writes this tile to global memory.
    static __device__ __forceinline__ void store_tile_tma(const float (&acc)[MI][BN / 8][4], unsigned stage, int wg, int warp,
                                                   int lane, const GlTensorMap* tmC, int M, int N, int i0, int j0, int z,
                                                   const GlEpi& ep) {
        // stmatrix (stage_cols): lane l names row l % 16 of a box (one 128-byte row each)
        const unsigned st_row = stage + (lane % 16) * GL_ROW_B;
        const int st_x = (lane / 16) ^ (lane % 8);
        // every box's bias loaded first: one wait for them all, not one per box
        EpiBiasLoad<BOX_N / 8> loads[MI][BN / BOX_N];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int bx = 0; bx < BN / BOX_N; ++bx)
                loads[mi][bx] = epi_bias_load<BOX_N / 8>(ep, i0 + mi * 64, j0, bx * BOX_N / 8, lane);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int bx = 0; bx < BN / BOX_N; ++bx) {
                const EpiBias<BOX_N / 8> bias = epi_bias_share<BOX_N / 8>(loads[mi][bx], lane);
                const unsigned buf = (mi * (BN / BOX_N) + bx) % EPI_BUFS * BOX_B;
                if (lane == 0) gl_bulk_wait_read<EPI_BUFS - 1>();   // this buffer's last box read
                __syncwarp();
                stage_cols<BOX_N>(acc[mi], bx * BOX_N / 8, st_row + buf, st_x, ep, true, bias);
                gl_fence_proxy_async();                   // the box's stmatrix visible to the copy engine
                __syncwarp();
                if (lane == 0) {
                    const int i = i0 + mi * 64, j = j0 + bx * BOX_N;
                    if (i < M && j < N) gl_tma_store_at(tmC, j, i, z, stage + buf);
                    gl_bulk_commit();                     // one group per box, issued or not: the count above holds
                }
            }
    }

    // ---- the deferred epilogue (DEFER=1, the default): the tile held in registers, written during the next ----
    // Where the epilogue stores by TMA (tma_store_now), a tile's alpha * acc, rounded to T and packed in
    // pairs, waits in NBOX x 16 registers per thread (64 at 128x256: 128 accumulators + 64 held + the
    // loop's state fit the consumers' 232) while the next piece's wgmmas run; each warp writes one box
    // of it (16 rows x 64 outputs: stmatrix, fence, one TMA store) every few k tiles, between two runs
    // of the main loop, with the last run's wgmmas in flight. Elsewhere (beta != 0, a C TMA cannot
    // store at run time) the tile is stored at its end by store_tile in passes of 64 columns; where no
    // TMA store is compiled (EPI_TMA=0, a C without 16-byte access) and for operands by the thread copy
    // (TMA_ONLY false: 200 registers for the consumers) DEFER=1 compiles what DEFER=0 does.
    // Why: the blocks of a wave end their tiles at nearly the same moment, so a wave's C (132 x 64 KB at
    // 128x256) was written in one burst; a timeline of one launch
    // (h100_timeline_wgmma_ws_streamk0_fp16_4096.json) shows those synchronized epilogues taking several
    // times as long as the ones where few blocks overlap. Spread over the next tile, the writes are a
    // trickle to L2 instead of a burst, and the tensor cores stop only for the last k tile's drain and
    // the packing. Measured with DEFER 0 and 1 in the same run beside cuBLAS
    // (h100_tune_wgmma_ws_defer_*.json): a small gain at 4096^3 and 8192^3 in fp16 and bf16, at the
    // low end of what was predicted (docs/journal/hopper.md).
    // What the build taught: with the write inside the k-tile loop, or the rows path writing from the
    // held registers, ptxas moved the loop's descriptors out of the uniform registers (a longer loop);
    // with 8 loads in flight in store_tile, or the stmatrix addresses hoisted out of the loop, it spilled.
    // A fused bias or activation (epilogue.cuh) is applied while holding, box by box: the box's bias
    // (epi_bias), the functor, then the packing. Beside the 128 accumulators and the 64 held registers
    // that fits for ReLU, GELU (tanh) and a bias alone; GELU (erf) and SiLU spill at 128x256, and their
    // plans take DEFER=0 (core/variant.py, FUSED_FALLBACKS). Why hold them: a fused tile stored at its
    // end keeps the tensor cores waiting for the bias's loads and the stores, as a plain one would.
    // Not with an auxiliary output: that tile is stored by rows (tma_store_now).
    static constexpr bool DEFERRED = DEFER && TMA_ONLY && TMA_STORE && !GL_AUX;
    static constexpr int NBOX = MI * (BN / BOX_N);       // boxes of a warp's share of a tile
    static constexpr int BOX_F = BOX_N / 8;              // accumulator fragments (8 columns) per box row
    // a held box: fragment f's 4 values as 2 packed pairs, (a0, a1) and (a2, a3), final (the launch
    // stores by TMA only where beta == 0): the whole functor of the warp's rows from i0, columns from j0
    static __device__ __forceinline__ void hold_tile(unsigned (&held)[NBOX][BOX_F][2], const float (&acc)[MI][BN / 8][4],
                                              const GlEpi& ep, int i0, int j0, int lane) {
#pragma unroll
        for (int c = 0; c < NBOX; ++c) {
            const int mi = c / (BN / BOX_N), f0 = (c % (BN / BOX_N)) * BOX_F;
            const EpiBias<BOX_F> bias = epi_bias<BOX_F>(ep, i0 + mi * 64, j0, f0, lane);
#pragma unroll
            for (int f = 0; f < BOX_F; ++f) {
                const uint2 p = epi_pairs(acc[mi][f0 + f], ep, true, bias, f);
                held[c][f][0] = p.x;
                held[c][f][1] = p.y;
            }
        }
    }
    // The held registers set to a constant once written: ptxas cannot see that a piece after a stream-K
    // piece that published reads nothing held, so without this it kept the written tile live through
    // stream-K's fixup (~100 bytes spilled at 128x256); constants it rematerializes instead.
    static __device__ __forceinline__ void hold_nothing(unsigned (&held)[NBOX][BOX_F][2]) {
#pragma unroll
        for (int c = 0; c < NBOX; ++c)
#pragma unroll
            for (int f = 0; f < BOX_F; ++f) held[c][f][0] = held[c][f][1] = 0u;
    }
    // Box cb of the held tile (its rows from row0, its columns from col0 + its offset) into buffer
    // cb % EPI_BUFS of the warp's staging, laid out as store_tile_tma's boxes (stmatrix, 128-byte swizzle).
    // cb is a constant after the callers' unrolled loops, so h is registers.
    // The lane is read again here (a volatile read of %laneid), not taken from the caller: ptxas hoisted
    // the 16 stmatrix addresses out of the main loop as invariants, registers the held tile needs (it
    // spilled 4 bytes so).
    static __device__ __forceinline__ unsigned stage_held_box(int cb, const unsigned (&h)[BOX_F][2], unsigned stage) {
        unsigned lane;
        asm volatile("mov.u32 %0, %%laneid;\n" : "=r"(lane));
        const unsigned buf = stage + (cb % EPI_BUFS) * BOX_B;
        const unsigned st_row = buf + (lane % 16) * GL_ROW_B;
        const int st_x = (lane / 16) ^ (lane % 8);
#pragma unroll
        for (int jj = 0; jj < BOX_F / 2; ++jj)
            gl_stmatrix_x4(st_row + ((2 * jj ^ st_x) << 4), h[2 * jj][0], h[2 * jj][1], h[2 * jj + 1][0], h[2 * jj + 1][1]);
        return buf;
    }
    // ... and written by TMA: lane 0 waits only for its buffer's last box to have been read.
    static __device__ __forceinline__ void write_held_box_tma(int cb, const unsigned (&h)[BOX_F][2], unsigned stage, int lane,
                                                       const GlTensorMap* tmC, int M, int N, int row0, int col0, int z) {
        if (lane == 0) gl_bulk_wait_read<EPI_BUFS - 1>();   // this buffer's last box read
        __syncwarp();
        const unsigned buf = stage_held_box(cb, h, stage);
        gl_fence_proxy_async();                       // the box's stmatrix visible to the copy engine
        __syncwarp();
        if (lane == 0) {
            const int i = row0 + cb / (BN / BOX_N) * 64, j = col0 + cb % (BN / BOX_N) * BOX_N;
            if (i < M && j < N) gl_tma_store_at(tmC, j, i, z, buf);
            gl_bulk_commit();
        }
    }

    // The tile stored by rows (store_tile): in passes of EPI_N columns, or with DEFERRED of 64 (store_tile's PASS_N).
    static __device__ __forceinline__ void store_rows(const float (&acc)[MI][BN / 8][4], unsigned stage, int wg, int warp, int lane,
                                               TC* C, int ldc, int M, int N, int i0, int j0, const GlEpi& ep) {
        store_tile<DEFERRED ? BOX_N : EPI_N>(acc, stage, lane, C, ldc, M, N, i0, j0, ep);
    }
    // C's map cached before any store
    static __device__ __forceinline__ void epi_prefetch(bool tma, int warp, int lane, const GlTensorMap* tmC) {
        if (tma && warp == 0 && lane == 0) gl_tma_prefetch(tmC);
    }
    // every warp's TMA stores complete before the block exits (its staging is freed with it)
    static __device__ __forceinline__ void epi_drain(bool tma, int warp, int lane) {
        if (tma && lane == 0) gl_bulk_wait<0>();
    }
};
