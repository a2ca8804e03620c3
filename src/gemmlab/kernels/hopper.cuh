// hopper.cuh — what the Hopper rungs (19 wgmma_tma, 21 wgmma_ws, 22 wgmma_tf32) share: PTX wrappers for the
// mbarriers, TMA (cp.async.bulk.tensor: loads, and rung 21's stores) and wgmma (matrix descriptors,
// fences, the m64nNk16 instruction with its accumulator operand lists), the tensor-map parameter
// type, and the operand loader that fills the 128-byte-swizzled shared panels wgmma reads, by TMA
// (multicast to a cluster too) or, for an operand TMA cannot describe (GL_VEC_A / GL_VEC_B = 0), by
// a warpgroup's threads; cluster and setmaxnreg wrappers; a warpgroup's stage descriptors and one k
// tile of its wgmmas (rung 21; rung 19 spells the same two out in its main loop).
// sm_90a only (wgmma); a rung that includes this checks the target itself.
#pragma once
#include "common.cuh"

constexpr int GL_ROW_B = 128;       // bytes of one swizzled row: 64 16-bit or 32 FP32 elements, the swizzle's width
constexpr int GL_WARPGROUP = 128;   // threads of a warpgroup (4 warps): wgmma's unit, and the copying producer

// ---- a Hopper block's warpgroups (rungs 19, 21, 22): BM / WM consumer warpgroups of WM rows each,
// then the producer warpgroup (the registry's wgmma_threads) ----------------------------------------
constexpr int WGS = BM / WM;                  // consumer warpgroups
constexpr int MI = WM / 64;                   // m64 wgmmas per warpgroup, down
constexpr int CONSUMERS = GL_WARPGROUP * WGS; // consumer threads
constexpr int CWARPS = CONSUMERS / 32;        // consumer warps; warps CWARPS.. are the producer warpgroup

// The driver's CUtensorMap (cuda.h is not part of NVRTC): 128 opaque bytes, 64-byte aligned,
// passed by value as a __grid_constant__ kernel parameter (the copy engine reads it from there).
struct alignas(64) GlTensorMap { unsigned long long opaque[16]; };

// ---- the grouped raster (rung 19's launch order, rungs 21 and 22's persistent schedule) ----------
// Tile number `lin` of a tiles_m x tiles_n grid of output tiles, numbered in groups of `group` row
// tiles, the column tiles of one group before the next: the (row tile, column tile) it names. Tiles
// in flight together then cover a patch of C about `group` rows tall, whose panels of A and B the
// L2 serves to many blocks at once (rung 19's header says by how much). I: the index type (rung 19
// numbers its blocks in 64 bits; the persistent rungs' 32-bit units keep registers).
template <typename I>
__device__ __forceinline__ int2 gl_group_raster(I lin, I tiles_n, int tiles_m, int group) {
    const I per_group = (I)group * tiles_n;
    const int first = (int)(lin / per_group) * group;
    const int rows = min(tiles_m - first, group);   // the last group may be shorter
    const int in_group = (int)(lin % per_group);
    return make_int2(first + in_group % rows, in_group / rows);
}

