// Rung 16 — tensor cores through WMMA (FP16 / BF16 in, FP32 accumulate).      seed: 002 gemm_v07
//
// What it changes against rung 15 (warp tiling, FP32 FFMA on the CUDA cores): the block tile ->
// warp tile hierarchy stays (BM x BN per block, WM x WN per warp), but the warp no longer splits
// its tile into per-thread TM x TN register tiles of FFMAs. It hands 16x16x16 products to the
// tensor cores through nvcuda::wmma: fragments are loaded from shared memory with
// wmma::load_matrix_sync (LDSM), multiplied with wmma::mma_sync (HMMA, FP32 accumulators) and
// written back with wmma::store_matrix_sync. Inputs are FP16 or BF16 (the tensor cores have no
// IEEE FP32 mode); C is in the input dtype, the accumulation in FP32.
// Why it is faster: one HMMA.16816 does 4096 multiply-adds for a warp, where the FFMA path needs
// 128 warp instructions plus their LDS feeding; the issue slots and the register-file bandwidth
// that bounded rung 15 are no longer the limit. Half-width inputs also halve the bytes per tile
// in global and shared memory. What remains is feeding the tensor cores: 16-byte global loads
// (LDG.E.128, 8 halves), shared rows padded by 8 halves so that the fragment loads are
// conflict-free, and a two-stage shared-memory pipeline with a register prefetch (as rung 14) so
// that the next tile's global loads are in flight during the current tile's HMMAs (one barrier
// per K tile).
// Layouts: each operand's shared tile keeps the global layout (the copy is a straight 16-byte
// copy, never a transpose) and the fragment layout follows it: row-major A -> As[BM][BK+8] with
// wmma::row_major, column-major A -> As[BK][BM+8] with wmma::col_major; likewise B. So all four
// A/B combinations take the vector path.
// Epilogue: each warp stores 16 x WN of its accumulators at a time as FP32 to a per-warp staging
// tile in shared memory (reusing the A/B buffers), then every lane takes 8 consecutive outputs,
// applies alpha/beta (C not read when beta == 0), converts to C's type TC (T, or an output dtype:
// FP32 or the other 16-bit type) and writes one 16-byte store per 8 16-bit outputs, two per 8 FP32
// (or guarded scalar stores at the edges / without GL_VEC_C).
// Seed: 002 v07 left its WMMA kernel's performance, well short of cuBLAS, as "future work".
// This rung on the H100 beside cuBLAS and Triton, measured in one run: benchmarks/results/
// h100_fp16_wmma_mma_sync.json and h100_bf16_wmma_mma_sync.json (`gemmlab bench --dtype fp16|bf16`).
#include "common.cuh"
#include <mma.h>

#if GL_DTYPE == 0
#error "rung 16 (wmma) needs GL_DTYPE 1 (fp16) or 2 (bf16): the tensor cores have no IEEE FP32 mode"
#endif

namespace wmma = nvcuda::wmma;

// ---- geometry -----------------------------------------------------------------------------
constexpr int WARPS_N = BN / WN;                  // warps along the columns of the block tile
constexpr int NWARPS = (BM / WM) * WARPS_N;       // == THREADS / 32
constexpr int FM = WM / 16;                       // accumulator fragments per warp, down
constexpr int FN = WN / 16;                       // accumulator fragments per warp, across
constexpr int KF = BK / 16;                       // 16-deep k steps per block tile
constexpr int PAD = 8;                            // halves of padding per shared row (16 bytes)
static_assert(NWARPS * 32 == THREADS, "THREADS must be 32 * (BM/WM) * (BN/WN)");
static_assert(WM % 16 == 0 && WN % 16 == 0 && BK % 16 == 0, "WMMA tiles are 16x16x16");

