// Rung 18 — asynchronous SIMT: cp.async multistage pipeline, 128x256 block tile, 16x8 thread tile,
// register double buffering of the fragments.       seeds: CUTLASS SIMT sgemm (MmaMultistage),
//                                     the cp.async 128x256x8 A100 SGEMM, the RTX 4090 SGEMMs
//
// What changes against rung 15 (warp tiling), and why each change buys FP32 issue slots:
//
// * Global -> shared by cp.async (LDGSTS), no register staging. Rung 15 prefetches the next tile
//   into registers (LDG), then stores them (STS) after the math: every element crosses the
//   register file twice and the prefetch registers are held across the whole tile. cp.async
//   copies straight into shared memory, costs one instruction per 16 (or 4) bytes and no
//   registers, so the registers go to a bigger thread tile instead.
// * STAGES shared-memory stages (default 4) instead of 2: tile t+STAGES-1 is in flight while
//   tile t is computed, so 3 tiles (~6000 cycles at the default tile) of math cover the L2/DRAM
//   latency of ~600-1000 cycles; one cp.async.wait_group + one barrier per tile.
// * Block tile 128 x 256 (8 warps of 64 x 64), thread tile TM x TN = 16 x 8: per k a thread reads
//   TM/4 + TN/4 = 4 + 2 LDS.128 and issues 128 FFMA (21.3 FFMA per LDS; rung 15: 64 per 4, 16).
//   An SM sub-partition issues one warp instruction per clock and FFMA is one of them, so every
//   non-FFMA instruction costs FP32 throughput: the FFMA share of the hot loop is the ceiling.
// * Register double buffering: the A/B fragments of step k+1 are read from shared memory while
//   the 128 FFMAs of step k run, across tile boundaries too (the wait + barrier sit before the
//   last step of a tile, whose FFMAs then hide the first fragment load of the next stage).
// * Conflict-free by construction: the 32 lanes of a warp form a LY x LX = 4 x 8 grid inside the
//   64 x 64 warp tile; a lane's 16 rows are 4 float4 spaced 4*LY = 16 rows apart, its 8 columns 2
//   float4 spaced 4*LX = 32 apart. One LDS.128 of A then reads 4 distinct float4 (64 contiguous
//   bytes, each broadcast to the 8 lanes of a lane row), one of B 8 distinct float4 (128
//   contiguous bytes): a single shared-memory wavefront each.
//
// Shared layout, per stage: As[BK][BM + PAD] (A transposed: k-major, m contiguous) and
// Bs[BK][BN + PAD] (n contiguous), so both fragments are float4 reads along m or n.
// Layouts: an operand whose global contiguous dimension is m (A column-major) or n (B row-major)
// is copied 16 bytes at a time (LDGSTS.128, .cg: L2 only) when 16-byte access is legal
// (GL_VEC_A/B), else 4 bytes at a time. An operand contiguous along k (A row-major, B
// column-major) needs a transpose on its way to shared memory: cp.async cannot transpose inside a
// 16-byte copy, so it is copied with 4-byte cp.async (LDGSTS.32, .ca) instead of a register-
// staged transposing store: 4 copy instructions per 16 bytes, but no registers held across the
// math and the same STAGES-deep pipeline for all four layouts. A warp's 4-byte copies take
// KC = 8 consecutive k (one 32-byte sector) of 4 consecutive rows, and the shared row stride
// BM + PAD is = 32/KC (mod 32) floats, so the 32 transposed writes land in 32 distinct banks.
// At the default tile that is 4 (A) + 8 (B) copies per thread per 1024 FFMAs at worst (A
// row-major and B column-major).
// Edges: every copy names how many source bytes are inside the matrix (cp.async's src-size);
// the rest of the 16 or 4 bytes is zero-filled by the hardware, so ragged M, N, K tiles compute
// with zeros and no thread ever reads outside A or B (a copy with src-size 0 reads nothing and
// is pointed at the operand's base). The epilogue writes C with 128-bit stores where legal
// (gl_store_c4), never reading C when beta == 0. A block that reaches past M or N copies its
// full-K tiles at the interior path's compile-time offsets with a bounds check per copy
// (StageCopy::edge); only the ragged last K tile takes the checked path. At 127x4097x1023, where
// every block reaches past M = 127, that made the edge blocks much faster (docs/journal/ladder.md).
//
// The design target: at the default tile the hot loop's interior path (`gemmlab inspect
// async_simt`) is FFMA for all but a few percent of its instructions (1024 FFMA, 48 LDS.128, 6
// LDGSTS, the address and loop arithmetic, 1 barrier per tile), so the rate is bounded by how well
// 8 warps per SM hide the barrier, the LDS latency and register-bank stalls. The seeds (an A100
// cp.async 128x256x8 SGEMM, the RTX 4090/4070 Ti SGEMMs) reached or passed cuBLAS (baselines.md).
// The first version was issue-bound and short of cuBLAS (benchmarks/results/h100_fp32.json;
// docs/journal/ladder.md): dispatch stalls with 8 warps per SM to hide them, no bank conflicts.
// Split-K (SPLITK > 1, kernels/common.cuh): blockIdx.z takes a slice of K (A and B advance to it,
// K becomes its length) and the epilogue writes the FP32 partial tile to the workspace with
// alpha = 1, beta = 0; splitk_reduce.cu finishes. For few output tiles and a long K (256x256x65536:
// 2 tiles of 128x256 for 132 SMs) it is the difference between 2 busy SMs and all of them.
// With SKCLUSTER = 1 (sm_90), the SPLITK (2..8) blocks of a tile form a thread-block cluster and
// sum their partial tiles in distributed shared memory instead (gl_splitk_cluster_store): no
// workspace and no second kernel.
// SPREAD=1 (the default): the hot loop as the warp scheduler sees it. Nsight Compute put rung 18
// beside cuBLAS's own SIMT kernel at 4096^3 (sm80_xmma ... 256x128x8, 8 warps): the same
// instructions, the same FFMAs and LDS, the same 8 warps per SM, but fewer instructions per cycle;
// the difference was the "wait" stall: fixed-latency stalls that ptxas writes into each
// instruction's control bits (docs/journal/ladder.md). The interior path's SASS control codes
// showed where: LDS.128 issued in clusters four cycles apart, the copies' LDGSTS likewise, and
// three dependent compare-and-branch pairs at the tile's top choosing between the interior, edge
// and checked copies. SPREAD=1 changes the loop, not the tile:
// * each step's next fragment loads are placed among its rows of FFMAs (load l after row l*TM/NLOAD);
// * the interior copies sit at the first step under a predicate, with no branch around them;
// * the edge and checked copies stay behind one branch at the tile's top, on a predicate computed
//   a tile ahead, so the compare's latency is off the loop's top.
// The loop keeps about the same instruction count with a fraction of the fixed stall cycles
// (`gemmlab inspect async_simt`). Up to 12 copies per thread per stage; more take the loop above
// unchanged. (At 8 first: a 64x128 tile spilled with 12 under the code of d4e2098. Today's code
// compiles without spills with 12 in every preset, shipped entry and split tile, and every tile
// from 64x64 to 256x128, every layout, NVRTC 13.0 and 13.5. The 12 bring a column-major B, copied
// 4 bytes at a time, into this loop: h100_tune_async_simt_rc_4096.json.)
// SPREAD gained more than predicted at the default tile (h100_tune_async_simt_spread_{4096,8192}{,_b}.json)
// and moved the FP32 suite at every large shape (h100_fp32_suite_spread.json); what was left was the
// "dispatch stall".
// SNAKE=1 (the default): where the dispatch stalls sit. Nsight Compute's per-instruction sampling
// (gemmlab profile --source; benchmarks/profiles/h100_profile_source_async_simt_vs_cublas_fp32_4096.json)
// put most of them on the FFMAs, spread over the whole loop. Joined with the SASS's reuse flags (the
// H100 machine's NVRTC 13.0; tools/ffma_dispatch_join.py -> h100_ffma_dispatch_async_simt_fp32_4096.json):
// an FFMA that reads all three sources from the register file (none from the operand reuse cache)
// stalls about twice as often as one that reads two, and more again when two of the three sit in
// one bank (register number mod 4). First tried: cuBLAS's own FFMA order (2x2 blocks of a and b,
// from its SASS): more three-read FFMAs, slower, with more short-scoreboard stalls
// (h100_tune_async_simt_order_{4096,8192}.json, h100_profile_async_simt_order1_vs_cublas_fp32_4096.json),
// dropped. SNAKE=1 runs the odd rows of the outer product backward: a row starts on the b[j] the
// last one ended on, read from the reuse cache. inspect (schedule: ffma_three_reads,
// ffma_bank_collisions) counts fewer three-read FFMAs and bank collisions at 128x256 (at 64x256,
// more). Measured: faster at 128x256 and 256x128, slower at 64x256, as predicted
// (h100_tune_async_simt_snake_{4096,8192}.json); fewer dispatch stalls
// (h100_profile_async_simt_snake_vs_cublas_fp32_4096.json).
// STREAMK=1 (off by default; the shipped entries of 4096^3, 8192^3 and 4096x14336x4096 set it): the
// partial last wave of 128x256 tiles split by k tiles over all the SMs, in a second kernel after the
// whole waves (the stream-K section below). It gains at 8192^3 and 4096x14336x4096, little at
// 4096^3, and loses at 4096x4096x1024 and 8192x1024x8192 (h100_tune_async_simt_streamk_*.json,
// h100_fp32_suite_streamk.json), less than the partial wave's share predicts: not the start (the whole tiles' SMs finish
// nearly together, ncu sm__cycles_active min/max), but the tail's loop, which issues less per cycle
// than the whole tiles' with more dispatch, barrier and long-scoreboard stalls (its own register
// allocation; h100_profile_async_simt_streamk_4096_unpredicated.json). Its interior copies are now
// predicated in the instruction (gl_tile's SPREAD loop), which won back a little
// (h100_fp32_suite_streamk_predicated.json, h100_fp32_4096_streamk_predicated_run{1,2}.json).
#include "common.cuh"

