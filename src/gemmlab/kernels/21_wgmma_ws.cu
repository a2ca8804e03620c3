// Rung 21 — warp-specialized, persistent WGMMA: the producer warpgroup runs ahead into the next
// tile while the consumers write this one (FP16 / BF16 in, FP32 accumulate; sm_90a only).
//                                           seed: none (the seeds stop at WMMA); the design is
// CUTLASS's sm90 warp-specialized persistent GEMM (TMA, two cooperative consumer warpgroups, 2x1
// clusters), written here from the PTX ISA. The measurements behind each choice below are in the
// design journal (docs/journal/hopper.md).
//
// What it changes against rung 19 (wgmma_tma; the same wgmma, TMA boxes, swizzled panels and
// mbarrier ring, now shared through hopper.cuh):
// * Persistent: the grid is min(tiles, SMs) blocks (clusters: min(units, SMs/2) pairs; BALANCE=1, the
//   default: the fewest that take no more waves, schedule.cuh), each
//   looping over output tiles in a static grouped order (schedule.cuh). Rung 19 launches one
//   block per tile, 1 block of 384 threads per SM (192 KB of stages): each block fills its
//   pipeline and writes its epilogue with the tensor cores idle (Nsight Compute showed the tensor
//   pipe idle for a quarter of the time and barriers as the top stall). Here the mbarrier phases continue across
//   tiles, so the producer's TMA for tile i+1 is in flight while the consumers finish tile i and
//   store it: only the first tile of a block pays the pipeline fill.
// * The epilogue has shared staging of its own (the stages belong to the next tile, which the
//   producer is already loading): each consumer warp rounds alpha * acc to the output type into
//   its 16 x 128 staging (stmatrix, swizzled: no bank conflicts), reads whole rows back and writes
//   16-byte stores (beta: C read by 16-byte loads in the same pass, never when beta == 0); see
//   store_tile. Each consumer releases a tile's last stage before its epilogue. Where it can, the
//   epilogue stores the staging through TMA instead (store_tile_tma; the paragraph at the end).
//   These stores are the epilogue part of a 16-bit C, kernels/ws_epi16.cuh; an FP32 C (an output
//   dtype other than the operands', out_dtype) takes ws_epi32.cuh, rung 22's part, instead.
// * setmaxnreg: the producer warpgroup gives its registers back (setmaxnreg.dec to 40; it only
//   holds loop state) and the consumers take them (setmaxnreg.inc to 232), one if/else on the
//   role at the top of the kernel, a cap of 168 at entry (__launch_bounds__(384, 1)). ptxas
//   allocates 168 per thread at launch and the split (128 x 40 + 256 x 232 = 384 x 168) uses it
//   exactly; the consumers' code needs fewer than 232, so the 128 accumulators never come near a spill
//   and any growth of the epilogue has room.
// * Clusters of 2 along M (CLUSTER=2, the default): the two CTAs compute vertically adjacent tiles
//   of one column tile, so they need the same B tile; each loads half of it (half the rows of each
//   panel) and TMA multicast writes it into both. Per k tile an SM then pulls 16 + 16 KB through
//   L2 instead of 16 + 32 KB: a third less L2 traffic for the same math, which matters at the
//   tensor cores' full rate. The empty barriers count both CTAs' consumers (the peer's
//   producer overwrites this CTA's stage too), the producer's last act is to wait for every stage
//   to be released (no remote arrival reaches an exited CTA), and a cluster barrier after the
//   mbarrier init keeps the peer's first multicast from reaching an uninitialized barrier.
// Operands TMA cannot describe (GL_VEC_A / GL_VEC_B = 0) are copied by the producer warpgroup's
// 128 threads as in rung 19 (GlOperand::copy, hopper.cuh); that variant keeps 96 registers for the
// producer (8 halves per chunk in flight) and gives the consumers 200. B is then not multicast.
// History (docs/journal/hopper.md): the first epilogue stored straight from the accumulators (4-byte
// stores touching 8 rows each) and left the rung below rung 19 (benchmarks/results/h100_wgmma_ws_fp16.json):
// the stores kept the LSU busy while neither warpgroup issued a wgmma. The staged epilogue
// (store_tile: stmatrix, LDS.128, STG.128) cut that traffic and put the rung above rung 19
// (benchmarks/results/h100_wgmma_ws_staged_fp16.json). A ping-pong schedule (each consumer warpgroup
// on its own tile) was built and measured slower: more L2 bytes and more instructions with its
// 128x128 tiles (benchmarks/results/h100_pingpong_coop_bf16.json,
// benchmarks/profiles/h100_profile_wgmma_ws_coop_fp16_4096.json). What is left is the partial last
// wave and the epilogue the tensor cores wait for.
// STREAMK=1 (ws.cuh, shared with rung 22; off by default) splits the partial last wave by k tiles.
// It gains where a wave is far from whole (1024x14336x4096 and 1024x6144x4096 with 128x256 tiles,
// where 128x128 tiles without it are faster still) and loses a little at 4096^3
// (benchmarks/results/h100_tune_streamk_fp16_4096.json and the other h100_tune_streamk_*.json).
// Walked forwards (each cluster on its own k offset) the tail re-read the operands from DRAM and
// lost more (h100_tune_streamk_fwd_*.json). Why the k-synchronous walk gains nothing at 8192^3 was
// not profiled.
// The TMA store epilogue (EPI_TMA=1, the default; store_tile_tma): where C has a tensor map
// (16-byte aligned base, row stride a multiple of 16 bytes: GL_VEC_C; the host passes C's map as a
// third __grid_constant__ parameter), beta == 0 and N % 8 == 0 (decided at run time: the copy
// engine writes C without reading it, in whole 16-byte chunks; on the H100 a ragged row's last
// chunk overwrote the 3 outputs after it in C's padding), each consumer warp stmatrixes its 16 x 64
// boxes into its staging in TMA's 128-byte swizzle and one lane issues a cp.async.bulk.tensor store
// per box (UTMASTG), clipped by the copy engine at M and N. The LDS.128 + STG.128 half of the
// staged epilogue, with its per-row bounds and address arithmetic, leaves the consumers: they go
// back to the next tile's wgmmas while the copy engine drains this one, waiting only (lane 0,
// cp.async.bulk.wait_group.read) until a box buffer is read before refilling it. beta != 0, a C TMA
// cannot describe or store, and EPI_TMA=0 keep store_tile (EPI_TMA=0 compiles to the SASS the rung
// had before the switch existed).
// The TMA store gained a little over EPI_TMA=0, at the low end of what was predicted
// (benchmarks/results/h100_wgmma_ws_epi1_fp16.json against h100_wgmma_ws_epi0_fp16.json, and the
// bf16 pair). A probe with no stores at all (accumulators kept live;
// h100_wgmma_ws_noepilogue_probe_{fp16,bf16}.json) shows what this epilogue still costs with the
// tensor cores idle: alpha and rounding, stmatrix, a proxy fence per box, waiting for the copy
// engine to read a box buffer.
// A second step on those costs was built and measured (branch epi2, be7a5fd; not in this file):
// a buffer for every box (the 2 the staging cannot hold in the tile's last stage, released in the
// next tile once the copy engine had read them), one proxy fence and one bulk group per tile, no
// multiply when alpha == 1, and the tile's first wgmmas with scale-d 0 instead of zeroing the
// accumulators. Its gain stayed inside the spread of one sitting
// (h100_wgmma_ws_epi2_new_bf16.json against h100_wgmma_ws_epi2_base_bf16.json), so the code stays
// as it was: the waits and fences were not where the no-store probe's cost goes.
// GROUP 16 (ws.cuh; a wave's patch 16 x 8.25 tiles) reads less from DRAM than GROUP 8
// (h100_tune_wgmma_ws_group_*.json). The k-tile loop was long for its 4 HGMMAs: 64-bit descriptor
// adds, register pairs moved into uniform registers one wgmma at a time, the shared base recomputed
// every trip. 32-bit descriptor words over a constant high word, with the warpgroup index uniform to
// ptxas, cut the instructions executed by about a third (benchmarks/profiles/h100_profile_wgmma_ws_desc32_streamk0_fp16_4096.json
// against h100_profile_wgmma_ws_streamk0_fp16_4096.json): less issue and less power under the
// H100's cap, so a higher clock (h100_{fp16,bf16}_desc32_group16.json against
// h100_{fp16,bf16}_desc64_group8.json). At 4096^3 the rest is the partial wave and the epilogue: a
// timeline of one launch (h100_timeline_wgmma_ws_streamk0_fp16_4096.json) shows the gap from a
// tile's last wgmma to the next tile's first.
// The epilogues of a wave's blocks coincide, and so do their C writes; DEFER=1 (the
// default) holds a tile in registers and writes it during the next tile's k-tile loop (the section
// "the deferred epilogue" of ws_epi16.cuh; h100_{fp16,bf16}_defer.json); it is slower with 128x128 tiles,
// which keep DEFER=0.
// The store twin (GL_TMA_STORE_ONLY): this kernel built without the staged epilogue
// (store_tile), which a plan loads beside the full build where the TMA store serves every call with
// beta == 0 (EPI_TMA=1, C with a map, rows of whole 16-byte chunks) and launches for those calls
// (core/launch.py; Rung.store_twin, Variant.store_twin). Why: the staged epilogue, 16 unrolled
// 16-byte stores each with its guarded scalar fallback, is most of the kernel's code at 128x128 tiles,
// and ptxas lays it out between the main loop and the TMA store's code; at 128x14336x4096 rung 21
// trailed Triton at K = 64 in the timed interval, and not inside the kernel by Nsight
// Compute (docs/journal/hopper.md). Shrinking the staged path in place moved the k-tile loop's
// descriptors out of the uniform registers; the twin leaves the full build as it was. The twin
// saves a fixed fraction of a microsecond a launch at every shape
// (h100_store_twin_wgmma_ws_{bf16,fp16}.json.gz).
// A batch in one launch (GL_BATCHED=1; core/batched.py): the schedule numbers the units of every
// element of the batch, element after element (schedule.cuh), and each unit's loads and stores carry its
// element: the third coordinate of 3-D tensor maps, or a pointer offset for the thread copy and the
// staged stores. One launch for a batch of small products instead of one per element: the
// persistent blocks go from one element's tiles to the next's with the pipeline full, as they go
// from tile to tile of one product.
#include "common.cuh"
#include "hopper.cuh"

