// mainloop.cuh — the mainloop parts of the WGMMA rungs. GlMainloopSS reads both operands from the
// shared stages by descriptor (rungs 19 and 21: fp16, bf16; rung 22: TF32 and 3xTF32's planes; rung 25: FP8). One k
// tile of a consumer warpgroup: its KSTEPS x MI wgmmas as one commit group, after which the previous
// k tile's group is done and its stage is released (one group stays in flight while the next full
// barrier is awaited). 3xTF32 (LO_A, LO_B: the small parts' offsets in a stage) sums a k tile's three
// products into fresh partial sums, waits for them, releases the stage and adds them in FP32.
// PROMOTE (rung 25, FP8): the same with the one product: the tensor cores keep fewer fraction bits
// than FP32 in an FP8 accumulation, so a k tile's sum is formed there and promoted into FP32
// registers once per k tile (128 of K), as DeepGEMM does.
// A mainloop part gives the consumers (ring.cuh's consume_ktiles, under rung 19's kernel and
// ws_consume.cuh's persistent walk):
//   Mainloop(sm, wg, warp, lane)           the warpgroup's descriptors (its WM rows of A, all of B);
//   ktile(acc, s, later, prev, release)    k tile in stage s (later: not the piece's first k tile;
//                                          prev: the stage whose group is still in flight, updated);
//   begin(sc, row0, col0, k0, kblocks, warp, lane, M, N)
//                                          a piece's start (the block-scaled part's scale pointers);
//   drain(acc, prev, release)              after a piece's last k tile: every group done, the last
//                                          stage released (the producer refills it during the epilogue).
//   PAIRED                                 the part takes a run of k tiles whole instead of ktile:
//                                          run(sm, ring, acc, kt, stop, prev, release) (the
//                                          block-scaled part, which pipelines across k tiles).
//   HOLDS_STAGE                            whether a k tile's stage is held past its ktile (released
//                                          by the next one's, the last by drain): ring.cuh's
//                                          skip_ktiles releases a sat-out tile's stages the same way.
// GlMainloopRegA, rung 22's register-A mainloop (an MN-major A read into registers), gives the same.
// The includer defines, before including: BN, MI, WM (hopper.cuh), KSTEPS (its k step) and includes
// ring.cuh (Smem, the stages' carve-up).
#pragma once

template <int A_COL, int B_COL, int LO_A = 0, int LO_B = 0, bool PROMOTE = false>
struct GlMainloopSS {
    static constexpr bool SPLIT = LO_A > 0 || PROMOTE;    // 3xTF32, FP8's promotion: partial sums per k tile
    // the stage of a k tile's wgmmas stays held until the next k tile's are issued (or drain): not
    // where the partial sums are waited for within the k tile
    static constexpr bool HOLDS_STAGE = !SPLIT;
    static constexpr bool PAIRED = false;       // one k tile at a time (ktile)
    const GlStageDescs<A_COL, B_COL, A_PANEL_B, B_PANEL_B> descs;
    __device__ __forceinline__ GlMainloopSS(const Smem& sm, int wg, int, int) : descs(sm.a_base, sm.b_base, wg * WM) {}

    template <typename Release>
    __device__ __forceinline__ void ktile(float (&acc)[MI][BN / 8][4], int s, bool later, int& prev,
                                          const Release& release) const {
        if constexpr (SPLIT) {   // the k tile's three products into fresh partial sums, then an FP32 add
            float part[MI][BN / 8][4];
            gl_wgmma_ktile<BN, MI, KSTEPS, A_COL, B_COL, LO_A, LO_B, PROMOTE>(part, descs, s * A_STAGE_B, s * B_STAGE_B);
            release(s);          // its wgmmas are done: the stage is free while the sums are added
            gl_add_acc(acc, part);
        } else {
            gl_wgmma_ktile<BN, MI, KSTEPS, A_COL, B_COL>(acc, descs, s * A_STAGE_B, s * B_STAGE_B);
            if (later) release(prev);
            prev = s;
        }
    }

