// Rung 20 — FP32 operands on the tensor cores: mma.sync m16n8k8 TF32 (precision "tf32") and the
// three-product split 3xTF32 (precision "3xtf32", FP32-accurate), ldmatrix / LDS.128 fragments,
// a cp.async pipeline into XOR-swizzled shared memory.          seeds: CUTLASS's "FastF32"
// 3xTF32 (a x b = a_big b_big + a_big b_small + a_small b_big), rung 17's pipeline.
//
// What it changes against rung 18 (async SIMT, the top FP32 rung): the multiply-adds leave the
// CUDA cores for the tensor cores. The H100's FP32 FMA peak is ~67 TFLOP/s; its dense TF32 tensor
// peak ~495. A TF32 operand is an FP32 number with 10 fraction bits (unit roundoff 2^-11), so:
// * GL_PRECISION 1 ("tf32"): each operand is rounded to TF32 once (cvt.rna.tf32.f32, round to
//   nearest, ties away) and one mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32 (SASS HMMA.1688.F32.TF32)
//   multiplies; FP32 accumulation. Accuracy: that of cuBLAS with TF32 enabled.
// * GL_PRECISION 3 ("3xtf32"): each operand x is split into big = tf32(x) and
//   small = tf32(x - big) (x - big is exact in FP32; big + small equals x within 2^-22 |x|), and per
//   k-step t = small_a*big_b + big_a*small_b + big_a*big_b from t = 0 (the small products first),
//   then acc += t in FP32 (the tensor cores' sums round toward zero: see compute()); small_a*small_b (below
//   2^-22 of the product) is dropped. Three MMAs per k-step: one third of the TF32 rate, FP32-level
//   accuracy (tests/test_tf32_accuracy.py measures it against cuBLAS SGEMM on the same data).
//   Edge semantics: an infinite operand gives NaN (big - x is inf - inf) where FP32 gives +-inf,
//   and so does a finite |x| within 2^-12 of FP32's largest (big rounds up to inf); NaN propagates.
//
// Fragments (PTX ISA, mma.m16n8k8 .tf32; g = lane/4, t = lane%4): a0..a3 = A(g, t), A(g+8, t),
// A(g, t+4), A(g+8, t+4); b0, b1 = B(t, g), B(t+4, g); c0..c3 = C(g, 2t), C(g, 2t+1), C(g+8, 2t),
// C(g+8, 2t+1). The rows of A and the columns of B that a lane meets are PERMUTED inside the
// warp tile (the MMA does not care which physical row is its row g, as long as C uses the same
// map):  the m rows of a warp tile are "items" 2i+h (m16 tile i, half h) x g, item = 4s+e lives at
//   physical row 32s + 4g + e;   n8 tile j = 4s+e, column c, at physical column 32s + 4c + e.
// So a lane's four items of one s are 4 CONSECUTIVE rows (columns) 32s+4g .. +3, and:
// * where k is NOT the contiguous dimension in shared memory (A column-major: As[k][m]; B
//   row-major: Bs[k][n]), one LDS.128 gives a lane four fragment registers at once: a0/a1 of two
//   m16 tiles, or b0 of four n8 tiles (TF32 is 32-bit: ldmatrix.trans, which transposes 16-bit
//   elements, cannot serve here);
// * where k IS contiguous (A row-major: As[m][k]; B column-major: Bs[n][k]), ldmatrix.x4 of b16
//   8x8 matrices reads 32-bit elements as pairs: a 16-byte row is 4 floats and lane l receives
//   row l/4, float l%4 of each matrix, exactly the fragment's (g, t) -- each lane names the
//   (permuted) row it serves;
// * the epilogue finds, per row, 8 consecutive columns 32s + 8t .. +7 in a lane's accumulators:
//   two 16-byte stores straight from the registers (gl_store_c4), no shared-memory staging.
// Swizzle (no padding): the 16-byte chunk c of shared row r is stored at chunk c ^ sw(r),
//   k-contiguous tiles: sw(r) = (r >> 2) & 7 -- an ldmatrix phase reads the rows 4*i8 + e of one
//     chunk (i8 = 0..7): 8 distinct chunk positions, 8 distinct bank groups;
//   k-outer tiles: sw(r) = (r & 3) << 1 -- an LDS.128 quarter-warp reads rows k0 + t (t = 0..3),
//     chunks 8s + g (g = 0, 1): positions g ^ 2t, all 8 distinct.
// The cp.async writes of 8 consecutive threads cover 8 consecutive chunks of one row (rows are at
// least 8 chunks: BK, BM, BN >= 32 floats), which an XOR with a constant below 8 only permutes:
// every shared access of the rung is free of bank conflicts.
//
// Pipeline, as rung 17: STAGES tiles in flight through cp.async.cg 16-byte copies (LDGSTS) that
// zero-fill what lies past the matrix (src-size); without 16-byte legality (GL_VEC_A/B = 0) the
// chunk is four 4-byte copies (cp.async.ca), each zero-filled past the edge, so the main loop is
// the same code for any alignment. The fragments of the next k-step are read while the tensor
// cores work on the current one (two register sets), across tile boundaries too.
// Conversions: cvt.rna.tf32.f32 is a range test (FSETP) and a predicated add of half a TF32 ulp
// (the tensor cores ignore the 13 low bits), done in registers for every fragment register, so an
// element is rounded once per warp that reads it. `gemmlab inspect` (default tile) counts several
// instructions per HMMA in both precisions, most of them FSETP, IMAD, SEL, LOP3 and FADD: the
// rounding, not the tensor cores, bounds the issue rate.
//
// Why it was expected to be faster: rung 18 is bound by the FP32 FMA peak, and the TF32 tensor
// cores' peak is several times higher. Measured (benchmarks/results/h100_tf32.json,
// h100_3xtf32.json; docs/journal/ladder.md), both precisions fell well below the prediction: TF32
// far short of cuBLAS with TF32, 3xTF32 at about cuBLAS SGEMM's speed. The warps round (and split)
// every fragment they read, and 3xTF32 adds 4 FADD per three HMMA. Rounding each element once in
// shared memory, or wgmma .tf32 (operands straight from shared memory), is the next step (rung 22).
//
// Geometry (defaults BM=128, BN=128, BK=32, WM=64, WN=32, STAGES=4): 8 warps as 2 x 4, each a
// 64x32 warp tile = 4 x 4 mma tiles of 16x8 (64 FP32 accumulators per thread); BK = 32 is 4
// k-steps of 8; shared memory STAGES x (BM*BK + BK*BN) x 4 B = 128 KB, one block (8 warps) per SM.
// A 64x64 warp tile would halve the shared-memory reads per MMA but spills in 3xTF32 (big and
// small parts of every fragment beside 128 accumulators): the registry refuses it for both.
#include "common.cuh"

