// pack.cu — operand packing for the fast paths (not a rung of the ladder; a rung's PACK
// parameter, core/packing.py).
//
// The fast paths of rungs 17-20 (cp.async of 16 bytes, TMA) need an operand whose base is 16-byte
// aligned and whose leading dimension is a multiple of 16 bytes (GL_VEC_A / GL_VEC_B,
// kernels/common.cuh). Without that they fall back to 16-bit or 32-bit copies, many times slower
// (rung 19 at 4093^3 against 4096^3 in benchmarks/results/h100_wgmma_tma_fp16.json).
// This kernel copies such an operand once, before the GEMM, into the workspace: a dense buffer
// whose base is 256-byte aligned and whose leading dimension ldp is the row length rounded up to a
// multiple of 32 bytes (core/packing.py says why). The layout (row- or column-major) stays as it
// was: the operand is `outer` rows of `inner` contiguous elements, src row i at src + i*ld, dst
// row i at dst + i*ldp. The GEMM then runs its 16-byte variant on it. The padding (ldp - inner <
// 32 bytes) is written with zeros by each row's last 16-byte stores; no GEMM reads it (they read
// inside M, N, K only).
//
// Work: one warp per row (GL_PACK_ROWS rows per block, more along gridDim.y strides), one
// 16-byte chunk of dst per lane, so a warp writes 512 consecutive bytes with STG.128 and reads
// the 512 bytes behind them (each lane's 4 or 8 element loads hit the sectors its neighbours
// read: the L1 merges them, the DRAM sees each byte once). Loads are of single elements because
// the source is aligned only to its element size. It moves outer*(inner + ldp)*sizeof(T) bytes:
// memory-bound (expected near the device-to-device copy rate).
//
// GL_PACK_SPLIT 1 (3xTF32 on rung 22, FP32 only): both kernels write two planes instead of one copy,
// the big TF32 parts hi = tf32(x) at dst and the small ones lo = tf32(x - hi) right after them, at
// dst + rows * ldp (rows of the copy: `outer`, or `inner` when transposed), from ONE read of the
// source (common.cuh, gl_split: x = hi + lo within 2^-22 |x|). The GEMM's 3-D tensor map reads the
// two planes as (k, row, plane). The padding is zero in both planes (the split of 0 is 0 + 0).
//
// Launch: a plan's second copy, and then its GEMM, go out with programmatic stream serialization
// on sm_90 (core/launch.py): each may be scheduled while the kernel before it finishes and waits
// for it in its first instruction (gl_pdl_wait; a no-op after an ordinary launch): each launch's
// latency then overlaps the kernel before it, a few microseconds off every packed plan
// (benchmarks/results/h100_pdl_pack.json, the same plans with and without it).
#include "common.cuh"

#ifndef GL_PACK_SPLIT
#define GL_PACK_SPLIT 0
#endif
#if GL_PACK_SPLIT && GL_DTYPE != 0
#error "the split pack (GL_PACK_SPLIT) splits FP32 operands into TF32 parts"
#endif

// Where element `at` of the copy goes: as is, or its TF32 parts into the two planes `plane` apart.
template <typename E>
__device__ __forceinline__ void gl_pack_put(E* dst, size_t at, size_t plane, E x) {
#if GL_PACK_SPLIT
    unsigned hi, lo;
    gl_split(x, hi, lo);
    dst[at] = hi;
    dst[at + plane] = lo;
#else
    dst[at] = x;
#endif
}

#define GL_PACK_ROWS 4                               // warps (rows) per block
#define GL_PACK_VEC (16 / (int)sizeof(T))            // elements per 16-byte chunk

#if GL_DTYPE == 0
typedef unsigned int GlBits;                         // an element's bits
#define GL_PER_WORD 1
#elif GL_DTYPE == 3
typedef unsigned char GlBits;                        // FP8 (rung 25): bytes of either format
#define GL_PER_WORD 4
#else
typedef unsigned short GlBits;
#define GL_PER_WORD 2
#endif

// The 32-bit word of dst holding elements j .. j + GL_PER_WORD - 1 of a source row; zero past
// the row's end (the padding).
__device__ __forceinline__ unsigned int gl_pack_word(const GlBits* __restrict__ row, int j, int inner) {
    unsigned int w = 0;
#pragma unroll
    for (int e = 0; e < GL_PER_WORD; ++e)
        if (j + e < inner) w |= (unsigned int)__ldg(row + j + e) << (8 * (int)sizeof(GlBits) * e);
    return w;
}