#if GL_DTYPE != 0
#error "rung 18 (async_simt) is FP32 only (GL_DTYPE 0): it computes on the CUDA cores"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "rung 18 (async_simt) needs sm_80 or newer for cp.async"
#endif
#ifndef SPREAD
#define SPREAD 0
#endif
#ifndef SNAKE
#define SNAKE 0
#endif
#ifndef STREAMK
#define STREAMK 0
#endif
#if STREAMK && GL_BATCHED
#error "the stream-K tail (STREAMK) lays its tiles out in its own grid: a batch (GL_BATCHED) takes grid.z instead"
#endif
#if STREAMK && (GL_SPLITK || GL_SPLITK_CLUSTER || GL_TALL)
#error "the stream-K tail (STREAMK) lays its tiles out in its own grid and writes C itself: not with split-K or the tall grid"
#endif
#ifndef GL_DYN_SMEM
#error "rung 18 (async_simt) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif

// ---- geometry (the registry's constraints, restated) ----------------------------------------
constexpr int LY = WM / TM;                        // lanes of a warp along M
constexpr int LX = WN / TN;                        // lanes of a warp along N
constexpr int WARPS_N = BN / WN;                   // warps along N
constexpr int SUBM = TM / 4;                       // float4 of A per thread per k
constexpr int SUBN = TN / 4;                       // float4 of B per thread per k
static_assert(BM % WM == 0 && BN % WN == 0 && WM % TM == 0 && WN % TN == 0, "the tiles must nest evenly");
static_assert(LY * LX == 32, "a warp tile must hold exactly 32 lanes of TM x TN outputs");
static_assert(THREADS == 32 * (BM / WM) * (BN / WN), "THREADS must be one warp per WM x WN warp tile");
static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are read as float4 (LDS.128): TM, TN multiples of 4");
static_assert(BM % 32 == 0 && BN % 32 == 0, "a warp's transposing copy covers whole rows: BM, BN multiples of 32");
static_assert(BK % 4 == 0 && BK <= 32, "BK must be a multiple of 4, at most 32 (the k loop is unrolled: code and registers grow with it)");
static_assert(STAGES >= 2, "the pipeline needs at least 2 stages");