#if GL_DTYPE == 0
#error "rung 21 (wgmma_ws) needs GL_DTYPE 1 (fp16) or 2 (bf16): wgmma has no IEEE FP32 mode"
#endif
#ifndef GL_DYN_SMEM
#error "rung 21 (wgmma_ws) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "rung 21 (wgmma_ws) needs the sm_90a target (wgmma, setmaxnreg): compile for sm_90a"
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
#define GL_TMA_STORE_ONLY 0   // the store twin (the header's last paragraph): only the TMA store's epilogue
#endif
#define GL_WS_C_MAP 1     // the kernel takes C's tensor map after A's and B's (ws_entry.cuh)

// ---- geometry (the warpgroups, WGS, MI, CONSUMERS and CWARPS: hopper.cuh) ----------------------
constexpr int KSTEPS = BK / 16;               // k16 wgmma steps per k tile
// What the registry's constraints promise (core/families/hopper.py, ws_constraints), restated.
static_assert(THREADS == CONSUMERS + GL_WARPGROUP, "THREADS must be two consumer warpgroups plus a producer warpgroup");
static_assert((WM == 64 || WM == 128) && BM == 2 * WM, "two consumer warpgroups of 64 or 128 rows each");
static_assert(BN == 64 || BN == 128 || BN == 256, "a wgmma's N is the block's BN: 64, 128 or 256");
static_assert(STAGES >= 2, "the pipeline needs at least two stages");
static_assert(MI * BN / 2 <= 128, "at most 128 FP32 accumulators per thread");
static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two CTAs along M");

