// ws.cuh — what the warp-specialized persistent WGMMA rungs (21 wgmma_ws, 22 wgmma_tf32) share:
// the persistent schedule's parameters (the schedule itself: schedule.cuh, chosen by the rung), the
// mbarrier ring bookkeeping, the shared-memory handles, the producer warpgroup's load loop and the
// stream-K fixup. Rung 21's header explains the design; this file holds it once.
// The includer defines, before including: BM, BN, BK, STAGES, CLUSTER, THREADS (defines), T, and
// the constants WGS, MI, CWARPS (its consumer warpgroups), A_PANELS, A_ROWS, B_PANELS, B_ROWS,
// A_STAGE_B, B_STAGE_B (its shared-memory carve-up), TMA_ONLY, MCAST_B, TX_BYTES (how its operands
// arrive); this file derives the barriers' counts and the register split. sm_90a only (hopper.cuh).
// GL_PLANES (default 1): planes per operand, 2 for rung 22's 3xTF32 (big and small TF32 parts, the
// TMA boxes of both in one stage, counted in A_STAGE_B / B_STAGE_B and TX_BYTES by the includer).
#pragma once
#include "hopper.cuh"
#include "schedule.cuh"
#ifndef GL_PLANES
#define GL_PLANES 1
#endif
// ---- the barriers' counts and the register split, from the includer's TMA_ONLY ---------------------
// Full: one arrival (the thread that issues every TMA, with the stage's bytes) where both operands
// come by TMA, else one per producer thread (GlOperand::copy). Empty: a stage may be refilled once
// every consumer warp that reads it has released it; with multicast the peer's producer writes this
// CTA's stage too, so the consumers of BOTH CTAs arrive on the empty barrier of each (one arrival per
// consumer warp per CTA).
constexpr unsigned FULL_ARRIVALS = TMA_ONLY ? 1 : GL_WARPGROUP;
constexpr unsigned EMPTY_ARRIVALS = CWARPS * CLUSTER;
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
// ---- the k direction of a wave (KREV=1) ---------------------------------------------------------
// A wave of ~132 units reads its patch's A and B panels k tile by k tile, all CTAs at about the same
// k, and the L2 (50 MB on the H100) keeps only the last part of it: at 8192^3 in TF32 a wave's patch
// (16 x 8.25 tiles of 128x256) is 64 MB of A and 66 MB of B. The next wave of the same group has
// the same row tiles, so the same A panels. Walked forward again, it starts at k = 0, whose lines
// left the L2 long ago; walked backward, it starts where the last wave ended, on the A lines the L2
// still holds. With KREV=1 the units of odd waves (the 2nd, 4th, ... a cluster walks) load their k
// tiles from the last to the first. Only the producer's coordinates change: a unit's k tiles are
// summed in the other order (the same products; the bits of C change, the same at every launch).
// Not with a stream-K tail (the registry refuses both): a unit's pieces, on several clusters,
// would have to agree on its direction, and with both, rung 21's DEFER=1 kernel spilled.
// Tried (docs/journal/hopper.md, docs/journal/tf32.md): backward odd waves read less from DRAM at
// TF32 8192^3 but left the clock and the time where they were
// (benchmarks/profiles/h200_l2probe_tf32_8192_l2promo.json), and moved rung 21's default tile by
// about the spread of a run (h100_tune_wgmma_ws_krev_promo_*.json). So KREV is in the tuner's
// space, off by default.
#ifndef KREV
#define KREV 0
#endif
static_assert(!(KREV && STREAMK), "backward odd waves (KREV) take no stream-K tail");
// ---- mbarrier bookkeeping (both roles) ---------------------------------------------------------
// A block's k tiles are numbered g = 0, 1, 2, ... across ALL the pieces of work it walks (whole
// units, and with STREAMK=1 parts of them). k tile g lives in stage s = g % STAGES in round r = g / STAGES; each
// role keeps (s, phase = r & 1) and advances it once per k tile, and never resets it between tiles.
//   full[s]  completes phase r when k tile g's bytes are in stage s (FULL_ARRIVALS arrivals + TX_BYTES).
//            The consumers wait on parity (r & 1).
//   empty[s] completes phase r when every consumer warp (of both CTAs with a cluster) has released
//            k tile g. Before writing k tile g the producer needs round r - 1 released: it waits on
//            parity (r & 1) ^ 1; in round 0 that is parity 1, which a fresh barrier counts as done.
// No wait lags its barrier by two phases: full[s] cannot complete phase r + 1 before the consumers
// released round r of s (the producer waits for that), and empty[s] cannot complete phase r before
// the producer filled round r. With a cluster the same holds for the peer's multicast into this
// CTA: the peer issues round r + 1 of stage s only after THIS CTA's consumers released round r. A
// multicast's bytes may reach this CTA's full[s] before its own producer's expect_tx of that round;
// the phase still waits for that producer's arrival, and the transaction count settles at zero.
struct Ring {
    int s = 0;
    unsigned phase = 0;
    __device__ __forceinline__ void next() {
        if (++s == STAGES) { s = 0; phase ^= 1u; }
    }
};

