// Rung 25 — FP8 on Hopper's tensor cores: scaled e4m3 / e5m2 products in rung 21's warp-specialized,
// persistent structure (FP8 in, FP32 accumulate, C in bf16, fp16 or fp32; sm_90a only).
//                                           seed: none (the seeds stop at WMMA); the design is
// DeepGEMM's and cuBLASLt's FP8 GEMM (scaled operands, FP32 promotion of the tensor cores' partial
// sums), written here from the PTX ISA and composed of the Hopper parts rungs 21 and 22 share.
//
// What it changes against rung 21 (wgmma_ws):
// * The operands are bytes: wgmma.mma_async m64nNk32 with .e4m3 or .e5m2 A and B (each its own format,
//   GL_FP8_A / GL_FP8_B: an e5m2 gradient times e4m3 activations), twice rung 21's k per instruction
//   and twice its peak rate. A 128-byte swizzle row is now 128 elements of k, so a k tile (BK) is 128
//   or 256 of K, one or two panels.
// * Both operands K-major: FP8 wgmma has no transpose operands (PTX ISA: imm-trans exists for .f16 and
//   .bf16 only), so the kernel reads a row-major A and a column-major B, both through TMA (16-byte
//   aligned bases and leading dimensions). The plan copies any other operand first, transposing an
//   MN-major one and padding K to 16 bytes (core/packing.py; the registry's k_major reads), which
//   costs a read and a write of that operand; the plan says so.
// * Promotion (precision "fp8", the default): Hopper's tensor cores add FP8 products with fewer
//   fraction bits than FP32, so over a long K the sums drift. Each k tile of 128 is summed in fresh
//   accumulators (the first wgmma with scale-d 0) and added into FP32 registers once its wgmmas are
//   done (mainloop.cuh's PROMOTE, the form of rung 22's 3xTF32 partial sums). A thread holds both
//   sets: at most 64 of each, so 128x128 tiles (two m64n128 consumer warpgroups); while one
//   warpgroup adds, the other's wgmmas keep the tensor cores busy. Precision "fp8_fast"
//   (GL_PRECISION 1, torch's use_fast_accum): the sums stay in the tensor cores' accumulators across
//   the whole K, one set of registers, so 128x256 tiles as rung 21's.
// * Scales (scales.cuh): C = act(alpha * s * acc + beta * C + bias) with s = scale_a * scale_b
//   tensor-wise (GL_SCALE 1, folded into alpha on the device) or scale_a[i] * scale_b[j] row-wise
//   (GL_SCALE 2, applied to a tile's accumulators before its epilogue part). Block-wise (GL_SCALE 3,
//   DeepSeek-V3's 1x128 scales of A and 128x128 of B) the scales change with each k block of 128, so
//   the mainloop part multiplies each k tile's promoted partial sums by them before adding (in
//   clusters of 2 while the next k tile's wgmmas run into a second set of partial sums: mainloop.cuh,
//   GlMainloopBlockScaled). The scales stay on the device: no host synchronization, and a CUDA
//   graph captures the call.
// Everything else is rung 21's parts, unchanged: the stage ring and its TMA producer with B multicast
// to a cluster of 2 (ring.cuh), the register split and stream-K fixup (ws.cuh), the persistent
// grouped schedule (schedule.cuh), the consumer walk (ws_consume.cuh) and the epilogue part of C's type
// (ws_epi16.cuh: staged, TMA or deferred stores; ws_epi32.cuh for an FP32 C), with bias and activation
// from epilogue.cuh's functor.
#include "common.cuh"
#include "hopper.cuh"

#if GL_DTYPE != 3
#error "rung 25 (wgmma_fp8) takes FP8 operands (GL_DTYPE 3)"
#endif
#if GL_C_DTYPE == 3
#error "rung 25 (wgmma_fp8) writes C in fp32, fp16 or bf16 (GL_C_DTYPE 0, 1 or 2), not in FP8"
#endif
#ifndef GL_DYN_SMEM
#error "rung 25 (wgmma_fp8) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "rung 25 (wgmma_fp8) needs the sm_90a target (wgmma, setmaxnreg): compile for sm_90a"
#endif
#if GL_A_COL || !GL_B_COL || !GL_VEC_A || !GL_VEC_B
#error "rung 25 (wgmma_fp8) reads K-major operands by TMA: a row-major A and a column-major B, both 16-byte legal"
#endif
#if GL_BATCHED
#error "rung 25 (wgmma_fp8) computes one product per launch"
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
#ifndef GL_TMA_STORE_ONLY
#define GL_TMA_STORE_ONLY 0   // the store twin (rung 21's last header paragraph): only the TMA store's epilogue
#endif
#ifndef GL_PRECISION
#define GL_PRECISION 0        // 0 "fp8": promoted once per k tile; 1 "fp8_fast": summed in the tensor cores
#endif
#define GL_WS_C_MAP 1         // the kernel takes C's tensor map after A's and B's (ws_entry.cuh)

