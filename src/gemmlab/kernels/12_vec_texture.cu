// Rung 12 — vectorized through texture<float4>.                          seed: 003 texture<float4>
//
// What changes against rung 11 (vectorized float4): the tiling, the transposed A tile, the
// LDS.128 fragments and the float4 epilogue are the same; only the global -> register loads of A
// and B go through 1-D texture objects over the operands' linear memory: tex1Dfetch<float4>
// (one 128-bit texture fetch, SASS TEX/TLD) where rung 11 issues LDG.E.128. This is the fifth and
// last version of seed 003's SGEMM (vanilla, __ldg, texture<float>, __ldg(float4),
// texture<float4>), the way MAGMA/BEAST fed Fermi/Kepler GPUs.
// Why it can be faster (and why today it mostly is not): texture fetches travel through the
// texture pipeline and its cache, which on Kepler was separate from L1 and had its own bandwidth;
// out-of-range fetches return 0 without faulting. Since Maxwell, texture and L1 share one unified
// cache and LDG.E.128.CONSTANT (the __ldg path) reaches it as well, so on the H100 this rung
// measures the cost of the texture path (TEX latency, texture-unit throughput) against rung 11.
// Seed figure: 003's slides show texture<float4> as the fastest of their five versions.
//
// Host contract for the texture arguments (appended to the common signature):
//   GL_VEC_A == 1: texA is a 4-channel float (float4) 1-D linear texture over A's allocation and
//                  offA (a multiple of 4) is A's element offset from the texture base; the float4
//                  holding elements e..e+3 (e % 4 == 0) is tex1Dfetch<float4>(texA, (offA+e)/4).
//   GL_VEC_A == 0: texA is a 1-channel float texture; element e is tex1Dfetch<float>(texA, offA+e).
//   Same for B. The pointers A and B are passed too but not read. Texture indices are int:
//   the host must keep (offA + elements of A) / 4 (float4) or offA + elements (float) below the
//   device's maximum linear texture width.
// Bounds: as in rung 11 — full vectors only when all four elements lie inside the matrix;
// partial vectors at the K/M/N edge fetch the aligned float4 (GL_VEC=1, always valid: it starts
// inside the allocation) and keep only the in-bounds components; with GL_VEC=0, guarded scalar
// fetches. Nothing outside the matrix reaches shared memory.
#include "common.cuh"

constexpr int PAD = 4;   // floats appended to each shared row: 16-byte aligned rows, conflict-free transposing stores

static_assert(THREADS == (BM / TM) * (BN / TN), "THREADS must be (BM/TM)*(BN/TN)");
static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 fragments need TM, TN, BK multiples of 4");
static_assert(BM % TM == 0 && BN % TN == 0, "TM/TN must divide BM/BN");
static_assert((BM + PAD) % 4 == 0 && (BN + PAD) % 4 == 0, "shared rows must stay 16-byte aligned");

// Four consecutive elements e..e+3 (along the operand's contiguous dimension) from a texture;
// n_left = how many of them lie inside the matrix (>= 4: all, <= 0: none). Mirrors gl_load4.
template <int VEC>
__device__ __forceinline__ float4 tex_load4(cudaTextureObject_t tex, long long base, size_t e, int n_left) {
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (n_left <= 0) return v;
    if (VEC) {
        // float4-typed texture: base + e is a multiple of 4 (host contract + ld % 4 == 0 and the
        // tile origin k0/m0/n0 % 4 == 0), so this is the float4 that holds exactly e..e+3.
        const float4 t = tex1Dfetch<float4>(tex, (int)((base + (long long)e) >> 2));
        if (n_left >= 4) return t;
        v.x = t.x;
        if (n_left > 1) v.y = t.y;
        if (n_left > 2) v.z = t.z;
        return v;
    } else {
        const int i = (int)(base + (long long)e);
        v.x = tex1Dfetch<float>(tex, i);
        if (n_left > 1) v.y = tex1Dfetch<float>(tex, i + 1);
        if (n_left > 2) v.z = tex1Dfetch<float>(tex, i + 2);
        if (n_left > 3) v.w = tex1Dfetch<float>(tex, i + 3);
        return v;
    }
}

// Same work split and shared layout as GlATileLoader (common.cuh): A tile BM x BK at (row0, k0),
// stored transposed as As[BK][BM + PAD]; only load() differs (texture instead of LDG).
template <int TBM, int TBK, int NT, int TPAD>
struct TexATileLoader {
    static_assert((TBM * TBK) % (4 * NT) == 0, "A tile must split evenly into float4 per thread");
    static constexpr int PER_THREAD = (TBM * TBK) / (4 * NT);
    float4 r[PER_THREAD];