// ---- PTX wrappers: mbarriers, TMA, wgmma --------------------------------------------------------
__device__ __forceinline__ void gl_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
// Block until the phase of parity `parity` has completed (a fresh barrier counts parity 1 as done).
__device__ __forceinline__ void gl_mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void gl_mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void gl_mbar_arrive_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void gl_mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
// One 2-D box at coordinates (inner c0, outer c1) of the tensor `map` into shared memory at `dst`;
// its bytes count against the transaction count of the mbarrier `bar`.
__device__ __forceinline__ void gl_tma_load(unsigned dst, const GlTensorMap* map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
// The same with a third coordinate c2: a plane of a 3-D map (rung 22's 3xTF32 operands: plane 0 the
// big TF32 parts, plane 1 the small ones, each a 2-D operand of its own with its own zero fill).
__device__ __forceinline__ void gl_tma_load_3d(unsigned dst, const GlTensorMap* map, int c0, int c1, int c2, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}
// A tensor map written in global memory by another kernel (tensormap.replace: rung 26's group_maps),
// made visible to this thread's TMA before it uses the map
__device__ __forceinline__ void gl_tensormap_acquire(const GlTensorMap* map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n"
                 :: "l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
__device__ __forceinline__ void gl_tma_prefetch(const GlTensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" :: "l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}
// The other direction: the box at shared `src` to coordinates (inner c0, outer c1) of the tensor
// `map`; elements past the tensor's edges are not written. The copy joins this thread's current
// bulk async-group (gl_bulk_commit closes it); the writing threads fence their st.shared / stmatrix
// (gl_fence_proxy_async) and synchronize with the issuing thread before it.
__device__ __forceinline__ void gl_tma_store(const GlTensorMap* map, int c0, int c1, unsigned src) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(src) : "memory");
}
// ... at (c0, c1) of element c2 of a batched C (GL_BATCHED: a 3-D map)
__device__ __forceinline__ void gl_tma_store_3d(const GlTensorMap* map, int c0, int c1, int c2, unsigned src) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n"
                 :: "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(src) : "memory");
}
// C's box at (c0, c1) of batch element z: the 2-D store, or the 3-D one of a batched launch (or of
// rung 26's groups over K, GL_C_ELEMENTS: each group's own C)
#ifndef GL_C_ELEMENTS
#define GL_C_ELEMENTS 0
#endif
__device__ __forceinline__ void gl_tma_store_at(const GlTensorMap* map, int c0, int c1, int z, unsigned src) {
    if constexpr (GL_BATCHED || GL_C_ELEMENTS) gl_tma_store_3d(map, c0, c1, z, src);
    else gl_tma_store(map, c0, c1, src);
}
__device__ __forceinline__ void gl_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Wait until at most N of this thread's bulk async-groups are pending: with .read, only until their
// reads of shared memory are done (the source may be written again); without, until their writes
// to global memory are complete too.
template <int N>
__device__ __forceinline__ void gl_bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N) : "memory"); }
template <int N>
__device__ __forceinline__ void gl_bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;\n" :: "n"(N) : "memory"); }

// The same box delivered to the same shared offset of every CTA of the cluster named in `mask`
// (bit r: cluster rank r); each destination's mbarrier at offset `bar` counts the bytes it gets.
__device__ __forceinline__ void gl_tma_load_multicast(unsigned dst, const GlTensorMap* map, int c0, int c1, unsigned bar,
                                                      unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
                 : "memory");
}

__device__ __forceinline__ void gl_tma_load_multicast_3d(unsigned dst, const GlTensorMap* map, int c0, int c1, int c2,
                                                         unsigned bar, unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask)
                 : "memory");
}

// ---- thread-block clusters (gl_cluster_rank, gl_cluster_sync: common.cuh) --------------------
// An arrival on the mbarrier at shared offset `bar` of the cluster's CTA `rank`. The default
// semantics (release at CTA scope), not .release.cluster: what the arrival publishes is that this
// warp's wgmmas finished reading the stage, which wgmma.wait_group already guarantees (the reads
// are the async proxy's, complete before the wait returns). The cluster-scope release made ptxas
// put a MEMBAR before every arrival: "membar" was rung 21's top stall in Nsight Compute at 4096^3,
// and CLUSTER=2 ran far slower with it (benchmarks/results/h100_wgmma_ws_v1_fp16.json) than
// without (h100_wgmma_ws_fp16.json).
__device__ __forceinline__ void gl_mbar_arrive_cluster(unsigned bar, unsigned rank) {
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
                 :: "r"(bar), "r"(rank) : "memory");
}

