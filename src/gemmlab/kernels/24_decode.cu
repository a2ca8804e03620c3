// Rung 24 — decode: the memory-bound thin 16-bit GEMM. The wide operand is read once, 16 bytes
// per load straight into mma.sync fragments; K is split over the warps of a block and over the
// blocks of a cluster, and the partial sums meet in shared memory in a fixed order.
//                                     seeds: beyond them (issue 40: LLM decoding, thin 16-bit GEMMs)
//
// What it is for. Decoding a token multiplies M = 1..32 activations by every weight matrix:
// C (M x N) = A (M x K) B (K x N) with N x K of 4096 x 4096 .. 14336 x 4096. Each element of B
// feeds only M multiply-adds, so the time is B's bytes at the memory rate (4096 x 14336 bf16: 117
// MB) and the tensor cores are nearly idle. The tiled rungs are built for the
// other regime: rung 21 pads M = 1 to a 128-row tile, gives each output tile all of K (4096 x
// 4096 is 16 tiles of 128 x 256 for 132 SMs) and reads B through a shared-memory pipeline sized
// for a reuse that never comes. Rung 23 does this job for FP32 on the CUDA cores; 16-bit operands at M = 32 ask
// 32 FMAs per 2 bytes, more at the memory rate than the CUDA cores have: the
// multiply-adds go to the tensor cores (mma.sync m16n8k16), whose fragments are loaded from
// global memory directly.
//
// What changes:
// * The problem is wide x thin: P, the wide operand (B when M is thin, A when N is), has BR rows
//   per block (64 per warp), Q, the thin one, NS = 8, 16 or 32 columns. P is the mma's A operand
//   (16 rows of P per m-tile) and Q its B operand (8 columns per n-tile): the thin side of C is
//   the mma's n, so M = 1 wastes 7 of 8 columns of an idle unit, not 127 of 128 rows of a tile.
// * No shared memory in the main loop. A warp's 32-k chunk is 64 rows of P x 32 k: each thread
//   issues 8 loads of 16 bytes (ld.global.nc.L1::no_allocate: streamed, not kept in L1) and
//   builds its fragments from them. The order of the k inside a chunk is free (a sum does not
//   care), so each thread takes the 8 consecutive k 8t..8t+7 (t = lane % 4), and the two
//   k16-mmas of a chunk use k 8t+4h .. 8t+4h+3 (h = 0, 1) in place of the mma's 2t, 2t+1, 2t+8,
//   2t+9; Q's fragment follows the same permutation, so it too is one 16-byte load (8 k of one
//   column, from L1: every warp of the block reads the same Q chunk).
//     P contiguous along k ("KC": nn.Linear's weight, B column-major; A row-major): a thread's 16
//       bytes are 8 k of one row, exactly two registers of each of the two mmas' A fragments;
//       rows g, g+8, g+16, ... g+56 (g = lane / 4) make the warp's 4 m-tiles.
//     P contiguous along its wide index ("WC": B row-major): a thread's 16 bytes are 8 rows at
//       one k; its 8 loads are k 8t..8t+7 of rows 8g..8g+7, and byte permutes (PRMT) pair the
//       k: m-tile i holds rows 8g+2i (the fragment's row g) and 8g+2i+1 (row g+8).
//   A warp's load instruction reads 4 runs of 128 contiguous bytes (WC) or 8 of 64 (KC): whole
//   sectors either way.
// * A thread keeps DEPTH chunks in flight (DEPTH x 128 bytes of P): the loads of chunk c+DEPTH-1
//   are issued before the mmas of chunk c, from a ring of DEPTH register buffers. A block's slice
//   is only a few chunks per warp at decode's sizes, so its time is a chain of memory latencies:
//   the deeper the ring, the fewer links.
// * ASYNC=1 moves the ring into shared memory: each thread's 16-byte units of P and Q go there by
//   cp.async (LDGSTS), to slots of its own warp, and the lane whose fragments they are reads them
//   back (LDS.128): cp.async.wait_group and at most a warp barrier, no block barrier. The
//   register ring holds DEPTH x (8 + NT) x 16 bytes per thread and its registers bound DEPTH (and
//   the warps an SM keeps); in shared memory a deeper ring costs no registers, so more of P is in
//   flight per SM where the memory's latency times its rate asks for more than the register ring
//   holds (a GPU with faster memory, the same latency).
//   It applies where P and Q both have 16-byte access (Q contiguous along k); elsewhere the kernel
//   keeps a ring of 2 register buffers.
// * K is split twice. The WK warps of a block that share the block's rows take interleaved
//   chunks (the block reads 32*WK contiguous k of each row at a time). The SPLITK blocks of one
//   row tile take slices of K, either as one thread-block cluster (SKCLUSTER=1, up to 8 slices:
//   the slices' partial tiles are summed through distributed shared memory, each block summing
//   1/SPLITK of the tile, no workspace, one launch) or through the FP32 workspace and the
//   reduction kernel (SKCLUSTER=0, up to 64 slices; kernels/common.cuh). Every sum is in a fixed
//   order (warps then slices, ascending): the result has the same bits on every run.
// * Without 16-byte access to P (GL_VEC_A/B = 0: a leading dimension off 8, as most shapes drawn at
//   random have) the loads are 4 bytes, a pair of elements each, spread over the chunk so that each
//   load instruction of the warp still reads whole runs of memory (SPREAD, below). Pairs that are
//   not 4-byte aligned (an odd leading dimension) take two words and a byte permute.
// Edges: a chunk with rows past P's end, k past the slice's end or columns past Q's takes the
// guarded loads (zeros outside, nothing read there); the epilogue's stores are bounds-checked; C
// is not read when beta == 0.
//
// The target: B's bytes at close to the device's copy rate where B is large, a little further
// from it where a launch's few microseconds weigh, and so ahead of cuBLAS, which stays further from
// the copy rate (benchmarks/results/h100_decode_bf16.json, h100_decode_fp16.json: GB/s and share of
// the copy bandwidth per shape; docs/journal/thin.md). No spills at any NS; SASS: 8 LDG.E.128 and
// 2*4*NS/8 HMMA.16816 per chunk (without 16-byte access: 32 4-byte LDG.E, and PRMT for the pairs
// that are not 4-byte aligned; with ASYNC: 8 + NS/8 LDGSTS.128 and as many LDS.128, the loop not
// unrolled).
#include "common.cuh"