    // A piece's start (the block-scaled part's hook, GlMainloopBlockScaled): nothing to do here.
    template <typename Scales>
    __device__ __forceinline__ void begin(const Scales&, int, int, int, int, int, int, int, int) {}

    template <typename Release>
    __device__ __forceinline__ void drain(float (&acc)[MI][BN / 8][4], int prev, const Release& release) const {
        if constexpr (!SPLIT) {
            gl_wgmma_wait<0>();
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) gl_fence_acc(acc[mi]);
            release(prev);
        }
    }
};

#if GL_SCALE == 3
// ---- FP8's block-scaled mainloop part (rung 25, GL_SCALE 3: DeepGEMM's scales) ------------------------
// scale_a holds one float per row of A and k block of 128 (M x kblocks), scale_b one per k block and
// block of 128 columns of B (kblocks x nblocks), each in any layout (scales.cuh's strides; an
// M-contiguous scale_a, DeepGEMM's, makes a warp's loads of it coalesced); a k tile is one k block
// (BK 128). Each k tile's partial sums (GlMainloopSS's promotion) are multiplied by scale_a of their
// row times scale_b of the tile's column block before they are added into the FP32 sums: the scales
// differ per k block, so they cannot wait for the epilogue. A thread's rows (two per m64 block) and
// the tile's column block are fixed for a piece of k tiles (begin).
// PIPELINED (rung 25 in clusters of 2): software-pipelined by one k tile. A k tile's wgmmas go out
// into one of two sets of partial sums while the previous k tile's set is scaled and added, so a
// warpgroup's promotion runs under its own wgmmas instead of leaving the tensor cores to the other
// warpgroup's; the part then takes a piece's k tiles whole (PAIRED: run, in place of ktile and
// drain), each k tile's stage released once its wgmmas are done. Its cost: the stage of the k tile
// in flight stays held while the next one is awaited, one stage fewer for the producer's loads.
// Where B is multicast the consumers bound the kernel and it gains; where each block loads all its
// operands it lost (benchmarks/results/h200_fp8_block.json.gz), so blocks alone add after waiting for
// their own wgmmas, as DeepGEMM does (ktile), and leave the tensor cores to the other warpgroup
// meanwhile. 64x128 warpgroup tiles at most: 64 FP32 sums and, pipelined, twice 64 partial sums.
template <int A_COL, int B_COL, bool PIPELINED>
struct GlMainloopBlockScaled {
    static_assert(BK == 128 && BN <= 128, "a k tile is one k block and a tile lies in one column block of 128");
    static constexpr bool HOLDS_STAGE = false;  // each k tile's stage released within its ktile, or run
    static constexpr bool PAIRED = PIPELINED;   // pipelined: takes a piece's k tiles whole (run)
    const GlStageDescs<A_COL, B_COL, A_PANEL_B, B_PANEL_B> descs;
    const float* pa[MI][2];     // this thread's rows of scale_a, at the k tile after the one in ca
    const float* pb;            // the tile's column block of scale_b, likewise
    int pa_step, pb_step;       // the scales' strides along k
    int left;                   // k blocks of K after the one in ca, cb
    float ca[MI][2], cb;        // the oldest k tile not yet added: its scales, as loaded
    __device__ __forceinline__ GlMainloopBlockScaled(const Smem& sm, int wg, int, int) : descs(sm.a_base, sm.b_base, wg * WM) {}