// The TM x TN outer product of one k step, acc += a b^T; calls after(f) after every TN FFMAs, f the
// number of the last of them in issue order (NVVM unrolled a k tile only 2-fold when after() ran
// for every FFMA: 480 FFMA in the PTX against 1248). SNAKE=0: row by row, a[i] against b[0..TN).
// SNAKE=1: odd rows backward, so that each row starts on the b[j] the previous one ended on (see
// the header: fewer FFMAs that read all three sources from the register file).
template <class After>
__device__ __forceinline__ void gl_outer(float (&acc)[TM][TN], const float (&a)[TM], const float (&b)[TN], After after) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) {
            const int j = (SNAKE && (i & 1)) ? TN - 1 - jj : jj;
            acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        after(i * TN + TN - 1);
    }
}

// The transposing (k-contiguous) copies: a warp takes KC consecutive k of 32/KC consecutive rows.
constexpr int KC = (BK % 8 == 0) ? 8 : 4;
constexpr int PAD = 32 / KC;                       // row stride = 32/KC (mod 32): distinct banks
constexpr int LDA_S = BM + PAD;                    // As row stride, floats (a multiple of 4)
constexpr int LDB_S = BN + PAD;
constexpr int A_STAGE = BK * LDA_S;                // floats
constexpr int STAGE = BK * (LDA_S + LDB_S);        // floats per stage (A then B)
constexpr int SMEM_BYTES = STAGES * STAGE * 4;
static_assert(SMEM_BYTES <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");
static_assert(LDA_S % 4 == 0 && LDB_S % 4 == 0 && A_STAGE % 4 == 0, "float4 reads need 16-byte aligned rows");
#if GL_SPLITK_CLUSTER
// The partial tile the cluster split leaves in shared memory (over the stages, after the main
// loop): rows of BN + 4 floats. A warp's float4 stores of one accumulator row cover LY rows 4
// apart and LX float4 of each; a row stride of 4 (mod 32) floats puts row pairs 16 banks apart, so
// the 512 bytes take the 4 wavefronts they must (a stride of 0 mod 32 took twice as many).
constexpr int LDT = BN + 4;
static_assert(BM * LDT * 4 <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for the partial tile");
#endif

// Registers: the accumulators, two buffers of fragments, ~48 for indices, pointers and loop state,
// and ~1 per 4-byte copy a thread issues per stage (the worst layout: both operands transposed),
// whose addresses the compiler computes ahead of the copies. More than 24 copies per thread per
// stage crowd out the accumulators (ptxas spills), hence the cap.
// The launch bounds ask for as many blocks per SM as this estimate plus 24 registers of headroom
// allow (at most 4; ptxas spilled where the estimate met its cap exactly): small thread tiles get
// several blocks to hide each other's barrier, and the compiler is held to the registers they
// need; a 16x8 thread tile gets one block of up to 255 registers.
// The registry's constraints (_simt_registers) use the same estimate and headroom.
constexpr int COPIES = GL_CEIL_DIV((BM + BN) * BK, THREADS);
constexpr int REG_ESTIMATE = TM * TN + 2 * (TM + TN) + 48 + COPIES;
constexpr int REG_HEADROOM = 24;
constexpr int MIN_BLOCKS_FIT = 65536 / (THREADS * (REG_ESTIMATE + REG_HEADROOM));
constexpr int MIN_BLOCKS = MIN_BLOCKS_FIT < 1 ? 1 : (MIN_BLOCKS_FIT > 4 ? 4 : MIN_BLOCKS_FIT);
static_assert(COPIES <= 24, "more than 24 copies per thread per stage: use a smaller BK or more threads");
static_assert(REG_ESTIMATE <= 255 && (THREADS <= 256 || (REG_ESTIMATE + REG_HEADROOM) * THREADS <= 65536),
              "the thread tile needs more registers than a thread may have");

// cp.async: gl_cp / gl_cp_if / gl_cp_commit / gl_cp_wait (common.cuh)

// ---- one operand's stage: global -> shared [BK][MN + PAD] --------------------------------------
// The operand P is (extent n_mn) x (extent n_k) with MN = m for A, n for B; element (mn, k) at
//   MN_CONTIG: P[k*ld + mn]  (A column-major, B row-major)    else: P[mn*ld + k]  (A row-major, B column-major).
// A thread's copies are the units u = tid + p*THREADS of the stage, cut into rows of D units:
//   MN_CONTIG: one unit = W floats along mn (W = 4 with 16-byte copies, else 1); row = k, D = MN/W.
//     A warp writes 32 consecutive units of one k row: coalesced and conflict-free.
//   transposing: one unit = 1 float; u -> k_lo = u % KC, r = u / KC; row = r / MN (a block of KC
//     k), mn = r % MN, k = row*KC + k_lo. A warp reads KC consecutive k (one 32-byte sector) of
//     32/KC consecutive rows and writes banks (k_lo * 32/KC + row) % 32: 32 distinct.
template <int MN, int LDS, bool MN_CONTIG, bool VEC>
struct StageCopy {
    static constexpr bool V16 = MN_CONTIG && VEC;
    static constexpr int W = V16 ? 4 : 1;                          // floats per copy
    static constexpr int TOTAL = BK * MN / W;                      // copies per stage
    static constexpr int PER = GL_CEIL_DIV(TOTAL, THREADS);        // ... per thread (last one guarded)
    static constexpr int D = MN_CONTIG ? MN / W : MN;              // units per row of the decomposition
    static constexpr int S = MN_CONTIG ? THREADS : THREADS / KC;   // row index step per copy
    // With D % S == 0 or S % D == 0, copy p of every thread sits at a compile-time offset (dk, dmn)
    // from the thread's copy 0, so the interior path needs one 64-bit pointer per operand and
    // immediate offsets; other shapes (never the presets) take the checked path everywhere.
    static constexpr bool UNIFORM = (D % S == 0) || (S % D == 0);

    // (k, mn) of copy unit u inside the stage
    __device__ static __forceinline__ void at(int u, int& k, int& mn) {
        if constexpr (MN_CONTIG) {
            k = u / D; mn = (u % D) * W;
        } else {
            const int r = u / KC;
            k = (r / MN) * KC + u % KC; mn = r % MN;
        }
    }
    __device__ static constexpr int dk(int p) { return MN_CONTIG ? (p * S) / D : ((p * S) / D) * KC; }
    __device__ static constexpr int dmn(int p) { return MN_CONTIG ? ((p * S) % D) * W : (p * S) % D; }
    __device__ static __forceinline__ long long goff(int k, int mn, int ld) {
        return MN_CONTIG ? (long long)k * ld + mn : (long long)mn * ld + k;
    }
    __device__ static __forceinline__ void copy(unsigned dst, const float* src, int bytes) {
        gl_cp<V16 ? 16 : 4>(dst, src, bytes);
    }

    // Interior stage (every copy inside the matrix): src = &P(mn0 + mn_t, k0 + k_t) and dst = the
    // shared address of this thread's copy 0; copy p is at compile-time offsets from them. PRED:
    // each copy predicated on `on` in the instruction itself (gl_cp_if), for ptxas to schedule
    // among the FFMAs where it may put a branch around a source-level `if (on)`.
    template <bool PRED = false>
    __device__ static __forceinline__ void full(unsigned dst, const float* __restrict__ src, int ld, int tid,
                                                bool on = true) {
#pragma unroll
        for (int p = 0; p < PER; ++p)
            if (TOTAL % THREADS == 0 || tid + p * THREADS < TOTAL) {
                const unsigned d = dst + 4u * (dk(p) * LDS + dmn(p));
                const float* g = src + goff(dk(p), dmn(p), ld);
                if constexpr (!PRED) copy(d, g, 4 * W);
                else gl_cp_if<4 * W>(on, d, g);
            }
    }

    // A full-K stage of an edge block (part of the tile's mn range outside the matrix): the copies
    // of `full`, at the same compile-time offsets, each reading only what lies inside. `left` is
    // n_mn minus the mn of this thread's copy 0: copy p has left - dmn(p) elements inside (<= 0:
    // it reads nothing, src-size 0, pointed at P). Three instructions per copy more than `full`,
    // instead of the checked path's index arithmetic: with M = 127 and BM = 128 every block is an
    // edge block, and the checked path ran its whole K loop at about half speed.
    __device__ static __forceinline__ void edge(unsigned dst, const float* __restrict__ src, const float* __restrict__ P,
                                                int ld, int left, int tid) {
#pragma unroll
        for (int p = 0; p < PER; ++p)
            if (TOTAL % THREADS == 0 || tid + p * THREADS < TOTAL) {
                const int bytes = 4 * max(0, min(W, left - dmn(p)));
                copy(dst + 4u * (dk(p) * LDS + dmn(p)), bytes ? src + goff(dk(p), dmn(p), ld) : P, bytes);
            }
    }

    // Any stage: each copy reads only the bytes inside the matrix (cp.async src-size), the hardware
    // zero-fills the rest; a copy wholly outside reads nothing (src-size 0, pointed at P itself).
    __device__ static __forceinline__ void checked(unsigned s_tile, const float* __restrict__ P, int ld, int mn0, int k0,
                                                   int n_mn, int n_k, int tid) {
        // An opaque copy of tid: the index arithmetic below is redone at each checked stage instead
        // of being hoisted out of the main loop, where its results would hold registers through
        // the math of every tile (this path runs only at the edges and the last k tile).
        asm volatile("" : "+r"(tid));
#pragma unroll
        for (int p = 0; p < PER; ++p) {
            const int u = tid + p * THREADS;
            if (TOTAL % THREADS == 0 || u < TOTAL) {
                int k, mn;
                at(u, k, mn);
                const int gk = k0 + k, gmn = mn0 + mn;
                const int bytes = gk < n_k ? 4 * max(0, min(W, n_mn - gmn)) : 0;
                copy(s_tile + 4u * (k * LDS + mn), bytes ? P + goff(gk, gmn, ld) : P, bytes);
            }
        }
    }
};

#include "simt_streamk.cuh"   // the stream-K tail (STREAMK=1): its schedule and the pieces' fixup

// ---- one tile of C: k tiles of a stage pipeline, then the epilogue --------------------------------
// The block's tile at (row0, col0) over the K columns of A (rows of B) from k_base on. After the
// main loop, fixup(acc) says whether to store the tile (a stream-K piece may publish its sums
// instead). k_base rather than A and B advanced to it: the edge and checked copies keep reading
// A and B from the kernel's parameters (the tail kernel spilled 8 bytes holding advanced ones).

struct GlWhole;   // (below) the whole tiles' fixup: gl_tile compiles a few things for it alone
template <class F> struct GlIsWhole { static constexpr bool value = false; };
template <> struct GlIsWhole<GlWhole> { static constexpr bool value = true; };
template <class Fixup>
__device__ __forceinline__ void gl_tile(int M, int N, int K, const GlEpi& ep,
                                        const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
                                        T* __restrict__ C, int ldc, int row0, int col0, int k_base,
                                        Fixup fixup)
{
    extern __shared__ __align__(16) float smem[];  // [STAGES][ As[BK][LDA_S] | Bs[BK][LDB_S] ]
    const unsigned s_base = (unsigned)__cvta_generic_to_shared(smem);
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    // first row / column of this lane's outputs inside the block tile (float4 s adds s*4*LY / s*4*LX)
    const int m_lane = (warp / WARPS_N) * WM + (lane / LX) * 4;
    const int n_lane = (warp % WARPS_N) * WN + (lane % LX) * 4;
    const int tiles = GL_CEIL_DIV(K, BK);

    // ---- load: tile t of A and B -> stage t % STAGES, one commit group per tile ------------------
    using CopyA = StageCopy<BM, LDA_S, GL_A_COL != 0, GL_VEC_A != 0>;
    using CopyB = StageCopy<BN, LDB_S, GL_B_COL == 0, GL_VEC_B != 0>;
    // This thread's copy 0 in a stage: shared offset (bytes) and global pointer for tile 0; the
    // pointers advance by one tile (BK along k) per issue.
    int ka, ma, kb, nb;
    CopyA::at(tid, ka, ma);
    CopyB::at(tid, kb, nb);
    const unsigned a_dst = 4u * (ka * LDA_S + ma), b_dst = 4u * (A_STAGE + kb * LDB_S + nb);
    const float* a_src = A + gl_a_off(row0 + ma, k_base + ka, lda);
    const float* b_src = B + gl_b_off(k_base + kb, col0 + nb, ldb);
    const long long a_step = GL_A_COL ? (long long)BK * lda : BK;
    const long long b_step = GL_B_COL ? BK : (long long)BK * ldb;
    // Interior blocks: every row and column of the tile inside C (block-uniform)
    const bool inside_mn = row0 + BM <= M && col0 + BN <= N;
    int ws = 0;                                    // the stage the next issue writes
    // (an empty commit group past the last tile keeps the wait_group count uniform)
    auto issue = [&](int t) {
        if (t < tiles) {
            const unsigned s = s_base + 4u * (unsigned)(ws * STAGE);
            if (CopyA::UNIFORM && CopyB::UNIFORM && (t + 1) * BK <= K) {
                if (inside_mn) {
                    CopyA::full(s + a_dst, a_src, lda, tid);
                    CopyB::full(s + b_dst, b_src, ldb, tid);
                } else {
                    // this thread's copy-0 (m, n), recomputed from an opaque tid so that the interior
                    // path holds no extra registers for it
                    int u = tid, k_, m_, n_;
                    asm volatile("" : "+r"(u));
                    CopyA::at(u, k_, m_);
                    CopyB::at(u, k_, n_);
                    CopyA::edge(s + a_dst, a_src, A, lda, M - row0 - m_, tid);
                    CopyB::edge(s + b_dst, b_src, B, ldb, N - col0 - n_, tid);
                }
            } else {
                CopyA::checked(s, A, lda, row0, k_base + t * BK, M, k_base + K, tid);
                CopyB::checked(s + 4u * A_STAGE, B, ldb, col0, k_base + t * BK, N, k_base + K, tid);
            }
            a_src += a_step;
            b_src += b_step;
        }
        ws = (ws + 1 == STAGES) ? 0 : ws + 1;
        gl_cp_commit();
    };

    float acc[TM][TN];                             // [4*SUBM rows][4*SUBN cols] register tile
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    float a_frag[2][TM], b_frag[2][TN];            // [buffer][...]: step k+1 loads while step k computes
    // the fragments of step k of a stage (As at `as`, Bs at `as + A_STAGE`) into buffer `buf`. (Not
    // written as a loop over load_one below: the same loads, but ptxas then scheduled the clustered
    // loop's 4096x64x4096 entry slower; the SPREAD kernels compiled the same.
    // h100_tune_async_simt_12copies_4096x64x4096.json against h100_tune_async_simt_loadfrag_*.json.)
    auto load_frag = [&](int buf, const float* as, int k) {
        const float* bs = as + A_STAGE;
#pragma unroll
        for (int s = 0; s < SUBM; ++s)
            *reinterpret_cast<float4*>(&a_frag[buf][4 * s]) =
                *reinterpret_cast<const float4*>(&as[k * LDA_S + m_lane + s * (4 * LY)]);
#pragma unroll
        for (int s = 0; s < SUBN; ++s)
            *reinterpret_cast<float4*>(&b_frag[buf][4 * s]) =
                *reinterpret_cast<const float4*>(&bs[k * LDB_S + n_lane + s * (4 * LX)]);
    };

    // one float4 of the fragments (SPREAD=1): l < SUBM of A, else of B
    auto load_one = [&](int buf, const float* as_, int k, int l) {
        if (l < SUBM)
            *reinterpret_cast<float4*>(&a_frag[buf][4 * l]) =
                *reinterpret_cast<const float4*>(&as_[k * LDA_S + m_lane + l * (4 * LY)]);
        else
            *reinterpret_cast<float4*>(&b_frag[buf][4 * (l - SUBM)]) =
                *reinterpret_cast<const float4*>(&as_[A_STAGE + k * LDB_S + n_lane + (l - SUBM) * (4 * LX)]);
    };

    // ---- prologue: tiles 0 .. STAGES-2 in flight; wait for tile 0 -------------------------------
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s);
    gl_cp_wait<STAGES - 2>();
    __syncthreads();
    int rs = 0;                                    // the stage being read
    const float* as = smem;
    load_frag(0, as, 0);

    // ---- main loop ------------------------------------------------------------------------------
    // Tile t: first issue tile t+STAGES-1 into the stage tile t-1 used (every thread finished
    // reading it before the barrier at the end of tile t-1), then BK steps of outer products.
    // Before the last step: wait until tile t+1 has landed (this thread's copies), barrier (every
    // thread's), and read step 0 of tile t+1 while the last step of tile t computes.
    // SPREAD=1 needs the registers of its copies beside the fragments: up to 12 per thread per stage
    // (the header)
    constexpr bool SPREAD_LOOP = SPREAD && CopyA::PER + CopyB::PER <= 12;
    if constexpr (!SPREAD_LOOP) {
        for (int t = 0; t < tiles; ++t) {
            issue(t + STAGES - 1);
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                if (k < BK - 1) {
                    load_frag((k + 1) & 1, as, k + 1);
                } else {
                    gl_cp_wait<STAGES - 2>();
                    __syncthreads();
                    rs = (rs + 1 == STAGES) ? 0 : rs + 1;
                    as = smem + rs * STAGE;
                    load_frag((k + 1) & 1, as, 0);     // after the last tile: a stale stage, never used
                }
                gl_outer(acc, a_frag[k & 1], b_frag[k & 1], [](int) {});
            }
        }
    } else {
        // SPREAD=1 (see the header): the next step's fragment loads spread among this step's rows of
        // FFMAs; the interior copies predicated at the first step; the edge and checked copies behind
        // one branch at the tile's top, on a predicate decided a tile ahead.
        const int n_fast = (CopyA::UNIFORM && CopyB::UNIFORM && inside_mn) ? K / BK : 0;
        constexpr int NLOAD = SUBM + SUBN;
        // whether tile tn's copies take the interior path, decided a tile ahead (the compare's latency
        // off the loop's top)
        bool fast = STAGES - 1 < n_fast;
        for (int t = 0; t < tiles; ++t) {
            const int tn = t + STAGES - 1;
            const bool fast_next = tn + 1 < n_fast;
            const unsigned s = s_base + 4u * (unsigned)(ws * STAGE);
            if (!fast && tn < tiles) {
                int u = tid, k_, m_, n_;
                asm volatile("" : "+r"(u));
                if (CopyA::UNIFORM && CopyB::UNIFORM && (tn + 1) * BK <= K) {
                    CopyA::at(u, k_, m_);
                    CopyB::at(u, k_, n_);
                    CopyA::edge(s + a_dst, a_src, A, lda, M - row0 - m_, tid);
                    CopyB::edge(s + b_dst, b_src, B, ldb, N - col0 - n_, tid);
                } else {
                    CopyA::checked(s, A, lda, row0, k_base + tn * BK, M, k_base + K, u);
                    CopyB::checked(s + 4u * A_STAGE, B, ldb, col0, k_base + tn * BK, N, k_base + K, u);
                }
            }
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                // the interior copies: all at the first step, predicated (no branch). In the stream-K
                // tail (more registers than the whole tiles' kernel) ptxas put a branch around them
                // instead: six LDGSTS back to back, and FFMAs and an LDS writing their address
                // registers a few instructions later, which waits until the copies have read them
                // (long scoreboard). There they are predicated in the instruction (PRED).
                // Predicating them halved the tail's long-scoreboard stalls but won back only a
                // little time (ncu, 4096^3, h100_profile_async_simt_streamk_*.json): its loop still
                // issues less than the whole tiles' (more dispatch stalls: its own register allocation).
                if constexpr (GlIsWhole<Fixup>::value) {
                    if (k == 0 && fast) {
                        CopyA::full(s + a_dst, a_src, lda, tid);
                        CopyB::full(s + b_dst, b_src, ldb, tid);
                    }
                } else if (k == 0) {
                    CopyA::template full<true>(s + a_dst, a_src, lda, tid, fast);
                    CopyB::template full<true>(s + b_dst, b_src, ldb, tid, fast);
                }
                const float* src_stage = as;
                int kn = k + 1;
                if (k == BK - 1) {
                    gl_cp_commit();
                    ws = (ws + 1 == STAGES) ? 0 : ws + 1;
                    a_src += a_step;
                    b_src += b_step;
                    gl_cp_wait<STAGES - 2>();
                    __syncthreads();
                    rs = (rs + 1 == STAGES) ? 0 : rs + 1;
                    as = smem + rs * STAGE;
                    src_stage = as;
                    kn = 0;
                    fast = fast_next;
                }
                // load l after the FFMAs of row l*TM/NLOAD (as many FFMAs in with SNAKE=1)
                gl_outer(acc, a_frag[k & 1], b_frag[k & 1], [&](int f) {
#pragma unroll
                    for (int l = 0; l < NLOAD; ++l)
                        if (f == (l * TM / NLOAD + 1) * TN - 1) load_one((k + 1) & 1, src_stage, kn, l);
                });
            }
        }
    }

    gl_cp_wait<0>();                            // no copy outlives the block (all are empty by now)

