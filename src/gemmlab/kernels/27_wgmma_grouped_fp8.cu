// Rung 27 — grouped FP8: the experts of a mixture-of-experts layer in one launch, their operands
// FP8 codes with per-group scales (e4m3 / e5m2 in, FP32 accumulate, C in bf16, fp16 or fp32;
// sm_90a only).
//                                           seed: none (the seeds stop at WMMA); the design is that of
// DeepGEMM's FP8 grouped GEMMs (contiguous and masked layouts, block scales promoted into FP32) and
// of torch._scaled_grouped_mm (row-wise scales), composed here of the parts of rungs 25 and 26.
//
// What it takes from each:
// * Rung 26 (wgmma_grouped): the tile scheduler part over (group, tile) pairs with the group sizes
//   read on the device (grouped.cuh, schedule.cuh's GlGroupedSchedule), A and C one 2-D map over all
//   the tokens, the weights a 3-D map with the group its third coordinate, the tile that reaches
//   past its group's end stored by rows bounded there, A's boxes loaded only up to a tile's group's
//   end (ring.cuh's GROUP_BOXES), the stream-K tail over the units the device counted, and the
//   per-group column bias. Groups over K (the weight gradient) are not built here: GROUP_K is 0.
// * Rung 25 (wgmma_fp8): wgmma m64nNk32 on FP8 codes (each operand its own format, GL_FP8_A /
//   GL_FP8_B), both operands K-major (a row-major A, the weights column-major: (G, N, K) weights as
//   they lie), a k tile of 128 (or 256 summed in the tensor cores) of K, and the FP32 promotion of
//   each k tile's partial sums (mainloop.cuh's PROMOTE; precision "fp8_fast" sums the whole K in the
//   tensor cores).
// What it adds: the scales are the groups' (scales.cuh, GlScales::group, applied per tile from the
// tile's group). scale_a runs along all the rows, as A does (a token's own scale or its 1x128 block
// scales); scale_b is each expert's: tensor-wise one value per group (its product with scale_a[0]
// per tile, since alpha cannot hold G values), row-wise one row of N per group (torch's
// _scaled_grouped_mm), block-wise one grid of 128x128 blocks per group (DeepGEMM's), which the
// block-scaled mainloop part multiplies into each k tile's promoted sums.
#define GROUP_K 0         // groups of rows only (the experts' tokens)
#define GL_GROUPED 1
#define GL_BATCH_A 0      // A: one 2-D map over every group's rows
#define GL_BATCH_B 1      // B: the group's element of a 3-D map
#define GL_C_ELEMENTS 0
#include "common.cuh"
#include "hopper.cuh"

#if GL_DTYPE != 3
#error "rung 27 (wgmma_grouped_fp8) takes FP8 operands (GL_DTYPE 3)"
#endif
#if GL_C_DTYPE == 3
#error "rung 27 (wgmma_grouped_fp8) writes C in fp32, fp16 or bf16 (GL_C_DTYPE 0, 1 or 2), not in FP8"
#endif
#ifndef GL_DYN_SMEM
#error "rung 27 (wgmma_grouped_fp8) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "rung 27 (wgmma_grouped_fp8) needs the sm_90a target (wgmma, setmaxnreg): compile for sm_90a"
#endif
#if GL_A_COL || !GL_B_COL || !GL_VEC_A || !GL_VEC_B
#error "rung 27 (wgmma_grouped_fp8) reads K-major operands by TMA: a row-major A and column-major weights, both 16-byte legal"
#endif
#if GL_BATCHED || GL_SPLITK || GL_TMA_STORE_ONLY || GL_AUX
#error "rung 27 (wgmma_grouped_fp8) walks its own groups: no batch, split-K, store twin or auxiliary output"
#endif
#ifndef GROUP_CAP
#error "rung 27 (wgmma_grouped_fp8) needs GROUP_CAP, the most groups its shared table holds"
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif
#ifndef EPI_TMA
#define EPI_TMA 0
#endif
#ifndef DEFER
#define DEFER 0
#endif
#ifndef GL_PRECISION
#define GL_PRECISION 0        // 0 "fp8": promoted once per k tile; 1 "fp8_fast": summed in the tensor cores
#endif
#define GL_TMA_STORE_ONLY 0   // no store twin: the tile past its group's end is stored by rows
#define GL_WS_C_MAP 1         // the kernel takes C's tensor map after A's and B's (ws_entry.cuh)

// ---- geometry (the warpgroups, WGS, MI, CONSUMERS and CWARPS: hopper.cuh) ----------------------
constexpr int KSTEPS = BK / 32;               // k32 wgmma steps per k tile
constexpr bool PROMOTE = GL_PRECISION == 0;
// What the registry's constraints promise (core/families/hopper.py, fp8_constraints), restated.
static_assert(THREADS == CONSUMERS + GL_WARPGROUP, "THREADS must be two consumer warpgroups plus a producer warpgroup");
static_assert((WM == 64 || WM == 128) && BM == 2 * WM, "two consumer warpgroups of 64 or 128 rows each");
static_assert(BN == 64 || BN == 128 || BN == 256, "a wgmma's N is the block's BN: 64, 128 or 256");
static_assert(BK == 128 || (BK == 256 && !PROMOTE), "a k tile is 128 of K (the promotion's interval) or, summed in the tensor cores, 256");
static_assert(STAGES >= 2, "the pipeline needs at least two stages");
static_assert((PROMOTE ? 2 : 1) * MI * BN / 2 <= 128,
              "at most 128 FP32 accumulators per thread, the promoted sums and a k tile's partial sums together");
static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two CTAs along M");

#include "ws.cuh"        // rung 21's ring, register split and schedule parameters
constexpr int EPI_BUDGET_B = CWARPS * 16 * (BN < 128 ? BN : 128) * 2;
#include "grouped.cuh"   // the groups' arguments, the grouped schedule and its table

#if GL_C_DTYPE == 0
constexpr bool REG_A = false;   // the accumulators' rows are the wgmma's own (ws_epi32.cuh's acc_row)
#include "ws_epi32.cuh"
using Epilogue = GlWsEpi32;
#else
#include "ws_epi16.cuh"
using Epilogue = GlWsEpi16;
#endif
constexpr int SMEM_NEED = 1024 + PIPE_B + EPI_BUDGET_B + 2 * STAGES * 8 + GROUP_TABLE_B;
static_assert(SMEM_NEED <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");

#include "mainloop.cuh"
#if GL_SCALE == 3
static_assert(PROMOTE && !KREV, "block scales multiply each k tile's promoted sums, walked forwards (no fp8_fast, no KREV)");
using Mainloop = GlMainloopBlockScaled<0, 1, false>;   // each k tile's partial sums times its group's block scales
#else
using Mainloop = GlMainloopSS<0, 1, 0, 0, PROMOTE>;
#endif
#include "ws_consume.cuh"

#include "ws_entry.cuh"   // the kernel entry: the group table, barriers, then the producer / consumer split