    // The next k tile's scales into ca, cb (raw loads: nothing here waits for them), the pointers one
    // k tile on.
    __device__ __forceinline__ void load() {
        cb = __ldg(pb);
        pb += pb_step;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                ca[mi][h] = __ldg(pa[mi][h]);
                pa[mi][h] += pa_step;
            }
    }

    // Piece start: the tile's first row for this warpgroup (row0), first column (col0) and first k tile
    // (k0) of the kblocks; rows past M read row M - 1 (their outputs are never stored). The first k
    // tile's scales are loaded here; each k tile's are used a k tile after its wgmmas went out, and the
    // next one's loaded then, so a load has a whole k tile of wgmmas to land in (an earlier form loaded
    // them into other registers and copied them, multiplying them at once: it waited for them there, in
    // long-scoreboard stalls; benchmarks/profiles/h200_ncu_fp8_block_scales_waited_4096.csv.gz against
    // h200_ncu_fp8_scales_4096.csv.gz).
    template <typename Scales>
    __device__ __forceinline__ void begin(const Scales& sc, int row0, int col0, int k0, int kblocks, int warp,
                                          int lane, int M, int N) {
        const int r = row0 + 16 * (warp % 4) + lane / 4;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                pa[mi][h] = sc.sa + (size_t)min(r + 64 * mi + 8 * h, M - 1) * sc.sa_m + (size_t)k0 * sc.sa_k;
        pa_step = sc.sa_k;
        pb_step = sc.sb_k;
        pb = sc.sb + (size_t)k0 * sc.sb_k + (size_t)(col0 / 128) * sc.sb_n;
        left = kblocks - k0 - 1;
        load();
    }

    // The k tile in stage s into p: fresh sums (the first k step's scale-d 0), one commit group, not
    // waited for.
    __device__ __forceinline__ void issue(float (&p)[MI][BN / 8][4], int s) const {
        gl_wgmma_ktile<BN, MI, KSTEPS, A_COL, B_COL, 0, 0, true, true>(p, descs, s * A_STAGE_B, s * B_STAGE_B);
    }

    // p, whose wgmmas are done, times its k tile's scales into the FP32 sums; then the next k tile's
    // scales (within K, whether or not this piece takes it).
    __device__ __forceinline__ void scale_add(float (&acc)[MI][BN / 8][4], const float (&p)[MI][BN / 8][4]) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            const float f0 = ca[mi][0] * cb, f1 = ca[mi][1] * cb;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                acc[mi][j][0] = fmaf(p[mi][j][0], f0, acc[mi][j][0]);
                acc[mi][j][1] = fmaf(p[mi][j][1], f0, acc[mi][j][1]);
                acc[mi][j][2] = fmaf(p[mi][j][2], f1, acc[mi][j][2]);
                acc[mi][j][3] = fmaf(p[mi][j][3], f1, acc[mi][j][3]);
            }
        }
        if (left-- > 0) load();
    }

    // The same on a set whose wgmmas were waited for here (fenced: no read of it moves above the wait).
    __device__ __forceinline__ void add(float (&acc)[MI][BN / 8][4], float (&p)[MI][BN / 8][4]) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) gl_fence_acc(p[mi]);
        scale_add(acc, p);
    }

    // Not pipelined: the k tile in stage s, its wgmmas waited for, its stage released, its sums added.
    template <typename Release>
    __device__ __forceinline__ void ktile(float (&acc)[MI][BN / 8][4], int s, bool, int&, const Release& release) {
        float part[MI][BN / 8][4];
        gl_wgmma_ktile<BN, MI, KSTEPS, A_COL, B_COL, 0, 0, true>(part, descs, s * A_STAGE_B, s * B_STAGE_B);
        release(s);          // its wgmmas are done: the stage is free while the sums are added
        scale_add(acc, part);
    }

    // Pipelined: the piece's k tiles [kt, stop) (ring.cuh's consume_ktiles hands them here whole): each
    // into one of two sets of partial sums in turn, p0 and p1; once a k tile's wgmmas are out, the
    // previous one's are waited for (wait_group 1), its stage released and its set added. The sets
    // live in this function only and the loop takes k tiles in pairs, so which set is in flight is
    // known at every instruction and no value of one crosses the loop's edge while its wgmmas run
    // (else ptxas serializes every wgmma: its C7514). The last k tile is waited for, released and
    // added here too: drain has nothing left to do.
    template <typename Release>
    __device__ __forceinline__ void run(const Smem& sm, Ring& ring, float (&acc)[MI][BN / 8][4], int& kt, int stop,
                                        int&, const Release& release) {
        if (kt >= stop) return;
        float p0[MI][BN / 8][4], p1[MI][BN / 8][4];
        int s0 = take_stage(sm, ring, kt), s1;
        issue(p0, s0);
        while (kt + 1 < stop) {
            s1 = step(sm, ring, acc, kt, p1, p0, s0, release);
            s0 = step(sm, ring, acc, kt, p0, p1, s1, release);
        }
        if (kt < stop) {
            s1 = step(sm, ring, acc, kt, p1, p0, s0, release);
            last(acc, p1, s1, release);
        } else {
            last(acc, p0, s0, release);
        }
    }

    // The next k tile into set `into` once its stage is full; then the one before it, in set `done`
    // (stage s_done), waited for, its stage released and its set added. Returns the new k tile's stage.
    template <typename Release>
    __device__ __forceinline__ int step(const Smem& sm, Ring& ring, float (&acc)[MI][BN / 8][4], int& kt,
                                        float (&into)[MI][BN / 8][4], float (&done)[MI][BN / 8][4], int s_done,
                                        const Release& release) {
        const int s = take_stage(sm, ring, kt);
        issue(into, s);
        gl_wgmma_wait<1>();
        release(s_done);
        add(acc, done);
        return s;
    }

    // The piece's last k tile (set p, stage s): waited for, released, added.
    template <typename Release>
    __device__ __forceinline__ void last(float (&acc)[MI][BN / 8][4], float (&p)[MI][BN / 8][4], int s,
                                         const Release& release) {
        gl_wgmma_wait<0>();
        release(s);
        add(acc, p);
    }

    template <typename Release>
    __device__ __forceinline__ void drain(float (&)[MI][BN / 8][4], int, const Release&) const {}
};
#endif

