// common.cuh — what every rung shares: the element type, the layout-aware accessors, the
// epilogue, and the tile loaders that the tiled rungs reuse so each rung changes only what it is
// about.
//
// ---------------------------------------------------------------------------------------------
// The launch contract (every rung):
//
//   extern "C" __global__ void gemm(int M, int N, int K, float alpha,
//                                   const T* A, int lda, const T* B, int ldb,
//                                   float beta, T* C, int ldc  [, texture objects])
//
// computes C <- alpha * A @ B + beta * C for A (M x K), B (K x N), C (M x N).
// Inside a kernel C is ALWAYS row-major: the host maps a column-major C through
// C^T = B^T A^T (swap A and B, M and N, flip their layouts). A and B are either layout, chosen at
// compile time by the defines below. When beta == 0, C is never read (BLAS semantics).
//
// Defines given by the host (gemmlab/core/variant.py, Variant.defines) at compile time:
//   GL_DTYPE   0 = fp32, 1 = fp16, 2 = bf16          (element type T of A and B, and of C)
//   GL_C_DTYPE the same codes: C's element type TC where it is not T (an output dtype other than the
//              operands'; only rung 21 is built so, its epilogue part chosen by TC)
//   GL_A_COL   0: A(i,k) = A[i*lda + k]   1: A(i,k) = A[k*lda + i]
//   GL_B_COL   0: B(k,j) = B[k*ldb + j]   1: B(k,j) = B[j*ldb + k]
//   GL_VEC_A / GL_VEC_B / GL_VEC_C   1 when 16-byte vector access of that operand is legal:
//              the base pointer is 16-byte aligned and the leading dimension is a multiple of
//              the vector width (4 fp32 or 8 fp16/bf16). Rungs that vectorize fall back to
//              scalar, bounds-checked access when 0 and at the matrix edges.
//   GL_TALL    1 when the row tiles exceed grid.y's limit and continue along grid.z (see below)
//   GL_SPLITK  1 for the split-K variant of a rung with a SPLITK parameter (see "split-K" below):
//              blockIdx.z picks a slice of K, C is the FP32 workspace; never together with GL_TALL
//   GL_BATCHED 1 for a batch of problems in one launch (rungs 18 and 21; see "a batch" below)
//   GL_SPLITK_CLUSTER  S (2..8) for the cluster split of a rung with SKCLUSTER = 1 (sm_90+): the S
//              slices of a tile form a cluster and sum in distributed shared memory into C
//   plus each rung's own tile parameters (BM, BN, BK, TM, TN, WM, WN, THREADS, ...).
// ---------------------------------------------------------------------------------------------
#pragma once

#ifndef GL_DTYPE
#define GL_DTYPE 0
#endif
#ifndef GL_A_COL
#define GL_A_COL 0
#endif
#ifndef GL_B_COL
#define GL_B_COL 0
#endif
#ifndef GL_VEC_A
#define GL_VEC_A 0
#endif
#ifndef GL_VEC_B
#define GL_VEC_B 0
#endif
#ifndef GL_VEC_C
#define GL_VEC_C 0
#endif

#ifndef GL_C_DTYPE
#define GL_C_DTYPE GL_DTYPE
#endif
#if GL_DTYPE == 1 || GL_C_DTYPE == 1
#include <cuda_fp16.h>
#endif
#if GL_DTYPE == 2 || GL_C_DTYPE == 2
#include <cuda_bf16.h>
#endif
#if GL_DTYPE == 1
typedef __half T;
#elif GL_DTYPE == 2
typedef __nv_bfloat16 T;
#else
typedef float T;
#endif
#if GL_C_DTYPE == 1
typedef __half TC;
#elif GL_C_DTYPE == 2
typedef __nv_bfloat16 TC;
#else
typedef float TC;
#endif

#define GL_CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

// ---- grid mapping -----------------------------------------------------------------------------
// Column tiles run along grid.x (up to 2^31 - 1), row tiles along grid.y. grid.y stops at 65535:
// a taller problem (more than 65535 row tiles) gets the GL_TALL=1 variant, whose row tiles go on
// along grid.z (core/registry.py, Rung.launch), so M is never capped at 65535 x BM. In that
// variant the last z slice may hold a few (< grid.z) tiles wholly past M; every rung
// bounds-checks rows against M, so such a tile loads zeros and stores nothing. GL_TALL is a
// compile-time switch because the two extra terms cost a register, and rung 16 sits exactly at
// its 128-register floor (it spilled 16 bytes with them); an early `return` for surplus tiles made
// rung 8 spill. Problems of ordinary height run exactly the code they ran before.
#ifndef GL_TALL
#define GL_TALL 0
#endif
#if GL_TALL
#define GL_TILE_ROW ((int)(blockIdx.z * gridDim.y + blockIdx.y))
#else
#define GL_TILE_ROW ((int)blockIdx.y)
#endif