#if GL_DTYPE == 0
#error "rung 24 (decode) needs GL_DTYPE 1 (fp16) or 2 (bf16): its multiply-adds are mma.sync's"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "rung 24 (decode) needs sm_80 or newer for mma.sync m16n8k16 with bf16"
#endif
#ifndef GL_DYN_SMEM
#error "rung 24 (decode) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif

#include "decode.cuh"   // the tile's geometry (THIN_N, NS, BR, NT, WR, WARPS, TILE), cp16, the sums

// ---- geometry (the registry's constraints, restated) ----------------------------------------
constexpr bool P_KC = THIN_N ? (GL_A_COL == 0) : (GL_B_COL != 0);   // P contiguous along k
constexpr bool P_VEC = (THIN_N ? GL_VEC_A : GL_VEC_B) != 0;
constexpr bool Q_KC = THIN_N ? (GL_B_COL != 0) : (GL_A_COL == 0);   // Q contiguous along k
constexpr bool Q_VEC = (THIN_N ? GL_VEC_B : GL_VEC_A) != 0 && Q_KC;
constexpr int CHUNK = 32;                          // k per warp step: two k16-mmas
#ifndef ASYNC
#define ASYNC 0
#endif
constexpr bool SRING = ASYNC && P_VEC && Q_VEC;    // the ring in shared memory, filled by cp.async
constexpr int UNITS = 8 + NT;                      // a thread's 16-byte units of a chunk: P's 8, Q's NT
constexpr int RING_SMEM = ASYNC ? DEPTH * UNITS * 16 * THREADS : 0;   // bytes (the registry's smem counts them)
static_assert(DEPTH >= 2 && DEPTH <= (ASYNC ? 8 : 6), "DEPTH (chunks in flight per thread) must be 2 to 6 (8 with ASYNC)");
static_assert(BK % (CHUNK * WK) == 0, "BK must be a multiple of 32 * WK: a slice holds whole steps of the block");
static_assert(WK * TILE * 4 + RING_SMEM <= GL_DYN_SMEM,
              "the registry's shared-memory size (GL_DYN_SMEM) is too small for the partial tiles and the ring");

