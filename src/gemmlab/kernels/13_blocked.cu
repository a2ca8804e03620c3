// Rung 13 — 64x64 / 128x128 register-blocked tiles.
//                                         seeds: 000 gemm_64x64, 000 gemm_128x128, fynv g_fgemm
//
// What changes against rung 11 (vectorized float4): the block tile (128 x 128 x 8), the 8 x 8
// outputs per thread, the float4 loaders and the LDS.128 fragments stay; what changes is WHICH
// 8 x 8 outputs a thread owns. Rung 11 gives thread (tx, ty) the contiguous block rows ty*8..+7,
// columns tx*8..+7. Here, as in seed 000's gemm_128x128 (fynv's g_fgemm), the thread tile is
// (TM/4) x (TN/4) blocks of 4 x 4 placed BM/(TM/4) rows and BN/(TN/4) columns apart: for the
// default 8 x 8 that is 2 x 2 blocks of 4 x 4 at rows ty*4 + {0, 64} + 0..3 and columns
// tx*4 + {0, 64} + 0..3. The k loop is fully unrolled (#pragma unroll) and C is written with
// float4 stores (STG.E.128 when GL_VEC_C), as in rung 11.
// Why it is faster: within a warp (16 tx x 2 ty) the B fragment reads are Bs[k][tx*4 + q*64]:
// 16 consecutive float4 = 256 contiguous bytes, which the LDS.128 serves in the minimum 2
// wavefronts (all 32 banks used) — rung 11's Bs[k][tx*8 + ...] reads are 32 bytes apart, use
// half of the banks and need 4 wavefronts (2-way conflict). The A fragment reads
// As[k][ty*4 + p*64] are 2 distinct addresses per warp (broadcast) in both designs. So per k the
// same 4 LDS.128 feed 64 FFMA but take fewer shared-memory cycles, and the C stores of a warp are
// 256 contiguous bytes per row instead of 16 pieces of 16 bytes 32 bytes apart.
// Preset "64x64" (seed 000 gemm_64x64): BM = BN = 64, BK = 16, TM = TN = 4, 256 threads. With
// TM = TN = 4 the rule above gives ONE 4 x 4 block per thread (rows ty*4..+3, columns tx*4..+3),
// exactly seed 000's gemm_64x64 mapping; its float4 reads of a warp are already contiguous
// (16 tx -> 256 bytes), so it is conflict-free without splitting (2 x 2 blocks of 2 x 2 would
// need LDS.64 and double the shared-load instructions).
// Shared rows are padded by 4 floats (16-byte aligned, conflict-free transposing stores, see
// rung 11); the reads stay conflict-free because a warp reads within one row k.
// Seed figures (docs/journal/ladder.md): 000's gemm_64x64 and gemm_128x128 came close to the
// V100's peak and to cuBLAS, the larger tile closer, with the larger FFMA share of the inner loop
// in PTX (16/17 against 8/9).
//
// Geometry: THREADS = (BM/TM) * (BN/TN); tx = t % (BN/TN) (lane-fast), ty = t / (BN/TN).
// RM = TM/4, RN = TN/4 blocks; output (p, i; q, j) of the thread, p < RM, q < RN, i, j < 4, is
// C(row0 + p*(BM/RM) + ty*4 + i, col0 + q*(BN/RN) + tx*4 + j). Since ty < BM/TM = (BM/RM)/4 the
// blocks of the threads tile [0, BM/RM) exactly; likewise for columns.
#include "common.cuh"

constexpr int PAD = 4;         // floats appended to each shared row
constexpr int RM = TM / 4;     // 4-row blocks per thread
constexpr int RN = TN / 4;     // 4-column blocks per thread
constexpr int SM_ = BM / RM;   // distance between a thread's row blocks    (64 for the default)
constexpr int SN_ = BN / RN;   // distance between a thread's column blocks (64 for the default)

static_assert(THREADS == (BM / TM) * (BN / TN), "THREADS must be (BM/TM)*(BN/TN)");
static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "4x4 blocks need TM, TN, BK multiples of 4");
static_assert(BM % TM == 0 && BN % TN == 0, "TM/TN must divide BM/BN");
static_assert((BM + PAD) % 4 == 0 && (BN + PAD) % 4 == 0, "shared rows must stay 16-byte aligned");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    __shared__ __align__(16) float As[BK][BM + PAD];   // [BK k's][BM rows (+PAD)]: A tile TRANSPOSED
    __shared__ __align__(16) float Bs[BK][BN + PAD];   // [BK k's][BN columns (+PAD)]

    const int tid = threadIdx.x;
    const int tx = (int)(threadIdx.x % (BN / TN));   // column slot: columns q*SN_ + tx*4 .. +3
    const int ty = (int)(threadIdx.x / (BN / TN));   // row slot:    rows    p*SM_ + ty*4 .. +3
    const int row0 = GL_TILE_ROW * BM;
    const int col0 = blockIdx.x * BN;

    GlATileLoader<BM, BK, THREADS, PAD> la;   // float4 per thread, global -> registers -> As
    GlBTileLoader<BK, BN, THREADS, PAD> lb;   // float4 per thread, global -> registers -> Bs

    float acc[TM][TN];             // [RM*4][RN*4] register tile: acc[p*4+i][q*4+j] = C(p*SM_+ty*4+i, q*SN_+tx*4+j)
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- load: LDG.E.128 when legal and in bounds, guarded scalars at the edges -------
        la.load(A, lda, M, K, row0, k0, tid);
        lb.load(B, ldb, K, N, k0, col0, tid);
        la.store(As, tid);
        lb.store(Bs, tid);
        __syncthreads();

        // ---- main loop: RM + RN LDS.128 per k, TM x TN outer product -----------------------
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float4 a[RM];          // [RM] fragments: A(p*SM_ + ty*4 + 0..3, k)
            float4 b[RN];          // [RN] fragments: B(k, q*SN_ + tx*4 + 0..3)
#pragma unroll
            for (int p = 0; p < RM; ++p) a[p] = *reinterpret_cast<const float4*>(&As[k][p * SM_ + ty * 4]);
#pragma unroll
            for (int q = 0; q < RN; ++q) b[q] = *reinterpret_cast<const float4*>(&Bs[k][q * SN_ + tx * 4]);
#pragma unroll
            for (int p = 0; p < RM; ++p) {
                const float av[4] = {a[p].x, a[p].y, a[p].z, a[p].w};
#pragma unroll
                for (int q = 0; q < RN; ++q) {
                    const float bv[4] = {b[q].x, b[q].y, b[q].z, b[q].w};
#pragma unroll
                    for (int i = 0; i < 4; ++i)
#pragma unroll
                        for (int j = 0; j < 4; ++j)
                            acc[p * 4 + i][q * 4 + j] = fmaf(av[i], bv[j], acc[p * 4 + i][q * 4 + j]);
                }
            }
        }
        __syncthreads();   // the tile is consumed before the next iteration overwrites it
    }

    // ---- epilogue: float4 stores (STG.E.128 when GL_VEC_C), scalar at the edges ------------
#pragma unroll
    for (int p = 0; p < RM; ++p)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int q = 0; q < RN; ++q)
                gl_store_c4(C, ldc, M, N, row0 + p * SM_ + ty * 4 + i, col0 + q * SN_ + tx * 4,
                            make_float4(acc[p * 4 + i][q * 4 + 0], acc[p * 4 + i][q * 4 + 1],
                                        acc[p * 4 + i][q * 4 + 2], acc[p * 4 + i][q * 4 + 3]),
                            GL_EPI(alpha, beta));
}