// ---- geometry (the warpgroups, WGS, MI, CONSUMERS and CWARPS: hopper.cuh) ----------------------
constexpr int KSTEPS = BK / 32;               // k32 wgmma steps per k tile
constexpr bool PROMOTE = GL_PRECISION == 0;
// What the registry's constraints promise (core/families/hopper.py, fp8_constraints), restated.
static_assert(THREADS == CONSUMERS + GL_WARPGROUP, "THREADS must be two consumer warpgroups plus a producer warpgroup");
static_assert((WM == 64 || WM == 128) && BM == 2 * WM, "two consumer warpgroups of 64 or 128 rows each");
static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "a wgmma's N is the block's BN: 64, 128, 192 or 256");
static_assert(BK == 128 || (BK == 256 && !PROMOTE), "a k tile is 128 of K (the promotion's interval) or, summed in the tensor cores, 256");
static_assert(STAGES >= 2, "the pipeline needs at least two stages");
static_assert((PROMOTE ? 2 : 1) * MI * BN / 2 <= (PROMOTE ? 192 : 128),
              "at most 128 FP32 accumulators per thread, or promoted 96 sums and 96 partial sums");
static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two CTAs along M");

// ---- the stages' carve-up, how the operands arrive, the mbarrier ring and the producer's loads
// (ring.cuh), with the register split and the stream-K fixup of the persistent rungs (ws.cuh) ------
#include "ws.cuh"
// The epilogue's staging, apart from the stages: rung 21's (core/families/hopper.py, ws_smem).
constexpr int EPI_BUDGET_B = CWARPS * 16 * (BN < 128 ? BN : BN % 128 ? 64 : 128) * 2;   // ws_epi16.cuh's EPI_N

// the tile scheduler part (schedule.cuh): the persistent grouped walk, with a stream-K tail as the build says
using Schedule = GlPersistentSchedule<BM, BN, BK, CLUSTER, GROUP_U, STREAMK, 0>;

#if GL_C_DTYPE == 0
constexpr bool REG_A = false;   // the accumulators' rows are the wgmma's own (ws_epi32.cuh's acc_row)
#include "ws_epi32.cuh"
using Epilogue = GlWsEpi32;     // an FP32 C: direct or TMA stores of FP32
#else
#include "ws_epi16.cuh"
using Epilogue = GlWsEpi16;     // a 16-bit C: staged, TMA or deferred stores
#endif
constexpr int SMEM_NEED = 1024 + PIPE_B + EPI_BUDGET_B + 2 * STAGES * 8;   // 1024: aligning the base; then full[], empty[]
static_assert(SMEM_NEED <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");

// ---- main loop and epilogue: the consumer warpgroups (ws_consume.cuh), both operands read from the
// stages by descriptor, each k tile promoted into FP32 unless summed in the tensor cores (mainloop.cuh)
#include "mainloop.cuh"
#if GL_SCALE == 3
static_assert(PROMOTE && !KREV, "block scales multiply each k tile's promoted sums, walked forwards (no fp8_fast, no KREV)");
// pipelined in clusters of 2, where B is multicast (mainloop.cuh says why only there); its two sets of
// partial sums leave no registers for a held tile
static_assert(CLUSTER == 1 || !DEFER, "block scales in clusters of 2 take no deferred store (DEFER=0)");
using Mainloop = GlMainloopBlockScaled<0, 1, CLUSTER == 2>;   // each k tile's partial sums times its block scales
#else
using Mainloop = GlMainloopSS<0, 1, 0, 0, PROMOTE>;
#endif
#include "ws_consume.cuh"

#include "ws_entry.cuh"   // the kernel entry: barriers, then the producer / consumer split