// One thread's operands of a chunk: P's 8 loads and Q's NT.
struct Chunk {
    uint4 p[8];
    uint4 q[NT];
};

// 16 bytes of P, streamed: read once, not kept in L1 (Q's chunks stay there). L2PF=1 asks the L2
// to fetch the 256 bytes around each access (.L2::256B): the next load of the same run of P then
// finds its sectors on the way, and a thread's loads reach further ahead than its registers.
__device__ __forceinline__ uint4 ld_stream(const T* __restrict__ p) {
    uint4 r;
#if L2PF
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
#else
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
#endif
    return r;
}

// Load j (0..7) of a thread: KC row w0 + 8j at k0 .. k0+7; WC k row k0 + j at rows w0 .. w0+7.
// The interior path: every load inside, 16-byte legal (one LDG.E.128 each, at j * step from the
// first; step = 8 rows (KC) or 1 k row (WC) of P).
__device__ __forceinline__ void load_p_fast(Chunk& c, const T* __restrict__ p0, long long step) {
#pragma unroll
    for (int j = 0; j < 8; ++j) c.p[j] = ld_stream(p0 + j * step);
}
// P's words without 16-byte access (SPREAD): a load's 4 words (pairs of elements) are spread so
// that each 4-byte load instruction of the warp reads whole runs of memory: 32 contiguous bytes of
// each of 4 k rows (WC) or 16 of each of 8 rows (KC). Eight consecutive elements per thread, as
// the 16-byte path takes them, would scatter every instruction over 4 sectors of each run and
// fetch each sector four times.
//   KC: word i of thread t holds k kc + 8i + 2t, +1: the mma's own k order, Q's words follow;
//   WC: word i of thread g holds the wide indices wbase + 16i + 2g, +1 (the fragment's rows: the
//       epilogue follows); the k rows stay kc + 8t + j.
constexpr bool SPREAD = !P_VEC;
constexpr int ISTEP = P_KC ? 8 : 16;               // elements between a SPREAD thread's words

// 4 bytes (a pair of elements, 4-byte aligned). KEEP: allocate in L1 (Q; P where KC, whose two
// halves of a sector are read by consecutive instructions); else streamed past it.
template <bool KEEP>
__device__ __forceinline__ unsigned ld_word(const T* __restrict__ p) {
    unsigned r;
    if constexpr (KEEP) asm("ld.global.nc.u32 %0, [%1];\n" : "=r"(r) : "l"(p));
    else asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];\n" : "=r"(r) : "l"(p));
    return r;
}
// A pair at any 2-byte alignment: the 4-byte word holding its first element and, where that element
// is the word's upper half, the next word too (elements p[-1] .. p[2] read), byte-permuted.
template <bool KEEP>
__device__ __forceinline__ unsigned ld_pair(const T* __restrict__ p) {
    const size_t a = reinterpret_cast<size_t>(p);
    const T* w = reinterpret_cast<const T*>(a & ~(size_t)3);
    const bool odd = (a & 2) != 0;
    const unsigned lo = ld_word<KEEP>(w);
    const unsigned hi = odd ? ld_word<KEEP>(w + 2) : 0u;
    return __byte_perm(lo, hi, odd ? 0x5432 : 0x3210);
}
// The interior, SPREAD: load j at p0 + j * ostep, its word i at + i * ISTEP. ALIGNED: every pair
// 4-byte aligned (P 4-byte aligned, even leading dimension), one LDG.E per word; else ld_pair.
template <bool ALIGNED>
__device__ __forceinline__ void load_p_words(Chunk& c, const T* __restrict__ p0, long long ostep) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        const T* p = p0 + j * ostep;
        unsigned w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = ALIGNED ? ld_word<P_KC>(p + i * ISTEP) : ld_pair<P_KC>(p + i * ISTEP);
        c.p[j] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}