// ---- split-K -------------------------------------------------------------------------------
// A problem with few output tiles and a long K (256x256x65536, 16x4096x4096) leaves most SMs idle
// when one block owns one tile of C for all of K. The split-K variant (GL_SPLITK = 1, from a
// rung's SPLITK parameter > 1) launches gridDim.z = S blocks per tile of C (core/registry.py,
// Rung.launch): block z multiplies the z-th slice of K and writes its FP32 partial tile, with
// alpha and beta NOT applied, to the workspace slice W[z] of W[S][M][N]; a second kernel
// (splitk_reduce.cu) sums the S slices in the order z = 0 .. S-1 and applies alpha, beta and the
// output type. Every partial sum is computed by one block in its fixed k order and lands in its
// own slice (no atomics), and the reduction's order is fixed: the result has the same bits on
// every run (it differs from the unsplit kernel's, whose additions are in another order).
// Contract of the split variant: the C argument is the workspace (float*, 16-byte aligned), ldc
// its row length N, and GL_VEC_C says whether 16-byte stores to it are legal (N % 4 == 0); alpha
// and beta are ignored. The slices are whole BK tiles: slice z covers k in [z*per, z*per + per)
// with per = ceil(ceil(K/BK) / S) * BK, so it starts on a multiple of BK and the 16-byte
// alignment of A and B (a multiple of BK elements along k) is the same as at k = 0. The host
// picks S so that no slice is empty (core/registry.py, splitk_slices); an empty one would still
// be correct: its blocks compute nothing and write zeros. The slice count is gridDim.z, not a
// define: one compiled kernel serves every SPLITK.
#ifndef GL_SPLITK
#define GL_SPLITK 0
#endif
#ifndef GL_SPLITK_CLUSTER
#define GL_SPLITK_CLUSTER 0
#endif
#if GL_SPLITK && GL_TALL
#error "split-K (GL_SPLITK) and the tall grid (GL_TALL) both use grid.z: a variant has one or the other"
#endif
#if GL_SPLITK_CLUSTER && (GL_SPLITK || GL_TALL)
#error "the cluster split (GL_SPLITK_CLUSTER) takes grid.z for its slices and writes C itself: not with GL_SPLITK or GL_TALL"
#endif
// ---- a batch of problems in one launch (GL_BATCHED=1: rungs 18 and 21, Rung.batched) ---------------
// The kernel computes C_b = A_b B_b for b < gl_batch, element b of each operand gl_bs* elements after
// element 0 (core/batched.py). Rung 18 takes element blockIdx.z (its grid's z is the batch); rung
// 21's persistent schedule walks batch x units (ws.cuh), an operand that varies over the batch
// (GL_BATCH_A / GL_BATCH_B; 0: broadcast, stride 0) read through a 3-D tensor map whose third
// coordinate is the element, so the copy engine clips each box at the element's own rows and
// columns (a tile at an edge loads zeros, not the next element's data). The arguments come after a
// stream-K workspace, before the epilogue's (GL_EPI_PARAMS).
#ifndef GL_BATCHED
#define GL_BATCHED 0
#endif
#ifndef GL_BATCH_A
#define GL_BATCH_A GL_BATCHED
#endif
#ifndef GL_BATCH_B
#define GL_BATCH_B GL_BATCHED
#endif
#if GL_BATCHED
#define GL_BATCH_PARAMS , int gl_batch, long long gl_bsa, long long gl_bsb, long long gl_bsc
#else
#define GL_BATCH_PARAMS
#endif
#if GL_BATCHED && (GL_SPLITK || GL_SPLITK_CLUSTER || GL_TALL)
#error "a batch in one launch (GL_BATCHED) takes grid.z or the persistent schedule: not with split-K or the tall grid"
#endif
#if GL_SPLITK_CLUSTER && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "the cluster split (GL_SPLITK_CLUSTER) needs thread-block clusters: sm_90 or newer"
#endif
#if GL_SPLITK || GL_SPLITK_CLUSTER
// This block's slice of K: k_first becomes its start (>= K: empty), K its end.
__device__ __forceinline__ void gl_splitk_bounds(int& K, int& k_first, int bk) {
    const long long tiles = GL_CEIL_DIV((long long)K, (long long)bk);
    const long long per = GL_CEIL_DIV(tiles, (long long)gridDim.z) * bk;
    const long long k0 = per * blockIdx.z;
    k_first = (int)(k0 < K ? k0 : K);
    K = (int)(k0 + per < K ? k0 + per : K);
}
// The slice as a problem of its own: A and B advance to its first k and K becomes its length
// (PA, PB: the kernel's pointer types, __restrict__ or not).
template <typename PA, typename PB>
__device__ __forceinline__ void gl_splitk_advance(PA& A, int lda, PB& B, int ldb, int& K, int bk) {
    int k_first;
    gl_splitk_bounds(K, k_first, bk);
    A += GL_A_COL ? (long long)k_first * lda : (long long)k_first;
    B += GL_B_COL ? (long long)k_first : (long long)k_first * ldb;
    K -= k_first;
}
#endif
#if GL_SPLITK
// The block's workspace slice W[z] (C is the workspace in the split variant).
__device__ __forceinline__ float* gl_splitk_workspace(TC* C, int M, int ldc) {
    return reinterpret_cast<float*>(C) + (size_t)blockIdx.z * (size_t)M * (size_t)ldc;
}
// The slice in place (gl_splitk_bounds); returns W[z].
__device__ __forceinline__ float* gl_splitk_range(int& K, int& k_first, TC* C, int M, int ldc, int bk) {
    gl_splitk_bounds(K, k_first, bk);
    return gl_splitk_workspace(C, M, ldc);
}
// The slice as a problem of its own (gl_splitk_advance); returns W[z].
template <typename PA, typename PB>
__device__ __forceinline__ float* gl_splitk_slice(PA& A, int lda, PB& B, int ldb, int& K, TC* C, int M, int ldc, int bk) {
    gl_splitk_advance(A, lda, B, ldb, K, bk);
    return gl_splitk_workspace(C, M, ldc);
}
// An FP32 rung whose epilogue writes its partial sums straight into the workspace (rungs 18, 23):
// the slice as above, C becomes W[z], and the epilogue stores the sums as they are (alpha = 1,
// beta = 0: splitk_reduce.cu applies the caller's).
template <typename PA, typename PB, typename PC>
__device__ __forceinline__ void gl_splitk_partial(PA& A, int lda, PB& B, int ldb, int& K, PC& C, int M, int ldc, int bk,
                                                  float& alpha, float& beta) {
    C = gl_splitk_slice(A, lda, B, ldb, K, C, M, ldc, bk);
    alpha = 1.0f;
    beta = 0.0f;
}
#endif