#if GL_DTYPE != 0
#error "rung 20 (tf32_mma) takes FP32 operands (GL_DTYPE 0): TF32 is a rounding of FP32"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "rung 20 (tf32_mma) needs sm_80 or newer (TF32 tensor cores, cp.async)"
#endif
#ifndef GL_DYN_SMEM
#error "rung 20 (tf32_mma) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif
#ifndef GL_PRECISION
#define GL_PRECISION 1
#endif
#if GL_PRECISION != 1 && GL_PRECISION != 3
#error "GL_PRECISION must be 1 (TF32) or 3 (3xTF32)"
#endif

// ---- geometry (the registry's constraints, _tf32_constraints, restated) --------------------------
constexpr int WARPS_N = BN / WN;                  // warps along the columns of the block tile
constexpr int NWARPS = (BM / WM) * WARPS_N;       // == THREADS / 32
constexpr int FM = WM / 16;                       // m16 mma tiles per warp, down
constexpr int FN = WN / 8;                        // n8 mma tiles per warp, across
constexpr int SM_ = WM / 32;                      // 32-row groups s of a warp tile (4 items each per lane)
constexpr int SN = WN / 32;                       // 32-column groups s (4 n8 tiles each)
constexpr int KSTEPS = BK / 8;                    // k8 steps per block tile

__host__ __device__ constexpr bool gl_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }
static_assert(NWARPS * 32 == THREADS, "THREADS must be 32 * (BM/WM) * (BN/WN)");
static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
static_assert(WM % 32 == 0 && WN % 32 == 0, "the permuted fragment map groups a warp tile's rows and columns by 32");
static_assert(gl_pow2(BM) && gl_pow2(BN) && gl_pow2(BK) && BM >= 32 && BN >= 32 && BK >= 32 && BK <= 64,
              "the swizzles need rows of at least 8 chunks: power-of-two BM, BN >= 32 and BK of 32 or 64");