// The same at the wide edge: word i of load j at (row[j], col[i]) of P, positions past P's wide side
// moved to a readable one (their products feed only outputs past C's edge, never stored).
template <bool ALIGNED>
__device__ __forceinline__ void load_p_words_at(Chunk& c, const T* __restrict__ P, int ldp, const int (&row)[8],
                                                const int (&col)[4]) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        unsigned w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const T* p = P + (size_t)row[j] * ldp + col[i];
            w[i] = ALIGNED ? ld_word<P_KC>(p) : ld_pair<P_KC>(p);
        }
        c.p[j] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}
// Two elements at (outer, inner) and (outer, inner + 1) of a matrix with leading dimension ld, each
// outside (outer >= n_outer, inner >= n_inner) read as nothing and given as 0.
__device__ __forceinline__ unsigned ld_pair_checked(const T* __restrict__ X, int ld, int outer, int inner, int n_outer,
                                                    int n_inner) {
    const unsigned short* x = reinterpret_cast<const unsigned short*>(X) + (size_t)outer * ld + inner;
    const bool in = outer < n_outer;
    const unsigned h0 = (in && inner < n_inner) ? __ldg(x) : (unsigned short)0;
    const unsigned h1 = (in && inner + 1 < n_inner) ? __ldg(x + 1) : (unsigned short)0;
    return h0 | (h1 << 16);
}
// Any chunk, SPREAD: load j's outer index o0 + j * so, word i's inner index i0 + i * ISTEP.
__device__ __forceinline__ void load_p_spread_checked(Chunk& c, const T* __restrict__ P, int ldp, int o0, int so,
                                                      int n_outer, int i0, int n_inner) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        unsigned w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = ld_pair_checked(P, ldp, o0 + j * so, i0 + i * ISTEP, n_outer, n_inner);
        c.p[j] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}
// Any chunk: rows past n_wide and k past k_end read nothing and give zeros.
__device__ __forceinline__ void load_p_checked(Chunk& c, const T* __restrict__ P, int ldp, int w0, int n_wide, int k0,
                                               int k_end) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
        c.p[j] = P_KC ? gl_load8<P_VEC>(P, ldp, w0 + 8 * j, k0, n_wide, k_end)
                      : gl_load8<P_VEC>(P, ldp, k0 + j, w0, k_end, n_wide);
}
// Q's 8 k k0 .. k0+7 of column j0 + 8n (n < NT): one 16-byte load each from L1 when Q is
// contiguous along k and legal, else guarded 16-bit loads (zeros past n_thin and k_end).
template <bool FAST>
__device__ __forceinline__ void load_q(Chunk& c, const T* __restrict__ Q, int ldq, int j0, int n_thin, int k0, int k_end) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
        const int j = j0 + 8 * n;
        if constexpr (Q_KC) {
            if (FAST) c.q[n] = __ldg(reinterpret_cast<const uint4*>(Q + (size_t)j * ldq + k0));
            else c.q[n] = gl_load8<Q_VEC>(Q, ldq, j, k0, n_thin, k_end);
        } else {
            const unsigned short* q = reinterpret_cast<const unsigned short*>(Q);
            unsigned short h[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) h[e] = (j < n_thin && k0 + e < k_end) ? __ldg(q + (size_t)(k0 + e) * ldq + j) : (unsigned short)0;
            c.q[n] = make_uint4(h[0] | ((unsigned)h[1] << 16), h[2] | ((unsigned)h[3] << 16),
                                h[4] | ((unsigned)h[5] << 16), h[6] | ((unsigned)h[7] << 16));
        }
    }
}

// Q's words where P is SPREAD and KC: word i of column j0 + 8n holds k kb + 8i, +1 (kb = kc + 2t).
// FAST (the chunk and the columns inside, one element past the chunk readable): ld_pair from L1
// where Q is contiguous along k; else, and along the thin index always, checked 16-bit loads.
template <bool FAST>
__device__ __forceinline__ void load_q_spread(Chunk& c, const T* __restrict__ Q, int ldq, int j0, int n_thin, int kb,
                                              int k_end) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
        const int j = j0 + 8 * n;
        unsigned w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int k = kb + 8 * i;
            if constexpr (Q_KC) w[i] = FAST ? ld_pair<true>(Q + (size_t)j * ldq + k) : ld_pair_checked(Q, ldq, j, k, n_thin, k_end);
            else {
                const unsigned short* q = reinterpret_cast<const unsigned short*>(Q) + (size_t)k * ldq + j;
                const bool in = j < n_thin;
                const unsigned h0 = (in && k < k_end) ? __ldg(q) : (unsigned short)0;
                const unsigned h1 = (in && k + 1 < k_end) ? __ldg(q + ldq) : (unsigned short)0;
                w[i] = h0 | (h1 << 16);
            }
        }
        c.q[n] = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