// ---- the stages' carve-up, how the operands arrive, the mbarrier ring and the producer's loads
// (ring.cuh, rung 19's), with the register split and the stream-K fixup of the persistent rungs --------
#include "ws.cuh"
// The epilogue's staging, apart from the stages (the producer refills those for the next tile while
// the consumers store this one): what the registry gives it (core/families/hopper.py, ws_smem),
// each consumer warp 16 rows x min(BN, 128) 16-bit outputs; the part chosen by C's type uses it.
constexpr int EPI_BUDGET_B = CWARPS * 16 * (BN < 128 ? BN : 128) * 2;

// the tile scheduler part (schedule.cuh): the persistent grouped walk, with a stream-K tail and over a
// batch as the build says
using Schedule = GlPersistentSchedule<BM, BN, BK, CLUSTER, GROUP_U, STREAMK, GL_BATCHED>;

#if GL_C_DTYPE == 0
constexpr bool REG_A = false;   // the accumulators' rows are the wgmma's own (ws_epi32.cuh's acc_row)
#include "ws_epi32.cuh"
using Epilogue = GlWsEpi32;     // an FP32 C (16-bit operands, out_dtype float32): direct or TMA stores of FP32
#else
#include "ws_epi16.cuh"
using Epilogue = GlWsEpi16;     // a 16-bit C: staged, TMA or deferred stores
#endif
constexpr int SMEM_NEED = 1024 + PIPE_B + EPI_BUDGET_B + 2 * STAGES * 8;   // 1024: aligning the base; then full[], empty[]
static_assert(SMEM_NEED <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");

// ---- main loop and epilogue: the consumer warpgroups (ws_consume.cuh), with both operands read from
// the stages by descriptor (mainloop.cuh) ------------------------------------------------------
#include "mainloop.cuh"
using Mainloop = GlMainloopSS<GL_A_COL, GL_B_COL>;
#include "ws_consume.cuh"

#include "ws_entry.cuh"   // the kernel entry: barriers, then the producer / consumer split
