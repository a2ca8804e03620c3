// Rung 11 — vectorized float4, A transposed in shared memory.
//                                          seeds: 000 gemm_32x32_v5, 002 gemm_v05, 003 ldg(float4)
//
// What changes against rung 10 (2D thread tiling): the same 128 x 128 x 8 block tile and 8 x 8
// register tile per thread, but every memory access of the hot path becomes 128 bits wide:
//  * global -> shared: each thread moves one float4 of A and one of B per tile (LDG.E.128 through
//    GlATileLoader / GlBTileLoader) instead of four scalar loads each;
//  * A is stored TRANSPOSED in shared memory (As[k][m]), so a thread's TM = 8 rows of one k are
//    contiguous: the A fragment is 2 explicit LDS.128 instead of 8 strided scalar reads; B's
//    fragment (TN = 8 contiguous columns of Bs[k]) is 2 x LDS.128 as well;
//  * the epilogue writes C as float4 (gl_store_c4: STG.E.128 when GL_VEC_C).
// Why it is faster: global loads take 4x fewer instructions (and far less index/bounds
// arithmetic per element), so the per-tile overhead between the two barriers shrinks and more
// bytes are in flight per instruction. In shared memory, rung 10's A reads As[ty*8+i][k] put the
// two row groups of a warp 8 rows = 256 bytes apart, on the same banks (2-way conflict); in
// As[k][ty*8+i] they are 32 bytes apart, on different banks (1 wavefront). (nvcc already merged
// rung 10's row-contiguous scalar reads into LDS.128 — both main loops are 32 LDS.128 : 512
// FFMA per tile — so the win is not the LDS count but conflicts and load overhead.)
// PAD = 4 floats at the end of each shared row keeps every row 16-byte aligned (float4) and
// staggers the rows by 16 banks, which makes the TRANSPOSING scalar stores of the loaders
// (row-major A, column-major B: 4 k's of one m per thread) conflict-free.
// What it leaves: a warp is 2 row groups x 16 column groups; its B fragment reads hit
// Bs[k][tx*8 .. tx*8+3] — 16 float4 32 bytes apart, only half of the banks, 2-way conflicted
// (rung 13 fixes the mapping).
// Seed figures (docs/journal/ladder.md): 000 v5's FFMA share was 2/3 of its inner loop.
//
// Geometry: THREADS = (BM/TM) * (BN/TN); tx = t % (BN/TN) (lane-fast) -> columns tx*TN .. +TN-1,
// ty = t / (BN/TN) -> rows ty*TM .. +TM-1. TM, TN, BK multiples of 4 (registry constraints).
#include "common.cuh"

constexpr int PAD = 4;   // floats appended to each shared row (see the header)

static_assert(THREADS == (BM / TM) * (BN / TN), "THREADS must be (BM/TM)*(BN/TN)");
static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "float4 fragments need TM, TN, BK multiples of 4");
static_assert(BM % TM == 0 && BN % TN == 0, "TM/TN must divide BM/BN");
static_assert((BM + PAD) % 4 == 0 && (BN + PAD) % 4 == 0, "shared rows must stay 16-byte aligned");

extern "C" __global__ void __launch_bounds__(THREADS)
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, T* C, int ldc GL_EPI_PARAMS)
{
    __shared__ __align__(16) float As[BK][BM + PAD];   // [BK k's][BM rows (+PAD)]: A tile TRANSPOSED
    __shared__ __align__(16) float Bs[BK][BN + PAD];   // [BK k's][BN columns (+PAD)]

    const int tid = threadIdx.x;
    const int tx = (int)(threadIdx.x % (BN / TN));   // column group: columns tx*TN .. tx*TN+TN-1
    const int ty = (int)(threadIdx.x / (BN / TN));   // row group:    rows    ty*TM .. ty*TM+TM-1
    const int row0 = GL_TILE_ROW * BM;
    const int col0 = blockIdx.x * BN;

    GlATileLoader<BM, BK, THREADS, PAD> la;   // float4 per thread, global -> registers -> As
    GlBTileLoader<BK, BN, THREADS, PAD> lb;   // float4 per thread, global -> registers -> Bs

    float acc[TM][TN];             // [TM][TN] register tile of C
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float a[TM];                   // [TM] fragment: A(ty*TM + i, k)
    float b[TN];                   // [TN] fragment: B(k, tx*TN + j)

    for (int k0 = 0; k0 < K; k0 += BK) {
        // ---- load: LDG.E.128 when legal and in bounds, guarded scalars at the edges -------
        la.load(A, lda, M, K, row0, k0, tid);
        lb.load(B, ldb, K, N, k0, col0, tid);
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