// ---- the ring in shared memory (ASYNC): each 16-byte unit by decode.cuh's cp16 (16 bytes read, or
// 0: zeros, nothing read); units that need guarded loads go by gl_sts128 ------------------------

__device__ __forceinline__ unsigned word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// The chunk's 2 x 4 x NT mmas: k half h takes k 8t+4h .. 8t+4h+3 of each thread's 8.
__device__ __forceinline__ void multiply(float (&acc)[4][NT][4], const Chunk& c) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned b[NT][2];
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            b[n][0] = word(c.q[n], 2 * h);
            b[n][1] = word(c.q[n], 2 * h + 1);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            unsigned a[4];
            if constexpr (P_KC) {          // rows 16i + g (load 2i) and 16i + 8 + g (load 2i+1)
                a[0] = word(c.p[2 * i], 2 * h);
                a[1] = word(c.p[2 * i + 1], 2 * h);
                a[2] = word(c.p[2 * i], 2 * h + 1);
                a[3] = word(c.p[2 * i + 1], 2 * h + 1);
            } else {                       // rows 8g + 2i and 8g + 2i + 1: word i of each k row
                const unsigned k0 = word(c.p[4 * h], i), k1 = word(c.p[4 * h + 1], i);
                const unsigned k2 = word(c.p[4 * h + 2], i), k3 = word(c.p[4 * h + 3], i);
                a[0] = __byte_perm(k0, k1, 0x5410);
                a[1] = __byte_perm(k0, k1, 0x7632);
                a[2] = __byte_perm(k2, k3, 0x5410);
                a[3] = __byte_perm(k2, k3, 0x7632);
            }
#pragma unroll
            for (int n = 0; n < NT; ++n) gl_mma16816(acc[i][n], a, b[n]);
        }
    }
}