// ---- registers and proxies ----------------------------------------------------------------------
// Give back registers down to N per thread (a warpgroup that needs few), or wait for and take
// registers up to N (one that needs many). Effective only when the kernel has a register cap at
// entry (__launch_bounds__(threads, 1)) and each warpgroup's role is one branch of one if/else.
template <int N>
__device__ __forceinline__ void gl_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N)); }
template <int N>
__device__ __forceinline__ void gl_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N)); }
// This thread's generic-proxy shared stores (st.shared) visible to the async proxy (wgmma, TMA).
__device__ __forceinline__ void gl_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Four 8x8 matrices of 16-bit elements, held in the tensor cores' fragment layout (register r of
// lane t: row t / 4, elements 2 (t % 4) and +1 of matrix r), to shared memory: lane t names the
// 16-byte row t % 8 of matrix t / 8. One instruction where 32-bit st.shared would take four.
__device__ __forceinline__ void gl_stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
__device__ __forceinline__ uint4 gl_lds128(unsigned addr) {
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
    return v;
}
__device__ __forceinline__ unsigned short gl_lds16(unsigned addr) {
    unsigned short v;
    asm volatile("ld.shared.b16 %0, [%1];\n" : "=h"(v) : "r"(addr) : "memory");
    return v;
}

// A shared-memory matrix descriptor with the 128-byte swizzle: start address, leading- and
// stride-dimension byte offsets (all in 16-byte units), swizzle mode 1 in bits 62-63. The start
// field is 14 bits of a shared address below 256 KB: adding (offset >> 4) to a descriptor moves
// its start without carrying into the other fields.
// The low word (start and leading offset) varies with the stage and the k step; the high word
// (stride offset, swizzle) is a constant of the layout: gl_desc_lo + gl_desc_hi, joined by gl_desc_at.
__device__ __forceinline__ unsigned gl_desc_lo(unsigned addr, unsigned lbo) {
    return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16);
}
__host__ __device__ constexpr unsigned gl_desc_hi(unsigned sbo) { return (sbo >> 4) | (1u << 30); }
__device__ __forceinline__ unsigned long long gl_desc_at(unsigned lo, unsigned hi) {
    return ((unsigned long long)hi << 32) | lo;
}
__device__ __forceinline__ unsigned long long gl_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return gl_desc_at(gl_desc_lo(addr, lbo), gl_desc_hi(sbo));
}

__device__ __forceinline__ void gl_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void gl_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void gl_wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }

// A warpgroup's accumulators (MI m64 blocks of R = N / 8 fragments): d = 0, and d += p (rung 22's
// 3xTF32 adds a k tile's partial sums in FP32).
template <int MI, int R>
__device__ __forceinline__ void gl_zero_acc(float (&d)[MI][R][4]) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int j = 0; j < R; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) d[mi][j][e] = 0.0f;
}
template <int MI, int R>
__device__ __forceinline__ void gl_add_acc(float (&d)[MI][R][4], const float (&p)[MI][R][4]) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int j = 0; j < R; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) d[mi][j][e] += p[mi][j][e];
}

// Pins accumulator registers at this point of the program: the compiler may neither move their
// reads and writes across it nor copy them elsewhere while a wgmma that writes them is in flight.
template <int R>
__device__ __forceinline__ void gl_fence_acc(float (&d)[R][4]) {
#pragma unroll
    for (int j = 0; j < R; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[j][e]) :: "memory");
}

