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
//   group's weights are clipped at their own K and N. A tile's rows past its group's end are the
//   next group's tokens (or TMA's zeros past the last row): their products are computed and never
//   stored. The tile that reaches past its group's end is stored by rows, bounded at the end (the
//   staged 16-byte stores, ws_consume.cuh's m_end), every other tile by TMA as in rung 21 (the
//   copy engine clips only at C's last row). Hence no alignment of the group sizes is needed, and
//   with sizes that are multiples of BM every tile is stored by TMA. An operand TMA cannot describe
//   (a leading dimension or a group stride that is not whole 16-byte vectors) is copied by the
//   producer warpgroup's threads, as in rung 21 (the group's weights at their own pointer). The
//   masked form with a row-major A loads a group's tiles through the group's own map of A, its rows
//   cut at the group's count (group_maps, at the end of this file): the padding past the count is
//   filled with zeros by the copy engine instead of read from DRAM.
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
// the groups' arguments, after the maps (ws_entry.cuh): G, B's group stride (elements), the G ints
// on the device (cumulative ends, or counts with gl_group_rows > 0: rows per group of the masked form)
// (over K: gl_bsb is C's group stride, and the groups' maps follow, written by group_maps)
#define GL_GROUP_PARAMS , int gl_groups, long long gl_bsb, const int* __restrict__ gl_group_src, int gl_group_rows, \
                        const GlTensorMap* __restrict__ gl_group_maps

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
#if GROUP_K
using Schedule = GlGroupedKSchedule<BM, BN, BK, CLUSTER, GROUP_U>;
constexpr int GROUP_TABLE_B = 0;
#else
using Schedule = GlGroupedSchedule<BM, BN, BK, CLUSTER, GROUP_U, STREAMK>;
// the group table (GlGroupedSchedule::fill) after the barriers
constexpr int GROUP_TABLE_B = 4 * Schedule::table_ints(GROUP_CAP, THREADS / 32);
#endif

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

#if GROUP_K || !GL_A_COL
// ---- the groups' tensor maps, launched before the GEMM on the same stream ------------------------------
// Over K (GROUP_K=1), for each group g, copies of A's and B's maps (the host's, over all of K) whose K
// extent is cut at the group's end (ends[g], clamped to K), into dst[2g] and dst[2g + 1]: the GEMM
// loads group g's k tiles from its first k through these, and the copy engine fills zeros past the
// end instead of reading the next group's k. For the masked form (groups of `rows` rows, a row-major
// A), a copy of A's map per group, dst[g], whose rows end at the group's count: the copy engine fills
// a tile's rows past it with zeros instead of reading the padding. One warp per map, as the PTX
// ISA's device-side map update goes: the map copied into shared memory, its extent replaced there by
// one lane, then the warp's tensormap.cp_fenceproxy copies it to global memory with a release of
// the tensormap proxy, which the GEMM's producer acquires (gl_tensormap_acquire) before its first
// load through it.
template <int ORD>
__device__ __forceinline__ void gl_tensormap_set_dim(unsigned smem_map, int extent) {
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], %1, %2;\n"
                 :: "r"(smem_map), "n"(ORD), "r"(extent) : "memory");
}
// ints: the groups' cumulative end k (over K) or counts (masked); n: K (over K) or the rows per group
extern "C" __global__ void __launch_bounds__(64) group_maps(const __grid_constant__ GlTensorMap tmA,
                                                            const __grid_constant__ GlTensorMap tmB,
                                                            const int* __restrict__ ints, int G, int n,
                                                            GlTensorMap* __restrict__ dst) {
    __shared__ alignas(128) GlTensorMap maps[2];   // each on 128 bytes, as the tensormap instructions take it
    const int g = (int)blockIdx.x, operand = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    if (g >= G || (!GROUP_K && operand)) return;   // the masked form: A's map only
    const GlTensorMap& src = operand ? tmB : tmA;
    if (lane < 16) maps[operand].opaque[lane] = src.opaque[lane];
    __syncwarp();
    const unsigned smem_map = static_cast<unsigned>(__cvta_generic_to_shared(&maps[operand]));
    // over K: K, the outer dimension of both (a column-major A, a row-major B); masked: the rows, A's
    // outer dimension (row-major); an extent of at least 1 (an empty group loads nothing)
    const int extent = GROUP_K ? min(max(ints[g], 0), n) : g * n + min(max(ints[g], 0), n);
    if (lane == 0) gl_tensormap_set_dim<1>(smem_map, max(extent, 1));
    __syncwarp();
    asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], 128;\n"
                 :: "l"(reinterpret_cast<unsigned long long>(dst + (GROUP_K ? 2 * g + operand : g))), "r"(smem_map)
                 : "memory");
}
#endif
