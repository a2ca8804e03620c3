// Rung 17 — tensor cores through mma.sync, ldmatrix and a cp.async pipeline (FP16 / BF16 in,
// FP32 accumulate).      seed: none of the seeds goes this far; 002 ends at gemm_v07 (WMMA, a third of
// cuBLAS on an RTX 3090) and leaves its performance "as a future work": this rung is that work.
//
// What it changes against rung 16 (WMMA):
// * The math is PTX mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} (SASS HMMA.16816) on
//   fragments this kernel owns, instead of nvcuda::wmma's opaque 16x16x16 fragments. The warp
//   loads them with ldmatrix.x4 (LDSM): one instruction gives every lane its registers of four
//   8x8 matrices, an A fragment (16x16) or two B fragments (16x8 each). ldmatrix.trans transposes
//   on the way, so each operand's shared tile keeps its global layout whatever that is:
//     A row-major (K-contiguous)  As[BM][BK]  ldmatrix        A col-major (M-contiguous)  As[BK][BM]  ldmatrix.trans
//     B col-major (K-contiguous)  Bs[BN][BK]  ldmatrix        B row-major (N-contiguous)  Bs[BK][BN]  ldmatrix.trans
// * Global -> shared copies are cp.async.cg 16-byte copies (LDGSTS): they go to shared memory
//   without passing through registers, so no prefetch registers are spent on them (rung 16 held
//   the next tile in registers) and a deeper pipeline costs shared memory only. STAGES tiles are
//   in flight: while the warps multiply tile t, tiles t+1 .. t+STAGES-1 are loading
//   (cp.async.commit_group per tile, cp.async.wait_group STAGES-2 before a tile is read). Ragged
//   edges are zero-filled by the copy itself (src-size < 16 bytes), not by a separate path.
// * No padding: the shared rows are exactly the tile width, and the 16-byte chunks of a row are
//   permuted by an XOR swizzle (GlSwz below) so that the 8 rows an ldmatrix phase reads, and
//   the 8 chunks a cp.async phase writes, fall in 8 different 16-byte bank groups: both are free
//   of bank conflicts, and no shared memory is spent on padding.
// * The fragments of the next k-step are loaded (LDSM) while the tensor cores work on the current
//   one: two register sets alternate, across tile boundaries too (the barrier that publishes the
//   next tile is taken before the last k-step of the current one).
// Why it is faster: rung 16 stays far below cuBLAS
// (benchmarks/results/h100_fp16_wmma_mma_sync.json). It held a 2-stage pipeline whose loads went through
// registers, so the tensor cores idled on global-memory latency and on the stores into shared
// memory. Here the copies are asynchronous and STAGES deep, ldmatrix reads are conflict-free, and
// a 64x64 warp tile gives 32 HMMA.16816 per 8 LDSM.x4. Measured, it is more than twice as fast
// as rung 16 and inside its prediction, still well short of cuBLAS
// (benchmarks/results/h100_fp16_wmma_mma_sync.json, h100_bf16_wmma_mma_sync.json); the top stalls
// are "wait" (ldmatrix to mma dependencies) and "math pipe throttle" (docs/journal/ladder.md).
// The rest of the way is WGMMA + TMA (a later rung), which cuBLAS uses:
// on Hopper mma.sync does not reach the tensor cores' full rate, WGMMA (operands read from shared
// memory by a whole warpgroup) does.
//
// Geometry (defaults BM=128, BN=128, BK=32, WM=64, WN=64, STAGES=4): 4 warps as 2 x 2, each a 64x64
// warp tile = 4 x 8 mma tiles of 16x8 (128 FP32 accumulators per thread); BK = 32 is 2 k-steps of
// 16; the shared memory is STAGES x (BM*BK + BK*BN) x 2 B = 64 KB; about 240 registers per thread,
// so two blocks (8 warps) share an SM and one block's barrier no longer stalls the whole SM. The
// preset "128x256" (8 warps as 2 x 4, 3 stages, 72 KB, 230-254 registers in the 4 layouts and 8
// vector-access combinations on sm_90a and sm_80, no spills, one block per SM) halves the L2 ->
// shared traffic per flop instead; on the H100 it measured slower than 128x128 at 4096^3 (the
// benchmark's figures: benchmarks/results/h100_fp16_wmma_mma_sync.json and docs/journal/ladder.md).
// Epilogue: each warp stages 16 rows x WN of its FP32 accumulators in shared memory (reusing the
// pipeline buffers), then every lane takes 8 consecutive outputs, applies alpha/beta (C not read
// when beta == 0), converts to C's type TC (T, or an output dtype) and writes 16-byte stores
// (GL_VEC_C) or guarded scalar stores.
// Without 16-byte legality of A or B (GL_VEC_A/B = 0: unaligned base or leading dimension not a
// multiple of 8), that operand's copies are cp.async copies of the aligned 4-byte words its chunks
// lie in, into staging words after the tiles; each thread shifts its own chunks into the SAME
// swizzled tile before the barrier that publishes it (GlTileCopy::fixup), so the pipeline and the
// main loop are the same for any alignment.
// Split-K (SPLITK > 1, kernels/common.cuh): blockIdx.z takes a slice of K (A and B advance to it,
// K becomes its length) and the epilogue writes the FP32 partial tile to the workspace (gl_store_w8)
// instead of alpha/beta into C; splitk_reduce.cu sums the slices in a fixed order and converts.
// The cluster split (SKCLUSTER = 1, SPLITK = S of 2..8, sm_90; GL_SPLITK_CLUSTER, kernels/common.cuh):
// the S blocks of a tile are one thread-block cluster along z; each leaves its FP32 partial tile in
// its own shared memory (over the drained stages) and block z sums the z-th S-th of the tile over
// the S blocks (gl_cluster_split_store, tensor16.cuh) into C, one launch. Why: a small problem of a
// few tiles runs each tile's whole K as one chain of k tiles on one SM, a memory latency per
// STAGES-1 tiles, while the other SMs idle; the workspace split cuts the chain but adds a second
// launch and a round trip of C through memory, about as long again at that size.
#include "common.cuh"

