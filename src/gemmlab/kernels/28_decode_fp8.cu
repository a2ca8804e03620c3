// Rung 28 — FP8 decode: the memory-bound thin scaled matmul. Rung 24's streaming of the wide
// operand, for FP8 codes: each 16-byte unit is 16 k of one row, converted to fp16 in registers for
// four mma.sync m16n8k16 per 64-k chunk, the scales applied as rung 25 applies them.
//                            seeds: beyond them (issue 42: FP8 GEMMs at the M of decoding, 1 to 32)
//
// What it is for. An FP8 model decoding a token multiplies M = 1..32 activations by FP8 weights:
// each byte of B feeds M multiply-adds, so the time is B's bytes at the memory rate (14336 x 4096:
// 59 MB), half of bf16's. Rung 25 is built for the other regime: a 128-row tile for M = 1 and all
// of K per tile, so 4096 x 4096 is 32 tiles of 128 x 128 for 132 SMs, each streaming its 512 KB of
// B alone.
//
// What it changes against rung 24 (decode):
// * Bytes. A thread's 16-byte unit of a row is 16 k of FP8 (8 k of 16-bit in rung 24), so a warp's
//   chunk is 64 rows of P x 64 k.
// * Conversion. Hopper's FP8 tensor-core path is wgmma; its mma.sync has no FP8 form in hardware
//   (ptxas turns mma.sync .e4m3 into F2FP unpacks, HMMA.16816 into fresh accumulators and an FADD
//   per accumulator: 560 instructions per chunk at NS = 32, where the memory's rate left issue
//   for about 250). So the kernel converts the codes itself, cvt.rn.f16x2.e4m3x2 (or e5m2x2: one
//   F2FP per two codes; every e4m3 and e5m2 value is an fp16 value, so the products are exact),
//   Q's NS/8 units once per chunk and P's an m-tile (two units) at a time, and chains HMMA.16816
//   with FP32 accumulators over the whole slice. The k order inside a chunk is free, as in rung 24:
//   the m-th of a chunk's four k16 mmas takes, for thread t, the codes 4m .. 4m+3 of its 16 (k
//   16t+4m ..): the fragment's pair "2t" from codes 4m, 4m+1, its pair "2t+8" from 4m+2, 4m+3, for
//   P's rows and Q's columns alike.
// * K-major operands only, with 16-byte access (the plan copies any other: the registry's k_major
//   reads, as rung 25's): the ring in shared memory filled by cp.async (rung 24's ASYNC form, the
//   faster one on both GPUs measured), every edge a zero fill of the copy itself (cp.async's source
//   size: the bytes inside K, or none past P's or Q's end), so no guarded load at all. The ring and
//   the k-warps' partial tiles share the shared memory (one after the other).
// * Precision. The HMMA's sums are FP32's, so "fp8" needs no promotion here and runs as "fp8_fast"
//   does; block scales keep each chunk's sums apart, since they multiply them (PROMOTE).
// * Scales (scales.cuh): tensor-wise folded into alpha; row-wise scale_a[i] * scale_b[j] on each
//   output as it is stored (the split's sums are linear in them); block-wise the chunk's sums times
//   their blocks' scales (a chunk lies in one k block of 128: chunks start at multiples of 64 and
//   slices at multiples of BK): with M thin, scale_b of the warp's 64 rows of B (one 128-row
//   block) and scale_a of each of the thread's columns; with N thin, scale_a of each of the
//   thread's rows of A and scale_b of the tile's columns (one block).
// * K split as rung 24's, over the WK warps of a block and the SPLITK blocks of a cluster
//   (SKCLUSTER=1; the workspace's reduction does not apply the scales, so this rung has no
//   workspace split), in a fixed order (decode.cuh).
// SASS: per chunk 8 LDGSTS.E.BYPASS.128 (P) and NS/8 LDGSTS.E.128 (Q), as many LDS.128, 64 + 8 NS/8
// F2FP.F16.E4M3.UNPACK_B (or E5M2) and 4 * 4 * NS/8 HMMA.16816.F32; no spill.
#include "common.cuh"
#include "scales.cuh"

