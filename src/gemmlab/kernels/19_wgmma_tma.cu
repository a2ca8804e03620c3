// Rung 19 — Hopper's own matrix path: WGMMA fed by TMA through an mbarrier pipeline (FP16 / BF16
// in, FP32 accumulate; sm_90a only).      seed: none of the seeds reaches Hopper; seed 002 stops at
// WMMA (gemm_v07) and rung 17 (mma.sync) is the Ampere-style answer. This rung is what cuBLAS does
// on an H100.
//
// What it changes against rung 17 (mma.sync + ldmatrix + cp.async):
// * The math is wgmma.mma_async m64nNk16 (SASS HGMMA): a warpgroup (4 warps) multiplies a 64 x 16
//   slice of A by a 16 x N slice of B (N = BN, up to 256) in ONE asynchronous instruction whose
//   operands the tensor cores read straight from shared memory through two 64-bit matrix
//   descriptors (start address, byte strides, 128-byte swizzle). No ldmatrix, no fragment
//   registers: rung 17's top stall was waiting on its ldmatrix results (its header). On Hopper only
//   wgmma reaches the tensor cores' full rate; mma.sync runs at a fraction of it.
// * Tiles arrive by TMA (cp.async.bulk.tensor.2d, SASS UTMALDG): ONE thread issues a whole box
//   (64 elements x up to 256 rows) per instruction; the copy engine computes the addresses, fills
//   what lies outside the matrix with zeros (ragged M, N and K need no code here) and writes the
//   128-byte swizzle the descriptors expect. Rung 17 spent 128 threads' address arithmetic and
//   LDGSTS issue on the same bytes.
// * A STAGES-deep ring of shared buffers is guarded by mbarriers (SASS SYNCS): "full[s]" completes
//   when the copy engine has delivered stage s's bytes (expect_tx), "empty[s]" when every consumer
//   warp has finished the wgmmas that read it. The producer and the consumer warpgroups never meet
//   at a block-wide barrier in the main loop.
// * Blocks start in groups of 8 row tiles (schedule.cuh's GlTilePerBlock): the blocks resident at
//   once share their tiles of A and B through L2.
// Geometry (default BM=128, BN=256, BK=64, WM=64, STAGES=4): BM/WM consumer warpgroups, each owning
// WM rows x BN columns (WM/64 wgmma rows; 128 FP32 accumulators per thread at 64 x 256), plus a
// producer warpgroup: 384 threads, __launch_bounds__(384, 1) -> up to 168 registers per thread;
// ptxas uses 154, so the 128 accumulators fit without setmaxnreg (the register split between
// producer and consumers, persistence and clusters are the next rung). Shared memory: STAGES x
// (BM + BN) x BK x 2 B = 192 KB at the default, so one block per SM.
// Shared layout (128-byte swizzle; every panel starts 1024-byte aligned, the swizzle's period):
//   K-major operand (row-major A, column-major B): BK/64 panels of [rows][64 k], one TMA box each;
//   MN-major operand (column-major A, row-major B): rows/64 panels of [BK k][64 m or n].
// wgmma takes both: imm-trans = 1 marks an MN-major operand (16-bit types allow it). The common
// case, row-major A times row-major B, is A K-major and B MN-major.
// Operands TMA cannot describe (GL_VEC_A / GL_VEC_B = 0: base not 16-byte aligned, or a leading
// dimension whose byte stride is not a multiple of 16) are copied by the producer warpgroup's 128
// threads instead (that is why it is a warpgroup: with TMA, one of its threads does all the work):
// guarded 16-bit loads written into the SAME swizzled panels (st.shared), then
// fence.proxy.async (generic-proxy writes made visible to the tensor cores' async proxy) and an
// arrive on the full barrier; the main loop is the same code. That path is bound by the loads.
// Epilogue: each consumer warp stages its 16-row slices of accumulators in shared memory (reusing
// the pipeline buffers once all consumer warps are done with them) and writes 8 outputs per lane,
// alpha/beta applied (C never read when beta == 0), rounded to C's type TC (T, or an output dtype:
// FP32 or the other 16-bit type), 16-byte stores where legal (gl_store_warp16).
// Parts (docs/hopper.md, "How a Hopper rung is composed"), shared with rungs 21 and 22: the stages'
// carve-up, the mbarrier ring, the producer's loads (TMA or the thread copy) and the consumers' wait
// per k tile are ring.cuh's; a k tile's wgmmas are mainloop.cuh's GlMainloopSS; the tile order is
// schedule.cuh's GlTilePerBlock; the staged epilogue is tensor16.cuh's gl_store_warp16 (rung 17's
// too). This file is the kernel that composes them: one tile per block, no register split.
// The tensor cores are fed without ldmatrix, but every block still pays its prologue and epilogue
// alone (no persistence) and the producer shares the consumers' register budget. The first version,
// blocks in plain row order, did well at 4096^3 and lost at 8192^3 to L2 misses
// (benchmarks/results/h100_wgmma_tma_v1_fp16.json); the grouped launch order (gl_group_raster)
// fixed that (h100_wgmma_tma_fp16.json; docs/journal/hopper.md). The likely rest of the gap at
// 4096^3 (not profiled): one block per SM, so each block's first loads and its epilogue leave the
// tensor cores idle; persistence (the next rung) overlaps them.
// Operands TMA cannot describe take the thread copy and are far slower, though still ahead of
// rung 17 (h100_wgmma_tma_unaligned_fp16.json).
// Split-K (SPLITK > 1, kernels/common.cuh, as rungs 15, 17 and 18): blockIdx.z takes a slice of K,
// whole BK tiles, so the TMA boxes of a slice stop at its end (the tensor maps still describe the
// whole matrix: zeros past K in the last slice only) and the thread-copy path starts at the slice's
// first k; the epilogue writes the FP32 partial tile to the workspace (no alpha/beta, C not read)
// and splitk_reduce.cu sums the slices in a fixed order. Why: one block per SM runs one tile for
// all of K, so a problem with few output tiles leaves SMs idle for the whole launch (with 128x256
// tiles, 128x4096x4096 is 16 tiles and 256x256x65536 is 2, for 132 SMs). The
// dispatch rule (core/dispatch.py) splits such shapes until the blocks fill the SMs, or takes the
// 128x128 preset where that fills them better (the reasoning per shape: docs/journal/dispatch.md):
// the split launches are bound by reading B (or A and B) from DRAM, plus a reduction of the FP32
// partials from L2. SPLITK = 1 compiles the same SASS as before the parameter existed.
// The reduction goes out with programmatic stream serialization (core/launch.py): the split
// variant lets it be scheduled once every block is past its main loop (griddepcontrol.
// launch_dependents, SASS PREEXIT), and the reduction waits in its first instruction for this
// grid's partials: the reduction's launch latency overlaps the GEMM's tail, a small gain over the
// ordinary launch of the same plan (h100_pdl_reduce.json).
// The cluster split (SKCLUSTER = 1, SPLITK = S of 2..8; GL_SPLITK_CLUSTER, kernels/common.cuh): the S
// blocks of a tile are one thread-block cluster along z. Each leaves its FP32 partial tile in its own
// shared memory (over the drained stages), and after a cluster barrier every thread of block z,
// the producer warpgroup's too, sums its share of the z-th S-th of the tile over the S blocks'
// shared memory (ld.shared::cluster, slices in ascending order) and stores C through the epilogue
// functor (gl_cluster_split_store, tensor16.cuh): no workspace, no second kernel. Why: the skinny and small problems the split serves move
// little data through the tensor cores, so the workspace's round trip of S FP32 copies of C and the
// reduction's launch are a large share of their time. The producer warpgroup stays until the
// cluster's last barrier (a block's shared memory must outlive its peers' reads), its idle lanes
// waiting for the TMA thread's warp to reconverge: the cluster barriers are .aligned.
#include "common.cuh"
#include "hopper.cuh"
#if GL_BATCHED
#error "rung 19 (wgmma_tma) launches one problem: a batch in one launch is rung 21's (GL_BATCHED)"
#endif

