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
//   default: the fewest that take no more waves, ws.cuh), each
//   looping over output tiles in a static grouped order (Schedule below). Rung 19 launches one
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
// "the deferred epilogue" below; h100_{fp16,bf16}_defer.json); it is slower with 128x128 tiles,
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
// element of the batch, element after element (ws.cuh), and each unit's loads and stores carry its
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
// What the registry's constraints promise (core/registry.py, _ws_constraints), restated.
static_assert(THREADS == CONSUMERS + GL_WARPGROUP, "THREADS must be two consumer warpgroups plus a producer warpgroup");
static_assert((WM == 64 || WM == 128) && BM == 2 * WM, "two consumer warpgroups of 64 or 128 rows each");
static_assert(BN == 64 || BN == 128 || BN == 256, "a wgmma's N is the block's BN: 64, 128 or 256");
static_assert(BK % 64 == 0 && BK <= 256, "BK is whole 128-byte swizzle rows (64 elements) and a TMA box side (<= 256)");
static_assert(STAGES >= 2, "the pipeline needs at least two stages");
static_assert(MI * BN / 2 <= 128, "at most 128 FP32 accumulators per thread");
static_assert(CLUSTER == 1 || CLUSTER == 2, "clusters of one or two CTAs along M");

// ---- shared-memory carve-up: rung 19's stages, then the epilogue's own staging (see below) ----
#if GL_A_COL
constexpr int A_PANELS = BM / 64, A_ROWS = BK;        // MN-major: [BK][64 m] per 64 rows of the tile
#else
constexpr int A_PANELS = BK / 64, A_ROWS = BM;        // K-major: [BM][64 k] per 64 k
#endif
#if GL_B_COL
constexpr int B_PANELS = BK / 64, B_ROWS = BN;        // K-major: [BN][64 k] per 64 k
#else
constexpr int B_PANELS = BN / 64, B_ROWS = BK;        // MN-major: [BK][64 n] per 64 columns
#endif
constexpr int A_PANEL_B = A_ROWS * GL_ROW_B, B_PANEL_B = B_ROWS * GL_ROW_B;
constexpr int A_STAGE_B = A_PANELS * A_PANEL_B, B_STAGE_B = B_PANELS * B_PANEL_B;
constexpr int PIPE_B = STAGES * (A_STAGE_B + B_STAGE_B);
// Epilogue staging, apart from the stages (the producer refills those for the next tile while the
// consumers store this one): each consumer warp owns 16 rows x EPI_N outputs of the output type
// (4 KB at EPI_N = 128), through which its 16 rows of each m64 block pass in BN / EPI_N column
// passes. 128 columns, not 256: 32 KB in all keeps 4 stages of 128x256x64 (192 KB) within a
// block's 227 KB; a whole 128x256 tile (64 KB) would cost a stage.
constexpr int EPI_N = BN < 128 ? BN : 128;
constexpr int EPI_WARP_B = 16 * EPI_N * 2;
constexpr int EPI_B = CWARPS * EPI_WARP_B;
constexpr int SMEM_NEED = 1024 + PIPE_B + EPI_B + 2 * STAGES * 8;   // 1024: aligning the base; then full[], empty[]
static_assert(A_PANEL_B % 1024 == 0 && B_PANEL_B % 1024 == 0, "panels keep the 1024-byte swizzle alignment");
// The TMA store epilogue (store_tile_tma) uses the same staging as boxes of 16 rows x 64 outputs (one
// 128-byte swizzle row each: 2 KB), EPI_BUFS of them per warp, each on the swizzle's 1024-byte period.
constexpr int BOX_N = GL_ROW_B / 2, BOX_B = 16 * GL_ROW_B;
constexpr int EPI_BUFS = EPI_WARP_B / BOX_B;
static_assert(PIPE_B % 1024 == 0 && EPI_WARP_B % BOX_B == 0 && BN % BOX_N == 0,
              "the staging holds whole 2 KB boxes on the swizzle's period, and a tile whole boxes");