static_assert(STAGES >= 2, "the cp.async pipeline needs at least two stages");
static_assert(KSTEPS % 2 == 0, "the two fragment register sets alternate and every tile starts on set 0");

// ---- shared-memory tiles: [OUTER][INNER] floats, INNER = the operand's contiguous dimension ------
#if GL_A_COL
constexpr int A_OUTER = BK, A_INNER = BM;         // As[k][m]: k-outer
#else
constexpr int A_OUTER = BM, A_INNER = BK;         // As[m][k]: k-contiguous
#endif
#if GL_B_COL
constexpr int B_OUTER = BN, B_INNER = BK;         // Bs[n][k]: k-contiguous
#else
constexpr int B_OUTER = BK, B_INNER = BN;         // Bs[k][n]: k-outer
#endif
constexpr int A_STAGE_BYTES = A_OUTER * A_INNER * 4;
constexpr int B_STAGE_BYTES = B_OUTER * B_INNER * 4;
constexpr int SMEM_BYTES = STAGES * (A_STAGE_BYTES + B_STAGE_BYTES);
static_assert(SMEM_BYTES <= GL_DYN_SMEM, "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");

// The swizzle of a tile whose k runs along the rows (K_INNER) or down them (see the header).
template <bool K_INNER>
__device__ __forceinline__ int gl_sw(int r) { return K_INNER ? (r >> 2) & 7 : (r & 3) << 1; }

// ---- PTX wrappers ---------------------------------------------------------------------------
// cp.async: gl_cp / gl_cp_commit / gl_cp_wait (common.cuh)
__device__ __forceinline__ void gl_ldsm_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void gl_lds128(unsigned (&r)[4], unsigned addr) {
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}

// d += a (16x8, row) * b (8x8, col), TF32 operands, FP32 accumulators.
__device__ __forceinline__ void gl_mma1688(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- one operand's tile copies: global -> shared (swizzled) -------------------------------
// The operand is P(outer, inner) = P[outer * ld + inner], inner contiguous; its block tile is
// OUTER x INNER floats at (outer0, inner0); k runs along inner (K_INNER) or along outer. Chunk v
// (4 floats) of the tile is row v / CPR, chunk v % CPR; thread tid copies chunks tid, tid + THREADS,
// ...: consecutive threads copy consecutive 16-byte pieces of a row (coalesced). All of a thread's
// chunks share the logical column c and step RSTEP rows.
template <int VEC, int OUTER, int INNER, bool K_INNER>
struct GlTf32Copy {
    static constexpr int CPR = INNER / 4;
    static constexpr int CHUNKS = OUTER * CPR;
    static constexpr int PER = (CHUNKS + THREADS - 1) / THREADS;
    static constexpr int RSTEP = THREADS / CPR;
    static_assert(THREADS % CPR == 0, "a row's chunks split evenly over the threads");

    const float* first;   // this thread's first chunk in tile 0 (not dereferenced unless inside the matrix)
    size_t rstride;       // RSTEP rows, in elements
    size_t kstride;       // one tile along k, in elements: BK, or BK rows
    int outer_left;       // matrix rows (outer) from this thread's first row of tile 0
    int inner_left;       // matrix elements (inner) from this thread's chunk of tile 0
    int r0, c;            // this thread's first row and its logical chunk in the tile

    __device__ __forceinline__ GlTf32Copy(const float* P, int ld, int outer0, int inner0, int n_outer, int n_inner, int tid)
        : r0(tid / CPR), c(tid % CPR) {
        first = P + ((size_t)(outer0 + r0) * ld + inner0 + 4 * c);
        rstride = (size_t)RSTEP * ld;
        kstride = K_INNER ? (size_t)BK : (size_t)BK * ld;
        outer_left = n_outer - (outer0 + r0);
        inner_left = n_inner - (inner0 + 4 * c);
    }

    // Block tile number kt into the stage at shared address `stage`; every byte past the matrix is
    // zero-filled by the copy itself (a copy of 0 bytes reads nothing and may name any address).
    __device__ __forceinline__ void copy(unsigned stage, int kt) const {
        const float* base = first + kt * kstride;
        const int ol = K_INNER ? outer_left : outer_left - kt * BK;
        const int il = K_INNER ? inner_left - kt * BK : inner_left;
        auto chunk = [&](int p) {
            const int r = r0 + p * RSTEP;
            if (CHUNKS % THREADS == 0 || r < OUTER) {
                const unsigned dst = stage + (unsigned)(r * INNER * 4 + ((c ^ gl_sw<K_INNER>(r)) << 4));
                const bool in = ol > p * RSTEP && il > 0;
                if (VEC) {
                    gl_cp<16>(dst, base + p * rstride, in ? (il >= 4 ? 16 : 4 * il) : 0);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) gl_cp<4>(dst + 4 * e, base + p * rstride + e, in && il > e ? 4 : 0);
                }
            }
        };
        if (VEC) {
#pragma unroll
            for (int p = 0; p < PER; ++p) chunk(p);
        } else {
            // Four copies per chunk, a loop: unrolled, the compiler computed every copy's address
            // ahead and 3xTF32 spilled on sm_80; this path (unaligned operands) is not the fast one.
#pragma unroll 1
            for (int p = 0; p < PER; ++p) chunk(p);
        }
    }
};

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    gl_pdl_wait();   // after an operand copy launched programmatically: the copy done (pack.cu)
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned a_base = static_cast<unsigned>(__cvta_generic_to_shared(smem));   // [STAGES][A_OUTER][A_INNER]
    const unsigned b_base = a_base + STAGES * A_STAGE_BYTES;                          // [STAGES][B_OUTER][B_INNER]

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;   // warp tile position in the block tile
    const int row0 = GL_TILE_ROW * BM, col0 = blockIdx.x * BN;
    const int ntiles = GL_CEIL_DIV(K, BK);

    // ---- load: the copies of both operands ----------------------------------------------------