#if GL_DTYPE == 0
#error "rung 19 (wgmma_tma) needs GL_DTYPE 1 (fp16) or 2 (bf16): wgmma has no IEEE FP32 mode"
#endif
#ifndef GL_DYN_SMEM
#error "rung 19 (wgmma_tma) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "rung 19 (wgmma_tma) needs the sm_90a target (wgmma exists on Hopper only): compile for sm_90a"
#endif
#ifdef CLUSTER
#error "rung 19 (wgmma_tma) takes no CLUSTER: its blocks load their own tiles (rung 21 multicasts B in a cluster)"
#endif
#define CLUSTER 1     // each block loads its own tiles (the cluster split's cluster along z shares no loads)

// ---- geometry (the warpgroups, WGS, MI, CONSUMERS and CWARPS: hopper.cuh) ----------------------
constexpr int KSTEPS = BK / 16;               // k16 wgmma steps per tile
// What the registry's constraints promise (core/families/hopper.py), restated.
static_assert(THREADS == CONSUMERS + GL_WARPGROUP, "THREADS must be 128 per consumer warpgroup plus a producer warpgroup");
static_assert((WM == 64 || WM == 128) && BM % WM == 0 && (WGS == 1 || WGS == 2),
              "one or two consumer warpgroups of 64 or 128 rows each");