// The instruction's shape and types by the element type: k16 for 16-bit operands, which take a
// transpose bit per operand (imm-trans-a, imm-trans-b: 1 = MN-major in shared memory); k8 for
// TF32 (FP32 operands, of which the tensor cores read the 19 high bits: sign, exponent and 10
// fraction bits, the 13 low ones ignored, i.e. truncated toward zero), which has NO transpose
// operands: both TF32 operands must be K-major in shared memory (PTX ISA, wgmma.mma_async:
// "imm-trans-a, imm-trans-b ... only .f16/.bf16"); GlWgmma refuses TA / TB != 0 for it.
#if GL_DTYPE == 0
#define GL_WGMMA_AB "k8.f32.tf32.tf32"
#define GL_WGMMA_TRANS(ta, tb) ""
#elif GL_DTYPE == 1
#define GL_WGMMA_AB "k16.f32.f16.f16"
#define GL_WGMMA_TRANS(ta, tb) ", %" #ta ", %" #tb
#elif GL_DTYPE == 2
#define GL_WGMMA_AB "k16.f32.bf16.bf16"
#define GL_WGMMA_TRANS(ta, tb) ", %" #ta ", %" #tb
#else
// FP8 (rung 25): k32 per instruction, each operand e4m3 or e5m2 (GL_FP8_A, GL_FP8_B), and like TF32
// no transpose operands (PTX ISA: imm-trans-a and imm-trans-b exist for .f16/.bf16 only): both K-major
#if GL_FP8_A
#define GL_WGMMA_FP8_A ".e5m2"
#else
#define GL_WGMMA_FP8_A ".e4m3"
#endif
#if GL_FP8_B
#define GL_WGMMA_FP8_B ".e5m2"
#else
#define GL_WGMMA_FP8_B ".e4m3"
#endif
#define GL_WGMMA_AB "k32.f32" GL_WGMMA_FP8_A GL_WGMMA_FP8_B
#define GL_WGMMA_TRANS(ta, tb) ""
#endif
#define GL_WGMMA_K_MAJOR_ONLY (GL_DTYPE == 0 || GL_DTYPE == 3)
// The accumulator operands of m64nNk16: N/2 FP32 registers per thread, d[j][e] = register 4j + e.
#define GL_WGMMA_D64 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define GL_WGMMA_D128 GL_WGMMA_D64 ", " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define GL_WGMMA_D256 GL_WGMMA_D128 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define GL_WGMMA_D192 GL_WGMMA_D128 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define GL_ACC4(d, j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define GL_ACC32(d, j) GL_ACC4(d, j), GL_ACC4(d, j + 1), GL_ACC4(d, j + 2), GL_ACC4(d, j + 3), \
                       GL_ACC4(d, j + 4), GL_ACC4(d, j + 5), GL_ACC4(d, j + 6), GL_ACC4(d, j + 7)
// d += A (64 x 16, descriptor da) * B (16 x N, descriptor db) (TF32: 64 x 8 and 8 x N; FP8: 64 x 32 and
// 32 x N); TA / TB = 1:
// that operand is MN-major in shared memory. scale_d = 0: d = A * B instead, the old d ignored (rung
// 22's 3xTF32 starts each k tile's partial sums so); the other rungs accumulate from zeros.

template <int N> struct GlWgmma;
template <> struct GlWgmma<64> {
    template <int TA, int TB>
    static __device__ __forceinline__ void mma(float (&d)[8][4], unsigned long long da, unsigned long long db,
                                               int scale_d = 1) {
        static_assert(!GL_WGMMA_K_MAJOR_ONLY || (TA == 0 && TB == 0), "TF32 and FP8 wgmma read K-major operands only");
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64" GL_WGMMA_AB " {" GL_WGMMA_D64 "}, %32, %33, p, 1, 1"
                     GL_WGMMA_TRANS(35, 36) ";\n}\n"
                     : GL_ACC32(d, 0) : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB) : "memory");
    }
};
template <> struct GlWgmma<128> {
    template <int TA, int TB>
    static __device__ __forceinline__ void mma(float (&d)[16][4], unsigned long long da, unsigned long long db,
                                               int scale_d = 1) {
        static_assert(!GL_WGMMA_K_MAJOR_ONLY || (TA == 0 && TB == 0), "TF32 and FP8 wgmma read K-major operands only");
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128" GL_WGMMA_AB " {" GL_WGMMA_D128 "}, %64, %65, p, 1, 1"
                     GL_WGMMA_TRANS(67, 68) ";\n}\n"
                     : GL_ACC32(d, 0), GL_ACC32(d, 8) : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB) : "memory");
    }
};
// N = 192 (rung 25's promoted 128x192 tile: 96 sums and 96 partial sums per thread within its 232
// registers, as DeepGEMM's promoted FP8 tiles take N between 128 and 256)
template <> struct GlWgmma<192> {
    template <int TA, int TB>
    static __device__ __forceinline__ void mma(float (&d)[24][4], unsigned long long da, unsigned long long db,
                                               int scale_d = 1) {
        static_assert(!GL_WGMMA_K_MAJOR_ONLY || (TA == 0 && TB == 0), "TF32 and FP8 wgmma read K-major operands only");
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192" GL_WGMMA_AB " {" GL_WGMMA_D192 "}, %96, %97, p, 1, 1"
                     GL_WGMMA_TRANS(99, 100) ";\n}\n"
                     : GL_ACC32(d, 0), GL_ACC32(d, 8), GL_ACC32(d, 16)
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB) : "memory");
    }
};
template <> struct GlWgmma<256> {
    template <int TA, int TB>
    static __device__ __forceinline__ void mma(float (&d)[32][4], unsigned long long da, unsigned long long db,
                                               int scale_d = 1) {
        static_assert(!GL_WGMMA_K_MAJOR_ONLY || (TA == 0 && TB == 0), "TF32 and FP8 wgmma read K-major operands only");
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256" GL_WGMMA_AB " {" GL_WGMMA_D256 "}, %128, %129, p, 1, 1"
                     GL_WGMMA_TRANS(131, 132) ";\n}\n"
                     : GL_ACC32(d, 0), GL_ACC32(d, 8), GL_ACC32(d, 16), GL_ACC32(d, 24)
                     : "l"(da), "l"(db), "r"(scale_d), "n"(TA), "n"(TB) : "memory");
    }
};