// Shared tiles keep the global layout of their operand: [OUTER][INNER + PAD], INNER being the
// contiguous dimension in global memory (8 halves = one 16-byte vector).
#if GL_A_COL
constexpr int A_OUTER = BK, A_INNER = BM;         // As[k][m]
typedef wmma::col_major ALayout;
#else
constexpr int A_OUTER = BM, A_INNER = BK;         // As[m][k]
typedef wmma::row_major ALayout;
#endif
#if GL_B_COL
constexpr int B_OUTER = BN, B_INNER = BK;         // Bs[n][k]
typedef wmma::col_major BLayout;
#else
constexpr int B_OUTER = BK, B_INNER = BN;         // Bs[k][n]
typedef wmma::row_major BLayout;
#endif
constexpr int A_LD = A_INNER + PAD;               // ldm of the A fragments (multiple of 8 halves)
constexpr int B_LD = B_INNER + PAD;
constexpr int CS_LD = WN + 4;                     // ldm of the FP32 staging tile (multiple of 4 floats)

constexpr int A_STAGE = A_OUTER * A_LD;           // halves per A stage
constexpr int B_STAGE = B_OUTER * B_LD;           // halves per B stage
constexpr int AB_BYTES = 2 * (A_STAGE + B_STAGE) * (int)sizeof(T);
constexpr int CS_BYTES = NWARPS * 16 * CS_LD * (int)sizeof(float);
constexpr int SMEM_BYTES = AB_BYTES > CS_BYTES ? AB_BYTES : CS_BYTES;
// The buffer is dynamic shared memory sized by the registry (Rung.smem, passed as GL_DYN_SMEM):
// tiles whose stages need more than 48 KB run with the launch's opt-in to the device's maximum.
#ifndef GL_DYN_SMEM
#error "rung 16 (wmma) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif
static_assert(SMEM_BYTES <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");
// wmma pointers must be 32-byte aligned: stage sizes and fragment offsets are multiples of 32 B.
static_assert((A_STAGE * sizeof(T)) % 32 == 0 && (B_STAGE * sizeof(T)) % 32 == 0, "stage alignment");

// 8-element vectors per tile and per thread (the last round is guarded when it does not divide).
constexpr int A_VECS = A_OUTER * A_INNER / 8;
constexpr int B_VECS = B_OUTER * B_INNER / 8;
constexpr int A_PER = (A_VECS + THREADS - 1) / THREADS;
constexpr int B_PER = (B_VECS + THREADS - 1) / THREADS;

// Which 16-byte vector of an [OUTER][INNER + PAD] tile the v-th copy moves: shared row o, inner
// offset in. With 8 or more vectors per row, a row is read by consecutive v. With fewer (INNER =
// BK = 32 or 16 -> 4 or 2 vectors), 8 consecutive v take ONE column of 8 consecutive rows: the
// rows are (INNER+8)*2 = 80 or 48 bytes apart, so these 8 16-byte stores fall in 8 different
// bank groups (the plain order would put two rows in one 8-lane store phase: 2-way conflict).
// Globally a warp still reads whole rows segments (8 rows x 64 B), so coalescing is unchanged.
template <int INNER>
__device__ __forceinline__ void gl_tile_pos(int v, int& o, int& in) {
    constexpr int CH = INNER / 8;                 // vectors per row
    if (CH >= 8) {
        o = v / CH; in = (v % CH) * 8;
    } else {
        const int w = v % (8 * CH);
        o = (v / (8 * CH)) * 8 + w % 8; in = (w / 8) * 8;
    }
}

// Fragment load from shared memory. FP16: wmma::load_matrix_sync (NVVM sees the pointer is in
// shared memory and emits wmma.load...shared -> LDSM). BF16: the same wmma.load, written as PTX,
// because the BF16 overloads of load_matrix_sync reach PTX as GENERIC loads (no .shared), which
// ptxas lowers to 32-bit LD + MOVM instead of LDSM. The BF16 16x16x16 A/B fragment is 4 x b32.
template <class X, class Y> struct GlSame { static constexpr bool value = false; };
template <class X> struct GlSame<X, X> { static constexpr bool value = true; };

template <class Use, class Layout>
__device__ __forceinline__ void gl_load_frag(wmma::fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
#if GL_DTYPE == 1
    wmma::load_matrix_sync(f, p, ldm);
#else
    static_assert(sizeof(f.x) == 16, "BF16 m16n16k16 A/B fragment is 4 registers");
    unsigned* r = reinterpret_cast<unsigned*>(f.x);
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
#define GL_WMMA_LD_BF16(AB, LAY) \
    asm volatile("wmma.load." AB ".sync.aligned." LAY ".m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;" \
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr), "r"(ldm) : "memory")
    constexpr bool is_a = GlSame<Use, wmma::matrix_a>::value;
    constexpr bool col = GlSame<Layout, wmma::col_major>::value;
    if (is_a && !col) GL_WMMA_LD_BF16("a", "row");
    else if (is_a)    GL_WMMA_LD_BF16("a", "col");
    else if (!col)    GL_WMMA_LD_BF16("b", "row");
    else              GL_WMMA_LD_BF16("b", "col");
#undef GL_WMMA_LD_BF16
#endif
}

