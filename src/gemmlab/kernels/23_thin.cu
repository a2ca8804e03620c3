// Rung 23 — thin GEMM: one side of C at most 32 wide. The wide operand is streamed through shared
// memory once, the thin one sits beside it, and the K loop is split over the warps of a block.
//                              seeds: beyond them (issue 9 section 2, the few-output-tile shapes)
//
// What it is for. When N (or M) is 16, C is a 4096 x 16 strip and the GEMM is a pass over A:
// every A element feeds only 16 FMAs, and the run time is A's bytes at the memory rate
// (4096x16x4096 FP32: 64 MB of A). The tiled rungs are built for the other
// regime. Rung 18 with its `tall` 128x32 tile pads N = 16 to 32, copies a row-major A to shared
// memory 4 bytes at a time (it transposes A on the way, for its k-major fragments), and needs
// split-K with an FP32 workspace to fill the SMs: it ran behind cuBLAS there, and cuBLAS itself
// well above the memory time (docs/journal/thin.md).
//
// What changes:
// * The tile is wide x thin: BR rows of the wide operand P by NS (4..32) columns of the thin one
//   Q. With N thin (BN <= BM) P is A and Q is B; with M thin (BM < BN) P is B and Q is A. C
//   stays row-major in the kernel (common.cuh), so the two cases differ in which index of C is
//   the wide one. Launch geometry, split-K and the GL_TALL grid are the registry's uniform ones.
// * P keeps its global layout in shared memory: no transposition, so every copy of an aligned P
//   is a 16-byte cp.async (LDGSTS.128) in every layout, and an unaligned P is copied 4 bytes at a
//   time into the same layout. Whichever way P is contiguous, a thread reads 4 of its elements
//   with one LDS.128: four k of one row (P contiguous along k: A row-major, B column-major, the
//   "KC" case) or four rows at one k (P contiguous along its wide index, the "MC" case).
// * The 32 lanes of a warp are 4 row groups x 8 k groups, and every warp takes a different share
//   of each K tile: a thread owns BR/4 rows x NS columns of partial sums (at most 128) over its
//   k. After the K loop the 8*WARPS partial sums of every output meet in shared memory and are
//   added in a fixed order (slot 0 first): deterministic, no atomics, no second kernel.
// * Q's tile is read by broadcast: the four row groups of a warp read the same Q element. Its
//   shared rows are NS+4 floats (NS/4 odd: NS), an odd number of 16-byte units, so the 8 k groups
//   of a warp read 8 distinct bank groups; in the KC case Q's rows are also permuted
//   (k -> (k%4)*(BK/4) + k/4) so that the 8 k groups, which read the k%4-th k of 8 consecutive
//   4-k chunks, read 8 consecutive rows.
// * Bank conflicts of P: KC: 8 lanes read 128 contiguous bytes of a row, 4 rows per instruction
//   (4 wavefronts, the minimum for 512 bytes). MC: 4 lanes read 64 contiguous bytes of a k row,
//   8 k rows per instruction; a row stride of 16 (mod 32) floats puts consecutive rows in
//   opposite halves of the banks (4 wavefronts).
// Edges: every copy names the bytes inside the matrix (cp.async src-size), the hardware zero-fills
// the rest, and a copy wholly outside reads nothing; the epilogue's stores are bounds-checked
// (gl_store_c4), C is not read when beta == 0.
//
// The design (H100, 4096x16x4096 FP32, the default 32x16 tile, 128 threads, BK 128, 3 stages):
// 128 blocks, one per SM; a block's K tile is 16 KB of A, and a thread's share of it is 8 copies,
// 24 LDS.128 and 512 FFMA, comfortably faster than the memory delivers the tile: the run should be
// A's bytes at close to the memory rate.
// Measured (the tuned entries of h100_tune_thin_*.json; h100_fp32_suite.json; docs/journal/thin.md):
// ahead of cuBLAS at 4096x16x4096 and 16x4096x4096, but short of the prediction. Nsight Compute
// (benchmarks/profiles/h100_profile_thin_fp32_*.json, 4 warps per block) found DRAM well short of
// busy and the warps issuing a minority of their cycles; 8 warps per block ran no faster, nor did
// 4 or 6 stages (h100_tune_thin_4096x16x4096.json): the limit is the memory's rate for this access,
// not the issue rate. The KC case uses nearly all of a thread's registers (128 sums, 8 float4 of P,
// 4 of Q), none spilled under NVRTC 13.0 or 13.5.
#include "common.cuh"