#if GL_DTYPE == 0
// d += A (64 x 8 TF32 from registers) * B (8 x N, descriptor db): the register-A form of m64nNk8
// (rung 22's MN-major A). a[0..3] is the thread's A fragment: a[0] (row g, k t), a[1] (row g + 8,
// k t), a[2] (row g, k t + 4), a[3] (row g + 8, k t + 4), g = lane / 4, t = lane % 4, rows of the
// warp's 16 (PTX ISA, wgmma register fragments; the same as mma.m16n8k8's A). The registers are
// read while the wgmma is in flight: the caller keeps them unchanged until its wait_group.
template <int N> struct GlWgmmaRS;
template <> struct GlWgmmaRS<64> {
    static __device__ __forceinline__ void mma(float (&d)[8][4], const unsigned (&a)[4], unsigned long long db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {" GL_WGMMA_D64 "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
                     : GL_ACC32(d, 0) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1) : "memory");
    }
};
template <> struct GlWgmmaRS<128> {
    static __device__ __forceinline__ void mma(float (&d)[16][4], const unsigned (&a)[4], unsigned long long db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" GL_WGMMA_D128 "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                     : GL_ACC32(d, 0), GL_ACC32(d, 8) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1) : "memory");
    }
};
template <> struct GlWgmmaRS<256> {
    static __device__ __forceinline__ void mma(float (&d)[32][4], const unsigned (&a)[4], unsigned long long db) {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {" GL_WGMMA_D256 "}, {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
                     : GL_ACC32(d, 0), GL_ACC32(d, 8), GL_ACC32(d, 16), GL_ACC32(d, 24)
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1) : "memory");
    }
};
#endif

// ---- a warpgroup's descriptors and one k tile of wgmmas ----------------------------------------
// The descriptors of a stage's A and B panels for the warpgroup that owns rows m0.. of the tile (the
// panel layouts of rung 19's header: K-major operands are panels of [rows][64 k], MN-major ones
// panels of [BK k][64 m or n]). a(kk, mi) / b(kk): the descriptors of k16 step kk (and m64 block mi)
// of the stage whose A and B tiles start `a_stage` / `b_stage` bytes after the first stage's.
// Only the descriptors' low words are kept and added to, in 32 bits (the start field cannot carry:
// see gl_desc); the high word is the constant SBO 1024 and the swizzle. Kept as 64-bit descriptors
// and added to in 64 bits, the k tile's loop had ptxas pair registers for every wgmma: 90 SASS
// instructions per k tile in rung 21 (123 with STREAMK=1, whose loop state left the uniform
// datapath), for 4 HGMMAs.
template <int A_COL, int B_COL, int A_PANEL_B, int B_PANEL_B>
struct GlStageDescs {
    static constexpr unsigned HI = gl_desc_hi(1024);
    unsigned a0, b0;        // the low words of the first stage's descriptors
    __device__ __forceinline__ GlStageDescs(unsigned a_base, unsigned b_base, int m0)
        : a0(A_COL ? gl_desc_lo(a_base + (m0 / 64) * A_PANEL_B, A_PANEL_B) : gl_desc_lo(a_base + m0 * GL_ROW_B, 16)),
          b0(B_COL ? gl_desc_lo(b_base, 16) : gl_desc_lo(b_base, B_PANEL_B)) {}
    __device__ __forceinline__ unsigned long long a(unsigned a_stage, int kk, int mi) const {
        return gl_desc_at(a0 + (a_stage >> 4) + ((A_COL ? mi * A_PANEL_B + kk * 16 * GL_ROW_B
                                                        : (kk / 4) * A_PANEL_B + mi * 64 * GL_ROW_B + (kk % 4) * 32) >> 4), HI);
    }
    __device__ __forceinline__ unsigned long long b(unsigned b_stage, int kk) const {
        return gl_desc_at(b0 + (b_stage >> 4) + ((B_COL ? (kk / 4) * B_PANEL_B + (kk % 4) * 32 : kk * 16 * GL_ROW_B) >> 4), HI);
    }
};