// ---- programmatic dependent launch (sm_90+) ---------------------------------------------------
// A kernel launched after another with programmatic stream serialization (core/launch.py: the
// split-K reduction after its partial products, a plan's second operand copy after the first, the
// rung's kernel after the copies) may be scheduled before the first one ends: it waits here until
// that grid has completed and its memory is visible (after an ordinary launch, at once). The first
// kernel lets it be scheduled once every block has called gl_pdl_trigger (or exited).
__device__ __forceinline__ void gl_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void gl_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// ---- thread-block clusters (sm_90+) ------------------------------------------------------------
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned gl_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// Every thread of every CTA of the cluster: what each wrote before (with release) is visible to
// all after (acquire). Also a CTA barrier.
__device__ __forceinline__ void gl_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The same barrier without the release: for a CTA that only has to know the others got there (its
// shared memory may go once they are done reading it). ptxas makes the release a MEMBAR.ALL.GPU,
// which would also wait for the CTA's global stores.
__device__ __forceinline__ void gl_cluster_sync_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
}
#endif

// ---- split-K in a cluster (GL_SPLITK_CLUSTER = S, the SPLITK of a rung with SKCLUSTER = 1) ---
// The workspace split above costs a second kernel and a round trip of S FP32 copies of C through
// L2/DRAM: at 1024^3 (4 slices) that is 16 MB written, read back and a launch boundary, a
// noticeable share of a GEMM that size. On sm_90 the S blocks of one output tile can instead form one thread-block cluster
// (gridDim.z = S = the cluster's z extent, __cluster_dims__(1, 1, S)): each block leaves its
// FP32 partial tile in its own shared memory, and after a cluster barrier block z sums the z-th
// S-th of the tile over the S blocks' shared memory (distributed shared memory, ld.shared::cluster)
// in the order 0, 1, ..., S-1, applies alpha and beta and stores C: no workspace, no second
// kernel, and the same bits as the workspace split with S slices (the same additions in the same
// order, then gl_store_c4's alpha/beta, as splitk_reduce.cu's gl_store_c). The slice count is the
// cluster's size, a define; a slice past K (K shorter than S tiles) computes nothing and adds
// zeros. A second cluster barrier keeps every block's shared memory alive until its readers are
// done. Cluster sizes 2..8 (the portable limit; registry.py _splitk_constraints).
#if GL_SPLITK_CLUSTER
#define GL_SK_CLUSTER_DIMS __cluster_dims__(1, 1, GL_SPLITK_CLUSTER)
#else
#define GL_SK_CLUSTER_DIMS
#endif

// ---- element conversion -------------------------------------------------------------------
__device__ __forceinline__ float gl_to_float(float x) { return x; }
#if GL_DTYPE == 1 || GL_C_DTYPE == 1
__device__ __forceinline__ float gl_to_float(__half x) { return __half2float(x); }
#endif
#if GL_DTYPE == 2 || GL_C_DTYPE == 2
__device__ __forceinline__ float gl_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
#endif
// An output, rounded once to C's type.
__device__ __forceinline__ TC gl_c_from_float(float x) {
#if GL_C_DTYPE == 1
    return __float2half_rn(x);
#elif GL_C_DTYPE == 2
    return __float2bfloat16_rn(x);
#else
    return x;
#endif
}