extern "C" __global__ void GL_SK_CLUSTER_DIMS __launch_bounds__(THREADS, 1)
gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
     float beta, TC* __restrict__ C, int ldc GL_EPI_PARAMS)
{
    extern __shared__ __align__(16) float red[];  // [WK][TILE]: each k-warp's partial tile
    const DecodeView v(M, N, K, A, lda, B, ldb);
#if GL_SPLITK
    float* const W = gl_splitk_workspace(C, M, ldc);   // this block's FP32 workspace
#endif
    const int k_first = v.k_first, k_end = v.k_end;
    const T* __restrict__ P = v.P;
    const T* __restrict__ Q = v.Q;
    const int ldp = v.ldp, ldq = v.ldq, n_wide = v.n_wide, n_thin = v.n_thin;
    const int row0 = v.row0, col0 = v.col0, wide0 = v.wide0, thin0 = v.thin0;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wk = warp % WK, wr = warp / WK;
    const int wbase = wide0 + 64 * wr;             // the warp's 64 rows of P
    // this thread's first load: KC row wbase + g at k 8t (SPREAD: 2t); WC k row 8t at rows wbase + 8g
    // (SPREAD: its first pair at wbase + 2g)
    const int w0 = P_KC ? wbase + g : wbase + (SPREAD ? 2 : 8) * g;
    const int j0 = thin0 + g;                      // its Q column in n-tile 0
    const bool rows_in = wbase + 64 <= n_wide;     // warp-uniform
    const bool thin_in = thin0 + NS <= n_thin;     // block-uniform
    const long long step = P_KC ? 8LL * ldp : (long long)ldp;
    const bool p_pairs = SPREAD && ((size_t)P & 3) == 0 && (ldp & 1) == 0;   // every pair 4-byte aligned

    float acc[4][NT][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][n][e] = 0.0f;

    auto load = [&](Chunk& c, int kc) {
        const bool k_in = kc + CHUNK <= k_end;
        // A warp across P's wide edge (rows_in false) keeps its loads whole and unguarded inside K,
        // its positions past the edge moved to readable ones (wsafe: the warp's first, else P's
        // first): guarded loads there would hold the whole kernel to that warp's pace.
        const int wsafe = wbase < n_wide ? wbase : 0;
        if constexpr (!SPREAD) {
            const int k0 = kc + 8 * t;
            const T* p0 = P + (P_KC ? (size_t)w0 * ldp + k0 : (size_t)k0 * ldp + w0);
            if (rows_in && k_in) load_p_fast(c, p0, step);
            // WC: a lane across the edge reads its whole 16 bytes (w0 + 8 <= ldp, a multiple of 8), in
            // the k row's padding, which the next k row bounds: not in the chunk of P's last k row
            else if (!P_KC && k_in && kc + CHUNK < K)
                load_p_fast(c, P + (size_t)k0 * ldp + (w0 < n_wide ? w0 : wsafe), step);
            else load_p_checked(c, P, ldp, w0, n_wide, k0, k_end);   // KC: whole rows or none, no halves
        } else {
            // word 0 of load 0 at (outer o0, inner i0): KC row w0 at k kc + 2t, WC k row kc + 8t at w0
            const int o0 = P_KC ? w0 : kc + 8 * t, i0 = P_KC ? kc + 2 * t : w0;
            // ld_pair may read the element after a pair: the one after the chunk must be P's (across
            // the wide edge, WC, a pair may also end past the k row: the next k row must follow)
            const bool past = P_KC ? kc + CHUNK < K : wbase + 64 < n_wide;
            const bool edge_ok = k_in && (P_KC ? p_pairs || past : kc + CHUNK < K);
            if (p_pairs && rows_in && k_in) load_p_words<true>(c, P + (size_t)o0 * ldp + i0, step);
            else if (rows_in && k_in && past) load_p_words<false>(c, P + (size_t)o0 * ldp + i0, step);
            else if (!rows_in && edge_ok) {
                int row[8], col[4];
#pragma unroll
                for (int j = 0; j < 8; ++j) row[j] = P_KC ? min(o0 + 8 * j, n_wide - 1) : o0 + j;
#pragma unroll
                for (int i = 0; i < 4; ++i) col[i] = P_KC ? i0 + 8 * i : (i0 + 16 * i < n_wide ? i0 + 16 * i : wsafe);
                if (p_pairs) load_p_words_at<true>(c, P, ldp, row, col);
                else load_p_words_at<false>(c, P, ldp, row, col);
            } else load_p_spread_checked(c, P, ldp, o0, P_KC ? 8 : 1, P_KC ? n_wide : k_end, i0, P_KC ? k_end : n_wide);
        }
        if constexpr (SPREAD && P_KC) {
            if (thin_in && k_in && kc + CHUNK < K) load_q_spread<true>(c, Q, ldq, j0, n_thin, kc + 2 * t, k_end);
            else load_q_spread<false>(c, Q, ldq, j0, n_thin, kc + 2 * t, k_end);
        } else {
            if (Q_VEC && thin_in && k_in) load_q<true>(c, Q, ldq, j0, n_thin, kc + 8 * t, k_end);
            else load_q<false>(c, Q, ldq, j0, n_thin, kc + 8 * t, k_end);
        }
    };

    // ASYNC: chunk kc's units to ring slot d; unit u of a warp's 32 lanes at slots + (d * UNITS +
    // u) * THREADS + 32 * warp (a warp's LDS.128 of one unit reads 512 contiguous bytes, 8 lanes
    // to a bank-free 128). A unit is copied whole or zero-filled; one that straddles an edge (KC:
    // the slice's end inside its 8 k; WC: P's wide end inside its 8 rows in P's last k row, whose
    // padding no next row bounds) is loaded by guarded loads and stored by the thread, which waits.
    //   Which lane copies which unit matters to the copies as it does not to loads into registers:
    //   cp.async serves a warp's 16-byte copies 8 lanes at a time, each 8 a request of their own
    //   lines, so WC's lanes, whose 4 consecutive lanes are 4 k rows, made every 8 lanes 4 requests
    //   of 32 bytes, several times the L2 requests and sectors of the register ring, at half its
    //   speed (docs/journal/thin.md). In the interior of a WC chunk lane 8t' + g' copies the
    //   unit of lane (g', t'): each 8 lanes one 128-byte run of one k row; the warp then shares its
    //   slots (__syncwarp), and lane (g, t) finds its unit at position 8t + (g + 2t) % 8, a
    //   rotation that keeps each 8 lanes of the LDS on distinct 16-byte banks. KC's 4 consecutive
    //   lanes are a row's 64 contiguous bytes, the chunk's whole width: they copy their own units.
    constexpr bool SWAP = !P_KC;
    uint4* const slots = reinterpret_cast<uint4*>(red + WK * TILE) + 32 * warp;
    const int mine = SWAP ? 8 * t + ((g + 2 * t) & 7) : lane;          // where this lane's P units are
    const int lg = lane % 8, lt = lane / 8;                               // SWAP: the unit this lane copies
    const unsigned own = (unsigned)__cvta_generic_to_shared(slots + mine);
    const unsigned copy = SWAP ? (unsigned)__cvta_generic_to_shared(slots + 8 * lt + ((lg + 2 * lt) & 7)) : own;
    const unsigned qown = (unsigned)__cvta_generic_to_shared(slots + lane);
    auto load_async = [&](int d, int kc) {
        constexpr unsigned U = THREADS * 16u;      // bytes between a lane's units
        const unsigned dd = (unsigned)d * UNITS * U;
        const int k0 = kc + 8 * t;
        const bool k_in = kc + CHUNK <= k_end;
        const bool kw = k0 + 8 <= k_end, kn = k0 >= k_end;   // the thread's 8 k all inside, none
        if (rows_in && k_in) {                     // the interior (warp-uniform): every unit whole
            const T* p0 = P + (P_KC ? (size_t)w0 * ldp + k0 : (size_t)(kc + 8 * lt) * ldp + wbase + 8 * lg);
#pragma unroll
            for (int j = 0; j < 8; ++j) cp16<true>(copy + dd + j * U, p0 + j * step, 16);
        } else if constexpr (P_KC) {
            if (kw || kn) {
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    const int r = w0 + 8 * j;
                    const bool in = kw && r < n_wide;
                    cp16<true>(own + dd + j * U, in ? P + (size_t)r * ldp + k0 : P, in ? 16 : 0);
                }
            } else {
#pragma unroll
                for (int j = 0; j < 8; ++j) gl_sts128(own + dd + j * U, gl_load8<true>(P, ldp, w0 + 8 * j, k0, n_wide, k_end));
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int k = k0 + j;
                const bool in = k < k_end && w0 < n_wide;
                // a lane across the wide edge reads its whole 16 bytes in the k row's padding
                // (w0 + 8 <= ldp, a multiple of 8), which the next k row bounds
                const bool whole = w0 + 8 <= n_wide || k + 1 < K;
                if (!in || whole) cp16<true>(own + dd + j * U, in ? P + (size_t)k * ldp + w0 : P, in ? 16 : 0);
                else gl_sts128(own + dd + j * U, gl_load8<true>(P, ldp, k, w0, k_end, n_wide));
            }
        }
#pragma unroll
        for (int n = 0; n < NT; ++n) {             // Q: contiguous along k, 16-byte access (SRING)
            const int j = j0 + 8 * n;
            const unsigned q = qown + dd + (8 + n) * U;
            if (thin_in && k_in) {
                cp16<false>(q, Q + (size_t)j * ldq + k0, 16);
            } else if (kw || kn || j >= n_thin) {
                const bool in = kw && j < n_thin;
                cp16<false>(q, in ? Q + (size_t)j * ldq + k0 : Q, in ? 16 : 0);
            } else {
                gl_sts128(q, gl_load8<true>(Q, ldq, j, k0, n_thin, k_end));
            }
        }
    };
    auto take = [&](Chunk& c, int d) {            // this lane's units of slot d
        const uint4* s = slots + d * UNITS * THREADS;
#pragma unroll
        for (int u = 0; u < 8; ++u) c.p[u] = s[u * THREADS + mine];
#pragma unroll
        for (int n = 0; n < NT; ++n) c.q[n] = s[(8 + n) * THREADS + lane];
    };

    // ---- main loop: RING chunks in flight, in registers or (SRING) in shared memory -------------
    // RING = DEPTH, at most 3 without 16-byte access: a pair that is not 4-byte aligned holds two
    // words in flight, and at 4 chunks ptxas (NVRTC 13.0) spilled. ASYNC where its ring does not
    // apply: 2, the depth its registers were counted at (core/decode.py).
    constexpr int RING = SRING ? DEPTH : ASYNC ? 2 : SPREAD && DEPTH > 3 ? 3 : DEPTH;
    constexpr int KSTEP = CHUNK * WK;
    const int kc0 = k_first + CHUNK * wk;
    if constexpr (SRING) {
        // every slot filled ahead; a slot is filled again right after its chunk's mmas. The slots
        // are the warp's own: a warp barrier orders the copies of other lanes before a lane reads
        // them (SWAP), and a lane's reads before other lanes copy over them; KC needs neither.
        // Not unrolled: a slot is an address, not a register, and one copy of the loop's loads,
        // edges included, keeps it within the instruction cache (unrolled by RING it was not:
        // no-instruction stalls, docs/journal/thin.md).
#pragma unroll 1
        for (int d = 0; d < RING; ++d) {
            if (kc0 + d * KSTEP < k_end) load_async(d, kc0 + d * KSTEP);
            gl_cp_commit();                        // one group per chunk, empty or not: the wait counts them
        }
        int d = 0;
#pragma unroll 1
        for (int k = kc0; k < k_end; k += KSTEP) {
            gl_cp_wait<RING - 1>();                // chunk k's group is the oldest of RING
            if constexpr (SWAP) __syncwarp();
            Chunk c;
            take(c, d);
            multiply(acc, c);
            if constexpr (SWAP) __syncwarp();
            if (k + RING * KSTEP < k_end) load_async(d, k + RING * KSTEP);
            gl_cp_commit();
            d = d + 1 == RING ? 0 : d + 1;
        }
    } else {
        // unrolled by RING so that every buffer index is a constant: registers, not local memory
        Chunk ring[RING];
#pragma unroll
        for (int d = 0; d < RING - 1; ++d)
            if (kc0 + d * KSTEP < k_end) load(ring[d], kc0 + d * KSTEP);
        for (int kc = kc0; kc < k_end; kc += RING * KSTEP) {
#pragma unroll
            for (int d = 0; d < RING; ++d) {
                const int k = kc + d * KSTEP;
                if (k >= k_end) break;
                const int kn = k + (RING - 1) * KSTEP;
                if (kn < k_end) load(ring[(d + RING - 1) % RING], kn);
                multiply(acc, ring[d]);
            }
        }
    }

    // ---- the k-warps' partial tiles meet in shared memory ---------------------------------------
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {              // the fragment's row g (r = 0) or g + 8
            const int w = 64 * wr + (P_KC ? 16 * i + 8 * r + g : SPREAD ? 16 * i + 2 * g + r : 8 * g + 2 * i + r);
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int e = 0; e < 2; ++e) red[wk * TILE + tile_index(w, 8 * n + 2 * t + e)] = acc[i][n][2 * r + e];
        }
    __syncthreads();

    // ---- epilogue: the k-warps added in order, then C, the workspace or the cluster's sum ------
    decode_sum_warps(red, row0, col0, [&](int e, int i, int j, float s) {
#if GL_SPLITK
        if (i < M && j < N) W[(size_t)i * ldc + j] = s;
#elif GL_SPLITK_CLUSTER
        red[e] = s;
#else
        gl_store_c_checked(C, ldc, M, N, i, j, s, GL_EPI(alpha, beta));
#endif
    });
#if GL_SPLITK_CLUSTER
    decode_cluster_sum(red, row0, col0, [&](int i, int j, float s) {
        gl_store_c_checked(C, ldc, M, N, i, j, s, GL_EPI(alpha, beta));
    });
#endif
}