#if GL_DTYPE != 0
#error "rung 23 (thin) is FP32 only (GL_DTYPE 0): it computes on the CUDA cores"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "rung 23 (thin) needs sm_80 or newer for cp.async"
#endif
#ifndef GL_DYN_SMEM
#error "rung 23 (thin) needs GL_DYN_SMEM, the dynamic shared memory the launch gives each block"
#endif

// ---- geometry (the registry's constraints, restated) ----------------------------------------
constexpr bool THIN_N = BN <= BM;                  // N thin: P = A (wide index m), Q = B
constexpr int NS = THIN_N ? BN : BM;               // the thin side of the tile
constexpr int BR = THIN_N ? BM : BN;               // the wide side: rows of P
constexpr bool P_KC = THIN_N ? (GL_A_COL == 0) : (GL_B_COL != 0);   // P contiguous along k
constexpr bool P_VEC = (THIN_N ? GL_VEC_A : GL_VEC_B) != 0;          // 16-byte copies of P legal
constexpr bool Q_JC = THIN_N ? (GL_B_COL == 0) : (GL_A_COL != 0);   // Q contiguous along its thin index
constexpr bool Q_VEC = (THIN_N ? GL_VEC_B : GL_VEC_A) != 0 && Q_JC;
constexpr int WARPS = THREADS / 32;
constexpr int TR = BR / 4;                         // rows of P per thread (4 row groups per warp)
constexpr int SLOTS = 8 * WARPS;                   // threads sharing one row set: 8 k groups per warp
static_assert(NS % 4 == 0 && NS <= 32, "the thin side min(BM, BN) must be 4, 8, ..., 32");
static_assert(BR == 16 || BR == 32, "the wide side max(BM, BN) must be 16 or 32 (64 rows spilled under NVRTC 13.0)");
static_assert(THREADS % 32 == 0 && BK % THREADS == 0, "BK must be a multiple of THREADS: every thread takes whole 4-k chunks of a tile");
static_assert(TR * NS <= 128, "at most 128 partial sums per thread: (max(BM,BN)/4) * min(BM,BN) <= 128");
static_assert(STAGES >= 2, "the pipeline needs at least 2 stages");

// ---- shared memory, per stage: Ps then Qs ------------------------------------------------------
constexpr int P_LD = P_KC ? BK : BR + (BR % 32 == 0 ? 16 : 0);   // floats per shared row of P
constexpr int P_STAGE = (P_KC ? BR : BK) * P_LD;
constexpr int Q_LD = NS + ((NS / 4) % 2 ? 0 : 4);                // an odd number of 16-byte units
constexpr int STAGE = P_STAGE + BK * Q_LD;
constexpr int PIPE_BYTES = STAGES * STAGE * 4;
constexpr int RED_LD = BR * NS + 4;                              // one slot's partial tile (+16 B: banks)
constexpr int RED_BYTES = SLOTS * RED_LD * 4;
static_assert(PIPE_BYTES <= GL_DYN_SMEM && RED_BYTES <= GL_DYN_SMEM,
              "the registry's shared-memory size (GL_DYN_SMEM) is too small for this tile");

// Q's shared row of k: KC permutes so the k%4-th k of consecutive 4-k chunks are consecutive rows
__device__ __forceinline__ constexpr int q_row(int k) { return P_KC ? (k % 4) * (BK / 4) + k / 4 : k; }