#include "epilogue.cuh"   // the epilogue functor: alpha, beta, bias, activation

// ---- layout-aware element offsets (64-bit: matrices may exceed 2^31 elements) ---------------
__device__ __forceinline__ size_t gl_a_off(int i, int k, int lda) {
    return GL_A_COL ? (size_t)k * lda + i : (size_t)i * lda + k;
}
__device__ __forceinline__ size_t gl_b_off(int k, int j, int ldb) {
    return GL_B_COL ? (size_t)j * ldb + k : (size_t)k * ldb + j;
}
__device__ __forceinline__ size_t gl_c_off(int i, int j, int ldc) { return (size_t)i * ldc + j; }

// Bounds-checked scalar reads: outside the matrix they read nothing and give 0, so a partial
// tile computes with zeros instead of touching memory it does not own.
__device__ __forceinline__ float gl_load_a(const T* A, int lda, int M, int K, int i, int k) {
    return (i < M && k < K) ? gl_to_float(A[gl_a_off(i, k, lda)]) : 0.0f;
}
__device__ __forceinline__ float gl_load_b(const T* B, int ldb, int K, int N, int k, int j) {
    return (k < K && j < N) ? gl_to_float(B[gl_b_off(k, j, ldb)]) : 0.0f;
}

// ---- epilogue -----------------------------------------------------------------------------
// C(i,j) <- act(alpha*acc + beta*C(i,j) + bias) (epilogue.cuh); with beta == 0 C is not read
// (NaN/Inf in C never leak).
__device__ __forceinline__ void gl_store_c(TC* C, int ldc, int i, int j, float acc, const GlEpi& ep) {
    const size_t o = gl_c_off(i, j, ldc);
    float v = ep.alpha * acc;
    if (ep.beta != 0.0f) v = fmaf(ep.beta, gl_to_float(C[o]), v);
    C[o] = gl_c_from_float(ep.finish(v, i, j));
}
__device__ __forceinline__ void gl_store_c_checked(TC* C, int ldc, int M, int N, int i, int j, float acc, const GlEpi& ep) {
    if (i < M && j < N) gl_store_c(C, ldc, i, j, acc, ep);
}

#if GL_DTYPE == 0
// Four consecutive outputs C(i, j..j+3) from a register tile: one 128-bit store when the row
// is 16-byte aligned (GL_VEC_C, j % 4 == 0) and fully inside; else scalar with bounds checks.
__device__ __forceinline__ void gl_store_c4(T* C, int ldc, int M, int N, int i, int j, float4 acc, const GlEpi& ep) {
    if (i >= M) return;
#if GL_VEC_C
    if (j + 3 < N) {
        float4* p = reinterpret_cast<float4*>(C + gl_c_off(i, j, ldc));
        const float alpha = ep.alpha, beta = ep.beta;
        float4 v = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
        if (beta != 0.0f) {
            const float4 c = *p;
            v.x = fmaf(beta, c.x, v.x); v.y = fmaf(beta, c.y, v.y);
            v.z = fmaf(beta, c.z, v.z); v.w = fmaf(beta, c.w, v.w);
        }
        v.x = ep.finish(v.x, i, j); v.y = ep.finish(v.y, i, j + 1);
        v.z = ep.finish(v.z, i, j + 2); v.w = ep.finish(v.w, i, j + 3);
        *p = v;
        return;
    }
#endif
    if (j + 0 < N) gl_store_c(C, ldc, i, j + 0, acc.x, ep);
    if (j + 1 < N) gl_store_c(C, ldc, i, j + 1, acc.y, ep);
    if (j + 2 < N) gl_store_c(C, ldc, i, j + 2, acc.z, ep);
    if (j + 3 < N) gl_store_c(C, ldc, i, j + 3, acc.w, ep);
}

#if GL_SPLITK_CLUSTER
// split-K in a cluster (see "split-K in a cluster" above): the reduction into C.
// The partial tile of this block is tile[BM_][LDT] (floats, 16-byte aligned rows) in shared
// memory, complete in every thread's view of the cluster after the caller's writes; NT threads.
template <int BM_, int BN_, int LDT, int NT>
__device__ __forceinline__ void gl_splitk_cluster_store(const float* tile, T* C, int ldc, int M, int N, int row0, int col0,
                                                         const GlEpi& ep) {
    static_assert(BN_ % 4 == 0 && LDT % 4 == 0, "the partial tile is read as float4");
    constexpr int Q = BN_ / 4;                                   // float4 per tile row
    constexpr int PART = GL_CEIL_DIV(BM_ * Q, GL_SPLITK_CLUSTER); // float4 this block sums
    gl_cluster_sync();                                           // every block's partial tile written
    const unsigned rank = gl_cluster_rank();
    const unsigned local = (unsigned)__cvta_generic_to_shared(tile);
    unsigned peer[GL_SPLITK_CLUSTER];                            // each block's tile, cluster addresses
#pragma unroll
    for (int z = 0; z < GL_SPLITK_CLUSTER; ++z)
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(peer[z]) : "r"(local), "r"(z));
    const int first = (int)rank * PART, last = min(BM_ * Q, first + PART);
    for (int e = first + (int)threadIdx.x; e < last; e += NT) {
        const int r = e / Q, c = (e % Q) * 4;
        const unsigned off = 4u * (unsigned)(r * LDT + c);
        float4 v[GL_SPLITK_CLUSTER];
#pragma unroll
        for (int z = 0; z < GL_SPLITK_CLUSTER; ++z)
            asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                         : "=f"(v[z].x), "=f"(v[z].y), "=f"(v[z].z), "=f"(v[z].w) : "r"(peer[z] + off));
        float4 sum = v[0];
