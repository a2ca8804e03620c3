// Rung 22 — FP32 operands on Hopper's wgmma: TF32 (m64nNk8 .tf32, FP32 accumulate) and 3xTF32 in
// rung 21's warp-specialized persistent structure (sm_90a only).       seed: none; CUTLASS's sm90 TF32 GEMM
// (tfloat32_t operands, both K-major) is the design, written here from the PTX ISA. The measurements
// behind each choice below are in the design journal (docs/journal/tf32.md).
//
// What it changes against rung 20 (tf32_mma: mma.sync m16n8k8 from ldmatrix fragments): the warps
// no longer load, round and feed fragments. wgmma reads both operands straight from 128-byte-
// swizzled shared memory through descriptors, TMA fills the stages (one producer thread), and
// rung 21's machinery is reused as is (schedule.cuh, ring.cuh, ws.cuh: persistent static schedule, mbarrier ring,
// setmaxnreg split, 2-CTA clusters with B multicast). Rung 20 stays far below cuBLAS with TF32
// (benchmarks/results/h100_tf32.json): its warps spend most of their instructions on fragments and
// rounding, many per HMMA. Here a consumer warpgroup issues BK / 8 x MI wgmmas per k
// tile and little else.
//
// What TF32 wgmma demands (PTX ISA, wgmma.mma_async):
// * the shape is m64nNk8 and .tf32 has NO transpose operands: A and B must both be K-major in
//   shared memory (row-major A: [BM][BK], column-major B: [BN][BK]). The plan guarantees it: the
//   registry marks this rung k_major, and core/packing.py transpose-copies an MN-major operand
//   (column-major A, row-major B -- the common row-major B) into the workspace before the GEMM
//   (kernels/pack.cu, pack_t), and packs an operand TMA cannot read (GL_VEC_A/B = 0) likewise, so
//   this kernel only ever sees K-major, 16-byte-legal operands and is TMA-only.
//   The copy reads and writes the whole operand once, a share of the call that shrinks as the
//   GEMM grows (its K^2 bytes against the GEMM's M N K). A row-major-A, column-major-B caller
//   (torch's a @ b.T) pays nothing.
// * a swizzle row of 128 bytes is 32 FP32: BK = 32 is one row per operand row, a TMA box of 32 x
//   rows; a k8 step is 32 bytes of the row, so the descriptor arithmetic (hopper.cuh,
//   GlStageDescs: 4 steps of 32 bytes per 128-byte row, SBO 1024 = 8 rows) is rung 21's
//   K-major one unchanged, with KSTEPS = BK / 8.
// * the tensor cores read the 19 high bits of each FP32 operand (sign, exponent, 10 fraction
//   bits) and ignore the 13 low ones: the operands are TRUNCATED to TF32 (relative error < 2^-10),
//   where rung 20 rounds to nearest (cvt.rna, 2^-11) in registers. Rounding here would cost a
//   read and write of every stage in shared memory, more shared-memory traffic than the wgmmas'
//   own reads: the precision table's tf32 roundoff covers both.
// * register A (GL_A_COL, tf32 only): wgmma's other form takes A from registers, in any layout
//   the threads care to load it from. So an MN-major A needs no copy: TMA brings it as [BK k][32 m]
//   panels (rung 19's MN-major layout), and each consumer thread loads its fragment with two
//   8-byte LDS per k8 step and m64 block (acc_row: a row map that makes them conflict-free). The
//   plan turns the common case, row-major A and B, into this one: C^T = B^T A^T, where B^T is a
//   column-major A and A^T a K-major B, and C is written column-major (GL_C_COL). Only a
//   column-major A with a row-major B still has B transposed by a copy. 3xTF32 packs (splits)
//   both operands anyway, so it keeps the descriptor form.
//   Why: the copy's share of the call goes, and the loads (8 LDS.64 and a second commit group per
//   32-k tile for a consumer thread) are covered by the other warpgroup's wgmmas; the kernel alone
//   on a column-major B was the target (benchmarks/results/h100_tune_wgmma_tf32_4096_rc.json,
//   h100_wgmma_tf32_rs.json).
// Epilogue (EPI_TMA=0, beta != 0, or a C TMA cannot store): alpha / beta applied to the accumulators
// and stored straight from them, two consecutive FP32 (8 bytes) per store (d[j][e] of m64nNk8: row
// 16 warp + lane / 4 (+8 for e >= 2), columns 8 j + 2 (lane % 4), +1), guarded at the edges.
// Both are ws_epi32.cuh, the epilogue part of an FP32 C, which rung 21 also takes for an FP32 output
// of 16-bit operands.
// EPI_TMA=1: through TMA stores from a 32 KB staging (store_tile_tma). Why: a build without its
// stores (a never-true guard, the main loop kept) ran clearly faster than the one with them
// (benchmarks/results/h100_tf32_epilogue_nostore.json against h100_tf32_epilogue_base.json): the 132
// SMs write C together, and the consumers' next wgmmas wait behind the stores' reads of the
// accumulators. cuBLAS's TF32 kernel (the same 128x256x32 tile) stages its output in shared memory
// and stores it by TMA. With the TMA store the consumers wait only for 8 KB chunks to be read from
// shared memory (two of them per warpgroup in flight) instead of for 64 st.global each.
// What was learned (h100_tune_wgmma_tf32_epi_*.json, h100_tf32_epi_tma.json;
// benchmarks/profiles/h100_profile_wgmma_tf32_epi{0,1}_8192.json): it gains at short K and is
// level or a little behind at 4096^3 and 8192^3. At 8192^3 it saves cycles, but the SM clock falls
// (the power cap) and the L2 moves more bytes. So EPI_TMA=1 is the default, and the shipped table
// (data/defaults_sm90.json) keeps EPI_TMA=0 at 8192^3.
// The staging made conflict-free (store_tile_tma; the 8-byte stores into a column-major C's boxes
// had taken more than twice the wavefronts they need) brought EPI_TMA=1 to cuBLAS's cycles; the
// clock is what it loses (benchmarks/profiles/h100_l2probe_tf32_8192_*.json). The extra L2 traffic
// is reads: every variant's TMA loads deliver the same sectors to the SMs, but the L2 slices looked
// up more of them with EPI_TMA=1 (also with its TMA stores removed, so not the stores' own traffic)
// than with EPI_TMA=0 or cuBLAS (which multicasts one operand in 2-CTA clusters). The sectors
// delivered without a lookup can only be requests of several SMs for the same data merged before
// the L2; our reading: with the shorter epilogue the SMs' k tiles drift apart and fewer of them
// merge: more L2 lookups, the power, the clock. CLUSTER=2 (B multicast) did not get them back
// (h100_l2probe_tf32_8192_cluster.json), and marking C's lines evict-first in L2 (st.global.cs; a
// cache policy on the TMA store) changed nothing that mattered (h100_l2probe_tf32_8192_cevict.json).
//
// ---- precision 3xtf32 (GL_PRECISION 3): FP32-accurate on the TF32 tensor cores ------------------
// What it adds: rung 20's 3xTF32 (x = hi + lo, both TF32; a_lo*b_hi + a_hi*b_lo + a_hi*b_hi) with
// the split taken out of the main loop. Rung 20 splits every fragment in registers, many
// instructions per HMMA, and stays at about cuBLAS SGEMM's speed (benchmarks/results/h100_3xtf32.json); here:
// * a split pass before the GEMM (kernels/pack.cu, GL_PACK_SPLIT; core/packing.py): per operand one
//   launch reads it once and writes hi = tf32(x) and lo = tf32(x - hi) (round to nearest: exact
//   within 2^-22 |x|) as two K-major planes, transposing an MN-major operand; the kernel sees
//   K-major, 16-byte-legal planes only;
// * a stage holds A_hi, A_lo, B_hi, B_lo: the tensor maps are 3-D (k, row, plane), one box per
//   plane into the same full barrier (TX_BYTES counts both), multicast for B in a cluster; rows
//   past the edge are zeros in both planes;
// * per k8 step three wgmmas, the small products first; the tensor cores' own sums truncate (rung
//   20 measured the bias this gives over K = 4096 when one accumulator takes every product), so a
//   k tile's 12 wgmmas go into fresh partial sums (scale-d 0 on the first), the group is waited for
//   and the sums are added in FP32 (round to nearest) -- CUTLASS's "promotion" of FP8 sums on
//   Hopper. The truncation is then relative to a 32-long partial sum of random sign. Partial sums
//   beside the sums cost a second accumulator set: 64 x 128 per warpgroup at most (BN 256 would need
//   256 registers), and two planes per stage: the 3xtf32 default is 128x128x32, 2 stages (128 KB).
// Each consumer warpgroup waits for its own k tile (wait_group 0) before the FP32 adds; the other
// warpgroup's wgmmas fill the tensor cores meanwhile (12 m64n128k8 per k tile).
// The 3xTF32 peak is a third of TF32's, and the split pass reads and writes each operand once. With
// the split pass in the call it runs about twice as fast as cuBLAS SGEMM, with a smaller relative
// error (tests/test_tf32_accuracy.py). 2 stages are the default: with 3 the GPU hit its power cap
// at 8192^3 and ran slower (benchmarks/results/h100_wgmma_3xtf32_default.json against
// h100_wgmma_3xtf32_stages2.json, h100_wgmma_3xtf32_final.json); why the third stage costs that
// much was not profiled. If the wait per k tile shows as tensor-pipe idle, double-buffered partial
// sums (192 accumulator registers) are the next step.
#include "common.cuh"
#include "hopper.cuh"
#if GL_BATCHED
#error "rung 22 (wgmma_tf32) launches one problem: a batch in one launch is rung 21's (GL_BATCHED)"
#endif