#if GL_DTYPE != 3
#error "rung 28 (decode_fp8) takes FP8 operands (GL_DTYPE 3)"
#endif
#if GL_C_DTYPE == 3
#error "rung 28 (decode_fp8) writes C in fp32, fp16 or bf16 (GL_C_DTYPE 0, 1 or 2)"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "rung 28 (decode_fp8) needs sm_89 or newer for cvt.rn.f16x2.e4m3x2 and .e5m2x2"
#endif
#ifndef GL_DYN_SMEM
#error "rung 28 (decode_fp8) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif
#if GL_A_COL || !GL_B_COL || !GL_VEC_A || !GL_VEC_B
#error "rung 28 (decode_fp8) reads K-major operands with 16-byte access: a row-major A and a column-major B"
#endif
#if GL_SPLITK || GL_BATCHED
#error "rung 28 (decode_fp8) splits K in a cluster only (SKCLUSTER=1) and computes one product per launch"
#endif
#ifndef GL_PRECISION
#define GL_PRECISION 0        // 0 "fp8", 1 "fp8_fast": the same kernel here (FP32 sums either way: the header)
#endif
#ifndef GL_FP8_A
#define GL_FP8_A 0            // 0 e4m3, 1 e5m2
#endif
#ifndef GL_FP8_B
#define GL_FP8_B 0
#endif
#include "decode.cuh"   // the tile's geometry (THIN_N, NS, BR, NT, WR, WARPS, TILE), cp16, the sums

// ---- geometry (the registry's constraints, core/decode.py, restated) -----------------------------
constexpr int CHUNK = 64;                          // k per warp step: four k16-mmas
constexpr int UNITS = 8 + NT;                      // a thread's 16-byte units of a chunk: P's 8, Q's NT
constexpr bool PROMOTE = GL_SCALE == 3;         // each chunk's sums apart, for its block scales
static_assert(DEPTH >= 2 && DEPTH <= 8, "DEPTH (chunks in flight per thread) must be 2 to 8");
static_assert(BK % (CHUNK * WK) == 0, "BK must be a multiple of 64 * WK: a slice holds whole steps of the block");
static_assert(GL_SCALE != 3 || GL_PRECISION == 0, "block scales multiply each chunk's own sums (no fp8_fast)");
// the ring during the main loop, the k-warps' partial tiles after it, in the same shared memory
constexpr int RING_B = DEPTH * UNITS * 16 * THREADS, RED_B = WK * TILE * 4;
static_assert((RING_B > RED_B ? RING_B : RED_B) <= GL_DYN_SMEM,
              "the registry's shared-memory size (GL_DYN_SMEM) is too small for the ring or the partial tiles");

// Four FP8 codes (a 32-bit word) as two fp16 pairs: codes 0, 1 in lo, codes 2, 3 in hi (one
// F2FP.F16.E4M3.UNPACK_B, or E5M2, each). FMT: 1 e5m2, 0 e4m3.
template <int FMT>
__device__ __forceinline__ void to_f16(unsigned w, unsigned& lo, unsigned& hi) {
    // the word's halves as 16-bit registers by mov (ptxas reads them as .H0 / .H1 operands of the
    // F2FP: no shift to extract the high half)
    if constexpr (FMT)
        asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e5m2x2 %0, l;\n cvt.rn.f16x2.e5m2x2 %1, h;\n}\n"
            : "=r"(lo), "=r"(hi) : "r"(w));
    else
        asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
            : "=r"(lo), "=r"(hi) : "r"(w));
}
// A unit's 16 codes as 8 fp16 pairs: f[2r], f[2r + 1] from its word r.
template <int FMT>
__device__ __forceinline__ void unit_f16(const uint4& u, unsigned (&f)[8]) {
    to_f16<FMT>(u.x, f[0], f[1]);
    to_f16<FMT>(u.y, f[2], f[3]);
    to_f16<FMT>(u.z, f[4], f[5]);
    to_f16<FMT>(u.w, f[6], f[7]);
}
// The operands' formats: P's is A's where N is thin (P = A), else B's (P = B's rows).
#if BN <= BM
constexpr int FMT_P = GL_FP8_A, FMT_Q = GL_FP8_B;
#else
constexpr int FMT_P = GL_FP8_B, FMT_Q = GL_FP8_A;
#endif
// d += a (16 x 16 of P, row) * b (16 x 8 of Q, col) in fp16 with FP32 accumulators at
// (lane/4, 2*(lane%4) +0/+1) and eight rows below (rung 24's layout).
__device__ __forceinline__ void hmma(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                     unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Block scales of a chunk (GL_SCALE 3): s(row, column) = wide[i][r] * thin[n][e] for the thread's
// accumulators (m-tile i, its row g + 8r; n-tile n, its column 2t + e); one side is the same for
// the whole warp (M thin: scale_b of the warp's 128-row block of B; N thin: scale_b of the tile's
// columns), loaded once.
struct ChunkScales {
    float wide[4][2];
    float thin[NT][2];
};

// The chunk's mmas: Q's units converted once, then P's an m-tile at a time (p: this lane's unit 0 in
// the ring slot, units THREADS apart), k16 mma m taking the pairs 2m, 2m + 1 of each (the header's
// order); with PROMOTE each (m-tile, n-tile)'s chunk sums in fresh accumulators, then times their
// block scales into acc.
__device__ __forceinline__ void multiply(float (&acc)[4][NT][4], const uint4* p, const uint4 (&q)[NT],
                                         const ChunkScales& s) {
    unsigned qf[NT][8];
#pragma unroll
    for (int n = 0; n < NT; ++n) unit_f16<FMT_Q>(q[n], qf[n]);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        unsigned p0[8], p1[8];                     // rows g and g + 8 of m-tile i
        unit_f16<FMT_P>(p[2 * i * THREADS], p0);
        unit_f16<FMT_P>(p[(2 * i + 1) * THREADS], p1);
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            float (&c)[4] = PROMOTE ? d : acc[i][n];
#pragma unroll
            for (int m = 0; m < 4; ++m) hmma(c, p0[2 * m], p1[2 * m], p0[2 * m + 1], p1[2 * m + 1], qf[n][2 * m], qf[n][2 * m + 1]);
            if constexpr (PROMOTE) {
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][n][e] = fmaf(d[e], s.wide[i][e / 2] * s.thin[n][e % 2], acc[i][n][e]);
            }
        }
    }
}