// ---- one K tile of P and Q: global -> shared -------------------------------------------------
// P(i, k): P_KC ? P[i*ld + k] : P[k*ld + i], i the wide index (< n_wide), k < K.
// Q(k, j): Q_JC ? Q[k*ld + j] : Q[j*ld + k], j the thin index (< n_thin).
// Both are copied in their global layout: a tile is OUTER rows (the strided index) of D units of
// W elements (the contiguous index), unit u -> (u / D, (u % D) * W), and thread tid copies units
// tid + p*THREADS. Global offset of unit (o, in): (o0 + o) * ld + in0 + in in both layouts.
template <int OUTER, int D>
struct Units {
    static constexpr int TOTAL = OUTER * D;
    static constexpr int PER = GL_CEIL_DIV(TOTAL, THREADS);
    // every thread's copy p at compile-time offsets (rows, units) from its copy 0
    static constexpr bool UNIFORM = TOTAL % THREADS == 0 && (THREADS % D == 0 || D % THREADS == 0);
    __device__ static constexpr int d_o(int p) { return THREADS % D == 0 ? p * (THREADS / D) : p / (D / THREADS); }
    __device__ static constexpr int d_in(int p) { return THREADS % D == 0 ? 0 : (p % (D / THREADS)) * THREADS; }
};
constexpr int WP = P_VEC ? 4 : 1, WQ = Q_VEC ? 4 : 1;
using UP = Units<P_KC ? BR : BK, (P_KC ? BK : BR) / WP>;
using UQ = Units<Q_JC ? BK : NS, (Q_JC ? NS : BK) / WQ>;
// KC's permuted Q rows are affine in k only in steps of 4: the uniform Q path needs each copy's k
// offset to be one (true of the presets; other tiles take the checked path)
__device__ constexpr bool q_steps_of_4() {
    for (int p = 0; p < UQ::PER; ++p)
        if ((Q_JC ? UQ::d_o(p) : UQ::d_in(p) * WQ) % 4) return false;
    return true;
}
constexpr bool Q_UNIFORM = UQ::UNIFORM && (!P_KC || q_steps_of_4());

template <int W>
__device__ __forceinline__ void cp(unsigned dst, const float* src, int bytes) {
    gl_cp<4 * W>(dst, src, bytes);
}

// Interior tile (every unit inside the matrix): copy p at compile-time offsets from the thread's
// copy 0 (shared byte offset `dst`, global `src`): one IMAD and one LDGSTS each.
__device__ __forceinline__ void full_p(unsigned dst, const float* __restrict__ src, int ld) {
#pragma unroll
    for (int p = 0; p < UP::PER; ++p)
        cp<WP>(dst + 4u * (UP::d_o(p) * P_LD + UP::d_in(p) * WP), src + (long long)UP::d_o(p) * ld + UP::d_in(p) * WP, 4 * WP);
}
__device__ __forceinline__ void full_q(unsigned dst, const float* __restrict__ src, int ld) {
#pragma unroll
    for (int p = 0; p < UQ::PER; ++p) {
        const int dk = Q_JC ? UQ::d_o(p) : UQ::d_in(p) * WQ, dj = Q_JC ? UQ::d_in(p) * WQ : UQ::d_o(p);
        cp<WQ>(dst + 4u * ((P_KC ? dk / 4 : dk) * Q_LD + dj), src + (long long)UQ::d_o(p) * ld + UQ::d_in(p) * WQ, 4 * WQ);
    }
}