#if GL_DTYPE != 0
#error "rung 22 (wgmma_tf32) takes FP32 operands (GL_DTYPE 0): TF32 is a reading of FP32"
#endif
#if !defined(GL_PRECISION) || (GL_PRECISION != 1 && GL_PRECISION != 3)
#error "rung 22 (wgmma_tf32) computes in precision tf32 (GL_PRECISION 1) or 3xtf32 (GL_PRECISION 3)"
#endif
#if GL_PRECISION == 3
#define GL_PLANES 2               // A and B come as two planes each: the big and the small TF32 parts
#else
#define GL_PLANES 1
#endif
#ifndef GL_C_COL
#define GL_C_COL 0                // 1: C column-major, C(i, j) at C[j * ldc + i] (the register-A path's transposed problem)
#endif
#if !GL_B_COL || !GL_VEC_A || !GL_VEC_B
#error "rung 22 (wgmma_tf32) reads a K-major B and 16-byte-legal operands only: the plan packs the others"
#endif
#if GL_A_COL && GL_PRECISION != 1
#error "rung 22 (wgmma_tf32) reads a column-major (MN-major) A into registers in precision tf32 only: 3xtf32 packs it"
#endif
#if GL_C_COL && !GL_A_COL
#error "rung 22 (wgmma_tf32) writes a column-major C only on the register-A path (the plan's transposed problem)"
#endif
#ifndef GL_DYN_SMEM
#error "rung 22 (wgmma_tf32) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "rung 22 (wgmma_tf32) needs the sm_90a target (wgmma, setmaxnreg): compile for sm_90a"
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif
#ifndef EPI_TMA
#define EPI_TMA 0
#endif
#define GL_WS_C_MAP 1     // the kernel takes C's tensor map after A's and B's (ws_entry.cuh; used with EPI_TMA)