static_assert(BN == 64 || BN == 128 || BN == 256, "a wgmma's N is the block's BN: 64, 128 or 256");
static_assert(STAGES >= 2, "the pipeline needs at least two stages");
static_assert(MI * BN / 2 <= 128, "at most 128 FP32 accumulators per thread");

// ---- the parts: the stage ring and its producer (ring.cuh), one tile per block in groups of 8 row
// tiles (schedule.cuh), both operands by descriptor (mainloop.cuh) -----------------------------------
#include "ring.cuh"
static_assert(!KREV, "rung 19 walks its k tiles forward: backward odd waves (KREV) are the persistent rungs'");
using Schedule = GlTilePerBlock<BK, 8, GL_TALL>;
#include "mainloop.cuh"
using Mainloop = GlMainloopSS<GL_A_COL, GL_B_COL>;

// ---- shared memory: the stages (ring.cuh), the epilogue's staging over them ----------------------
constexpr int CS_LD = BN + 8;                          // FP32 staging row (gl_store_warp16)
constexpr int STAGING_B = CWARPS * 16 * CS_LD * 4;
#if GL_SPLITK_CLUSTER
constexpr int PT_LD = BN + 8;                          // the partial tile's FP32 row (the staging's padding)
constexpr int PARTIAL_B = BM * PT_LD * 4;              // the cluster split's partial tile, over the stages
#else
constexpr int PARTIAL_B = 0;
#endif
constexpr int DATA_B = PIPE_B > STAGING_B ? (PIPE_B > PARTIAL_B ? PIPE_B : PARTIAL_B)
                                          : (STAGING_B > PARTIAL_B ? STAGING_B : PARTIAL_B);