#pragma unroll
        for (int z = 1; z < GL_SPLITK_CLUSTER; ++z) {            // fixed order: z ascending
            sum.x += v[z].x; sum.y += v[z].y; sum.z += v[z].z; sum.w += v[z].w;
        }
        gl_store_c4(C, ldc, M, N, row0 + r, col0 + c, sum, ep);
    }
    gl_cluster_sync_relaxed();                                   // no block leaves while its tile is read
}
#endif

// ---- vectorized global loads (fp32) -------------------------------------------------------
// Four consecutive elements of a row-major/column-major operand along its contiguous
// dimension, starting at element offset `off` of `P`; `n_left` = how many of the four lie
// inside the matrix (>= 4: all). A full, aligned vector is ONE 128-bit load (LDG.E.128);
// anything else is up to four guarded scalar loads, zeros beyond the edge.
template <int VEC>
__device__ __forceinline__ float4 gl_load4(const float* __restrict__ P, size_t off, int n_left) {
    if (VEC && n_left >= 4) return __ldg(reinterpret_cast<const float4*>(P + off));
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (n_left > 0) v.x = __ldg(P + off + 0);
    if (n_left > 1) v.y = __ldg(P + off + 1);
    if (n_left > 2) v.z = __ldg(P + off + 2);
    if (n_left > 3) v.w = __ldg(P + off + 3);
    return v;
}

// ---- block tile loaders for the vectorized rungs (fp32) -----------------------------------
// A block tile of A is BM x BK starting at (row0, k0); it is stored TRANSPOSED in shared memory
// as As[BK][BM + PAD_A] so that the main loop reads TM consecutive rows of one k as float4
// (LDS.128). A block tile of B is BK x BN at (k0, col0), stored as Bs[BK][BN + PAD_B].
//
// The loaders split into load() (global -> registers) and store() (registers -> shared) so that
// the double-buffered rungs can issue the next tile's global loads before computing the current
// tile (register prefetch) and write them to shared memory afterwards.
//
// Work split: the tile is cut into 4-element vectors along the operand's contiguous dimension;
// NT threads take them round-robin (PER_THREAD each). (Template parameters are TBM/TBN/TBK/NT
// because BM/BN/BK/THREADS are the rung's defines.)
template <int TBM, int TBK, int NT, int PAD>
struct GlATileLoader {
    static_assert((TBM * TBK) % (4 * NT) == 0, "A tile must split evenly into float4 per thread");
    static constexpr int PER_THREAD = (TBM * TBK) / (4 * NT);
    float4 r[PER_THREAD];

    __device__ __forceinline__ void load(const float* __restrict__ A, int lda, int M, int K, int row0, int k0, int tid) {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int v = tid + p * NT;
#if GL_A_COL
            // contiguous along m: vector v covers rows m..m+3 of column k
            const int k = v / (TBM / 4), m = (v % (TBM / 4)) * 4;
            const int gk = k0 + k, gm = row0 + m;
            r[p] = gk < K ? gl_load4<GL_VEC_A>(A, gl_a_off(gm, gk, lda), M - gm) : make_float4(0.f, 0.f, 0.f, 0.f);
#else
            // contiguous along k: vector v covers k..k+3 of row m
            const int m = v / (TBK / 4), k = (v % (TBK / 4)) * 4;
            const int gm = row0 + m, gk = k0 + k;
            r[p] = gm < M ? gl_load4<GL_VEC_A>(A, gl_a_off(gm, gk, lda), K - gk) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
        }
    }
    __device__ __forceinline__ void store(float (*As)[TBM + PAD], int tid) const {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int v = tid + p * NT;
#if GL_A_COL
            const int k = v / (TBM / 4), m = (v % (TBM / 4)) * 4;
            if ((TBM + PAD) % 4 == 0) {
                *reinterpret_cast<float4*>(&As[k][m]) = r[p];
            } else {
                As[k][m + 0] = r[p].x; As[k][m + 1] = r[p].y; As[k][m + 2] = r[p].z; As[k][m + 3] = r[p].w;
            }
#else
            const int m = v / (TBK / 4), k = (v % (TBK / 4)) * 4;
            As[k + 0][m] = r[p].x; As[k + 1][m] = r[p].y; As[k + 2][m] = r[p].z; As[k + 3][m] = r[p].w;
#endif
        }
    }
};