#if GL_DTYPE == 0
#error "rung 17 (mma_sync) needs GL_DTYPE 1 (fp16) or 2 (bf16): the tensor cores have no IEEE FP32 mode"
#endif
#ifndef GL_DYN_SMEM
#error "rung 17 (mma_sync) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif

// ---- geometry -----------------------------------------------------------------------------
constexpr int WARPS_N = BN / WN;                  // warps along the columns of the block tile
constexpr int NWARPS = (BM / WM) * WARPS_N;       // == THREADS / 32
constexpr int FM = WM / 16;                       // m16 mma tiles per warp, down
constexpr int FN = WN / 8;                        // n8 mma tiles per warp, across
constexpr int KSTEPS = BK / 16;                   // k16 steps per block tile

__host__ __device__ constexpr bool gl_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }
// What the registry's constraints promise (core/families/tensor.py, mma_constraints), restated.
static_assert(NWARPS * 32 == THREADS, "THREADS must be 32 * (BM/WM) * (BN/WN)");
static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
static_assert(WM % 16 == 0 && WN % 16 == 0, "a warp tile is m16 x n16 pieces (one ldmatrix.x4 each for A and B)");
static_assert(BK % 32 == 0, "BK/16 k-steps must be even: the two fragment register sets alternate and every tile starts on set 0");
static_assert(gl_pow2(BM) && gl_pow2(BN) && gl_pow2(BK) && BM >= 16 && BN >= 16,
              "the XOR swizzle needs power-of-two tile widths of 16 elements or more");
static_assert(STAGES >= 2, "the cp.async pipeline needs at least two stages");