#if GL_DTYPE == 0
// ---- the register-A mainloop part (rung 22, an MN-major A): A's fragments read into registers -------
// TF32 only (wgmma takes A from registers as K-major 32-bit pairs). Epilogue: the rung's epilogue
// part, whose acc_row names the accumulator rows each thread holds; this part loads A's rows in that
// order (ws_epi32.cuh says why the order makes the loads conflict-free).
// Half a k tile (KSTEPS / 2 k8 steps, all MI m64 blocks) per register buffer: a k tile's wgmmas go
// out as two commit groups, each reading one buffer, so the next half's loads never wait for the
// wgmmas that read the other. Row m of a [BK][32 m] panel, k row r: byte r * 128 + 16 * (chunk(m) ^
// (r % 8)) + 4 * (m % 4); r % 8 is t or t + 4 at every step, so each thread's two addresses per
// step are constants plus 1024 per step (see acc_row for the row map).
// Half 0 of a k tile, then half 1; each wait leaves the half just issued in flight: after half 0's
// wgmmas the previous k tile's second half is done (its stage is released), after half 1's this k
// tile's first half is done (its registers may be loaded again).
template <class Epilogue>
struct GlMainloopRegA {
    static constexpr int ROW_E = GL_ROW_B / 4;   // FP32 per 128-byte swizzle row: 32
    static constexpr int HALF = KSTEPS / 2;
    static_assert(KSTEPS % 2 == 0, "a k tile is two halves of k8 steps (BK a multiple of 32)");
    using Frags = unsigned[HALF][MI][4];
    static constexpr bool HOLDS_STAGE = true;   // released a k tile later, the last by drain
    static constexpr bool PAIRED = false;       // one k tile at a time (ktile)