template <int TBK, int TBN, int NT, int PAD>
struct GlBTileLoader {
    static_assert((TBK * TBN) % (4 * NT) == 0, "B tile must split evenly into float4 per thread");
    static constexpr int PER_THREAD = (TBK * TBN) / (4 * NT);
    float4 r[PER_THREAD];

    __device__ __forceinline__ void load(const float* __restrict__ B, int ldb, int K, int N, int k0, int col0, int tid) {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int v = tid + p * NT;
#if GL_B_COL
            // contiguous along k: vector v covers k..k+3 of column n
            const int n = v / (TBK / 4), k = (v % (TBK / 4)) * 4;
            const int gn = col0 + n, gk = k0 + k;
            r[p] = gn < N ? gl_load4<GL_VEC_B>(B, gl_b_off(gk, gn, ldb), K - gk) : make_float4(0.f, 0.f, 0.f, 0.f);
#else
            // contiguous along n: vector v covers n..n+3 of row k
            const int k = v / (TBN / 4), n = (v % (TBN / 4)) * 4;
            const int gk = k0 + k, gn = col0 + n;
            r[p] = gk < K ? gl_load4<GL_VEC_B>(B, gl_b_off(gk, gn, ldb), N - gn) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
        }
    }
    __device__ __forceinline__ void store(float (*Bs)[TBN + PAD], int tid) const {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int v = tid + p * NT;
#if GL_B_COL
            const int n = v / (TBK / 4), k = (v % (TBK / 4)) * 4;
            Bs[k + 0][n] = r[p].x; Bs[k + 1][n] = r[p].y; Bs[k + 2][n] = r[p].z; Bs[k + 3][n] = r[p].w;
#else
            const int k = v / (TBN / 4), n = (v % (TBN / 4)) * 4;
            if ((TBN + PAD) % 4 == 0) {
                *reinterpret_cast<float4*>(&Bs[k][n]) = r[p];
            } else {
                Bs[k][n + 0] = r[p].x; Bs[k][n + 1] = r[p].y; Bs[k][n + 2] = r[p].z; Bs[k][n + 3] = r[p].w;
            }
#endif
        }
    }
};
#endif  // GL_DTYPE == 0

#if GL_DTYPE != 0
// ---- 16-bit element helpers and the 8-wide epilogue (the tensor-core rungs) ---------------
#if GL_C_DTYPE != 0
// Two floats -> two packed outputs of C's 16-bit type (low half = first); and back.
__device__ __forceinline__ unsigned gl_pack2(float lo, float hi) {
#if GL_C_DTYPE == 1
    __half2 h = __floats2half2_rn(lo, hi);
#else
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
#endif
    return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ float2 gl_unpack2(unsigned u) {
#if GL_C_DTYPE == 1
    return __half22float2(*reinterpret_cast<__half2*>(&u));
#else
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&u));
#endif
}
#endif

// mma.sync m16n8k16 (sm_80+; rungs 17 and 24): d += a (16x16, row) * b (16x8, col), FP32
// accumulators: c0,c1 at (lane/4, 2*(lane%4) +0/+1), c2,c3 eight rows below.
__device__ __forceinline__ void gl_mma16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if GL_DTYPE == 1
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// Eight consecutive 16-bit elements P[outer*ld + inner .. +7] of an operand, as raw bits.
// outer >= n_outer or elements at inner+e >= n_inner read nothing and give 0 (zero fill).
// One 128-bit load when legal (VEC) and all eight are inside; else guarded 16-bit loads.
template <int VEC>
__device__ __forceinline__ uint4 gl_load8(const T* __restrict__ P, int ld, int outer, int inner, int n_outer, int n_inner) {
    uint4 r = make_uint4(0u, 0u, 0u, 0u);
    if (outer < n_outer) {
        const size_t off = (size_t)outer * ld + inner;
        const int left = n_inner - inner;
        if (VEC && left >= 8) {
            r = __ldg(reinterpret_cast<const uint4*>(P + off));
        } else {
            const unsigned short* p = reinterpret_cast<const unsigned short*>(P) + off;
            unsigned short h[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) h[e] = (e < left) ? __ldg(p + e) : (unsigned short)0;
            r.x = h[0] | ((unsigned)h[1] << 16);
            r.y = h[2] | ((unsigned)h[3] << 16);
            r.z = h[4] | ((unsigned)h[5] << 16);
            r.w = h[6] | ((unsigned)h[7] << 16);
        }
    }
    return r;
}