// Any tile: each copy reads only the bytes inside the matrix (cp.async src-size), the hardware
// zero-fills the rest; a copy wholly outside reads nothing (src-size 0, pointed at the base).
__device__ __forceinline__ void checked_p(unsigned s, const float* __restrict__ P, int ld, int wide0, int n_wide,
                                          int kt, int K, int tid) {
    // An opaque copy of tid: this path's address arithmetic is redone at each tile that takes it
    // instead of being hoisted out of the K loop, where its 64-bit results would hold registers
    // the sums need (ptxas spilled 80-516 bytes with them hoisted)
    asm volatile("" : "+r"(tid));
#pragma unroll
    for (int p = 0; p < UP::PER; ++p) {
        const int u = tid + p * THREADS;
        if (UP::TOTAL % THREADS == 0 || u < UP::TOTAL) {
            constexpr int D = (P_KC ? BK : BR) / WP;
            const int o = u / D, in = (u % D) * WP;
            const int i = P_KC ? wide0 + o : wide0 + in, k = P_KC ? kt + in : kt + o;
            const int left = P_KC ? K - k : n_wide - i;          // elements left along the contiguous side
            const bool row_in = P_KC ? i < n_wide : k < K;
            const int bytes = row_in && left > 0 ? 4 * min(WP, left) : 0;
            const float* src = bytes ? P + (P_KC ? (long long)i * ld + k : (long long)k * ld + i) : P;
            cp<WP>(s + 4u * (o * P_LD + in), src, bytes);
        }
    }
}
__device__ __forceinline__ void checked_q(unsigned s, const float* __restrict__ Q, int ld, int thin0, int n_thin,
                                          int kt, int K, int tid) {
    asm volatile("" : "+r"(tid));                  // as in checked_p
#pragma unroll
    for (int p = 0; p < UQ::PER; ++p) {
        const int u = tid + p * THREADS;
        if (UQ::TOTAL % THREADS == 0 || u < UQ::TOTAL) {
            constexpr int D = (Q_JC ? NS : BK) / WQ;
            const int o = u / D, in = (u % D) * WQ;
            const int k = Q_JC ? o : in, j = Q_JC ? in : o;
            const int gk = kt + k, gj = thin0 + j;
            const int bytes = gk < K && gj < n_thin ? 4 * min(WQ, n_thin - gj) : 0;
            const float* src = bytes ? Q + (Q_JC ? (long long)gk * ld + gj : (long long)gj * ld + gk) : Q;
            cp<WQ>(s + 4u * (q_row(k) * Q_LD + j), src, bytes);
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm(int M, int N, int K, float alpha, const T* __restrict__ A, int lda, const T* __restrict__ B, int ldb,
     float beta, T* __restrict__ C, int ldc GL_EPI_PARAMS)
{
    extern __shared__ __align__(16) float smem[];  // [STAGES][ Ps | Qs ], then the partial sums
    const unsigned s_base = (unsigned)__cvta_generic_to_shared(smem);

#if GL_SPLITK
    gl_splitk_partial(A, lda, B, ldb, K, C, M, ldc, BK, alpha, beta);   // this block's slice of K
#endif
    const GlEpi ep = GL_EPI(alpha, beta);
    const float* __restrict__ P = THIN_N ? A : B;
    const float* __restrict__ Q = THIN_N ? B : A;
    const int ldp = THIN_N ? lda : ldb, ldq = THIN_N ? ldb : lda;
    const int n_wide = THIN_N ? M : N, n_thin = THIN_N ? N : M;
    const int wide0 = (THIN_N ? GL_TILE_ROW : (int)blockIdx.x) * BR;
    const int thin0 = (THIN_N ? (int)blockIdx.x : GL_TILE_ROW) * NS;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    // KC: 8 consecutive lanes read 8 consecutive 4-k chunks of a row; MC: 4 consecutive lanes read
    // 16 consecutive rows at one k
    const int lr = P_KC ? lane / 8 : lane % 4;     // row group
    const int lk = P_KC ? lane % 8 : lane / 4;     // k group
    const int slot = warp * 8 + lk;
    const int tiles = GL_CEIL_DIV(K, BK);

    // ---- load: tile t -> stage t % STAGES, one commit group per tile -----------------------------
    // This thread's copy 0 of P and of Q: shared byte offset in a stage, and global pointer at tile
    // 0 (advanced one tile per issue); the interior path needs nothing else.
    constexpr int DP = (P_KC ? BK : BR) / WP, DQ = (Q_JC ? NS : BK) / WQ;
    const int po = tid / DP, pin = (tid % DP) * WP, qo = tid / DQ, qin = (tid % DQ) * WQ;
    const unsigned p_dst = 4u * (po * P_LD + pin);
    const unsigned q_dst = 4u * (P_STAGE + q_row(Q_JC ? qo : qin) * Q_LD + (Q_JC ? qin : qo));
    const float* p_src = P + (P_KC ? (long long)(wide0 + po) * ldp + pin : (long long)po * ldp + wide0 + pin);
    const float* q_src = Q + (Q_JC ? (long long)qo * ldq + thin0 + qin : (long long)(thin0 + qo) * ldq + qin);
    const long long p_step = P_KC ? BK : (long long)BK * ldp, q_step = Q_JC ? (long long)BK * ldq : BK;
    const bool p_inside = wide0 + BR <= n_wide, q_inside = thin0 + NS <= n_thin;   // block-uniform
    int ws = 0;
    auto issue = [&](int t) {
        if (t < tiles) {
            const unsigned s = s_base + 4u * (unsigned)(ws * STAGE);
            const bool k_inside = (t + 1) * BK <= K;
            if (UP::UNIFORM && p_inside && k_inside) full_p(s + p_dst, p_src, ldp);
            else checked_p(s, P, ldp, wide0, n_wide, t * BK, K, tid);
            if (Q_UNIFORM && q_inside && k_inside) full_q(s + q_dst, q_src, ldq);
            else checked_q(s + 4u * P_STAGE, Q, ldq, thin0, n_thin, t * BK, K, tid);
            p_src += p_step;
            q_src += q_step;
        }
        ws = (ws + 1 == STAGES) ? 0 : ws + 1;
        gl_cp_commit();                            // (empty past the last tile: uniform wait counts)
    };

    float acc[TR][NS];
#pragma unroll
    for (int t = 0; t < TR; ++t)
#pragma unroll
        for (int j = 0; j < NS; ++j) acc[t][j] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) issue(s);

    // ---- main loop: one barrier per tile --------------------------------------------------------
    // Wait for tile t (this thread's copies), barrier (everyone's, and everyone is done reading
    // tile t-1's stage), refill that stage with tile t+STAGES-1, then this thread's k of tile t.
    for (int t = 0; t < tiles; ++t) {
        gl_cp_wait<STAGES - 2>();
        __syncthreads();
        issue(t + STAGES - 1);
        const float* ps = smem + (t % STAGES) * STAGE;
        const float* qs = ps + P_STAGE;
        if constexpr (P_KC) {
            // chunk c: k = 4c .. 4c+3 of the tile. The smaller of the two fragments is held whole:
            // TR <= NS: the 4 k of every row (4*TR registers), then Q one k row at a time;
            // else Q's 4 k rows (4*NS registers), then P one row at a time (64x8 tiles spilled
            // 8-16 bytes holding 16 rows' float4)
#pragma unroll
            for (int s = 0; s < BK / (32 * WARPS); ++s) {
                const int c = lk + 8 * (warp + WARPS * s);
                if constexpr (TR <= NS) {
                    float4 p[TR];
#pragma unroll
                    for (int r = 0; r < TR; ++r) p[r] = *reinterpret_cast<const float4*>(&ps[(lr + 4 * r) * P_LD + 4 * c]);
#pragma unroll
                    for (int kk = 0; kk < 4; ++kk) {
                        float q[NS];
#pragma unroll
                        for (int j = 0; j < NS; j += 4)
                            *reinterpret_cast<float4*>(&q[j]) = *reinterpret_cast<const float4*>(&qs[(kk * (BK / 4) + c) * Q_LD + j]);
#pragma unroll
                        for (int r = 0; r < TR; ++r) {
                            const float a = kk == 0 ? p[r].x : kk == 1 ? p[r].y : kk == 2 ? p[r].z : p[r].w;
#pragma unroll
                            for (int j = 0; j < NS; ++j) acc[r][j] = fmaf(a, q[j], acc[r][j]);
                        }
                    }
                } else {
                    float q[4][NS];
#pragma unroll
                    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
                        for (int j = 0; j < NS; j += 4)
                            *reinterpret_cast<float4*>(&q[kk][j]) = *reinterpret_cast<const float4*>(&qs[(kk * (BK / 4) + c) * Q_LD + j]);
#pragma unroll
                    for (int r = 0; r < TR; ++r) {
                        const float4 p = *reinterpret_cast<const float4*>(&ps[(lr + 4 * r) * P_LD + 4 * c]);
#pragma unroll
                        for (int j = 0; j < NS; ++j) {
                            acc[r][j] = fmaf(p.x, q[0][j], acc[r][j]);
                            acc[r][j] = fmaf(p.y, q[1][j], acc[r][j]);
                            acc[r][j] = fmaf(p.z, q[2][j], acc[r][j]);
                            acc[r][j] = fmaf(p.w, q[3][j], acc[r][j]);
                        }
                    }
                }
            }
        } else {
            // k step: rows 4*(lr + 4v) .. +3 of P at one k (float4 v), Q's row k
#pragma unroll
            for (int s = 0; s < BK / (8 * WARPS); ++s) {
                const int k = lk + 8 * (warp + WARPS * s);
                float4 p[TR / 4];
#pragma unroll
                for (int v = 0; v < TR / 4; ++v) p[v] = *reinterpret_cast<const float4*>(&ps[k * P_LD + 4 * (lr + 4 * v)]);
                float q[NS];
#pragma unroll
                for (int j = 0; j < NS; j += 4)
                    *reinterpret_cast<float4*>(&q[j]) = *reinterpret_cast<const float4*>(&qs[k * Q_LD + j]);
#pragma unroll
                for (int r = 0; r < TR; ++r) {
                    const float a = r % 4 == 0 ? p[r / 4].x : r % 4 == 1 ? p[r / 4].y : r % 4 == 2 ? p[r / 4].z : p[r / 4].w;
#pragma unroll
                    for (int j = 0; j < NS; ++j) acc[r][j] = fmaf(a, q[j], acc[r][j]);
                }
            }
        }
    }
    gl_cp_wait<0>();
    __syncthreads();                               // every stage read: the partial sums reuse them

    // ---- the partial sums meet: slot s's tile red[s][BR][NS] -------------------------------------
    float* red = smem;
#pragma unroll
    for (int r = 0; r < TR; ++r) {
        const int row = P_KC ? lr + 4 * r : 4 * (lr + 4 * (r / 4)) + r % 4;
#pragma unroll
        for (int j = 0; j < NS; j += 4)
            *reinterpret_cast<float4*>(&red[slot * RED_LD + row * NS + j]) =
                make_float4(acc[r][j], acc[r][j + 1], acc[r][j + 2], acc[r][j + 3]);
    }
    __syncthreads();

    // ---- epilogue: the slots added in order, alpha/beta, 4 outputs along C's row per store ----------
    // N thin: C(wide0 + r, thin0 + j .. +3); M thin: C(thin0 + j, wide0 + r .. +3).
    constexpr int OUT = BR * NS / 4;
    for (int u = tid; u < OUT; u += THREADS) {
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        if constexpr (THIN_N) {
            const int r = u / (NS / 4), j = (u % (NS / 4)) * 4;
            for (int s = 0; s < SLOTS; ++s) {
                const float4 x = *reinterpret_cast<const float4*>(&red[s * RED_LD + r * NS + j]);
                v.x += x.x; v.y += x.y; v.z += x.z; v.w += x.w;
            }
            gl_store_c4(C, ldc, M, N, wide0 + r, thin0 + j, v, ep);
        } else {
            const int j = u / (BR / 4), r = (u % (BR / 4)) * 4;
            for (int s = 0; s < SLOTS; ++s) {
                const float* x = &red[s * RED_LD + r * NS + j];
                v.x += x[0]; v.y += x[NS]; v.z += x[2 * NS]; v.w += x[3 * NS];
            }
            gl_store_c4(C, ldc, M, N, thin0 + j, wide0 + r, v, ep);
        }
    }
}