#if GL_A_COL
    const GlTf32Copy<GL_VEC_A, BK, BM, false> copy_a(A, lda, 0, row0, K, M, tid);   // A(m, k) at A[k*lda + m]
#else
    const GlTf32Copy<GL_VEC_A, BM, BK, true> copy_a(A, lda, row0, 0, M, K, tid);    // A(m, k) at A[m*lda + k]
#endif
#if GL_B_COL
    const GlTf32Copy<GL_VEC_B, BN, BK, true> copy_b(B, ldb, col0, 0, N, K, tid);    // B(k, n) at B[n*ldb + k]
#else
    const GlTf32Copy<GL_VEC_B, BK, BN, false> copy_b(B, ldb, 0, col0, K, N, tid);   // B(k, n) at B[k*ldb + n]
#endif
    auto load_tiles = [&](int s, int kt) {
        copy_a.copy(a_base + s * A_STAGE_BYTES, kt);
        copy_b.copy(b_base + s * B_STAGE_BYTES, kt);
    };

    // ---- fragment addresses (see the header for the permuted map and the swizzles) ------------
    // Each lane keeps one byte offset per operand; a fragment load adds a compile-time constant
    // (and, for the k-contiguous tiles, XORs the k-step's chunk bits, which are zero in the lane
    // offset: every chunk field is XOR-ed by the swizzle, the row field only added to).
    const int g = lane / 4, t = lane % 4;
    const int q = lane / 8, i8 = lane % 8;
#if GL_A_COL
    // As[k][m]: rows k = 8kk + 4hk + t, chunk 8*(wm*WM/32 + s) + g, physical chunk ^ 2t
    const unsigned a_lane = t * (4u * BM) + 4u * (wm * WM) + ((g ^ (2 * t)) << 4);
    auto a_addr = [&](unsigned as, int s, int kk, int hk) -> unsigned {
        return as + a_lane + (8 * kk + 4 * hk) * (4u * BM) + 128u * s;
    };