#if GL_C_DTYPE != 0   // C's 16-bit outputs, eight at a time (an FP32 C is stored by other helpers)
// Eight outputs C(i, j..j+7) from FP32 values v[0..7]: one 128-bit store when legal (GL_VEC_C,
// j % 8 == 0 holds) and all eight are inside; else guarded scalar stores. beta == 0: C not read.
__device__ __forceinline__ void gl_store_c8(TC* C, int ldc, int M, int N, int i, int j, const float* v, const GlEpi& ep) {
    if (i >= M) return;
#if GL_VEC_C
    if (N - j >= 8) {
        uint4* p = reinterpret_cast<uint4*>(C + gl_c_off(i, j, ldc));
        const float alpha = ep.alpha, beta = ep.beta;
        float o[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = alpha * v[e];
        if (beta != 0.0f) {
            const uint4 c = *p;
            const float2 c0 = gl_unpack2(c.x), c1 = gl_unpack2(c.y), c2 = gl_unpack2(c.z), c3 = gl_unpack2(c.w);
            o[0] = fmaf(beta, c0.x, o[0]); o[1] = fmaf(beta, c0.y, o[1]);
            o[2] = fmaf(beta, c1.x, o[2]); o[3] = fmaf(beta, c1.y, o[3]);
            o[4] = fmaf(beta, c2.x, o[4]); o[5] = fmaf(beta, c2.y, o[5]);
            o[6] = fmaf(beta, c3.x, o[6]); o[7] = fmaf(beta, c3.y, o[7]);
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = ep.finish(o[e], i, j + e);
        *p = make_uint4(gl_pack2(o[0], o[1]), gl_pack2(o[2], o[3]), gl_pack2(o[4], o[5]), gl_pack2(o[6], o[7]));
        return;
    }
#endif
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (j + e < N) gl_store_c(C, ldc, i, j + e, v[e], ep);
}

// Eight outputs C(i, j..j+7) staged in shared memory rounded to T (h: four packed pairs, low half
// first). With beta == 0 the staging holds the finished outputs (the stager applied the whole
// functor) and the bits go out as they are (C not read); else it holds alpha * acc, and beta * C,
// the bias and the activation are applied here in FP32 and rounded again (two roundings;
// measure/verify.py's element tolerance allows two). One 128-bit load and store when legal
// (GL_VEC_C, j % 8 == 0 holds) and all eight are inside; else guarded scalar accesses.
__device__ __forceinline__ void gl_store_c8_rounded(TC* C, int ldc, int M, int N, int i, int j, uint4 h, const GlEpi& ep) {
    if (i >= M) return;
    const float beta = ep.beta;
    unsigned w[4] = {h.x, h.y, h.z, h.w};
#if GL_VEC_C
    if (N - j >= 8) {
        uint4* p = reinterpret_cast<uint4*>(C + gl_c_off(i, j, ldc));
        if (beta != 0.0f) {
            const uint4 c = *p;
            const unsigned cw[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float2 a = gl_unpack2(w[e]), b = gl_unpack2(cw[e]);
                w[e] = gl_pack2(ep.finish(fmaf(beta, b.x, a.x), i, j + 2 * e),
                                ep.finish(fmaf(beta, b.y, a.y), i, j + 2 * e + 1));
            }
        }
        *p = make_uint4(w[0], w[1], w[2], w[3]);
        return;
    }
#endif
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const float2 a = gl_unpack2(w[e / 2]);
        const float x = e % 2 ? a.y : a.x;
        if (j + e >= N) continue;
        if (beta != 0.0f) {
            const size_t o = gl_c_off(i, j + e, ldc);
            C[o] = gl_c_from_float(ep.finish(fmaf(beta, gl_to_float(C[o]), x), i, j + e));
        } else {
            C[gl_c_off(i, j + e, ldc)] = gl_c_from_float(x);
        }
    }
}
#endif  // GL_C_DTYPE != 0

#if GL_SPLITK
// Eight FP32 partial sums W(i, j..j+7) of the split-K variant (no alpha/beta, no conversion): two
// 128-bit stores when legal (GL_VEC_C: the workspace row length is a multiple of 4; j % 8 == 0)
// and all eight are inside; else guarded scalar stores.
__device__ __forceinline__ void gl_store_w8(float* W, int ldw, int M, int N, int i, int j, const float* v) {
    if (i >= M) return;
    float* p = W + gl_c_off(i, j, ldw);
#if GL_VEC_C
    if (N - j >= 8) {
        reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
        reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
        return;
    }
#endif
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (j + e < N) p[e] = v[e];
}
#endif

// A warp's 16 staged rows of TWN FP32 outputs, cs[16][LD] in shared memory, -> C rows i0..i0+15,
// columns j0..j0+TWN-1: each lane takes 8 consecutive outputs of a row, one 16-byte store where
// legal (gl_store_c8), and a warp writes whole rows (coalesced). Ends with __syncwarp: the caller
// may overwrite the staging next. In a split-K variant (GL_SPLITK) the output is the slice's FP32
// workspace W (Out = float): the partial sums go there as they are (gl_store_w8), alpha and beta
// are the reduction's.
template <int TWN, int LD, typename Out>
__device__ __forceinline__ void gl_store_rows16(const float (*cs)[LD], Out* C, int ldc, int M, int N, int i0, int j0,
                                                const GlEpi& ep, int lane) {
    static_assert(TWN % 16 == 0, "a warp's 16 rows of TWN outputs split into whole 8-wide vectors per lane");
    constexpr int VPR = TWN / 8;                        // 8-wide output vectors per staged row
    constexpr int VPL = 16 * VPR / 32;                  // vectors per lane
#pragma unroll
    for (int p = 0; p < VPL; ++p) {
        const int v = lane + p * 32;
        const int r = v / VPR, c = (v % VPR) * 8;
        const float4 lo = *reinterpret_cast<const float4*>(&cs[r][c]);
        const float4 hi = *reinterpret_cast<const float4*>(&cs[r][c + 4]);
        const float o[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#if GL_SPLITK
        gl_store_w8(C, ldc, M, N, i0 + r, j0 + c, o);
#else
        gl_store_c8(C, ldc, M, N, i0 + r, j0 + c, o, ep);
#endif
    }
    __syncwarp();                                       // staging read before the caller overwrites it
}

// One warp's 16 x TWN block of FP32 accumulators in the tensor cores' C-fragment layout (the same
// for mma.sync m16n8 tiles and for one warp's quarter of a wgmma m64nN tile): acc[j][0..1] at row
// lane/4, columns 8j + 2*(lane%4) + 0/1; acc[j][2..3] eight rows below. Staged in the warp's FP32
// tile cs[16][TWN + 8], then written by gl_store_rows16. The +8 floats of row padding put the
// float2 stores of four consecutive rows in four distinct 8-bank groups.
template <int TWN, typename Out>
__device__ __forceinline__ void gl_store_warp16(float (*cs)[TWN + 8], const float (&acc)[TWN / 8][4], Out* C, int ldc,
                                                int M, int N, int i0, int j0, const GlEpi& ep, int lane) {
    const int g = lane / 4, c2 = 2 * (lane % 4);        // fragment: row g (+8), columns c2, c2+1
#pragma unroll
    for (int j = 0; j < TWN / 8; ++j) {
        *reinterpret_cast<float2*>(&cs[g][8 * j + c2]) = make_float2(acc[j][0], acc[j][1]);
        *reinterpret_cast<float2*>(&cs[g + 8][8 * j + c2]) = make_float2(acc[j][2], acc[j][3]);
    }
    __syncwarp();
    gl_store_rows16<TWN, TWN + 8>(cs, C, ldc, M, N, i0, j0, ep, lane);
}

#endif  // GL_DTYPE != 0

// ---- cp.async (sm_80+): global -> shared without registers (rungs 18, 20 and 23) -------------
// One copy of BYTES = 16 (.cg: through L2 only, the one size .cg takes) or 4 (.ca): `bytes` of them
// are read from global memory, the rest of the destination is zero.
#if __CUDA_ARCH__ >= 800 || !defined(__CUDA_ARCH__)
template <int BYTES>
__device__ __forceinline__ void gl_cp(unsigned dst, const float* src, int bytes) {
    static_assert(BYTES == 16 || BYTES == 4, "cp.async copies 16 bytes (.cg) or 4 (.ca) here");
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}
// The same copy, whole, under a predicate in the instruction itself (@p cp.async): ptxas keeps it
// predicated where it would put a branch around a source-level `if`.
template <int BYTES>
__device__ __forceinline__ void gl_cp_if(bool p, unsigned dst, const float* src) {
    static_assert(BYTES == 16 || BYTES == 4, "cp.async copies 16 bytes (.cg) or 4 (.ca) here");
    if constexpr (BYTES == 16)
        asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %2, 0;\n @q cp.async.cg.shared.global [%0], [%1], 16;\n}\n"
                     :: "r"(dst), "l"(src), "r"((int)p) : "memory");
    else
        asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %2, 0;\n @q cp.async.ca.shared.global [%0], [%1], 4;\n}\n"
                     :: "r"(dst), "l"(src), "r"((int)p) : "memory");
}
__device__ __forceinline__ void gl_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void gl_cp_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }
#endif

// ---- TF32 (sm_80+): rounding and 3xTF32's split (rung 20 in registers, the split pack of pack.cu) ----
#if GL_DTYPE == 0 && (__CUDA_ARCH__ >= 800 || !defined(__CUDA_ARCH__))
// x rounded to TF32 (round to nearest, ties away from zero), as the bits the MMA reads.
__device__ __forceinline__ unsigned gl_tf32(unsigned x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(x)));
    return r;
}
// 3xTF32's split: x = big + small within 2^-22 |x|, both TF32 (x - big is exact in FP32).
__device__ __forceinline__ void gl_split(unsigned x, unsigned& big, unsigned& small) {
    big = gl_tf32(x);
    small = gl_tf32(__float_as_uint(__uint_as_float(x) - __uint_as_float(big)));
}
#endif
