// ws.cuh — what the warp-specialized persistent WGMMA rungs (21 wgmma_ws, 22 wgmma_tf32) add to the
// stage ring (ring.cuh, which rung 19 uses alone): the register split between the producer and the
// consumer warpgroups, the persistent schedule's parameters (the schedule itself: schedule.cuh,
// chosen by the rung) and the stream-K fixup. Rung 21's header explains the design; this file holds
// it once.
// The includer defines, before including: what ring.cuh needs, and THREADS; WGS, MI (hopper.cuh).
#pragma once
#include "ring.cuh"
// ---- the register split, from ring.cuh's TMA_ONLY --------------------------------------------------
// setmaxnreg: __launch_bounds__(384, 1) caps a thread at 168 registers (65536 / 384, in steps of 8),
// and the block is given 384 x 168 at launch. The producer gives most of its share back (it needs
// loop state and addresses only; the thread copy needs 8 halves per chunk in flight: 96) and the
// consumers take it: 128 accumulators plus descriptors and epilogue addresses fit in 232.
constexpr int PRODUCER_REGS = TMA_ONLY ? 40 : 96;
constexpr int CONSUMER_REGS = TMA_ONLY ? 232 : 200;
static_assert(GL_WARPGROUP * (PRODUCER_REGS + WGS * CONSUMER_REGS) <= THREADS * 168,
              "the register split must fit what the block holds at launch, or the consumers' setmaxnreg.inc waits forever");
// ---- the persistent schedule's parameters (the schedule: schedule.cuh) ---------------------------
#ifndef GROUP
#define GROUP 8                                 // the GROUP parameter of rungs 21 and 22
#endif
constexpr int GROUP_M = GROUP;
static_assert(GROUP_M % CLUSTER == 0, "a group is whole units (CLUSTER row tiles each)");
constexpr int GROUP_U = GROUP_M / CLUSTER;      // unit rows per group
#ifndef STREAMK
#define STREAMK 0
#endif
static_assert(!(KREV && STREAMK), "backward odd waves (KREV, ring.cuh) take no stream-K tail");
// ---- stream-K fixup: the consumer warpgroups ----------------------------------------------------
// The workspace (STREAMK=1; the kernel's last argument): per CTA (slot = blockIdx.x) and consumer
// warp, SK_V x 32 float4, lane-minor, so each store and load is a warp's 512 contiguous bytes; then
// one int flag per CTA and consumer warp. Its size is core/schema.py's streamk_workspace.
constexpr int SK_V = MI * BN / 8;    // float4 of accumulators per consumer thread
__device__ __forceinline__ float4* sk_part(float* ws, int slot, int warp, int lane) {
    return reinterpret_cast<float4*>(ws) + ((long long)slot * CWARPS + warp) * SK_V * 32 + lane;
}
__device__ __forceinline__ int* sk_flag(float* ws, int slot, int warp) {
    return reinterpret_cast<int*>(ws + (long long)gridDim.x * CWARPS * SK_V * 128) + slot * CWARPS + warp;
}

// This warp's accumulators into its slot, then its flag: the lanes' stores ordered before lane 0's
// fence by __syncwarp, the flag after the fence (the reader acquires it).
__device__ __forceinline__ void sk_publish(const float (&acc)[MI][BN / 8][4], float* ws, int warp, int lane) {
    float4* p = sk_part(ws, blockIdx.x, warp, lane);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
            __stcg(p + (mi * (BN / 8) + j) * 32, make_float4(acc[mi][j][0], acc[mi][j][1], acc[mi][j][2], acc[mi][j][3]));
    __syncwarp();
    if (lane == 0) {
        __threadfence();
        asm volatile("st.relaxed.gpu.global.b32 [%0], %1;\n" :: "l"(sk_flag(ws, blockIdx.x, warp)), "r"(1) : "memory");
    }
}

// Adds CTA `slot`'s published piece (the same warp's, so the same fragment layout) to acc, once its
// flag is up. Every lane acquires the flag itself before it reads.
__device__ __forceinline__ void sk_add(float (&acc)[MI][BN / 8][4], float* ws, int slot, int warp, int lane) {
    const int* flag = sk_flag(ws, slot, warp);
    // the loop ends for the whole warp at once (the vote), so the warp leaves the wait converged
    int ready;
    do {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(ready) : "l"(flag) : "memory");
    } while (!__all_sync(0xffffffffu, ready));
    const float4* p = sk_part(ws, slot, warp, lane);
    // in groups of SK_GROUP loads: all SK_V in flight at once would need 4 SK_V registers beside the
    // 4 SK_V accumulators (the descriptor path of rung 22 spilled 40 bytes so)
    constexpr int SK_GROUP = 8;
    static_assert((BN / 8) % SK_GROUP == 0, "a row of fragments is whole groups");
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int j0 = 0; j0 < BN / 8; j0 += SK_GROUP) {
            float4 v[SK_GROUP];
#pragma unroll
            for (int j = 0; j < SK_GROUP; ++j) v[j] = __ldcg(p + (mi * (BN / 8) + j0 + j) * 32);
#pragma unroll
            for (int j = 0; j < SK_GROUP; ++j) {
                acc[mi][j0 + j][0] += v[j].x;
                acc[mi][j0 + j][1] += v[j].y;
                acc[mi][j0 + j][2] += v[j].z;
                acc[mi][j0 + j][3] += v[j].w;
            }
            asm volatile("" ::: "memory");   // the next group's loads after these adds
        }
}

// After a piece's k tiles [k0, k1) of unit u: true when this CTA stores the tile (a whole unit, or
// the piece with the unit's last k tile, to which the earlier pieces have now been added, in falling
// cluster order); false when it published its piece for that CTA and stores nothing.
// The warp, lane and cluster rank are read again here (a volatile read of %tid.x, which the
// compiler cannot merge with the kernel's own), not kept live from the kernel's top: ptxas spilled
// the warp index kept so (8 bytes, rung 22's register-A path).
template <class Schedule>
__device__ __forceinline__ bool sk_fixup(const Schedule& sched, float (&acc)[MI][BN / 8][4], int u, int k0, int k1,
                                         float* ws) {
    if (!STREAMK || k1 - k0 == sched.ktiles) return true;
    unsigned tid;
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
    const int warp = (int)(tid / 32), lane = (int)(tid % 32);
    if (k1 < sched.ktiles) {
        sk_publish(acc, ws, warp, lane);
        return false;
    }
    const int rank = CLUSTER > 1 ? (int)gl_cluster_rank() : 0;
    const int first = (u - sched.dp) * sched.ktiles;           // the unit's first step
    for (int c = (int)blockIdx.x / CLUSTER - 1; c >= 0 && sched.sk_begin(c + 1) > first; --c)
        sk_add(acc, ws, c * CLUSTER + rank, warp, lane);
    return true;
}
