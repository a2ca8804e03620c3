// tensor16.cuh — common.cuh's part for 16-bit operands (GL_DTYPE 1 or 2, included by common.cuh,
// which every rung includes): packing to and from C's 16-bit type, mma.sync m16n8k16, the 8-wide
// operand loads, the 8-wide epilogue stores of the tensor-core rungs and the cluster split's reduction.
#pragma once

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

// Eight consecutive outputs of C's type at p (16-byte aligned), read as FP32 and written from FP32
// (rounded once): one 128-bit access for a 16-bit C, two for an FP32 one.
#if GL_C_DTYPE != 0
__device__ __forceinline__ void gl_load8_c(const TC* p, float (&o)[8]) {
    const uint4 c = *reinterpret_cast<const uint4*>(p);
    const float2 c0 = gl_unpack2(c.x), c1 = gl_unpack2(c.y), c2 = gl_unpack2(c.z), c3 = gl_unpack2(c.w);
    o[0] = c0.x; o[1] = c0.y; o[2] = c1.x; o[3] = c1.y; o[4] = c2.x; o[5] = c2.y; o[6] = c3.x; o[7] = c3.y;
}
__device__ __forceinline__ void gl_store8_c(TC* p, const float (&o)[8]) {
    *reinterpret_cast<uint4*>(p) = make_uint4(gl_pack2(o[0], o[1]), gl_pack2(o[2], o[3]), gl_pack2(o[4], o[5]),
                                              gl_pack2(o[6], o[7]));
}
#else
__device__ __forceinline__ void gl_load8_c(const float* p, float (&o)[8]) {
    const float4 c0 = reinterpret_cast<const float4*>(p)[0], c1 = reinterpret_cast<const float4*>(p)[1];
    o[0] = c0.x; o[1] = c0.y; o[2] = c0.z; o[3] = c0.w; o[4] = c1.x; o[5] = c1.y; o[6] = c1.z; o[7] = c1.w;
}
__device__ __forceinline__ void gl_store8_c(float* p, const float (&o)[8]) {
    reinterpret_cast<float4*>(p)[0] = make_float4(o[0], o[1], o[2], o[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(o[4], o[5], o[6], o[7]);
}
#endif

// Eight outputs C(i, j..j+7) from FP32 values v[0..7] (C of any type: an FP32 C is an output dtype
// of 16-bit operands), with GL_AUX their pre-activations beside: 16-byte stores when legal
// (GL_VEC_C, j % 8 == 0 holds) and all eight are inside; else guarded scalar stores. beta == 0: C
// not read.
__device__ __forceinline__ void gl_store_c8(TC* C, int ldc, int M, int N, int i, int j, const float* v, const GlEpi& ep) {
    if (i >= M) return;
#if GL_VEC_C
    if (N - j >= 8) {
        const size_t off = gl_c_off(i, j, ldc);
        const float alpha = ep.alpha, beta = ep.beta;
        float o[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = alpha * v[e];
        if (beta != 0.0f) {
            float c[8];
            gl_load8_c(C + off, c);
#pragma unroll
            for (int e = 0; e < 8; ++e) o[e] = fmaf(beta, c[e], o[e]);
        }
#if GL_EPI_AUX   // the pre-activations first, at C's offset in the auxiliary output
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = ep.pre(o[e], i, j + e);
        gl_store8_c(ep.aux + off, o);
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = ep.post(o[e]);
#else
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = ep.finish(o[e], i, j + e);
#endif
        gl_store8_c(C + off, o);
        return;
    }
#endif
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (j + e < N) gl_store_c(C, ldc, i, j + e, v[e], ep);
}

#if GL_C_DTYPE != 0
// One output C(i, j) (inside C) staged rounded to T (h: its bits), finished as gl_store_c8_rounded
// finishes eight.
__device__ __forceinline__ void gl_store_c1_rounded(TC* C, int ldc, int i, int j, unsigned short h, const GlEpi& ep) {
    const size_t o = gl_c_off(i, j, ldc);
    if (ep.beta != 0.0f || GL_EPI_AUX) {
        const float x = gl_unpack2(h).x;
#if GL_EPI_AUX
        const float c = ep.beta != 0.0f ? gl_to_float(C[o]) : 0.0f;
#else
        const float c = gl_to_float(C[o]);
#endif
        C[o] = gl_c_from_float(ep.finish_at(fmaf(ep.beta, c, x), i, j, o));
    } else {
        reinterpret_cast<unsigned short*>(C)[o] = h;
    }
}

// Eight outputs C(i, j..j+7) staged in shared memory rounded to T (h: four packed pairs, low half
// first). With beta == 0 the staging holds the finished outputs (the stager applied the whole
// functor) and the bits go out as they are (C not read); else, and always with GL_AUX, it holds
// alpha * acc, and beta * C, the bias and the activation are applied here in FP32 and rounded
// again (two roundings; measure/verify.py's element tolerance allows two), the pre-activations
// going to the auxiliary output beside. One 128-bit load and store when legal
// (GL_VEC_C, j % 8 == 0 holds) and all eight are inside; else guarded scalar accesses.
__device__ __forceinline__ void gl_store_c8_rounded(TC* C, int ldc, int M, int N, int i, int j, uint4 h, const GlEpi& ep) {
    if (i >= M) return;
    unsigned w[4] = {h.x, h.y, h.z, h.w};
#if GL_VEC_C
    if (N - j >= 8) {
        const float beta = ep.beta;
        uint4* p = reinterpret_cast<uint4*>(C + gl_c_off(i, j, ldc));
        if (beta != 0.0f || GL_EPI_AUX) {   // with GL_AUX the stager left the functor's rest here
#if GL_EPI_AUX
            const uint4 c = beta != 0.0f ? *p : make_uint4(0u, 0u, 0u, 0u);   // beta == 0: C not read
#else
            const uint4 c = *p;
#endif
            const unsigned cw[4] = {c.x, c.y, c.z, c.w};
#if GL_EPI_AUX
            unsigned zw[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float2 a = gl_unpack2(w[e]), b = gl_unpack2(cw[e]);
                const float z0 = ep.pre(fmaf(beta, b.x, a.x), i, j + 2 * e);
                const float z1 = ep.pre(fmaf(beta, b.y, a.y), i, j + 2 * e + 1);
                zw[e] = gl_pack2(z0, z1);
                w[e] = gl_pack2(ep.post(z0), ep.post(z1));
            }
            *reinterpret_cast<uint4*>(ep.aux + gl_c_off(i, j, ldc)) = make_uint4(zw[0], zw[1], zw[2], zw[3]);
#else
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float2 a = gl_unpack2(w[e]), b = gl_unpack2(cw[e]);
                w[e] = gl_pack2(ep.finish(fmaf(beta, b.x, a.x), i, j + 2 * e),
                                ep.finish(fmaf(beta, b.y, a.y), i, j + 2 * e + 1));
            }
#endif
        }
        *p = make_uint4(w[0], w[1], w[2], w[3]);
        return;
    }
#endif
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (j + e < N) gl_store_c1_rounded(C, ldc, i, j + e, (unsigned short)(w[e / 2] >> (16 * (e % 2))), ep);
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
// legal (gl_store_c8), and a warp writes whole rows (coalesced); a C without 16-byte access
// (GL_VEC_C = 0) is written by scalar stores, consecutive lanes on consecutive outputs. Ends with
// __syncwarp: the caller may overwrite the staging next. In a split-K variant (GL_SPLITK) the output is the slice's FP32
// workspace W (Out = float): the partial sums go there as they are (gl_store_w8), alpha and beta
// are the reduction's.
template <int TWN, int LD, typename Out>
__device__ __forceinline__ void gl_store_rows16(const float (*cs)[LD], Out* C, int ldc, int M, int N, int i0, int j0,
                                                const GlEpi& ep, int lane) {
    static_assert(TWN % 16 == 0, "a warp's 16 rows of TWN outputs split into whole 8-wide vectors per lane");
#if !GL_VEC_C
    // C without 16-byte access: consecutive lanes take consecutive outputs of a row, so a warp's
    // scalar store covers 32 neighbours (64 or 128 contiguous bytes; two rows of 16 where TWN is
    // 16). Eight outputs per lane, as below, spread one store instruction over eight times as many
    // 32-byte sectors, and the epilogue of a short-K problem is most of its time. The row loop is
    // not unrolled: its stores need no more registers than one row's.
    constexpr int ROW_LANES = TWN < 32 ? TWN : 32;
    const int cl = lane % ROW_LANES;
#pragma unroll 1
    for (int r = lane / ROW_LANES; r < 16; r += 32 / ROW_LANES) {
        const int i = i0 + r;
        if (i >= M) break;
#pragma unroll
        for (int c = cl; c < TWN; c += ROW_LANES) {
            if (j0 + c >= N) break;
#if GL_SPLITK
            C[gl_c_off(i, j0 + c, ldc)] = cs[r][c];
#else
            gl_store_c(C, ldc, i, j0 + c, cs[r][c], ep);
#endif
        }
    }
#else
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
#endif
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


#if GL_SPLITK_CLUSTER
// One warp's 16 x TWN block of FP32 accumulators (gl_store_warp16's fragment layout) into the
// cluster split's partial tile pt[..][LD] in shared memory, at rows r0.., columns c0.. (rungs 17 and
// 19, before gl_cluster_split_store).
template <int TWN, int LD>
__device__ __forceinline__ void gl_partial_warp16(float (*pt)[LD], const float (&acc)[TWN / 8][4], int r0, int c0, int lane) {
    const int r = r0 + lane / 4, c = c0 + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < TWN / 8; ++j) {
        *reinterpret_cast<float2*>(&pt[r][8 * j + c]) = make_float2(acc[j][0], acc[j][1]);
        *reinterpret_cast<float2*>(&pt[r + 8][8 * j + c]) = make_float2(acc[j][2], acc[j][3]);
    }
}

// The cluster split's reduction (common.cuh, "split-K in a cluster"; rungs 17 and 19): this
// block's FP32 partial tile [BM_][LD] is at shared address `tile`. The cluster barrier once every
// block's partial tile is written, then this block's S-th of the tile, 8 outputs per step, summed
// over the S blocks in ascending order and stored through the functor (gl_store_c8); the second
// barrier keeps the tile alive until every peer has read it. Called by all NT threads of the block.
template <int BM_, int BN_, int LD, int NT>
__device__ __forceinline__ void gl_cluster_split_store(unsigned tile, TC* C, int ldc, int M, int N, int row0, int col0,
                                                       const GlEpi& ep) {
    constexpr int S = GL_SPLITK_CLUSTER, Q = BN_ / 8;  // 8-wide vectors per tile row
    constexpr int PART = GL_CEIL_DIV(BM_ * Q, S);
    gl_cluster_sync();                                 // every block's partial tile written
    const unsigned rank = gl_cluster_rank();
    unsigned peer[S];
#pragma unroll
    for (int z = 0; z < S; ++z) asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(peer[z]) : "r"(tile), "r"(z));
    const int first = (int)rank * PART, last = min(BM_ * Q, first + PART);
    for (int e = first + (int)threadIdx.x; e < last; e += NT) {
        const int r = e / Q, c = (e % Q) * 8;
        if (row0 + r >= M || col0 + c >= N) continue;  // padding of an edge tile: nothing to store
        const unsigned off = 4u * (unsigned)(r * LD + c);
        float sum[8];
#pragma unroll
        for (int z = 0; z < S; ++z) {
            float v[8];
            asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                         : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3]) : "r"(peer[z] + off));
            asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                         : "=f"(v[4]), "=f"(v[5]), "=f"(v[6]), "=f"(v[7]) : "r"(peer[z] + off + 16u));
#pragma unroll
            for (int x = 0; x < 8; ++x) sum[x] = z == 0 ? v[x] : sum[x] + v[x];   // fixed order: z ascending
        }
        gl_store_c8(C, ldc, M, N, row0 + r, col0 + c, sum, ep);
    }
    __syncwarp();                                      // the warp whole again for the .aligned barrier
    gl_cluster_sync_relaxed();                         // no block leaves while its tile is read
}
#endif

#endif  // GL_DTYPE != 0