// Registers: FP32 accumulators take WM*WN/32 per thread (64 at 64x32). Up to that size ask for
// 128 registers per thread so two 256-thread blocks share an SM (one would leave the tensor
// cores idle during barriers and global-load waits); an NVRTC left to itself may use a few more
// than 128 and halve the occupancy (seen on the H100 test machine's NVRTC for BF16 row/row: one
// block per SM, and a clearly slower rung). Larger warp tiles: no floor.
// The floor is for sm_90 and later only. Below sm_90, 128 registers is at the edge and ptxas
// spills (default tile, 4 layouts, local bytes): NVRTC 12.9 on sm_80 8 B fp16 row/row, 16 B
// bf16 row/row, 8 B bf16 col/col (2-4 STL, 3-5 LDL, 2-4 in the hot loop); on sm_86/sm_89 8-16 B
// under both 12.9 and 13.5. Without the floor, sm_80 takes 145-154 registers (NVRTC 13.5, which
// fitted 126-128 without spills) or 154-163 (12.9): no spills, one block per SM instead of two
// (the floor's gain was measured on the H100 only; sm_80 trades it for never spilling).
// sm_90a keeps 126-128 registers, no spills, two blocks per SM under 12.9 and 13.5.
// A fused bias or activation (epilogue.cuh) does not fit the floor either: 20 bytes spilled with a
// bias and silu where C has no 16-byte access (the scalar stores' bias loads). Nor does a C without
// 16-byte access at all since its stores go row by row (gl_store_rows16): 20 bytes spilled under
// the H200 test machine's NVRTC 13.0 in fp16 with B column-major (13.5 fitted 128).
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900) || GL_TALL || !GL_EPI_PLAIN || !GL_VEC_C
constexpr int MIN_BLOCKS = 1;   // (GL_TALL: the grid.z term's register does not fit the floor)
#else
constexpr int MIN_BLOCKS = (WM * WN / 32 <= 64 && THREADS <= 512) ? 512 / THREADS : 1;   // 65536 / (THREADS * 128)
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, TC* C, int ldc GL_EPI_PARAMS)
{
    // One raw buffer, two views: the 2-stage A/B tiles during the main loop, then the FP32
    // per-warp staging tiles of the epilogue (after the loop's last barrier).
    extern __shared__ __align__(128) unsigned char smem[];
    T (*As)[A_OUTER][A_LD] = reinterpret_cast<T (*)[A_OUTER][A_LD]>(smem);      // [2][A_OUTER][A_INNER+PAD]
    T (*Bs)[B_OUTER][B_LD] = reinterpret_cast<T (*)[B_OUTER][B_LD]>(smem + 2 * A_STAGE * sizeof(T)); // [2][B_OUTER][B_INNER+PAD]
    float (*Cs)[16][CS_LD] = reinterpret_cast<float (*)[16][CS_LD]>(smem);       // [NWARPS][16][WN+4]

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;   // warp tile position in the block tile
    const int row0 = GL_TILE_ROW * BM, col0 = blockIdx.x * BN;

    // ---- global -> registers -> shared loaders -----------------------------------------------
    // Vector v of a tile -> (shared row o, inner offset in), see gl_tile_pos.
    uint4 ra[A_PER];   // this thread's prefetched A vectors (8 halves each)
    uint4 rb[B_PER];   // this thread's prefetched B vectors
    auto load_tiles = [&](int k0) {
#pragma unroll
        for (int p = 0; p < A_PER; ++p) {
            const int v = tid + p * THREADS;
            if (A_VECS % THREADS == 0 || v < A_VECS) {
                int o, in;
                gl_tile_pos<A_INNER>(v, o, in);
#if GL_A_COL
                ra[p] = gl_load8<GL_VEC_A>(A, lda, k0 + o, row0 + in, K, M);     // A(m, k) at A[k*lda + m]
#else
                ra[p] = gl_load8<GL_VEC_A>(A, lda, row0 + o, k0 + in, M, K);     // A(m, k) at A[m*lda + k]
#endif
            }
        }
#pragma unroll
        for (int p = 0; p < B_PER; ++p) {
            const int v = tid + p * THREADS;
            if (B_VECS % THREADS == 0 || v < B_VECS) {
                int o, in;
                gl_tile_pos<B_INNER>(v, o, in);
#if GL_B_COL
                rb[p] = gl_load8<GL_VEC_B>(B, ldb, col0 + o, k0 + in, N, K);     // B(k, n) at B[n*ldb + k]
#else
                rb[p] = gl_load8<GL_VEC_B>(B, ldb, k0 + o, col0 + in, K, N);     // B(k, n) at B[k*ldb + n]
#endif
            }
        }
    };
    auto store_tiles = [&](int s) {
#pragma unroll
        for (int p = 0; p < A_PER; ++p) {
            const int v = tid + p * THREADS;
            if (A_VECS % THREADS == 0 || v < A_VECS) {
                int o, in;
                gl_tile_pos<A_INNER>(v, o, in);
                *reinterpret_cast<uint4*>(&As[s][o][in]) = ra[p];
            }
        }
#pragma unroll
        for (int p = 0; p < B_PER; ++p) {
            const int v = tid + p * THREADS;
            if (B_VECS % THREADS == 0 || v < B_VECS) {
                int o, in;
                gl_tile_pos<B_INNER>(v, o, in);
                *reinterpret_cast<uint4*>(&Bs[s][o][in]) = rb[p];
            }
        }
    };

    // FM x FN accumulator fragments: the warp's WM x WN tile of C, FP32
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    // ---- prologue: tile 0 into stage 0 ----------------------------------------------------------
    const int ntiles = GL_CEIL_DIV(K, BK);
    load_tiles(0);
    store_tiles(0);
    __syncthreads();

    // ---- main loop: prefetch tile t+1 into registers, HMMA on stage t%2, store t+1 to the other
    // stage, one barrier per tile -----------------------------------------------------------------
    for (int t = 0; t < ntiles; ++t) {
        const int cur = t & 1;
        const bool more = t + 1 < ntiles;               // uniform across the block
        if (more) load_tiles((t + 1) * BK);

#pragma unroll
        for (int kk = 0; kk < KF; ++kk) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, ALayout> af[FM];   // 16x16 A pieces, down the warp tile
            wmma::fragment<wmma::matrix_b, 16, 16, 16, T, BLayout> bf[FN];   // 16x16 B pieces, across the warp tile
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                const int m = wm * WM + i * 16, k = kk * 16;
#if GL_A_COL
                gl_load_frag(af[i], &As[cur][k][m], A_LD);
#else
                gl_load_frag(af[i], &As[cur][m][k], A_LD);
#endif
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                const int n = wn * WN + j * 16, k = kk * 16;
#if GL_B_COL
                gl_load_frag(bf[j], &Bs[cur][n][k], B_LD);
#else
                gl_load_frag(bf[j], &Bs[cur][k][n], B_LD);
#endif
            }
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
        }

        // stage cur^1 was last read in iteration t-1, which ended with a barrier
        if (more) store_tiles(cur ^ 1);
        __syncthreads();
    }

    // ---- epilogue: accumulators -> FP32 staging (per warp, 16 rows at a time) -> alpha/beta ->
    // T -> C. The loop's last barrier has freed the A/B tiles this staging overlays. ------------
    float (*cs)[CS_LD] = Cs[warp];                      // this warp's [16][WN+4] staging tile
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::store_matrix_sync(&cs[0][j * 16], acc[i][j], CS_LD, wmma::mem_row_major);
        __syncwarp();
        gl_store_rows16<WN, CS_LD>(cs, C, ldc, M, N, row0 + wm * WM + i * 16, col0 + wn * WN, GL_EPI(alpha, beta), lane);
    }
}