constexpr int SMEM_NEED = 1024 + DATA_B + 2 * STAGES * 8;   // 1024: aligning the base; then full[], empty[]
static_assert(SMEM_NEED <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");

extern "C" __global__ void __launch_bounds__(THREADS, 1) GL_SK_CLUSTER_DIMS
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, TC* C, int ldc,
     const __grid_constant__ GlTensorMap tmA, const __grid_constant__ GlTensorMap tmB GL_EPI_PARAMS)
{
    gl_pdl_wait();   // after an operand copy launched programmatically: the copy done (pack.cu)
    // One raw buffer: [STAGES A tiles][STAGES B tiles] (the epilogue's FP32 staging overlays them),
    // then full[STAGES] and empty[STAGES]. Its base is rounded up to the swizzle's 1024 bytes.
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    const unsigned base = (raw + 1023u) & ~1023u;
    const Smem sm{base, base + STAGES * A_STAGE_B, base, base + DATA_B};

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
#if GL_SPLITK
    // split-K: this block's slice of K is [k_first, K) (whole BK tiles, so no box crosses into the
    // next slice; the tensor maps keep the whole matrix); its FP32 partial tile goes to the
    // workspace slice W, with alpha and beta left to the reduction kernel
    int k_first;
    float* const W = gl_splitk_range(K, k_first, C, M, ldc, BK);
#elif GL_SPLITK_CLUSTER
    // the cluster split: this block's slice of K is [k_first, K), the cluster's z-th (the header)
    int k_first;
    gl_splitk_bounds(K, k_first, BK);
#else
    constexpr int k_first = 0;
#endif
    const Schedule sched(k_first, K);
    const int2 tile = sched.tile(0, 0);      // (row tile, column tile)
    const int row0 = tile.x * BM, col0 = tile.y * BN;
#if GL_SPLITK_CLUSTER
    auto finish = [&]() { gl_cluster_split_store<BM, BN, PT_LD, THREADS>(base, C, ldc, M, N, row0, col0, GL_EPI(alpha, beta)); };
#endif

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            gl_mbar_init(sm.full(s), FULL_ARRIVALS);
            gl_mbar_init(sm.empty(s), EMPTY_ARRIVALS);
        }
        // the initialized barriers visible to the copy engine (async proxy) before any TMA names them
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    // ---- load: the producer warpgroup (ring.cuh) -------------------------------------------------
    if (warp >= CWARPS) {
        produce(sm, sched, 0, tid - CONSUMERS, M, N, K, A, lda, B, ldb, &tmA, &tmB);
#if GL_SPLITK_CLUSTER
        // every thread stays for the cluster's reduction; with TMA only the issuing thread's warp
        // meets its lane 0 again first (the cluster barriers are .aligned: whole warps)
        __syncwarp();
        finish();
#endif
        return;
    }

    // ---- main loop: the consumer warpgroups, each k tile waited for (ring.cuh) and multiplied by the
    // mainloop part, which releases the stage of the k tile before -----------------------------------
    // this warpgroup (its WM rows: wg * WM ..), the same in every lane for ptxas (a shuffle from lane 0)
    const int wg = __shfl_sync(0xffffffffu, warp / 4, 0);
    Mainloop ml(sm, wg, warp, lane);
    auto release = [&](int s) { sm.release(s, lane, 0); };
    float acc[MI][BN / 8][4];
    gl_zero_acc(acc);
    Ring ring;
    int prev = 0, kt = sched.k0;
    consume_ktiles(ml, sm, ring, acc, kt, sched.ktiles, sched.k0, prev, release);
    ml.drain(acc, prev, release);
#if GL_SPLITK
    gl_pdl_trigger();   // the reduction may be scheduled now; it waits for this grid's partials
#endif

    // ---- epilogue: accumulators -> FP32 staging (per warp, 16 rows at a time) -> alpha/beta -> TC
    // -> C. The staging overlays the stages: every consumer warp must be done reading them (the
    // producer has nothing left in flight: every tile it loaded was waited for). ---------------------
    asm volatile("bar.sync 1, %0;\n" :: "n"(CONSUMERS) : "memory");
#if GL_SPLITK_CLUSTER
    {   // the partial tile [BM][PT_LD] over the stages, from the fragments
        float (*pt)[PT_LD] = reinterpret_cast<float (*)[PT_LD]>(smem_raw + (base - raw));
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) gl_partial_warp16<BN, PT_LD>(pt, acc[mi], wg * WM + mi * 64 + 16 * (warp % 4), 0, lane);
    }
    finish();
    return;
#endif
    float (*cs)[CS_LD] = reinterpret_cast<float (*)[CS_LD]>(smem_raw + (base - raw) + warp * 16 * CS_LD * 4);
#if GL_SPLITK
    float* const out = W;                      // the FP32 partial tile, as it is
#else
    TC* const out = C;                         // alpha * acc + beta * C, rounded to C's type
#endif
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
        gl_store_warp16<BN>(cs, acc[mi], out, ldc, M, N, row0 + wg * WM + mi * 64 + 16 * (warp % 4), col0, GL_EPI(alpha, beta), lane);
}