// The TMA store needs C describable by a tensor map (GL_VEC_C: 16-byte aligned base, row stride a
// multiple of 16 bytes), beta == 0 (it writes C without reading it) and rows of whole 16-byte chunks
// (N % 8 == 0: the copy engine writes whole chunks, and past a ragged row's end they would land in
// the memory after it); the last two are the launch's (tma_store_now), the host's map follows them.
constexpr bool TMA_STORE = EPI_TMA && GL_VEC_C;
constexpr int STORE_CHUNK = 16 / (int)sizeof(T);    // outputs per 16-byte chunk
__device__ __forceinline__ bool tma_store_now(int N, float beta) {
    return GL_TMA_STORE_ONLY || (TMA_STORE && beta == 0.0f && N % STORE_CHUNK == 0);
}
static_assert(!GL_TMA_STORE_ONLY || TMA_STORE, "the store twin is built only where the TMA store is (EPI_TMA=1, GL_VEC_C)");
static_assert(SMEM_NEED <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");

// ---- how the operands arrive (ws.cuh derives the barriers' counts and the register split) -------
// TMA_ONLY: both operands come by TMA, issued by one thread; otherwise the producer warpgroup's 128
// threads copy what TMA cannot describe (GlOperand::copy) and each arrives on the full barrier.
constexpr bool TMA_ONLY = GL_VEC_A && GL_VEC_B;
// B multicast: the CLUSTER CTAs of a cluster compute vertically adjacent tiles of one column tile,
// so they need the same B tile; each loads 1/CLUSTER of it and the copy engine writes it to all.
constexpr bool MCAST_B = CLUSTER > 1 && GL_VEC_B;
// Bytes the copy engine delivers to THIS CTA per stage: its A tile and the whole B tile (with
// multicast, part of B comes from the peer's TMA, counted on this CTA's barrier all the same).
constexpr unsigned TX_BYTES = (GL_VEC_A ? A_STAGE_B : 0) + (GL_VEC_B ? B_STAGE_B : 0);

#include "ws.cuh"     // the persistent schedule, the mbarrier ring, the producer's load loop

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
};
template <int F>
__device__ __forceinline__ uint2 epi_pairs(const float (&a)[4], const GlEpi& ep, bool fin, const EpiBias<F>& b, int f) {
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        v[e] = ep.alpha * a[e];
        if (!GL_EPI_PLAIN && fin) v[e] = ep.apply(v[e], b.col[f][e % 2] + b.row[e / 2]);
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
template <int F>
__device__ __forceinline__ EpiBias<F> epi_bias(const GlEpi& ep, int i0, int j0, int f0, int lane) {
    EpiBias<F> b;
    constexpr int G = (F + 7) / 8;                    // groups of 64 columns
    float2 mine[G];
#pragma unroll
    for (int g = 0; g < G; ++g) mine[g] = ep.bias_pair(j0 + 8 * f0 + 64 * g + 2 * lane);
#pragma unroll
    for (int f = 0; f < F; ++f) {
        const int from = 4 * (f % 8) + lane % 4;
        b.col[f][0] = GL_BIAS && !GL_BIAS_ROW ? __shfl_sync(0xffffffffu, mine[f / 8].x, from) : 0.0f;
        b.col[f][1] = GL_BIAS && !GL_BIAS_ROW ? __shfl_sync(0xffffffffu, mine[f / 8].y, from) : 0.0f;
    }
    // a row bias: lane l loads row l % 16 of the warp's 16; rows g and g + 8 come from lanes g, g + 8
    const float row = ep.bias_row(i0 + lane % 16);
    b.row[0] = GL_BIAS && GL_BIAS_ROW ? __shfl_sync(0xffffffffu, row, lane / 4) : 0.0f;
    b.row[1] = GL_BIAS && GL_BIAS_ROW ? __shfl_sync(0xffffffffu, row, lane / 4 + 8) : 0.0f;
    return b;
}

// ---- epilogue staging: COLS columns of one warp's 16 rows of an m64 block, rounded (epi_pairs) ---
// From fragment f0 on (8 columns each), by stmatrix (16 rows x 16 columns per instruction: matrices
// 0 / 1 are rows 0-7 / 8-15 of 8 columns, 2 / 3 the next 8) into swizzled rows: lane l names row
// l % 16, whose staging starts at row_at, and 16-byte chunk 2 jj + l / 16 of it, stored at chunk
// (2 jj + l / 16) ^ (l % 8) = 2 jj ^ st_x (2 jj has no bit 0).
template <int COLS>
__device__ __forceinline__ void stage_cols(const float (&acc)[BN / 8][4], int f0, unsigned row_at, int st_x,
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
// per store (gl_store_c8_rounded: beta, ragged edges, unaligned C); a warp's store covers two rows
// of 256 contiguous bytes. The staging is swizzled like the operand panels, 16-byte chunk c of row
// r at chunk c ^ (r % 8): the 8 rows of one stmatrix matrix, and the 8 chunks a quarter-warp reads,
// fall on 8 distinct 16-byte bank groups (no conflicts, no padding). Only __syncwarp: the staging
// is the warp's own. Against storing from the fragments (rung 21 before: 64 4-byte stores per
// thread at BN = 256, each instruction touching 8 rows): 16 stores of 16 bytes, 16 stmatrix, 16
// loads of 16 bytes, so both consumer warpgroups get back to the next tile's wgmmas sooner.
// PASS_N (default EPI_N): the columns of a pass; DEFER=1 passes 64 (half the loads in flight: its held
// tile is live here too, and with 8 in flight ptxas spilled 16 bytes).
template <int PASS_N = EPI_N>
__device__ __forceinline__ void store_tile(const float (&acc)[MI][BN / 8][4], unsigned stage, int lane, T* C, int ldc,
                                           int M, int N, int i0, int j0, const GlEpi& ep) {
    constexpr int ROW_B = PASS_N * 2, CHUNKS = PASS_N / 8;   // bytes and 16-byte chunks of a staged row
    static_assert(PASS_N <= EPI_N && BN % PASS_N == 0, "a pass fits the staging, and a tile is whole passes");
    // stmatrix (stage_cols): lane l names row l % 16 of the pass's staging
    const unsigned st_at = stage + (lane % 16) * ROW_B;
    const int st_x = (lane / 16) ^ (lane % 8);
    const bool fin = ep.beta == 0.0f;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int p = 0; p < BN / PASS_N; ++p) {
            const EpiBias<PASS_N / 8> bias = epi_bias<PASS_N / 8>(ep, i0 + mi * 64, j0, p * PASS_N / 8, lane);
            stage_cols<PASS_N>(acc[mi], p * PASS_N / 8, st_at, st_x, ep, fin, bias);
            __syncwarp();                             // the staged pass visible to the whole warp
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
__device__ __forceinline__ void store_tile_tma(const float (&acc)[MI][BN / 8][4], unsigned stage, int lane,
                                               const GlTensorMap* tmC, int M, int N, int i0, int j0, int z,
                                               const GlEpi& ep) {
    // stmatrix (stage_cols): lane l names row l % 16 of a box (one 128-byte row each)
    const unsigned st_row = stage + (lane % 16) * GL_ROW_B;
    const int st_x = (lane / 16) ^ (lane % 8);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int bx = 0; bx < BN / BOX_N; ++bx) {
            // the box's bias, loaded before the wait for its buffer
            const EpiBias<BOX_N / 8> bias = epi_bias<BOX_N / 8>(ep, i0 + mi * 64, j0, bx * BOX_N / 8, lane);
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
// A fused bias or activation (epilogue.cuh) is not deferred: applied while holding, beside the 128
// accumulators and the 64 held registers, it spilled at 128x256 for some activations; applied
// as each held box was written, it spilled for most (and where it fitted, the plan's
// fallback to DEFER=0 had taken over under the device's NVRTC anyway).
constexpr bool DEFERRED = DEFER && TMA_ONLY && TMA_STORE && GL_EPI_PLAIN;
constexpr int NBOX = MI * (BN / BOX_N);       // boxes of a warp's share of a tile
constexpr int BOX_F = BOX_N / 8;              // accumulator fragments (8 columns) per box row
// a held box: fragment f's 4 values as 2 packed pairs, (a0, a1) and (a2, a3)
__device__ __forceinline__ void hold_tile(unsigned (&held)[NBOX][BOX_F][2], const float (&acc)[MI][BN / 8][4],
                                          float alpha) {
#pragma unroll
    for (int c = 0; c < NBOX; ++c)
#pragma unroll
        for (int f = 0; f < BOX_F; ++f) {
            const float (&a)[4] = acc[c / (BN / BOX_N)][(c % (BN / BOX_N)) * BOX_F + f];
            held[c][f][0] = gl_pack2(alpha * a[0], alpha * a[1]);
            held[c][f][1] = gl_pack2(alpha * a[2], alpha * a[3]);
        }
}
// The held registers set to a constant once written: ptxas cannot see that a piece after a stream-K
// piece that published reads nothing held, so without this it kept the written tile live through
// stream-K's fixup (~100 bytes spilled at 128x256); constants it rematerializes instead.
__device__ __forceinline__ void hold_nothing(unsigned (&held)[NBOX][BOX_F][2]) {
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
__device__ __forceinline__ unsigned stage_held_box(int cb, const unsigned (&h)[BOX_F][2], unsigned stage) {
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
__device__ __forceinline__ void write_held_box_tma(int cb, const unsigned (&h)[BOX_F][2], unsigned stage, int lane,
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
// ---- main loop and epilogue: the consumer warpgroups ------------------------------------------
__device__ __forceinline__ void consume(const Smem& sm, const Schedule& sched, int rank, int warp, int lane,
                                        int M, int N, const GlEpi& ep, T* C, int ldc, float* sk_ws,
                                        const GlTensorMap* tmC) {
    // this warpgroup (its WM rows: wg * WM ..), through a shuffle from lane 0, so that ptxas sees it is
    // the same in every lane (CUTLASS does the same) and keeps the descriptors in uniform registers
    const int wg = __shfl_sync(0xffffffffu, warp / 4, 0);
    // this warpgroup's descriptors (hopper.cuh): its WM rows of A, all of B
    const GlStageDescs<GL_A_COL, GL_B_COL, A_PANEL_B, B_PANEL_B> descs(sm.a_base, sm.b_base, wg * WM);
    auto release = [&](int s) { sm.release(s, lane, rank); };
    // warp % 4 owns 16 rows of each m64 block (the C-fragment layout), and its own staging
    const int warp_row = wg * WM + 16 * (warp % 4);
    const unsigned stage = sm.epi + warp * EPI_WARP_B;
    const bool tma = tma_store_now(N, ep.beta);
    if (tma && warp == 0 && lane == 0) gl_tma_prefetch(tmC);   // C's map cached before any store

    float acc[MI][BN / 8][4];
    Ring ring;
    // DEFERRED: the held tile, its first row (this warp's), column and batch element, and its next
    // box to write (NBOX: none held)
    unsigned held[NBOX][BOX_F][2];
    int held_row = 0, held_col = 0, held_z = 0, held_next = NBOX;
    // box b of the held tile by TMA, b known at run time only (the registers are named by constants)
    auto write_held = [&](int b) {
#pragma unroll
        for (int c = 0; c < NBOX; ++c)
            if (c == b) write_held_box_tma(c, held[c], stage, lane, tmC, M, N, held_row, held_col, held_z);
    };
    // every box of the held tile not yet written
    auto write_rest = [&]() {
#pragma unroll
        for (int c = 0; c < NBOX; ++c)
            if (c >= held_next) write_held_box_tma(c, held[c], stage, lane, tmC, M, N, held_row, held_col, held_z);
        held_next = NBOX;
    };
    sched.walk(blockIdx.x / CLUSTER, [&](int u, int k0, int k1) {
        const int2 t = sched.tile(u, rank);
        const int row0 = t.x * BM, col0 = t.y * BN;
        gl_zero_acc(acc);
        // the held tile's boxes go out during this piece, one every `gap` k tiles over its first half,
        // the first not before the second k tile (at the first, every block of the wave starts its
        // next tile's loads together)
        const int gap = max(1, (k1 - k0) / (2 * NBOX));
        int write_at = DEFERRED && held_next < NBOX ? k0 + gap / 2 + 1 : -1;

        // k tile kt: wait until its bytes are in, issue its KSTEPS x MI wgmmas as one commit group,
        // then wait for the group of k tile kt - 1 (one group stays in flight while the next
        // barrier is awaited) and release kt - 1's stage.
        // DEFERRED: in runs of k tiles up to the next box to write, which is written between the runs
        // with the run's last wgmmas in flight (inside the loop, the write made ptxas move the loop's
        // descriptors out of the uniform registers, and the loop grew)
        int prev = 0, kt = k0;
        for (;;) {
            const int stop = write_at >= 0 ? min(k1, write_at + 1) : k1;
            for (; kt < stop; ++kt) {
                const int s = ring.s;
                gl_mbar_wait(sm.full(s), ring.phase);
                gl_wgmma_ktile<BN, MI, KSTEPS, GL_A_COL, GL_B_COL>(acc, descs, s * A_STAGE_B, s * B_STAGE_B);
                if (kt > k0) release(prev);
                prev = s;
                ring.next();
            }
            if (!DEFERRED || kt >= k1) break;
            write_held(held_next);
            write_at = ++held_next < NBOX ? write_at + gap : -1;
        }
        gl_wgmma_wait<0>();
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) gl_fence_acc(acc[mi]);
        release(prev);          // the tile's last stage: the producer refills it during the epilogue
        if (DEFERRED) {         // what a short piece left of the held tile
            write_rest();
            hold_nothing(held);
        }
        // a stream-K piece: published for the CTA that stores the tile, or the others' added to it
        if (!sk_fixup(sched, acc, u, k0, k1, sk_ws)) return;

        // ---- epilogue: through the warp's own staging (the stages belong to the next tile by
        // now); a tile wholly below M (rank 1 of a cluster's last unit row) stores nothing; with
        // DEFERRED, a tile for TMA is held until the next piece's main loop (or the end of the walk),
        // and one stored by rows goes in passes of 64 columns -------
        if (row0 < M) {
            if (DEFERRED && tma) {
                hold_tile(held, acc, ep.alpha);   // DEFERRED: the plain epilogue (alpha alone)
                held_row = row0 + warp_row;
                held_col = col0;
                held_z = sched.batch_of(u);
                held_next = 0;
            } else if (tma) {
                store_tile_tma(acc, stage, lane, tmC, M, N, row0 + warp_row, col0, sched.batch_of(u), ep);
            } else {
#if !GL_TMA_STORE_ONLY   // the twin: the host launches it only where the TMA store serves
                store_tile<DEFERRED ? BOX_N : EPI_N>(acc, stage, lane, C + sched.batch_of(u) * sched.stride_c(), ldc, M,
                                                     N, row0 + warp_row, col0, ep);
#endif
            }
        }
    });
    if (DEFERRED) write_rest();   // the last tile
    // every TMA store complete before the block exits (its staging is freed with it)
    if (tma && lane == 0) gl_bulk_wait<0>();
}

#include "ws_entry.cuh"   // the kernel entry: barriers, then the producer / consumer split
