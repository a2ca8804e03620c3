// Rung 26 — grouped GEMM: the G products of a mixture-of-experts layer (every token times its
// expert's weights) in one launch, the group sizes read on the device (FP16 / BF16 in, FP32
// accumulate; sm_90a only).
//                                           seed: none (the seeds stop at WMMA); the design is that of
// CUTLASS's and DeepGEMM's grouped GEMMs (a persistent tile scheduler over (group, tile) pairs),
// written here on rung 21's parts.
//
// What it adds to rung 21 (wgmma_ws: the same ring, TMA producer, mainloop, consumer walk and
// epilogue parts; its header explains them):
// * The tile scheduler part, schedule.cuh's GlGroupedSchedule. A's rows are the tokens sorted by
//   group (expert): group g owns rows [start_g, end_g), given on the device either as the
//   cumulative ends (``offs``, torch's grouped_mm) or as counts in a padded (G, rows, K) buffer (the
//   masked form, which a CUDA graph replays with new counts that the host never sees). Each block
//   reads them once at its start into a table in shared memory (the units before each group, an
//   exclusive scan, and each group's end), then walks units as rung 21 does: cluster c takes
//   units c, c + clusters, ..., every unit's group found by a cursor that only moves forward. So no
//   host synchronization, no launch per group, and the launch is graph-capturable: the grid is
//   sized from what the host knows (at most ceil(T / BM) + G row tiles) and a block past the last
//   unit finds no work.
// * The operands as they lie: A (and C) one 2-D tensor map over all the tokens, each group's tile
//   at its group's first row plus whole tiles (any row, not only multiples of BM); the weights a
//   3-D map (the group the third coordinate, as a batch element of rung 21's batched build), so a
//   group's weights are clipped at their own K and N. A row-major A comes in boxes of 64 rows, and
//   a tile's boxes wholly past its group's end are not loaded (ring.cuh's GROUP_BOXES): the rows
//   past the end of a loaded box are the next group's tokens or the masked form's padding (TMA's
//   zeros past the last row), and their products, like those of the stage's stale rows, are
//   computed and never stored. The tile that reaches past its group's end is stored by rows,
//   bounded at the end (the staged 16-byte stores, ws_consume.cuh's m_end), every other tile by
//   TMA as in rung 21 (the copy engine clips only at C's last row). Hence no alignment of the group
//   sizes is needed, and with sizes that are multiples of BM every tile is stored by TMA. An operand
//   TMA cannot describe (a leading dimension or a group stride that is not whole 16-byte vectors)
//   is copied by the producer warpgroup's threads, as in rung 21 (the group's weights at their own
//   pointer).
// * The cost of a group boundary is the part-filled tile: a group of r rows takes ceil(r / BM)
//   row tiles, so many small groups (a token count near the number of experts x BM or below) make
//   the tensor cores multiply rows that are thrown away. There the weights' bytes, read once per
//   row tile, bound the time (core/families/hopper.py, grouped_config, chooses the tile from the
//   rows and groups; docs/usage.md "Grouped GEMM").
// * Groups over K (GROUP_K=1, the weight gradient: schedule.cuh's GlGroupedKSchedule): G products
//   of one M x N, group g summing its own tokens' k into its own C (a 3-D map). A group's last k tile
//   must not read the next group's: the group_maps kernel at the end of this file, launched first,
//   writes each group's maps of A and B with K cut at the group's end, and the copy engine fills
//   zeros past it. K is both operands' outer dimension (x^T and dY as a backward has them): a TMA
//   box starts 16-byte aligned along the contiguous dimension, which a group's first k need not be.
// The epilogue functor (epilogue.cuh) of groups of rows fuses an activation and a bias: a column bias
// is one row of N per group (G x N, each group's experts' own), which the consumers index by the
// tile's group (ws_consume.cuh); a row bias runs along all the rows. Groups over K store the plain
// product (alpha, the output type). STREAMK=1 (groups of rows): rung 21's stream-K tail over the
// units the device counted (the last wave's units split by k tiles, schedule.cuh), its workspace the
// host's; the tile that finishes a split unit applies the group's epilogue as any other.
#ifndef GROUP_K
#define GROUP_K 0         // 1: groups over K (the weight gradient), GlGroupedKSchedule
#endif
#define GL_GROUPED (GROUP_K ? 2 : 1)
#define GL_BATCH_A 0      // A: one 2-D map over every group's rows (over K: the group's own map)
#define GL_BATCH_B (!GROUP_K)   // B: the group's element of a 3-D map (over K: the group's own 2-D map)
#define GL_C_ELEMENTS GROUP_K   // over K: each group's C, an element of a 3-D map
#include "common.cuh"
#include "hopper.cuh"