// One k tile of a warpgroup's wgmmas (KSTEPS k16 steps x MI m64 blocks of N columns) issued as one
// commit group, then a wait until at most that group is in flight: the previous k tile's wgmmas
// have finished reading their stage, which the caller may release.
// LO_A / LO_B > 0 (3xTF32, rung 22): the stage also holds the small parts of A and B, LO_A / LO_B
// bytes after the big ones; each step then issues a_lo*b_hi and a_hi*b_lo before a_hi*b_hi into the
// same accumulators (the small terms first: they are added while the sum is still small), the
// tile's first wgmma with scale-d 0 (the accumulators are the tile's fresh partial sums), and the
// wait lets no group stay in flight (PENDING 0): the caller adds the partial sums at once.
// FRESH (FP8's promotion, rung 25): the same fresh partial sums and wait, of the one product.
// UNWAITED (the pipelined block-scaled mainloop, mainloop.cuh): the group goes out and is not waited
// for here; the caller waits and fences the sums itself.
template <int N, int MI, int KSTEPS, int A_COL, int B_COL, int LO_A = 0, int LO_B = 0, bool FRESH = false,
          bool UNWAITED = false, typename Descs>
__device__ __forceinline__ void gl_wgmma_ktile(float (&acc)[MI][N / 8][4], const Descs& d, unsigned a_stage, unsigned b_stage) {
    static_assert((LO_A == 0) == (LO_B == 0), "both operands have small parts, or neither");
    constexpr bool SPLIT = LO_A > 0 || FRESH;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) gl_fence_acc(acc[mi]);
    gl_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            if constexpr (FRESH) {
                GlWgmma<N>::template mma<A_COL, 1 - B_COL>(acc[mi], d.a(a_stage, kk, mi), d.b(b_stage, kk), kk > 0);
            } else {
                if constexpr (SPLIT) {
                    GlWgmma<N>::template mma<A_COL, 1 - B_COL>(acc[mi], d.a(a_stage + LO_A, kk, mi), d.b(b_stage, kk), kk > 0);
                    GlWgmma<N>::template mma<A_COL, 1 - B_COL>(acc[mi], d.a(a_stage, kk, mi), d.b(b_stage + LO_B, kk));
                }
                GlWgmma<N>::template mma<A_COL, 1 - B_COL>(acc[mi], d.a(a_stage, kk, mi), d.b(b_stage, kk));
            }
        }
    gl_wgmma_commit();
    if constexpr (!UNWAITED) {
        gl_wgmma_wait<SPLIT ? 0 : 1>();
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) gl_fence_acc(acc[mi]);
    }
}

