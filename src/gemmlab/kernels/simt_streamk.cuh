// simt_streamk.cuh — rung 18's stream-K tail (STREAMK=1): the tail's schedule (SkTail), what a
// piece does after its k tiles (SkPiece) and the fixup that publishes a piece or adds the published
// ones (gl_sk_fixup). Included by 18_async_simt.cu where it stands, after its geometry: BM, BN, BK,
// TM, TN, SUBN, THREADS. The persistent WGMMA rungs' stream-K is ws.cuh's (their accumulators are
// the wgmma fragments).
#pragma once
// ---- stream-K tail (STREAMK=1) -----------------------------------------------------------------
// One block per SM (the registry allows STREAMK=1 only for such tiles), and T tiles of C: T / 132
// waves of whole tiles plus a partial one, which takes a whole tile time with the rest of the SMs
// idle (4096^3 at 128x256: 512 tiles, 3.88 waves run in 4; 8192^3: 15.52 in 16). With G blocks per
// wave (core/schema.py, Rung.launch: the SM count), the dp tiles of the whole waves run first, one per
// block (`gemm`, grid (G, dp / G)); then `gemm_sk_tail`, G blocks, shares the k tiles of the T - dp
// tiles left: all of the partial wave, and one whole wave more when the partial one is under half
// full (as in ws.cuh: every block then gets at least half a tile's k tiles, so a tile has at most
// three pieces). Block c takes the steps [begin(c), begin(c + 1)) of the tail's (tile, k tile)
// steps, an even share, and walks them BACKWARDS: its first piece is the start of the tile its
// range ends in, which it publishes (its FP32 sums, to its slot of the workspace, and one flag per
// warp); its last piece holds the last k tile of the tile its range starts in, and it finishes
// that tile: it adds the pieces the lower blocks published, in falling block order (a fixed order:
// the same bits at every launch), and stores the tile with alpha and beta. A finisher waits only
// for blocks with lower indices, which publish first thing: no block waits on one that has not
// started (the G blocks fit the GPU at once, and are dispatched in index order). The workspace (the
// kernels' last argument; its size is the registry's streamk_workspace): per block c, SK_V x
// THREADS float4 (each store a warp's 512 contiguous bytes), then one int flag per block and warp,
// zeroed by the host before each launch.
#if STREAMK
constexpr int SK_V = TM * TN / 4;                 // float4 of accumulators per thread
struct SkTail {
    int tiles_n, ktiles, dp, steps;               // steps: the tail's (tile, k tile) pairs
    // dp by the host's rule (schema._streamk_split) for G = gridDim.x blocks
    __device__ __forceinline__ SkTail(int M, int N, int K)
        : tiles_n(GL_CEIL_DIV(N, BN)), ktiles(GL_CEIL_DIV(K, BK)) {
        const int total = GL_CEIL_DIV(M, BM) * tiles_n, g = (int)gridDim.x, rem = total % g;
        dp = total - (2 * rem >= g ? rem : rem + g);
        steps = (total - dp) * ktiles;
    }
    // block c's first step, floor(steps c / G) in 32 bits (steps < 2^31: the registry's streamk_tail)
    __device__ __forceinline__ int begin(int c) const {
        const int g = (int)gridDim.x, q = steps / g, r = steps % g;
        return q * c + r * c / g;
    }
};
// What a piece does after its k tiles: publish >= 0: its sums go to that slot, it stores nothing;
// else it adds slots add_hi, add_hi - 1, ..., add_lo (none when add_hi < add_lo) and stores the tile.
struct SkPiece {
    int publish, add_hi, add_lo;
};
__device__ __forceinline__ int* gl_sk_flag(float* ws, int slot, int warp) {
    return reinterpret_cast<int*>(ws + (size_t)gridDim.x * BM * BN) + slot * (THREADS / 32) + warp;
}
// true when the tile is to be stored (its other pieces now added to acc); false when published
__device__ __forceinline__ bool gl_sk_fixup(float (&acc)[TM][TN], const SkPiece& sk, float* __restrict__ ws) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    if (sk.publish >= 0) {
        float4* p = reinterpret_cast<float4*>(ws) + (size_t)sk.publish * SK_V * THREADS + tid;
#pragma unroll
        for (int v = 0; v < SK_V; ++v) {
            const int i = v / SUBN, j = 4 * (v % SUBN);
            __stcg(p + v * THREADS, make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
        }
        // the lanes' stores ordered before lane 0's fence by __syncwarp, the flag after the fence
        __syncwarp();
        if (lane == 0) {
            __threadfence();
            asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" :: "l"(gl_sk_flag(ws, sk.publish, warp)), "r"(1) : "memory");
        }
        return false;
    }
    for (int c = sk.add_hi; c >= sk.add_lo; --c) {
        const int* flag = gl_sk_flag(ws, c, warp);
        int ready;   // every lane acquires the flag itself; the vote ends the wait for the whole warp at once
        do {
            asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(ready) : "l"(flag) : "memory");
        } while (!__all_sync(0xffffffffu, ready));
        const float4* p = reinterpret_cast<const float4*>(ws) + (size_t)c * SK_V * THREADS + tid;
        // 4 loads in flight at a time: 16 registers beside the accumulators, not 4 SK_V
        constexpr int GROUP = 4;
        static_assert(SK_V % GROUP == 0, "the accumulators are whole groups of GROUP float4");
#pragma unroll
        for (int v0 = 0; v0 < SK_V; v0 += GROUP) {
            float4 x[GROUP];
#pragma unroll
            for (int g = 0; g < GROUP; ++g) x[g] = __ldcg(p + (v0 + g) * THREADS);
#pragma unroll
            for (int g = 0; g < GROUP; ++g) {
                const int i = (v0 + g) / SUBN, j = 4 * ((v0 + g) % SUBN);
                acc[i][j] += x[g].x; acc[i][j + 1] += x[g].y; acc[i][j + 2] += x[g].z; acc[i][j + 3] += x[g].w;
            }
        }
    }
    return true;
}
#endif