// GL_PACK_BATCHED 1: a batch of such operands in one launch (a batched GEMM's, core/batched.py), element
// blockIdx.z read src_stride elements after element 0 and written dst_stride after the copy's first.
#ifndef GL_PACK_BATCHED
#define GL_PACK_BATCHED 0
#endif
#if GL_PACK_BATCHED
#define GL_PACK_BATCH_PARAMS , long long src_stride, long long dst_stride
#else
#define GL_PACK_BATCH_PARAMS
#endif
extern "C" __global__ void __launch_bounds__(32 * GL_PACK_ROWS)
pack(int outer, int inner, const T* __restrict__ src, int ld, T* __restrict__ dst, int ldp GL_PACK_BATCH_PARAMS)
{
    gl_pdl_wait();   // a second copy, launched programmatically after the first (core/launch.py)
#if GL_PACK_BATCHED
    src += blockIdx.z * src_stride;
    dst += blockIdx.z * dst_stride;
#endif
    const int j = (blockIdx.x * 32 + (threadIdx.x & 31)) * GL_PACK_VEC;   // this lane's chunk
    if (j >= ldp) return;
    const GlBits* const s = reinterpret_cast<const GlBits*>(src);
    for (int i = blockIdx.y * GL_PACK_ROWS + (threadIdx.x >> 5); i < outer; i += gridDim.y * GL_PACK_ROWS) {
        const GlBits* const row = s + (size_t)i * ld;
        uint4 v;
        v.x = gl_pack_word(row, j, inner);
        v.y = gl_pack_word(row, j + GL_PER_WORD, inner);
        v.z = gl_pack_word(row, j + 2 * GL_PER_WORD, inner);
        v.w = gl_pack_word(row, j + 3 * GL_PER_WORD, inner);
#if GL_PACK_SPLIT
        uint4 hi, lo;
        gl_split(v.x, hi.x, lo.x);
        gl_split(v.y, hi.y, lo.y);
        gl_split(v.z, hi.z, lo.z);
        gl_split(v.w, hi.w, lo.w);
        *reinterpret_cast<uint4*>(dst + (size_t)i * ldp + j) = hi;
        *reinterpret_cast<uint4*>(dst + (size_t)outer * ldp + (size_t)i * ldp + j) = lo;
#else
        *reinterpret_cast<uint4*>(dst + (size_t)i * ldp + j) = v;
#endif
    }
}

// ---- the transposing pack (rungs whose kernel reads K-major operands only: 22 wgmma_tf32, 25 wgmma_fp8) -
// src is `outer` rows of `inner` contiguous elements (row i at src + i*ld); dst is its transpose,
// `inner` rows of `outer` elements (dst row c at dst + c*ldp, ldp >= outer a multiple of 16 bytes;
// the padding past `outer` is written with zeros). TF32 wgmma has no transpose bit, so an MN-major
// operand (column-major A, row-major B) becomes K-major this way before the GEMM. A block moves a
// GL_PACK_T x GL_PACK_T tile through shared memory, rows padded by one element (a warp reading a
// column hits 32 banks): reads along src rows and writes along dst rows are both coalesced. Blocks
// of 32 x 8 threads, each thread 4 elements per pass; tiles past grid.y's limit by a grid-stride loop.
#define GL_PACK_T 32
extern "C" __global__ void __launch_bounds__(256)
pack_t(int outer, int inner, const T* __restrict__ src, int ld, T* __restrict__ dst, int ldp)
{
    gl_pdl_wait();   // a second copy, launched programmatically after the first (core/launch.py)
    __shared__ GlBits tile[GL_PACK_T][GL_PACK_T + 1];
    const GlBits* const s = reinterpret_cast<const GlBits*>(src);
    GlBits* const d = reinterpret_cast<GlBits*>(dst);
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    const int c0 = blockIdx.x * GL_PACK_T;                    // src columns (dst rows) of this tile
    for (int r0 = blockIdx.y * GL_PACK_T; r0 < ldp; r0 += gridDim.y * GL_PACK_T) {   // src rows (dst columns)
#pragma unroll
        for (int y = ty; y < GL_PACK_T; y += 8) {             // load: a warp reads 32 elements of one src row
            const int r = r0 + y, c = c0 + tx;
            tile[y][tx] = (r < outer && c < inner) ? __ldg(s + (size_t)r * ld + c) : (GlBits)0;
        }
        __syncthreads();
#pragma unroll
        for (int y = ty; y < GL_PACK_T; y += 8) {             // store: a warp writes 32 elements of one dst row
            const int c = c0 + y, r = r0 + tx;
            if (c < inner && r < ldp) gl_pack_put(d, (size_t)c * ldp + r, (size_t)inner * ldp, tile[tx][y]);
        }
        __syncthreads();                                      // the tile is read before the next pass
    }
}
