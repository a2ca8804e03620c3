// fp32.cuh — common.cuh's part for FP32 operands (GL_DTYPE 0, included by common.cuh, which every rung
// includes): the 4-wide epilogue store, the vectorized global loads and the block tile loaders the
// SIMT rungs reuse, so each rung changes only what it is about.
#pragma once

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
#if GL_EPI_AUX
        v.x = ep.pre(v.x, i, j); v.y = ep.pre(v.y, i, j + 1); v.z = ep.pre(v.z, i, j + 2); v.w = ep.pre(v.w, i, j + 3);
        *reinterpret_cast<float4*>(ep.aux + gl_c_off(i, j, ldc)) = v;   // the pre-activations, one 16-byte store
        v.x = ep.post(v.x); v.y = ep.post(v.y); v.z = ep.post(v.z); v.w = ep.post(v.w);
#else
        v.x = ep.finish(v.x, i, j); v.y = ep.finish(v.y, i, j + 1);
        v.z = ep.finish(v.z, i, j + 2); v.w = ep.finish(v.w, i, j + 3);
#endif
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