// ---- one operand's tiles: global -> swizzled shared panels ---------------------------------------
// The operand is P(outer, inner) = P[outer * ld + inner] (inner contiguous), n_outer x n_inner.
// A tile is PANELS panels of ROWS rows x 64 inner elements; panel i of the tile at (inner0, outer0)
// holds P(outer0 + r, inner0 + 64 i + e) at row r, element e. The 16-byte chunk c of row r sits at
// chunk c ^ (r % 8) of the row: the 128-byte swizzle, the one TMA writes and wgmma reads.
// PLANES = 2 (3xTF32, rung 22): the operand is two such matrices, the planes of a 3-D map (plane 0
// the big TF32 parts, plane 1 the small ones); a tile holds plane 1's panels after plane 0's.
// ELEMENTS = 1 (GL_BATCHED, an operand that varies over the batch): element z of a batch, the third
// coordinate of its 3-D map; ``at`` gives the loader of element z (its pointer for the thread copy).
template <int PANELS, int ROWS, int PLANES = 1, int ELEMENTS = 0>
struct GlOperand {
    static constexpr int E = GL_ROW_B / (int)sizeof(T);   // elements of a swizzle row: 64 16-bit, 32 FP32
    static constexpr int PLANE_B = PANELS * ROWS * GL_ROW_B;   // shared bytes of one plane's tile
    static_assert(PLANES == 1 || PLANES == 2, "one plane, or the big and small parts of 3xTF32");
    static_assert(!(ELEMENTS && PLANES > 1), "a batch of 3xTF32 operands would need 4-D maps");
    const T* P;
    int ld, n_outer, n_inner;
    const GlTensorMap* map;
    int z = 0;          // the batch element (ELEMENTS)

    __device__ __forceinline__ GlOperand at(int element, long long stride) const {
        GlOperand o = *this;
        if constexpr (ELEMENTS) {
            o.P += element * stride;
            o.z = element;
        }
        return o;
    }

    // One box of panel i (inner side E, outer side `rows`) of every plane, to dst + plane * PLANE_B.
    __device__ __forceinline__ void box(unsigned dst, int inner, int outer, unsigned bar) const {
        if constexpr (PLANES == 1 && ELEMENTS) {
            gl_tma_load_3d(dst, map, inner, outer, z, bar);
        } else if constexpr (PLANES == 1) {
            gl_tma_load(dst, map, inner, outer, bar);
        } else {
#pragma unroll
            for (int p = 0; p < PLANES; ++p) gl_tma_load_3d(dst + p * PLANE_B, map, inner, outer, p, bar);
        }
    }
    __device__ __forceinline__ void box_multicast(unsigned dst, int inner, int outer, unsigned bar,
                                                  unsigned short mask) const {
        if constexpr (PLANES == 1 && ELEMENTS) {
            gl_tma_load_multicast_3d(dst, map, inner, outer, z, bar, mask);
        } else if constexpr (PLANES == 1) {
            gl_tma_load_multicast(dst, map, inner, outer, bar, mask);
        } else {
#pragma unroll
            for (int p = 0; p < PLANES; ++p) gl_tma_load_multicast_3d(dst + p * PLANE_B, map, inner, outer, p, bar, mask);
        }
    }

    // By TMA: one box (64 x ROWS) per panel (and plane); out-of-bounds elements arrive as zeros.
    __device__ __forceinline__ void tma(unsigned dst, int inner0, int outer0, unsigned bar) const {
#pragma unroll
        for (int i = 0; i < PANELS; ++i) box(dst + i * ROWS * GL_ROW_B, inner0 + E * i, outer0, bar);
    }

    // By TMA, the first `parts` of the ROWS / PART_ROWS boxes of PART_ROWS rows of each panel (the map's
    // box is E x PART_ROWS): a grouped tile's rows up to its group's end (ring.cuh's produce), the
    // rest of the stage left as it is (those rows' products are never stored).
    template <int PART_ROWS>
    __device__ __forceinline__ void tma_rows(unsigned dst, int inner0, int outer0, unsigned bar, int parts) const {
        static_assert(ROWS % PART_ROWS == 0 && (PART_ROWS * GL_ROW_B) % 1024 == 0,
                      "each part starts on the swizzle's 1024-byte period");
#pragma unroll
        for (int i = 0; i < PANELS; ++i)
#pragma unroll
            for (int p = 0; p < ROWS / PART_ROWS; ++p)
                if (p < parts) box(dst + i * ROWS * GL_ROW_B + p * PART_ROWS * GL_ROW_B, inner0 + E * i,
                                   outer0 + p * PART_ROWS, bar);
    }