extern "C" __global__ void GL_SK_CLUSTER_DIMS __launch_bounds__(THREADS, 1)
gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
     float beta, TC* __restrict__ C, int ldc GL_EPI_PARAMS GL_SCALE_PARAMS)
{
    // the ring, then (after the main loop) [WK][TILE]: each k-warp's partial tile
    extern __shared__ __align__(16) float red[];
    const DecodeView v(M, N, K, A, lda, B, ldb);
    const int k_first = v.k_first, k_end = v.k_end;
    const T* __restrict__ P = v.P;
    const T* __restrict__ Q = v.Q;
    const int ldp = v.ldp, ldq = v.ldq, n_wide = v.n_wide, n_thin = v.n_thin;
    const int row0 = v.row0, col0 = v.col0, wide0 = v.wide0, thin0 = v.thin0;
    const GlScales sc{GL_SCALE_ARGS};

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wk = warp % WK, wr = warp / WK;
    const int wbase = wide0 + 64 * wr;             // the warp's 64 rows of P
    const int w0 = wbase + g;                      // this thread's first row (unit u: w0 + 8u)
    const int j0 = thin0 + g;                      // its Q column in n-tile 0 (n-tile n: j0 + 8n)

    float acc[4][NT][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][n][e] = 0.0f;

    // Unit u of a warp's 32 lanes of ring slot d at slots + (d * UNITS + u) * THREADS + 32 * warp:
    // a warp's LDS.128 of one unit reads 512 contiguous bytes. Each lane copies and reads back its
    // own units: cp.async.wait_group orders them, no barrier.
    uint4* const slots = reinterpret_cast<uint4*>(red) + 32 * warp;
    const unsigned own = (unsigned)__cvta_generic_to_shared(slots + lane);
    // the rows past P's end and the columns past Q's read nothing (their outputs are never stored);
    // the k past the slice's end are zeros
    const T* const prow = P + (size_t)min(w0, n_wide - 1) * ldp;
    const T* const qcol = Q + (size_t)min(j0, n_thin - 1) * ldq;
    auto load_async = [&](int d, int kc) {
        constexpr unsigned U = THREADS * 16u;      // bytes between a lane's units
        const unsigned dd = own + (unsigned)d * UNITS * U;
        const int k0 = kc + 16 * t;
        const int kb = max(0, min(16, k_end - k0));   // the bytes of the thread's 16 k inside the slice
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const bool in = w0 + 8 * u < n_wide;
            cp16<true>(dd + u * U, in ? prow + (size_t)8 * u * ldp + k0 : P, in ? kb : 0);
        }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            const bool in = j0 + 8 * n < n_thin;
            cp16<false>(dd + (8 + n) * U, in ? qcol + (size_t)8 * n * ldq + k0 : Q, in ? kb : 0);
        }
    };

    // block scales of the chunk at kc (its k block kc / 128); other scalings need none
    auto chunk_scales = [&](ChunkScales& s, int kc) {
#if GL_SCALE == 3
        const int kb = kc / 128;
        if constexpr (THIN_N) {   // P = A: scale_a of each row, scale_b of the tile's columns (one block)
            const float b = __ldg(sc.sb + kb * sc.sb_k + (thin0 / 128) * sc.sb_n);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int r = 0; r < 2; ++r)
                    s.wide[i][r] = __ldg(sc.sa + (size_t)min(wbase + 16 * i + 8 * r + g, n_wide - 1) * sc.sa_m + kb * sc.sa_k);
#pragma unroll
            for (int n = 0; n < NT; ++n) s.thin[n][0] = s.thin[n][1] = b;
        } else {                  // P = B's rows: scale_b of the warp's 128-row block, scale_a of each column
            const float b = __ldg(sc.sb + kb * sc.sb_k + (wbase / 128) * sc.sb_n);
#pragma unroll
            for (int i = 0; i < 4; ++i) s.wide[i][0] = s.wide[i][1] = b;
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    s.thin[n][e] = __ldg(sc.sa + (size_t)min(thin0 + 8 * n + 2 * t + e, n_thin - 1) * sc.sa_m + kb * sc.sa_k);
        }