#else
    // As[m][k], ldmatrix.x4 for m16 tile i: matrix q = (h = q%2, hk = q/2), its row i8 is item
    // 2i+h of lane group i8: physical row 32(i/2) + 2(i%2) + 4*i8 + h, chunk (2kk + hk) ^ i8
    const unsigned a_lane = (wm * WM + 4 * i8 + q % 2) * (4u * BK) + (((q / 2) ^ i8) << 4);
    auto a_addr = [&](unsigned as, int i, int kk) -> unsigned {
        return as + ((a_lane ^ (32u * kk)) + (32 * (i / 2) + 2 * (i % 2)) * (4u * BK));
    };
#endif
#if GL_B_COL
    // Bs[n][k], ldmatrix.x4 for n8 tiles j = 4s + 2p, +1: matrix q = (tile j + q/2, hk = q%2), its
    // row i8 is column g = i8 of that tile: physical row 32s + 2p + 4*i8 + q/2, chunk (2kk + hk) ^ i8
    const unsigned b_lane = (wn * WN + 4 * i8 + q / 2) * (4u * BK) + (((q % 2) ^ i8) << 4);
    auto b_addr = [&](unsigned bs, int s, int p, int kk) -> unsigned {
        return bs + ((b_lane ^ (32u * kk)) + (32 * s + 2 * p) * (4u * BK));
    };
#else
    // Bs[k][n]: rows k = 8kk + 4hk + t, chunk 8*(wn*WN/32 + s) + g, physical chunk ^ 2t
    const unsigned b_lane = t * (4u * BN) + 4u * (wn * WN) + ((g ^ (2 * t)) << 4);
    auto b_addr = [&](unsigned bs, int s, int kk, int hk) -> unsigned {
        return bs + b_lane + (8 * kk + 4 * hk) * (4u * BN) + 128u * s;
    };
#endif

    unsigned af[2][FM][4];      // A fragments (FP32 bits), two register sets (k-step parity)
    unsigned bf[2][FN][2];      // B fragments, two register sets
    float acc[FM][FN][4];       // the warp's WM x WN tile of C, FP32, in the permuted map
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    auto load_frags = [&](int set, int st, int kk) {
        const unsigned as = a_base + st * A_STAGE_BYTES, bs = b_base + st * B_STAGE_BYTES;
#if GL_A_COL
#pragma unroll
        for (int s = 0; s < SM_; ++s)
#pragma unroll
            for (int hk = 0; hk < 2; ++hk) {
                unsigned r[4];   // items 4s+e = 2i+h: i = 2s + e/2, h = e%2 -> register h + 2hk of tile i
                gl_lds128(r, a_addr(as, s, kk, hk));
#pragma unroll
                for (int e = 0; e < 4; ++e) af[set][2 * s + e / 2][e % 2 + 2 * hk] = r[e];
            }
#else
#pragma unroll
        for (int i = 0; i < FM; ++i) gl_ldsm_x4(af[set][i], a_addr(as, i, kk));
#endif
#if GL_B_COL
#pragma unroll
        for (int s = 0; s < SN; ++s)
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                unsigned r[4];
                gl_ldsm_x4(r, b_addr(bs, s, p, kk));
                const int j = 4 * s + 2 * p;
                bf[set][j][0] = r[0]; bf[set][j][1] = r[1];
                bf[set][j + 1][0] = r[2]; bf[set][j + 1][1] = r[3];
            }
#else
#pragma unroll
        for (int s = 0; s < SN; ++s)
#pragma unroll
            for (int hk = 0; hk < 2; ++hk) {
                unsigned r[4];   // b_hk of n8 tiles 4s .. 4s+3
                gl_lds128(r, b_addr(bs, s, kk, hk));
#pragma unroll
                for (int e = 0; e < 4; ++e) bf[set][4 * s + e][hk] = r[e];
            }
#endif
    };

    // The MMAs of one k-step on register set `set`.
    auto compute = [&](int set) {
#if GL_PRECISION == 1
        unsigned a[FM][4], b[FN][2];
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) a[i][e] = gl_tf32(af[set][i][e]);
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) b[j][e] = gl_tf32(bf[set][j][e]);
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) gl_mma1688(acc[i][j], a[i], b[j]);
#else
        unsigned ab[FM][4], as_[FM][4], bb[FN][2], bs_[FN][2];
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) gl_split(af[set][i][e], ab[i][e], as_[i][e]);
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) gl_split(bf[set][j][e], bb[j][e], bs_[j][e]);
        // The three products of one k-step go into a zeroed partial t, small terms first, and t is
        // added to the accumulator with an FP32 add. The tensor cores round their FP32 sums toward
        // zero: accumulating into acc directly shrank |acc| by up to an ulp on each of the K/8
        // steps, always the same way, and the bias grew with K (on the H100 the error was well above
        // cuBLAS SGEMM's at K = 4096: tests/test_tf32_accuracy.py failed).
        // Truncated inside t, the error is relative to one k-step's sum, whose sign is random, and
        // the add that carries it into acc rounds to nearest (Ootomo & Yokota's observation for
        // 3xTF32 on Ampere). One row of MMA tiles at a time: FN partials (4 FN registers).
