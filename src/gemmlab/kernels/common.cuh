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
//              3 = fp8: A and B are bytes of FP8 (T the raw byte; GL_FP8_A / GL_FP8_B say each one's
//              format, 0 e4m3, 1 e5m2), read only by the tensor cores (rung 25); C is GL_C_DTYPE
//   GL_C_DTYPE the same codes: C's element type TC where it is not T (an output dtype other than the
//              operands': the rungs whose Rung.outputs name it, and the split-K reduction)
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
#if GL_DTYPE == 3
#define GL_C_DTYPE 2   // FP8 operands write bf16 unless told otherwise (core/variant.py, FP8_DEFAULT_OUT)
#else
#define GL_C_DTYPE GL_DTYPE
#endif
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
#elif GL_DTYPE == 3
typedef unsigned char T;   // FP8 bits: only copied (TMA) and read by wgmma, never converted here
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
// along grid.z (core/schema.py, Rung.launch), so M is never capped at 65535 x BM. In that
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
// rung's SPLITK parameter > 1) launches gridDim.z = S blocks per tile of C (core/schema.py,
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
// picks S so that no slice is empty (core/schema.py, splitk_slices); an empty one would still
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
// 21's persistent schedule walks batch x units (schedule.cuh), an operand that varies over the batch
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
// The divisions are 32-bit (K's tiles and gridDim.z fit): a 64-bit one by gridDim.z is a call
// (__cuda_sm20_div_s64), and ptxas spilled registers live across it in some split variants.
__device__ __forceinline__ void gl_splitk_bounds(int& K, int& k_first, int bk) {
    const unsigned tiles = (unsigned)K / (unsigned)bk + ((unsigned)K % (unsigned)bk != 0u);
    const long long per = (long long)GL_CEIL_DIV(tiles, gridDim.z) * bk;
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
// done. Cluster sizes 2..8 (the portable limit; core/families/common.py, splitk_constraints).
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

#include "epilogue.cuh"   // the epilogue functor: alpha, beta, bias, activation, auxiliary output
#if GL_AUX && GL_BATCHED
#error "an auxiliary output (GL_AUX) is written for one problem: a batch in one launch takes none"
#endif

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
    C[o] = gl_c_from_float(ep.finish_at(v, i, j, o));
}
__device__ __forceinline__ void gl_store_c_checked(TC* C, int ldc, int M, int N, int i, int j, float acc, const GlEpi& ep) {
    if (i < M && j < N) gl_store_c(C, ldc, i, j, acc, ep);
}

#include "fp32.cuh"       // FP32 operands: the 4-wide store, vector loads, the SIMT rungs' tile loaders

#include "tensor16.cuh"   // 16-bit operands: packing, mma.sync, 8-wide loads and stores

// 16 bytes from registers to shared memory (where a copy's source needed guarded loads: rung 24)
__device__ __forceinline__ void gl_sts128(unsigned dst, const uint4& v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" :: "r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// ---- cp.async (sm_80+): global -> shared without registers (rungs 18, 20, 23 and 24) ---------
// One copy of BYTES = 16 (.cg: through L2 only, the one size .cg takes) or 4 (.ca): `bytes` of them
// are read from global memory, the rest of the destination is zero.
#if __CUDA_ARCH__ >= 800 || !defined(__CUDA_ARCH__)
template <int BYTES>
__device__ __forceinline__ void gl_cp(unsigned dst, const void* src, int bytes) {
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