// ---- shared-memory tiles: [OUTER][INNER], INNER = the operand's contiguous dimension ----------
#if GL_A_COL
constexpr int A_OUTER = BK, A_INNER = BM;         // As[k][m]
#else
constexpr int A_OUTER = BM, A_INNER = BK;         // As[m][k]
#endif
#if GL_B_COL
constexpr int B_OUTER = BN, B_INNER = BK;         // Bs[n][k]
#else
constexpr int B_OUTER = BK, B_INNER = BN;         // Bs[k][n]
#endif
constexpr int A_STAGE = A_OUTER * A_INNER;        // elements per A stage
constexpr int B_STAGE = B_OUTER * B_INNER;        // elements per B stage
constexpr int AB_BYTES = STAGES * (A_STAGE + B_STAGE) * (int)sizeof(T);
constexpr int CS_LD = WN + 8;                     // FP32 staging row: +8 floats -> the float2 stores of 4 rows hit 4 distinct 8-bank groups
constexpr int CS_BYTES = NWARPS * 16 * CS_LD * (int)sizeof(float);
#if GL_SPLITK_CLUSTER
constexpr int PT_LD = BN + 8;                     // the cluster split's FP32 partial tile row (the staging's padding)
constexpr int PARTIAL_BYTES = BM * PT_LD * (int)sizeof(float);
#else
constexpr int PARTIAL_BYTES = 0;
#endif
constexpr int AFTER_BYTES = CS_BYTES > PARTIAL_BYTES ? CS_BYTES : PARTIAL_BYTES;   // what overlays the stages after the loop
constexpr int SMEM_BYTES = AB_BYTES > AFTER_BYTES ? AB_BYTES : AFTER_BYTES;
static_assert(SMEM_BYTES <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");

// ---- the XOR swizzle ---------------------------------------------------------------------------
// A tile row of INNER 16-bit elements is CPR = INNER/8 chunks of 16 bytes; shared memory has 32
// banks of 4 bytes = 8 chunk-sized bank groups, 128 bytes. Logical chunk c of row r is stored at
// chunk  c ^ ((r % 8) / RDIV)  of the same row, RDIV = 8 / min(CPR, 8):
//   CPR >= 8 (rows of 128 B or more): c ^ (r % 8) — 8 consecutive rows, same c: 8 distinct groups;
//   CPR = 4 (64 B rows, two per 128 B): c ^ ((r % 8) / 2) — r % 2 picks the half, the XOR the chunk;
//   CPR = 2 (32 B rows, four per 128 B): c ^ ((r % 8) / 4).
// Every ldmatrix 8x8 matrix is 8 consecutive rows (starting at a multiple of 8) at one logical
// chunk, and every 8 consecutive cp.async chunks of a thread-ordered copy are 8 consecutive chunks
// of one row (CPR >= 8) or whole rows: in both cases the 8 addresses of a phase cover the 8 bank
// groups once. The XOR stays inside the row (it changes the low log2(min(CPR, 8)) bits of c).
// tools/check_mma_layout.py checks this mapping, the fragment addressing below and the conflict
// freedom, and multiplies a block tile through an emulation of ldmatrix/mma.
template <int INNER>
struct GlSwz {
    static constexpr int CPR = INNER / 8;
    static constexpr int RDIV = 8 / (CPR < 8 ? CPR : 8);
    static_assert(CPR >= 2 && (CPR < 8 ? 8 % CPR == 0 : CPR % 8 == 0), "swizzle: 2, 4 or a multiple of 8 chunks per row");
    // element offset of (row r, logical chunk c) inside one stage
    static __device__ __forceinline__ int off(int r, int c) { return r * INNER + ((c ^ ((r & 7) / RDIV)) << 3); }
};
typedef GlSwz<A_INNER> SwA;
typedef GlSwz<B_INNER> SwB;

// ---- PTX wrappers ---------------------------------------------------------------------------
// ldmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8; register j receives matrix
// j's elements (row lane/4, columns 2*(lane%4), +1), or with .trans its transpose's.
template <bool TRANS>
__device__ __forceinline__ void gl_ldsm_x4(unsigned (&r)[4], unsigned addr) {
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

// ---- one operand's tile copies: global -> shared (swizzled) -------------------------------
// The operand is P(outer, inner) = P[outer * ld + inner], inner contiguous; its block tile is
// OUTER x INNER starting at (outer0, inner0), and k runs along inner (K_INNER: row-major A,
// column-major B) or along outer (column-major A, row-major B). Chunk v of the tile is row
// v / CPR, chunk v % CPR, and thread tid copies chunks tid, tid + THREADS, ...: consecutive
// threads copy consecutive 16-byte pieces of a row (coalesced), 8 consecutive threads write 8
// distinct bank groups, and all of a thread's chunks share one column (c) and step RSTEP rows.
// Everything that does not change along k is computed once; a tile costs one 64-bit multiply.
//
// Without 16-byte access (VEC = 0) the copies stay asynchronous: a chunk of 8 elements at any
// 2-byte alignment lies in 5 aligned 4-byte words (4 where it starts on a word), which cp.async
// copies 4 bytes at a time into this thread's STAGING words, zero-filling what lies past the row's
// end; once its group has landed (`fixup`, before the barrier that publishes the tile) the thread
// byte-permutes its own words into the 16-byte chunk of the swizzled tile. So the STAGES-deep
// pipeline holds here too: a copy that loaded through registers and stored at once waited a whole
// memory latency per chunk, which bounded small problems (the selection's tuning sample: a 64x64
// tile spent several times the aligned tile's time on a K of a few hundred).
template <int VEC, int OUTER, int INNER, bool K_INNER>
struct GlTileCopy {
    typedef GlSwz<INNER> Sw;
    static constexpr int CHUNKS = OUTER * INNER / 8;
    static constexpr int PER = (CHUNKS + THREADS - 1) / THREADS;
    static constexpr int RSTEP = THREADS / Sw::CPR;
    static constexpr int WORDS = 5;                                       // aligned words a chunk spans
    static constexpr int STAGING_B = VEC ? 0 : WORDS * PER * THREADS * 4;   // staging bytes per stage
    static constexpr unsigned WORD_STEP = PER * THREADS * 4;                // word i to word i + 1 of a chunk
    static_assert(THREADS % Sw::CPR == 0, "a row's chunks split evenly over the threads");
    static_assert(VEC || RSTEP % 2 == 0, "a thread's chunks share one 4-byte parity: an even row step");

    const T* first;       // this thread's first chunk in tile 0 (not dereferenced unless inside the matrix)
    size_t rstride;       // RSTEP rows, in elements
    size_t kstride;       // one tile along k, in elements: BK, or BK rows
    int outer_left;       // matrix rows (outer) from this thread's first row of tile 0
    int inner_left;       // matrix elements (inner) from this thread's chunk of tile 0
    int r0, c;            // this thread's first row and its chunk in the tile

    __device__ __forceinline__ GlTileCopy(const T* P, int ld, int outer0, int inner0, int n_outer, int n_inner, int tid)
        : r0(tid / Sw::CPR), c(tid % Sw::CPR) {
        first = P + ((size_t)(outer0 + r0) * ld + inner0 + 8 * c);
        rstride = (size_t)RSTEP * ld;
        kstride = K_INNER ? (size_t)BK : (size_t)BK * ld;
        outer_left = n_outer - (outer0 + r0);
        inner_left = n_inner - (inner0 + 8 * c);
    }
    // VEC = 0: the staging address of word 0 of this thread's chunk p (word i is i * WORD_STEP on):
    // the words of a chunk lie THREADS * PER words apart, so each of a warp's copies and reads of a
    // word touches 32 consecutive words
    __device__ __forceinline__ unsigned word0(unsigned staging, int p) const {
        return staging + (unsigned)((p * THREADS + (int)threadIdx.x) * 4);
    }
    // VEC = 0: whether its chunks start in the upper half of a 4-byte word (the same for all of
    // them: BK and RSTEP are even)
    __device__ __forceinline__ int odd() const { return (int)((reinterpret_cast<size_t>(first) >> 1) & 1); }

    // Block tile number kt into the stage at shared address `stage` (its staging words at `staging`):
    // cp.async of 16 bytes when VEC, else of the chunk's aligned words. A copy that reads nothing
    // (0 bytes) may name an address past the matrix.
    __device__ __forceinline__ void copy(unsigned stage, unsigned staging, int kt) const {
        const T* base = first + kt * kstride;
        const int ol = K_INNER ? outer_left : outer_left - kt * BK;
        const int il = K_INNER ? inner_left - kt * BK : inner_left;
        if constexpr (VEC) {
#pragma unroll
            for (int p = 0; p < PER; ++p) {
                if (CHUNKS % THREADS == 0 || r0 + p * RSTEP < OUTER) {
                    const bool in = ol > p * RSTEP && il > 0;
                    const unsigned dst = stage + (unsigned)(Sw::off(r0 + p * RSTEP, c) * (int)sizeof(T));
                    gl_cp<16>(dst, base + p * rstride, in ? (il >= 8 ? 16 : 2 * il) : 0);
                }
            }
        } else {
            // word i holds elements 2i - odd and 2i - odd + 1 of the chunk; element -1 (odd) is the
            // one before it in memory, read and dropped (the word is 4-byte aligned inside P's
            // allocation); an element at or past the row's end is not read. Word i's bytes:
            // 2 * (left - (2i - odd)), clamped to 0..4. One chunk at a time: the loop's registers
            // stay few beside the accumulators of the larger tiles.
            const int odd = this->odd();
#pragma unroll 1
            for (int p = 0; p < PER; ++p) {
                if (CHUNKS % THREADS == 0 || r0 + p * RSTEP < OUTER) {
                    const int twice = ol > p * RSTEP && il > 0 ? 2 * (il + odd) : 0;
                    const char* w = reinterpret_cast<const char*>(reinterpret_cast<size_t>(base + p * rstride) & ~(size_t)3);
                    const unsigned at = word0(staging, p);
#pragma unroll
                    for (int i = 0; i < WORDS; ++i)
                        gl_cp<4>(at + i * WORD_STEP, w + 4 * i,
                                 i == WORDS - 1 && !odd ? 0 : min(max(twice - 4 * i, 0), 4));
                }
            }
        }
    }

    // VEC = 0: this thread's chunks of the tile whose staging words are at `staging` (its copies'
    // group waited for) into the stage at `stage`, shifted by one element where `odd`.
    __device__ __forceinline__ void fixup(unsigned stage, unsigned staging) const {
        if constexpr (!VEC) {
            const int odd = this->odd();
#pragma unroll
            for (int p = 0; p < PER; ++p) {
                if (CHUNKS % THREADS == 0 || r0 + p * RSTEP < OUTER) {
                    unsigned w[WORDS];
#pragma unroll
                    for (int i = 0; i < WORDS; ++i)
                        asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(w[i]) : "r"(word0(staging, p) + i * WORD_STEP));
                    uint4 x;
                    x.x = odd ? __byte_perm(w[0], w[1], 0x5432) : w[0];
                    x.y = odd ? __byte_perm(w[1], w[2], 0x5432) : w[1];
                    x.z = odd ? __byte_perm(w[2], w[3], 0x5432) : w[2];
                    x.w = odd ? __byte_perm(w[3], w[4], 0x5432) : w[3];
                    gl_sts128(stage + (unsigned)(Sw::off(r0 + p * RSTEP, c) * (int)sizeof(T)), x);
                }
            }
        }
    }
};

// The two operands' copies, and after the block's tiles (and its epilogue's staging) the staging
// words of those without 16-byte access: STAGES of them each (the registry's mma_staging).
#if GL_A_COL
typedef GlTileCopy<GL_VEC_A, BK, BM, false> CopyA;   // A(m, k) at A[k*lda + m]
#else
typedef GlTileCopy<GL_VEC_A, BM, BK, true> CopyA;    // A(m, k) at A[m*lda + k]
#endif
#if GL_B_COL
typedef GlTileCopy<GL_VEC_B, BN, BK, true> CopyB;    // B(k, n) at B[n*ldb + k]
#else
typedef GlTileCopy<GL_VEC_B, BK, BN, false> CopyB;   // B(k, n) at B[k*ldb + n]
#endif
constexpr int STAGING_BYTES = STAGES * (CopyA::STAGING_B + CopyB::STAGING_B);
static_assert(SMEM_BYTES + STAGING_BYTES <= GL_DYN_SMEM,
              "the registry's shared-memory size (GL_DYN_SMEM) has no room for the unaligned operands' staging words");

// One block per SM is all the launch promises ptxas: without the minimum, ptxas (NVRTC 13.5) held the
// 64x64 tile's split variant with staged copies to 96 registers and spilled in its main loop, where
// 124 fit without spills.
extern "C" __global__ void __launch_bounds__(THREADS, 1) GL_SK_CLUSTER_DIMS
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, TC* C, int ldc GL_EPI_PARAMS)
{
    gl_pdl_wait();   // after an operand copy launched programmatically: the copy done (pack.cu)
    // One raw buffer, two views: the STAGES A tiles then the STAGES B tiles during the main loop,
    // then the FP32 per-warp staging tiles of the epilogue (or the cluster split's partial tile).
    extern __shared__ __align__(128) unsigned char smem[];
    constexpr unsigned A_STAGE_B = A_STAGE * sizeof(T), B_STAGE_B = B_STAGE * sizeof(T);   // bytes per stage
    const unsigned a_base = static_cast<unsigned>(__cvta_generic_to_shared(smem));   // [STAGES][A_OUTER][A_INNER] swizzled
    const unsigned b_base = a_base + STAGES * A_STAGE_B;                              // [STAGES][B_OUTER][B_INNER] swizzled

#if GL_SPLITK
    // split-K: this block's slice of K; its FP32 partial tile goes to the workspace slice W, with
    // alpha and beta left to the reduction kernel
    float* const W = gl_splitk_slice(A, lda, B, ldb, K, C, M, ldc, BK);
#elif GL_SPLITK_CLUSTER
    gl_splitk_advance(A, lda, B, ldb, K, BK);   // this block's slice of K, summed in the cluster
#endif
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;   // warp tile position in the block tile
    const int row0 = GL_TILE_ROW * BM, col0 = blockIdx.x * BN;
    const int ntiles = GL_CEIL_DIV(K, BK);

    // ---- load: the copies of both operands ----------------------------------------------------
#if GL_A_COL
    const CopyA copy_a(A, lda, 0, row0, K, M, tid);
#else
    const CopyA copy_a(A, lda, row0, 0, M, K, tid);
#endif
#if GL_B_COL
    const CopyB copy_b(B, ldb, col0, 0, N, K, tid);
#else
    const CopyB copy_b(B, ldb, 0, col0, K, N, tid);
#endif
    const unsigned a_staging = a_base + SMEM_BYTES;                                  // [STAGES][words] (VEC_A = 0)
    const unsigned b_staging = a_staging + STAGES * CopyA::STAGING_B;                // [STAGES][words] (VEC_B = 0)
    auto load_tiles = [&](int s, int kt) {
        copy_a.copy(a_base + s * A_STAGE_B, a_staging + s * CopyA::STAGING_B, kt);
        copy_b.copy(b_base + s * B_STAGE_B, b_staging + s * CopyB::STAGING_B, kt);
    };
    // the staged words of tile s's copies (waited for) into its stage, by the threads that copied them
    auto fixup_tiles = [&](int s) {
        copy_a.fixup(a_base + s * A_STAGE_B, a_staging + s * CopyA::STAGING_B);
        copy_b.fixup(b_base + s * B_STAGE_B, b_staging + s * CopyB::STAGING_B);
    };

    // ---- fragment addresses (the PTX ISA's mma.m16n8k16 fragment layouts) ----------------------
    // ldmatrix.x4 matrix q = lane / 8, its row i8 = lane % 8; every 8x8 matrix starts at a row
    // that is a multiple of 8, so the swizzle's XOR term is s = i8 / RDIV for all of them.
    // A fragment (16x16 at m0, k0): registers a0..a3 = (m0-7, k0-7), (m8-15, k0-7), (m0-7, k8-15),
    // (m8-15, k8-15). B fragments of n8 tiles 2*j2, 2*j2+1 (n0 = 16*j2): (k0-7, n0-7),
    // (k8-15, n0-7), (k0-7, n8-15), (k8-15, n8-15) = b0, b1 of tile 2*j2, then of tile 2*j2+1.
    // The byte offset of (row r, chunk c) is r * 2*INNER + ((c ^ s) * 16): row and chunk are
    // separate bit fields, and with power-of-two tiles every step below either adds to the row
    // field (a constant offset) or flips chunk bits that are zero in the step's base (an XOR with
    // a constant). So each lane keeps one offset per operand and each ldmatrix adds or XORs a
    // compile-time constant (tools/check_mma_layout.py checks this against the plain formula).
    const int q = lane / 8, i8 = lane % 8;
#if GL_A_COL
    // As[k][m], .trans: matrix q = rows k0 + 8*(q/2) + i8, chunk (m0 + 8*(q%2)) / 8, m0 = wm*WM + 16*i
    const unsigned a_lane = (8 * (q / 2) + i8) * (2 * BM) + ((((wm * WM) / 8) ^ (q % 2) ^ (i8 / SwA::RDIV)) << 4);
    auto a_off = [&](int i, int kk) -> unsigned { return (a_lane ^ (32u * i)) + kk * (32u * BM); };
#else
    // As[m][k]: matrix q = rows m0 + 8*(q%2) + i8, m0 = wm*WM + 16*i, chunk (k0 + 8*(q/2)) / 8, k0 = 16*kk
    const unsigned a_lane = (wm * WM + 8 * (q % 2) + i8) * (2 * BK) + (((q / 2) ^ (i8 / SwA::RDIV)) << 4);
    auto a_off = [&](int i, int kk) -> unsigned { return (a_lane ^ (32u * kk)) + i * (32u * BK); };
#endif
#if GL_B_COL
    // Bs[n][k]: matrix q = rows n0 + 8*(q/2) + i8, n0 = wn*WN + 16*j2, chunk (k0 + 8*(q%2)) / 8
    const unsigned b_lane = (wn * WN + 8 * (q / 2) + i8) * (2 * BK) + (((q % 2) ^ (i8 / SwB::RDIV)) << 4);
    auto b_off = [&](int j2, int kk) -> unsigned { return (b_lane ^ (32u * kk)) + j2 * (32u * BK); };
#else
    // Bs[k][n], .trans: matrix q = rows k0 + 8*(q%2) + i8, chunk (n0 + 8*(q/2)) / 8, n0 = wn*WN + 16*j2
    const unsigned b_lane = (8 * (q % 2) + i8) * (2 * BN) + ((((wn * WN) / 8) ^ (q / 2) ^ (i8 / SwB::RDIV)) << 4);
    auto b_off = [&](int j2, int kk) -> unsigned { return (b_lane ^ (32u * j2)) + kk * (32u * BN); };
#endif

    unsigned af[2][FM][4];      // A fragments, two register sets (k-step parity)
    unsigned bf[2][FN][2];      // B fragments, two register sets
    float acc[FM][FN][4];       // the warp's WM x WN tile of C, FP32
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    auto load_frags = [&](int set, int s, int kk) {
        const unsigned as = a_base + s * A_STAGE_B, bs = b_base + s * B_STAGE_B;
#pragma unroll
        for (int i = 0; i < FM; ++i) gl_ldsm_x4<GL_A_COL == 1>(af[set][i], as + a_off(i, kk));
#pragma unroll
        for (int j2 = 0; j2 < FN / 2; ++j2) {
            unsigned r[4];
            gl_ldsm_x4<GL_B_COL == 0>(r, bs + b_off(j2, kk));
            bf[set][2 * j2][0] = r[0]; bf[set][2 * j2][1] = r[1];
            bf[set][2 * j2 + 1][0] = r[2]; bf[set][2 * j2 + 1][1] = r[3];
        }
    };

    // ---- prologue: tiles 0 .. STAGES-2 in flight, one commit group each (group g is tile g; a
    // tile past K zero-fills its stage); wait for tile 0 and take its first fragments -----------
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        load_tiles(s, s);
        gl_cp_commit();
    }
    gl_cp_wait<STAGES - 2>();
    fixup_tiles(0);
    __syncthreads();
    load_frags(0, 0, 0);

    // ---- main loop ------------------------------------------------------------------------------
    // Iteration t multiplies tile t (stage t % STAGES). At its first k-step it issues the copies of
    // tile t + STAGES - 1 into stage (t - 1) % STAGES, which every warp finished reading before the
    // barrier of iteration t - 1. Before its last k-step it waits for tile t + 1 (groups committed:
    // STAGES - 1 + t + 1; tile t + 1 is group t + 1, so STAGES - 2 may stay pending) and takes the
    // barrier, so the fragments of tile t + 1's first k-step load while the last HMMAs of tile t run.
    int rd = 0, wr = STAGES - 1;    // stage read by this iteration, stage written by its copies
    for (int t = 0; t < ntiles; ++t) {
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            if (kk == KSTEPS - 1) {
                gl_cp_wait<STAGES - 2>();
                rd = rd + 1 == STAGES ? 0 : rd + 1;
                fixup_tiles(rd);     // (operands without 16-byte access; past K it writes zeros nobody reads)
                __syncthreads();
            }
            load_frags((kk + 1) % 2, rd, (kk + 1) % KSTEPS);    // next k-step's fragments (next tile's at the last)
            if (kk == 0) {
                // Past the last tile (the last STAGES-1 iterations) every copy is out of range along
                // k and zero-fills a stage nobody reads: no branch in the loop, and the commit
                // group still stands for tile t + STAGES - 1.
                load_tiles(wr, t + STAGES - 1);
                gl_cp_commit();
                wr = wr + 1 == STAGES ? 0 : wr + 1;
            }
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) gl_mma16816(acc[i][j], af[kk % 2][i], bf[kk % 2][j]);
        }
    }

    // ---- epilogue: accumulators -> FP32 staging (per warp, 16 rows at a time) -> alpha/beta -> TC
    // -> C. The last iteration's fragment load read a stage this staging overlays: wait for every
    // copy and every warp first. -------------------------------------------------------------------
    gl_cp_wait<0>();
    __syncthreads();
#if GL_SPLITK_CLUSTER
    {   // the partial tile [BM][PT_LD] over the stages, from the fragments
        float (*pt)[PT_LD] = reinterpret_cast<float (*)[PT_LD]>(smem);
#pragma unroll
        for (int i = 0; i < FM; ++i) gl_partial_warp16<WN, PT_LD>(pt, acc[i], wm * WM + 16 * i, wn * WN, lane);
    }
    gl_cluster_split_store<BM, BN, PT_LD, THREADS>(a_base, C, ldc, M, N, row0, col0, GL_EPI(alpha, beta));
#else
    float (*Cs)[16][CS_LD] = reinterpret_cast<float (*)[16][CS_LD]>(smem);           // [NWARPS][16][WN+8]
#pragma unroll
    for (int i = 0; i < FM; ++i)
#if GL_SPLITK
        gl_store_warp16<WN>(Cs[warp], acc[i], W, ldc, M, N, row0 + wm * WM + i * 16, col0 + wn * WN, GL_EPI(alpha, beta), lane);
#else
        gl_store_warp16<WN>(Cs[warp], acc[i], C, ldc, M, N, row0 + wm * WM + i * 16, col0 + wn * WN, GL_EPI(alpha, beta), lane);
#endif
#endif
}