#endif
    };

    // ---- main loop: DEPTH chunks in flight in the warp's ring slots ---------------------------
    // Every slot filled ahead; a slot is filled again right after its chunk's mmas. Not unrolled
    // (rung 24's reason: a slot is an address, and one copy of the loop stays in the instruction
    // cache).
    constexpr int KSTEP = CHUNK * WK;
    const int kc0 = k_first + CHUNK * wk;
#pragma unroll 1
    for (int d = 0; d < DEPTH; ++d) {
        if (kc0 + d * KSTEP < k_end) load_async(d, kc0 + d * KSTEP);
        gl_cp_commit();                            // one group per chunk, empty or not: the wait counts them
    }
    int d = 0;
#pragma unroll 1
    for (int k = kc0; k < k_end; k += KSTEP) {
        ChunkScales s;
        chunk_scales(s, k);                        // their loads in flight during the wait
        gl_cp_wait<DEPTH - 1>();                   // chunk k's group is the oldest of DEPTH
        const uint4* slot = slots + d * UNITS * THREADS + lane;   // this lane's units of slot d
        uint4 q[NT];
#pragma unroll
        for (int n = 0; n < NT; ++n) q[n] = slot[(8 + n) * THREADS];
        multiply(acc, slot, q, s);
        if (k + DEPTH * KSTEP < k_end) load_async(d, k + DEPTH * KSTEP);
        gl_cp_commit();
        d = d + 1 == DEPTH ? 0 : d + 1;
    }

    // ---- the k-warps' partial tiles meet in shared memory, over the ring (every copy landed: the
    // groups after the last chunk's are empty; every warp past its last read of the ring) ------------
    gl_cp_wait<0>();
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int r = 0; r < 2; ++r) {              // the fragment's row g (r = 0) or g + 8
            const int w = 64 * wr + 16 * i + 8 * r + g;
#pragma unroll
            for (int n = 0; n < NT; ++n)
#pragma unroll
                for (int e = 0; e < 2; ++e) red[wk * TILE + tile_index(w, 8 * n + 2 * t + e)] = acc[i][n][2 * r + e];
        }
    __syncthreads();

    // ---- epilogue: the k-warps added in order, then the cluster's sum; C(i, j) takes its row-wise
    // scales (GL_SCALE 2), alpha the tensor-wise ones (GL_SCALE 1) ------------------------------
    const GlEpi ep = GL_EPI(sc.alpha(alpha), beta);
    auto store = [&](int i, int j, float v) {
        if (i >= M || j >= N) return;
#if GL_SCALE == 2
        v *= __ldg(sc.sa + i) * __ldg(sc.sb + j);
#endif
        gl_store_c(C, ldc, i, j, v, ep);
    };
    decode_sum_warps(red, row0, col0, [&](int e, int i, int j, float v) {
#if GL_SPLITK_CLUSTER
        red[e] = v;
#else
        store(i, j, v);
#endif
    });
#if GL_SPLITK_CLUSTER
    decode_cluster_sum(red, row0, col0, store);
#endif
}