// ---- geometry (the warpgroups, WGS, MI, CONSUMERS and CWARPS: hopper.cuh) ----------------------
constexpr int KSTEPS = BK / 8;                // k8 wgmma steps per k tile
static_assert(THREADS == CONSUMERS + GL_WARPGROUP, "THREADS must be two consumer warpgroups plus a producer warpgroup");
static_assert((WM == 64 || WM == 128) && BM == 2 * WM, "two consumer warpgroups of 64 or 128 rows each");
static_assert(BN == 64 || BN == 128 || BN == 256, "a wgmma's N is the block's BN: 64, 128 or 256");
static_assert(STAGES >= 2, "the pipeline needs at least two stages");
constexpr bool SPLIT = GL_PLANES > 1;          // 3xTF32: the accumulators and a k tile's partial sums
static_assert((SPLIT ? 2 : 1) * MI * BN / 2 <= 128, "at most 128 FP32 accumulators per thread (3xTF32: sums and partial sums)");
static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two CTAs along M");

// ---- the stages' carve-up (ring.cuh): K-major operands in panels of [rows][32 k] per 32 k --------
// 3xTF32: a stage holds each operand's small-part panels (plane 1) right after its big-part ones.
// Register A (GL_A_COL): A's panels are [BK k][32 m] per 32 rows of the tile, as TMA copies an
// MN-major operand (rung 19's layout), read into registers by the consumers (mainloop.cuh).
// Both operands come by TMA (the plan packs the others), B multicast in a cluster (rung 21 says
// what each means); ring.cuh holds the mbarrier ring and the producer's loads, ws.cuh the register
// split and the stream-K fixup.
#include "ws.cuh"
#if !GL_A_COL
constexpr int A_LO = GL_PLANES > 1 ? A_PLANE_B : 0, B_LO = GL_PLANES > 1 ? B_PLANE_B : 0;   // small parts' offsets
#endif
// The epilogue's staging (ws_epi32.cuh), apart from the stages: 32 KB, what the registry gives it
// (core/families/hopper.py, WSTF32_EPI_B) where it stores by TMA.
constexpr int EPI_BUDGET_B = EPI_TMA && GL_VEC_C ? 2 * 2 * 64 * 32 * 4 : 0;
constexpr int SMEM_NEED = 1024 + PIPE_B + EPI_BUDGET_B + 2 * STAGES * 8;   // 1024: aligning the base; then full[], empty[]
static_assert(SMEM_NEED <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");

// the tile scheduler part (schedule.cuh): the persistent grouped walk, with a stream-K tail and over a
// batch as the build says
using Schedule = GlPersistentSchedule<BM, BN, BK, CLUSTER, GROUP_U, STREAMK, GL_BATCHED>;
constexpr bool REG_A = GL_A_COL;   // an MN-major A is read into registers, its rows in acc_row's order
#include "ws_epi32.cuh"
using Epilogue = GlWsEpi32;     // the epilogue part: direct or TMA stores of FP32


// ---- main loop and epilogue: the consumer warpgroups (ws_consume.cuh), TF32 k8 steps: K-major
// operands by descriptor (3xTF32 with each k tile's partial sums), or an MN-major A read into
// registers, its rows in the epilogue part's acc_row order (mainloop.cuh) -----------------------
#include "mainloop.cuh"
#if GL_A_COL
using Mainloop = GlMainloopRegA<Epilogue>;
#else
using Mainloop = GlMainloopSS<0, 1, A_LO, B_LO>;
#endif
#include "ws_consume.cuh"

#include "ws_entry.cuh"   // the kernel entry: barriers, then the producer / consumer split