struct Smem {
    unsigned a_base, b_base, epi, bars;
    __device__ __forceinline__ unsigned full(int s) const { return bars + 8u * s; }
    __device__ __forceinline__ unsigned empty(int s) const { return bars + 8u * (STAGES + s); }
    // A consumer warp done with stage s: one arrival (lane 0's) on its empty barrier, and with a
    // cluster one on the peer's, whose producer multicasts into this CTA's stage too (both rungs'
    // consumers release through this).
    __device__ __forceinline__ void release(int s, int lane, int rank) const {
        if (lane == 0) {
            gl_mbar_arrive(empty(s));
            if (CLUSTER > 1) gl_mbar_arrive_cluster(empty(s), rank ^ 1);
        }
    }
};

// ---- load: the producer warpgroup ------------------------------------------------------------
template <class Schedule>
__device__ __forceinline__ void produce(const Smem& sm, const Schedule& sched, int rank, int ptid,
                                        int M, int N, int K, const T* A, int lda, const T* B, int ldb,
                                        const GlTensorMap* tmA, const GlTensorMap* tmB) {
#if GL_A_COL
    const GlOperand<A_PANELS, A_ROWS, GL_PLANES, GL_BATCH_A> op_a{A, lda, K, M, tmA};    // A(m, k) at A[k*lda + m]
#else
    const GlOperand<A_PANELS, A_ROWS, GL_PLANES, GL_BATCH_A> op_a{A, lda, M, K, tmA};    // A(m, k) at A[m*lda + k]
#endif
#if GL_B_COL
    const GlOperand<B_PANELS, B_ROWS, GL_PLANES, GL_BATCH_B> op_b{B, ldb, N, K, tmB};    // B(k, n) at B[n*ldb + k]
#else
    const GlOperand<B_PANELS, B_ROWS, GL_PLANES, GL_BATCH_B> op_b{B, ldb, K, N, tmB};    // B(k, n) at B[k*ldb + n]
#endif
    if (TMA_ONLY && ptid != 0) return;       // TMA only: one thread issues everything
    if (ptid == 0) {
        if (GL_VEC_A) gl_tma_prefetch(tmA);
        if (GL_VEC_B) gl_tma_prefetch(tmB);
    }
    Ring ring;
    bool odd = false;       // KREV: this unit is in an odd wave (a cluster's 2nd, 4th, ...): k tiles last to first
    sched.walk(blockIdx.x / CLUSTER, [&](int u, int k0, int k1) {
        const int2 t = sched.tile(u, rank);
        const int row0 = t.x * BM, col0 = t.y * BN;
        const int element = sched.batch_of(u);      // 0 without a batch: opa, opb are op_a, op_b
        const auto opa = op_a.at(element, sched.stride_a());
        const auto opb = op_b.at(element, sched.stride_b());
        const bool back = KREV && odd;
        odd = !odd;
        for (int kt = k0; kt < k1; ++kt) {
            const int k_at = (back ? sched.ktiles - 1 - kt : kt) * BK, s = ring.s;     // the k tile's first element
            const unsigned full = sm.full(s), a_dst = sm.a_base + s * A_STAGE_B, b_dst = sm.b_base + s * B_STAGE_B;
            gl_mbar_wait(sm.empty(s), ring.phase ^ 1u);     // round r - 1 of stage s released (see Ring)
            if (ptid == 0 && TX_BYTES) {
                if (TMA_ONLY) gl_mbar_arrive_tx(full, TX_BYTES);
                else gl_mbar_expect_tx(full, TX_BYTES);
            }
#if GL_A_COL
            opa.load<GL_VEC_A>(a_dst, row0, k_at, full, ptid);
#else
            opa.load<GL_VEC_A>(a_dst, k_at, row0, full, ptid);
#endif
#if GL_B_COL
            const int b_inner = k_at, b_outer = col0;
#else
            const int b_inner = col0, b_outer = k_at;
#endif
            if (MCAST_B) {
                if (ptid == 0) opb.tma_multicast<CLUSTER>(b_dst, b_inner, b_outer, full, rank, (1u << CLUSTER) - 1u);
            } else {
                opb.load<GL_VEC_B>(b_dst, b_inner, b_outer, full, ptid);
            }
            if (!TMA_ONLY) {
                gl_fence_proxy_async();              // this thread's st.shared visible to wgmma
                gl_mbar_arrive(full);
            }
            ring.next();
        }
    });
    // With a cluster the peer's consumers arrive on this CTA's empty barriers (and this CTA's
    // multicasts write into the peer): stay until every stage's last round is released by both
    // CTAs' consumers, so no arrival targets a CTA that has exited.
    if (CLUSTER > 1) {
        for (int i = 0; i < STAGES; ++i) {
            gl_mbar_wait(sm.empty(ring.s), ring.phase ^ 1u);
            ring.next();
        }
    }
}

// ---- stream-K fixup: the consumer warpgroups ----------------------------------------------------
// The workspace (STREAMK=1; the kernel's last argument): per CTA (slot = blockIdx.x) and consumer
// warp, SK_V x 32 float4, lane-minor, so each store and load is a warp's 512 contiguous bytes; then
// one int flag per CTA and consumer warp. Its size is the registry's (streamk_workspace).
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