    __device__ __forceinline__ void load(cudaTextureObject_t tex, long long off, int lda, int M, int K, int row0, int k0, int tid) {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int v = tid + p * NT;
#if GL_A_COL
            const int k = v / (TBM / 4), m = (v % (TBM / 4)) * 4;   // rows m..m+3 of column k
            const int gk = k0 + k, gm = row0 + m;
            r[p] = gk < K ? tex_load4<GL_VEC_A>(tex, off, gl_a_off(gm, gk, lda), M - gm) : make_float4(0.f, 0.f, 0.f, 0.f);
#else
            const int m = v / (TBK / 4), k = (v % (TBK / 4)) * 4;   // k..k+3 of row m
            const int gm = row0 + m, gk = k0 + k;
            r[p] = gm < M ? tex_load4<GL_VEC_A>(tex, off, gl_a_off(gm, gk, lda), K - gk) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
        }
    }
    __device__ __forceinline__ void store(float (*As)[TBM + TPAD], int tid) const {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int v = tid + p * NT;
#if GL_A_COL
            const int k = v / (TBM / 4), m = (v % (TBM / 4)) * 4;
            *reinterpret_cast<float4*>(&As[k][m]) = r[p];
#else
            const int m = v / (TBK / 4), k = (v % (TBK / 4)) * 4;
            As[k + 0][m] = r[p].x; As[k + 1][m] = r[p].y; As[k + 2][m] = r[p].z; As[k + 3][m] = r[p].w;
#endif
        }
    }
};

// B tile BK x BN at (k0, col0), stored as Bs[BK][BN + PAD]; mirrors GlBTileLoader.
template <int TBK, int TBN, int NT, int TPAD>
struct TexBTileLoader {
    static_assert((TBK * TBN) % (4 * NT) == 0, "B tile must split evenly into float4 per thread");
    static constexpr int PER_THREAD = (TBK * TBN) / (4 * NT);
    float4 r[PER_THREAD];

    __device__ __forceinline__ void load(cudaTextureObject_t tex, long long off, int ldb, int K, int N, int k0, int col0, int tid) {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int v = tid + p * NT;
#if GL_B_COL
            const int n = v / (TBK / 4), k = (v % (TBK / 4)) * 4;   // k..k+3 of column n
            const int gn = col0 + n, gk = k0 + k;
            r[p] = gn < N ? tex_load4<GL_VEC_B>(tex, off, gl_b_off(gk, gn, ldb), K - gk) : make_float4(0.f, 0.f, 0.f, 0.f);
#else
            const int k = v / (TBN / 4), n = (v % (TBN / 4)) * 4;   // n..n+3 of row k
            const int gk = k0 + k, gn = col0 + n;
            r[p] = gk < K ? tex_load4<GL_VEC_B>(tex, off, gl_b_off(gk, gn, ldb), N - gn) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
        }
    }
    __device__ __forceinline__ void store(float (*Bs)[TBN + TPAD], int tid) const {
#pragma unroll
        for (int p = 0; p < PER_THREAD; ++p) {
            const int v = tid + p * NT;
#if GL_B_COL
            const int n = v / (TBK / 4), k = (v % (TBK / 4)) * 4;
            Bs[k + 0][n] = r[p].x; Bs[k + 1][n] = r[p].y; Bs[k + 2][n] = r[p].z; Bs[k + 3][n] = r[p].w;
#else
            const int k = v / (TBN / 4), n = (v % (TBN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[k][n]) = r[p];
#endif
        }
    }
};

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc,
     unsigned long long texA, long long offA, unsigned long long texB, long long offB GL_EPI_PARAMS)
{
    __shared__ __align__(16) float As[BK][BM + PAD];   // [BK k's][BM rows (+PAD)]: A tile TRANSPOSED
    __shared__ __align__(16) float Bs[BK][BN + PAD];   // [BK k's][BN columns (+PAD)]

    const int tid = threadIdx.x;
    const int tx = (int)(threadIdx.x % (BN / TN));   // column group: columns tx*TN .. tx*TN+TN-1
    const int ty = (int)(threadIdx.x / (BN / TN));   // row group:    rows    ty*TM .. ty*TM+TM-1
    const int row0 = GL_TILE_ROW * BM;
    const int col0 = blockIdx.x * BN;
    const cudaTextureObject_t tA = (cudaTextureObject_t)texA;
    const cudaTextureObject_t tB = (cudaTextureObject_t)texB;

    TexATileLoader<BM, BK, THREADS, PAD> la;   // float4 per thread, texture -> registers -> As
    TexBTileLoader<BK, BN, THREADS, PAD> lb;   // float4 per thread, texture -> registers -> Bs

    float acc[TM][TN];             // [TM][TN] register tile of C
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float a[TM];                   // [TM] fragment: A(ty*TM + i, k)
    float b[TN];                   // [TN] fragment: B(k, tx*TN + j)

    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- load: tex1Dfetch<float4> (or guarded scalar fetches) -> registers -> shared ----
        la.load(tA, offA, lda, M, K, row0, k0, tid);
        lb.load(tB, offB, ldb, K, N, k0, col0, tid);
        la.store(As, tid);
        lb.store(Bs, tid);
        __syncthreads();

        // ---- main loop: fragments as LDS.128, TM x TN outer product ------------------------
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&As[k][ty * TM + i]);
                a[i + 0] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN; j += 4) {
                const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tx * TN + j]);
                b[j + 0] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();   // the tile is consumed before the next iteration overwrites it
    }

    // ---- epilogue: float4 stores (STG.E.128 when GL_VEC_C), scalar at the edges ------------
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; j += 4)
            gl_store_c4(C, ldc, M, N, row0 + ty * TM + i, col0 + tx * TN + j,
                        make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), GL_EPI(alpha, beta));
}