#if GL_DTYPE != 1 && GL_DTYPE != 2
#error "rung 26 (wgmma_grouped) takes fp16 or bf16 operands (GL_DTYPE 1 or 2)"
#endif
#ifndef GL_DYN_SMEM
#error "rung 26 (wgmma_grouped) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "rung 26 (wgmma_grouped) needs the sm_90a target (wgmma, setmaxnreg): compile for sm_90a"
#endif
#if GL_BATCHED || GL_SPLITK || GL_TMA_STORE_ONLY
#error "rung 26 (wgmma_grouped) walks its own groups: no batch, split-K or store twin"
#endif
#if GROUP_K && (!GL_VEC_A || !GL_VEC_B)
#error "rung 26 over K (GROUP_K=1) reads A and B through each group's tensor maps: both 16-byte legal"
#endif
#if GROUP_K && (!GL_A_COL || GL_B_COL)
#error "rung 26 over K (GROUP_K=1) reads K as A's and B's outer dimension (a column-major A, a row-major B): a group's first k is any k, and a box's start along the contiguous dimension must be 16-byte aligned"
#endif
#if GL_AUX || (GROUP_K && !(GL_ACT == 0 && GL_BIAS == 0))
#error "rung 26 (wgmma_grouped) fuses a bias and an activation into groups of rows only, and no auxiliary output"
#endif
#ifndef GROUP_CAP
#error "rung 26 (wgmma_grouped) needs GROUP_CAP, the most groups its shared table holds"
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
#define GL_TMA_STORE_ONLY 0   // no store twin: the tile past its group's end is stored by rows
#if GROUP_K && defined(STREAMK) && STREAMK
#error "rung 26 over K (GROUP_K=1) has no stream-K tail"
#endif
#define GL_WS_C_MAP 1     // the kernel takes C's tensor map after A's and B's (ws_entry.cuh)
// ---- geometry (the warpgroups, WGS, MI, CONSUMERS and CWARPS: hopper.cuh) ----------------------
constexpr int KSTEPS = BK / 16;               // k16 wgmma steps per k tile
static_assert(THREADS == CONSUMERS + GL_WARPGROUP, "THREADS must be two consumer warpgroups plus a producer warpgroup");
static_assert((WM == 64 || WM == 128) && BM == 2 * WM, "two consumer warpgroups of 64 or 128 rows each");
static_assert(BN == 64 || BN == 128 || BN == 256, "a wgmma's N is the block's BN: 64, 128 or 256");
static_assert(STAGES >= 2, "the pipeline needs at least two stages");
static_assert(MI * BN / 2 <= 128, "at most 128 FP32 accumulators per thread");
static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two CTAs along M");

#include "ws.cuh"   // rung 21's ring, register split and schedule parameters
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
using Mainloop = GlMainloopSS<GL_A_COL, GL_B_COL>;
#include "ws_consume.cuh"

#include "ws_entry.cuh"   // the kernel entry: the group table, barriers, then the producer / consumer split

#include "group_maps.cuh"   // over K: the groups' own maps, written first