#if GL_SPLITK_CLUSTER
    // ---- epilogue: the partial tile to shared memory, the cluster sums it into C ---------------
    __syncthreads();                               // every warp is done with the stages it overwrites
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = m_lane + (i / 4) * (4 * LY) + (i % 4);
#pragma unroll
        for (int s = 0; s < SUBN; ++s)
            *reinterpret_cast<float4*>(&smem[row * LDT + n_lane + s * (4 * LX)]) =
                make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
    }
    gl_splitk_cluster_store<BM, BN, LDT, THREADS>(smem, C, ldc, M, N, row0, col0, ep);
#else
    if (!fixup(acc)) return;                       // a stream-K piece published for its tile's finisher
    // ---- epilogue: alpha/beta, 128-bit stores where the row allows ------------------------------
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + m_lane + (i / 4) * (4 * LY) + (i % 4);
#pragma unroll
        for (int s = 0; s < SUBN; ++s) {
            const int col = col0 + n_lane + s * (4 * LX);
            gl_store_c4(C, ldc, M, N, row, col,
                        make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]), ep);
        }
    }
#endif
}

// After the main loop of a whole tile: store it.
struct GlWhole {
    __device__ __forceinline__ bool operator()(float (&)[TM][TN]) const { return true; }
};

#if !STREAMK
// GL_BATCHED (common.cuh): element blockIdx.z of a batch, whose operands start that many batch
// strides on; the rest of the kernel is the one-problem kernel's
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS) GL_SK_CLUSTER_DIMS
gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
     float beta, T* __restrict__ C, int ldc GL_BATCH_PARAMS GL_EPI_PARAMS)
{
    gl_pdl_wait();   // after an operand copy launched programmatically: the copy done (pack.cu)
#if GL_BATCHED
    A += blockIdx.z * gl_bsa;
    B += blockIdx.z * gl_bsb;
    C += blockIdx.z * gl_bsc;
#endif
#if GL_SPLITK
    gl_splitk_partial(A, lda, B, ldb, K, C, M, ldc, BK, alpha, beta);   // this block's slice of K
#elif GL_SPLITK_CLUSTER
    gl_splitk_advance(A, lda, B, ldb, K, BK);                            // ... summed in the cluster
#endif
    gl_tile(M, N, K, GL_EPI(alpha, beta), A, lda, B, ldb, C, ldc, GL_TILE_ROW * BM, blockIdx.x * BN, 0, GlWhole{});
}
#else
// STREAMK=1: two kernels, launched one after the other on the stream. `gemm`, the whole tiles: tile
// y * G + x of its grid (G, dp / G), row-major over C. `gemm_sk_tail`, grid (G, 1): the k tiles of
// the tiles past dp. Two kernels, each with its own registers: one kernel holding both (the tail's
// pieces looping around a second inlined copy of the main loop) ran the whole tiles' loop with more
// registers and more issue cycles per k tile (ptxas recomputed ceil(K/BK) and the shared base
// inside it), and slower at 4096^3 and 8192^3 (h100_tune_async_simt_streamk1_{4096,8192}.json).
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
     float beta, T* __restrict__ C, int ldc, float* __restrict__ sk_ws GL_EPI_PARAMS)
{
    const int t = (int)(blockIdx.y * gridDim.x + blockIdx.x), tiles_n = GL_CEIL_DIV(N, BN);
    gl_tile(M, N, K, GL_EPI(alpha, beta), A, lda, B, ldb, C, ldc, t / tiles_n * BM, t % tiles_n * BN, 0, GlWhole{});
}