#pragma unroll
        for (int i = 0; i < FM; ++i) {
            float t[FN][4];
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                t[j][0] = t[j][1] = t[j][2] = t[j][3] = 0.0f;
                gl_mma1688(t[j], as_[i], bb[j]);
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) gl_mma1688(t[j], ab[i], bs_[j]);
#pragma unroll
            for (int j = 0; j < FN; ++j) gl_mma1688(t[j], ab[i], bb[j]);
#pragma unroll
            for (int j = 0; j < FN; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] += t[j][e];
        }
#endif
    };

    // ---- prologue: tiles 0 .. STAGES-2 in flight, one commit group each (group g is tile g; a
    // tile past K zero-fills its stage); wait for tile 0 and take its first fragments -----------
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        load_tiles(s, s);
        gl_cp_commit();
    }
    gl_cp_wait<STAGES - 2>();
    __syncthreads();
    load_frags(0, 0, 0);

    // ---- main loop ------------------------------------------------------------------------------
    // Iteration t multiplies tile t (stage t % STAGES). At its first k-step it issues the copies of
    // tile t + STAGES - 1 into stage (t - 1) % STAGES, which every warp finished reading before the
    // barrier of iteration t - 1. Before its last k-step it waits for tile t + 1 and takes the
    // barrier, so the fragments of tile t + 1's first k-step load while the last MMAs of tile t run.
    int rd = 0, wr = STAGES - 1;    // stage read by this iteration, stage written by its copies
    for (int kt = 0; kt < ntiles; ++kt) {
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            if (kk == KSTEPS - 1) {
                gl_cp_wait<STAGES - 2>();
                __syncthreads();
                rd = rd + 1 == STAGES ? 0 : rd + 1;
            }
            load_frags((kk + 1) % 2, rd, (kk + 1) % KSTEPS);   // next k-step's fragments (next tile's at the last)
            if (kk == 0) {
                // past the last tile every copy is out of range along k and zero-fills a stage
                // nobody reads; the commit group still stands for tile kt + STAGES - 1
                load_tiles(wr, kt + STAGES - 1);
                gl_cp_commit();
                wr = wr + 1 == STAGES ? 0 : wr + 1;
            }
            compute(kk % 2);
        }
    }
    gl_cp_wait<0>();                // no copy outlives the block (all are empty by now)

    // ---- epilogue: alpha/beta, 16-byte stores straight from the accumulators --------------------
    // Item 2i+h = 4s'+e of lane group g is row 32s' + 4g + e; n8 tiles 4s .. 4s+3 give this lane
    // columns 32s + 8t + e (c0/c2) and 32s + 8t + 4 + e (c1/c3), e = 0..3.
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int item = 2 * i + h;
            const int row = row0 + wm * WM + 32 * (item / 4) + 4 * g + item % 4;
#pragma unroll
            for (int s = 0; s < SN; ++s) {
                const int col = col0 + wn * WN + 32 * s + 8 * t;
                gl_store_c4(C, ldc, M, N, row, col, make_float4(acc[i][4 * s][2 * h], acc[i][4 * s + 1][2 * h],
                            acc[i][4 * s + 2][2 * h], acc[i][4 * s + 3][2 * h]), GL_EPI(alpha, beta));
                gl_store_c4(C, ldc, M, N, row, col + 4, make_float4(acc[i][4 * s][2 * h + 1], acc[i][4 * s + 1][2 * h + 1],
                            acc[i][4 * s + 2][2 * h + 1], acc[i][4 * s + 3][2 * h + 1]), GL_EPI(alpha, beta));
            }
        }
}