    struct AFrags {
        unsigned lo, hi;     // the thread's offsets in a stage's A tile: k = t and k = t + 4 of step 0, m64 block 0
        __device__ __forceinline__ AFrags(int wg, int w, int lane) {
            const int t = lane % 4;
            const int m = Epilogue::acc_row(w, lane, 0);                             // even: rows m, m + 1
            const int panel = wg * (WM / ROW_E) + m / ROW_E, chunk = (m % ROW_E) / 4;
            const unsigned base = panel * A_PANEL_B + 4 * (m % 4);
            lo = base + t * GL_ROW_B + ((chunk ^ t) << 4);
            hi = base + (t + 4) * GL_ROW_B + ((chunk ^ (t + 4)) << 4);
        }
        // half `q` of the k tile in the stage at `a_stage` (shared address)
        __device__ __forceinline__ void load(Frags& f, unsigned a_stage, int q) const {
#pragma unroll
            for (int kk = 0; kk < HALF; ++kk)
#pragma unroll
                for (int mi = 0; mi < MI; ++mi) {
                    const unsigned at = a_stage + mi * (64 / ROW_E) * A_PANEL_B + (q * HALF + kk) * 8 * GL_ROW_B;
                    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(f[kk][mi][0]), "=r"(f[kk][mi][1]) : "r"(at + lo) : "memory");
                    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(f[kk][mi][2]), "=r"(f[kk][mi][3]) : "r"(at + hi) : "memory");
                }
        }
    };

    // Keeps a buffer's registers live (and unchanged) up to this point: the wgmmas that read them are
    // asynchronous, so the compiler must not reuse them before the wait_group that ends those wgmmas.
    static __device__ __forceinline__ void fence_frags(Frags& f) {
#pragma unroll
        for (int kk = 0; kk < HALF; ++kk)
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(f[kk][mi][e]) :: "memory");
    }

    // One half of a k tile: its fragments' wgmmas (B from the stage's K-major panels), one commit group.
    template <typename Descs>
    static __device__ __forceinline__ void wgmma_half(float (&acc)[MI][BN / 8][4], const Frags& f, const Descs& d,
                                                      unsigned b_stage, int q) {
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) gl_fence_acc(acc[mi]);
        gl_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HALF; ++kk)
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) GlWgmmaRS<BN>::mma(acc[mi], f[kk][mi], d.b(b_stage, q * HALF + kk));
        gl_wgmma_commit();
    }

    const GlStageDescs<0, 1, A_PANEL_B, B_PANEL_B> descs;   // B's (A's are the fragments)
    const AFrags frags;
    const Smem& sm;
    Frags f0, f1;       // the k tile's first and second half
    __device__ __forceinline__ GlMainloopRegA(const Smem& sm_, int wg, int warp, int lane)
        : descs(sm_.a_base, sm_.b_base, wg * WM), frags(wg, warp % 4, lane), sm(sm_) {}

    template <typename Release>
    __device__ __forceinline__ void ktile(float (&acc)[MI][BN / 8][4], int s, bool later, int& prev,
                                          const Release& release) {
        const unsigned a_stage = sm.a_base + s * A_STAGE_B;
        frags.load(f0, a_stage, 0);
        wgmma_half(acc, f0, descs, s * B_STAGE_B, 0);
        gl_wgmma_wait<1>();
        fence_frags(f1);
        if (later) release(prev);
        frags.load(f1, a_stage, 1);
        wgmma_half(acc, f1, descs, s * B_STAGE_B, 1);
        gl_wgmma_wait<1>();
        fence_frags(f0);
        prev = s;
    }

    template <typename Scales>
    __device__ __forceinline__ void begin(const Scales&, int, int, int, int, int, int, int, int) {}

    template <typename Release>
    __device__ __forceinline__ void drain(float (&acc)[MI][BN / 8][4], int prev, const Release& release) {
        gl_wgmma_wait<0>();
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) gl_fence_acc(acc[mi]);
        fence_frags(f1);
        release(prev);
    }
};
#endif