    // By TMA, this CTA's share of a tile that every CTA of a cluster of PARTS needs: part `part` of
    // each panel's ROWS rows (the map's box is 64 x ROWS/PARTS), multicast to the CTAs in `mask`.
    // Together the PARTS CTAs deliver the whole tile to each of them.
    template <int PARTS>
    __device__ __forceinline__ void tma_multicast(unsigned dst, int inner0, int outer0, unsigned bar, int part,
                                                  unsigned short mask) const {
        constexpr int PART_ROWS = ROWS / PARTS;
        static_assert(ROWS % PARTS == 0 && (PART_ROWS * GL_ROW_B) % 1024 == 0,
                      "each part starts on the swizzle's 1024-byte period");
#pragma unroll
        for (int i = 0; i < PANELS; ++i)
            box_multicast(dst + i * ROWS * GL_ROW_B + part * PART_ROWS * GL_ROW_B, inner0 + E * i,
                          outer0 + part * PART_ROWS, bar, mask);
    }

    // By the producer warpgroup's 128 threads (operands TMA cannot describe): guarded 16-bit loads,
    // zeros outside the matrix, one 16-byte shared store per chunk; 8 consecutive threads take the 8
    // chunks of a row. The trip count is a compile-time constant and the bounds are predicates, not
    // branches, so the loads of BATCH chunks (8 each) are in flight together. The caller fences and
    // arrives.
    __device__ __forceinline__ void copy(unsigned dst, int inner0, int outer0, int ptid) const {
        static_assert(sizeof(T) == 2 && PLANES == 1, "the thread copy is written for 16-bit elements (TF32 operands are packed instead)");
        constexpr int CHUNKS = PANELS * ROWS * 8;
        constexpr int PER = CHUNKS / GL_WARPGROUP, BATCH = PER < 4 ? PER : 4;
        static_assert(CHUNKS % GL_WARPGROUP == 0 && PER % BATCH == 0, "whole batches of chunks per producer thread");
        const unsigned short* P16 = reinterpret_cast<const unsigned short*>(P);
#pragma unroll 1
        for (int p0 = 0; p0 < PER; p0 += BATCH) {     // one batch at a time: the registers stay few
            unsigned short h[BATCH][8];
            unsigned at[BATCH];
#pragma unroll
            for (int q = 0; q < BATCH; ++q) {
                const int v = ptid + (p0 + q) * GL_WARPGROUP;
                const int i = v / (ROWS * 8), r = (v / 8) % ROWS, c = v % 8;
                const int outer = outer0 + r, inner = inner0 + 64 * i + 8 * c;
                const bool row_in = outer < n_outer;
                const int left = row_in ? n_inner - inner : 0;            // elements of the chunk inside
                const unsigned short* src = P16 + (row_in ? (size_t)outer * ld + inner : 0);
#pragma unroll
                for (int e = 0; e < 8; ++e) h[q][e] = e < left ? __ldg(src + e) : (unsigned short)0;
                at[q] = dst + i * ROWS * GL_ROW_B + r * GL_ROW_B + ((c ^ (r & 7)) << 4);
            }
#pragma unroll
            for (int q = 0; q < BATCH; ++q)
                asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n"
                             :: "r"(at[q]), "r"(h[q][0] | ((unsigned)h[q][1] << 16)), "r"(h[q][2] | ((unsigned)h[q][3] << 16)),
                                "r"(h[q][4] | ((unsigned)h[q][5] << 16)), "r"(h[q][6] | ((unsigned)h[q][7] << 16)) : "memory");
        }
    }

    template <bool TMA>
    __device__ __forceinline__ void load(unsigned dst, int inner0, int outer0, unsigned bar, int ptid) const {
        if constexpr (TMA) {       // constexpr: the thread copy is not instantiated for TMA-only operands
            if (ptid == 0) tma(dst, inner0, outer0, bar);
        } else {
            copy(dst, inner0, outer0, ptid);
        }
    }
};