// ---- the tail: block c's steps [begin(c), begin(c + 1)), backwards, one piece per tile -------------
// Live across a piece's main loop: `end` only. The piece (u, k0, k1) and what its fixup does are
// recomputed from it after the loop (an opaque copy keeps the compiler from holding them).
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm_sk_tail(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
             float beta, T* __restrict__ C, int ldc, float* __restrict__ sk_ws GL_EPI_PARAMS)
{
    const int c = (int)blockIdx.x;
    struct Piece { int u, k0, k1; };
    auto piece_at = [&](int end) {
        const SkTail s(M, N, K);
        const int lo = s.begin(c), u = (end - 1) / s.ktiles, k1 = (end - 1) % s.ktiles + 1;
        return Piece{u, max(0, k1 - (end - lo)), k1};
    };
    const SkTail sk(M, N, K);
    for (int end = sk.begin(c + 1), n = 0; end > sk.begin(c); ++n) {
        const Piece pc = piece_at(end);
        if (n) __syncthreads();                    // the last piece's reads of the stages are done
        const int t = sk.dp + pc.u, kf = pc.k0 * BK;
        gl_tile(M, N, min(K, pc.k1 * BK) - kf, GL_EPI(alpha, beta), A, lda, B, ldb, C, ldc, t / sk.tiles_n * BM,
                t % sk.tiles_n * BN, kf, [&](float (&acc)[TM][TN]) {
                    int e = end;
                    asm volatile("" : "+r"(e));
                    const SkTail s(M, N, K);
                    const Piece p = piece_at(e);
                    SkPiece role{-1, -1, 0};
                    if (p.k1 - p.k0 < s.ktiles) {
                        if (p.k1 < s.ktiles) {
                            role.publish = c;      // the tile's first k tiles: its finisher adds them
                        } else {
                            // the tile's last k tiles: add the pieces of the blocks below whose ranges
                            // reach into it, down to the one holding its first step
                            role.add_hi = c - 1;
                            int q = c - 1;
                            while (q > 0 && s.begin(q) > p.u * s.ktiles) --q;
                            role.add_lo = q;
                        }
                    }
                    return gl_sk_fixup(acc, role, sk_ws);
                });
        int e = end;
        asm volatile("" : "+r"(e));
        const Piece p = piece_at(e);
        end = e - (p.k1 - p.k0);
    }
}
#endif
