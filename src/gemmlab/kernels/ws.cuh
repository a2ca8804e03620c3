// ws.cuh — what the warp-specialized persistent WGMMA rungs (21 wgmma_ws, 22 wgmma_tf32) share:
// the static persistent schedule, the mbarrier ring bookkeeping, the shared-memory handles and the
// producer warpgroup's load loop. Rung 21's header explains the design; this file holds it once.
// The includer defines, before including: BM, BN, BK, STAGES, CLUSTER, THREADS (defines), T, and
// the constants WGS, MI, CWARPS (its consumer warpgroups), A_PANELS, A_ROWS, B_PANELS, B_ROWS,
// A_STAGE_B, B_STAGE_B (its shared-memory carve-up), TMA_ONLY, MCAST_B, TX_BYTES (how its operands
// arrive); this file derives the barriers' counts and the register split. sm_90a only (hopper.cuh).
// GL_PLANES (default 1): planes per operand, 2 for rung 22's 3xTF32 (big and small TF32 parts, the
// TMA boxes of both in one stage, counted in A_STAGE_B / B_STAGE_B and TX_BYTES by the includer).
#pragma once
#include "hopper.cuh"
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
// ---- the persistent schedule ------------------------------------------------------------------
// The grid has min(units, SMs / CLUSTER) clusters (core/registry.py, Rung.persistent_grid), or with
// BALANCE=1 (the default of both rungs; the host's choice, this code is the same) the fewest that
// take no more waves: at 8192^3, 2048 units in 16 waves of 128 instead of 15 of 132 and one of 68.
// Each wave then covers 8 whole column tiles of a group of 16 row tiles, where 132-unit waves
// straddled columns and groups: fewer DRAM reads and L2 misses, and a little more clock under the
// power cap (benchmarks/profiles/h100_l2probe_tf32_8192_balance.json; docs/journal/hopper.md). A unit is
// CLUSTER vertically adjacent output tiles (one per CTA of the cluster) of one column tile. Cluster
// c takes units c, c + clusters, c + 2 clusters, ...: a static schedule that its producer and its
// consumers, and both CTAs of a cluster, walk identically, so no atomics are needed and every
// barrier sees the same sequence of tiles and k tiles. Units are numbered in groups of GROUP_M
// row tiles, the column tiles of one group before the next (rung 19's launch order): the ~132
// units in flight at a time cover an 8 x 16 patch of C, whose tiles of A and B are served by L2.
// A wave reads from DRAM each row panel of A and each column panel of B of its patch once: with
// 128x256 tiles an 8 x 16.5 patch reads (8 x 128 + 16.5 x 256) rows of K, a 16 x 8.25 one (16 x 128
// + 8.25 x 256): a fifth less (GROUP = 16, the default of both rungs; 3xTF32 keeps 8).
#ifndef GROUP
#define GROUP 8                                 // the GROUP parameter of rungs 21 and 22
#endif
constexpr int GROUP_M = GROUP;
static_assert(GROUP_M % CLUSTER == 0, "a group is whole units (CLUSTER row tiles each)");
constexpr int GROUP_U = GROUP_M / CLUSTER;      // unit rows per group
// ---- stream-K tail (STREAMK=1) -----------------------------------------------------------------
// Without it the last wave is partial: 512 tiles of 128x256 at 4096^3 on 132 SMs are 3.88 waves
// that take 4 tile times, 2048 at 8192^3 are 15.52 that take 16. With it,
// the units past the last whole wave (and one wave more when they would fill less than half of
// one: each cluster then still gets at least half a unit of k tiles, so a unit has at most three
// pieces) are cut into a contiguous run of (unit, k tile) steps split evenly over the clusters:
// cluster c takes steps [c W / G, (c + 1) W / G) of the W = units x ktiles (below 2^31: the host's
// registry.streamk_tail). A cluster walks its steps BACKWARDS, its pieces in falling order: its
// share is the same length for every cluster, so each one starts on a unit's first k tiles and
// then, one share-length later, goes on with the previous unit's last ones at the same offset, and
// at any time all clusters stand at (nearly) the same k. That keeps the k-synchronous reuse of the
// whole units' waves, where the CTAs of a row or column of tiles read the same k panel of A or B
// from L2 together; walked forwards (each cluster on its own k offset) the tail read every panel
// from DRAM again, and rung 22 at 4096^3 ran well behind its time without stream-K
// (h100_tune_streamk_fwd_tf32_4096.json). The piece holding a unit's LAST k tile, done last by its
// cluster, finishes the unit: the others (each its cluster's first piece, so done early) publish
// their sums to the workspace, and the finisher adds them in falling cluster order, a fixed order,
// so the sum is the same at every launch. Every CTA publishes at most one piece: the workspace
// holds one tile of FP32 per CTA (sk_part), and a flag per consumer warp (sk_flag) that the host
// zeroes before each launch.
// Why it still loses at 4096^3 (docs/journal/hopper.md): a timeline of one launch (%globaltimer per
// piece, fp16 4096^3; h100_timeline_wgmma_ws_streamk1_fp16_4096.json) had the last pieces ending
// together, publishing at the same time, and the finishers of units holding a whole share in their
// middle (a third piece, ending with the tail) waiting for it. Splitting one whole wave more (shares
// of 1 to 2 units: at most two pieces a unit, each finisher's partner published first thing) was
// slower still, in fp16 and more so in tf32 (h100_tune_*_sk2_*.json): with shares longer than a
// unit the clusters' pieces stand at k offsets that differ by their shares' fractions, and the tail
// lost the k-synchronous L2 reuse as the forward walk did.
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
// Units and steps are 32-bit: a unit is at least 128 x 64 outputs, so 2^31 of them would need a C of
// 2^44 elements (the host also keeps a stream-K tail's steps below 2^31), and every int that is not
// 64-bit is a register the consumers keep beside their 128 accumulators.
// A batch (GL_BATCHED, hopper.cuh): the units of element 0, then those of element 1, ...; each
// element's in the grouped order above. A wave of small elements then covers several whole elements.
struct Schedule {
    int units_m, tiles_n, ktiles, clusters;
    int total, dp;           // units; the first dp go whole to one cluster each (data-parallel)
#if GL_BATCHED
    int per;                 // units of one batch element
    long long sa, sb, sc;    // the operands' batch strides, elements
    __device__ __forceinline__ Schedule(int M, int N, int K, int batch, long long bsa, long long bsb, long long bsc)
        : Schedule(M, N, K, batch) {
        per = units_m * tiles_n;
        sa = bsa, sb = bsb, sc = bsc;
    }
#endif
    __device__ __forceinline__ Schedule(int M, int N, int K, int batch = 1)
        : units_m(GL_CEIL_DIV(GL_CEIL_DIV(M, BM), CLUSTER)), tiles_n(GL_CEIL_DIV(N, BN)), ktiles(GL_CEIL_DIV(K, BK)),
          clusters((int)gridDim.x / CLUSTER), total(units_m * tiles_n * batch), dp(total) {
        if (STREAMK && total > clusters) {
            const int rem = total % clusters;
            if (rem) dp = total - rem - (2 * rem >= clusters ? 0 : clusters);
        }
    }
    // The batch element of unit u (0 without a batch).
    __device__ __forceinline__ int batch_of(int u) const {
#if GL_BATCHED
        return u / per;
#else
        return 0;
#endif
    }
    __device__ __forceinline__ long long stride_a() const {
#if GL_BATCHED
        return sa;
#else
        return 0;
#endif
    }
    __device__ __forceinline__ long long stride_b() const {
#if GL_BATCHED
        return sb;
#else
        return 0;
#endif
    }
    __device__ __forceinline__ long long stride_c() const {
#if GL_BATCHED
        return sc;
#else
        return 0;
#endif
    }
    // Unit u's tile for the CTA of cluster rank `rank`: (row tile, column tile) in its batch element.
    // With CLUSTER = 2 and an odd number of row tiles, rank 1's tile of the last unit row lies wholly
    // below M: it loads zeros (TMA fills, the copy path guards) and stores nothing, and keeps the two
    // CTAs in step.
    __device__ __forceinline__ int2 tile(int u, int rank) const {
#if GL_BATCHED
        u -= batch_of(u) * per;
#endif
        const int2 t = gl_group_raster<int>(u, tiles_n, units_m, GROUP_U);   // (unit row, column tile)
        return make_int2(t.x * CLUSTER + rank, t.y);
    }
    // The first stream-K step of cluster c (steps count k tiles of the units past dp).
    // floor(W c / G) for the W = (total - dp) ktiles steps and G clusters, in 32 bits: W = q G + r
    // gives q c + floor(r c / G), r c < G^2. The 64-bit quotient it replaced was a called routine
    // (CALL __cuda_sm20_div_s64). Removing it did not shorten the k-tile loop: with STREAMK=1 ptxas
    // still keeps the ring state in vector registers, a longer loop than STREAMK=0's, for a reason
    // not found (neither the fixup's publish nor its add is it: removing either alone left the loop
    // as long).
    __device__ __forceinline__ int sk_begin(int c) const {
        const int w = (total - dp) * ktiles, q = w / clusters, r = w % clusters;
        return q * c + r * c / clusters;
    }
    // Cluster c's work in order: body(u, k0, k1) for unit u's k tiles [k0, k1), the whole units
    // first, then its stream-K steps backwards. The producer and the consumers of both CTAs of a
    // cluster walk the same sequence. One call site of the body (it is the whole main loop and
    // epilogue, inlined), and one cursor x: the next whole unit while x >= 0, then -1 - the step the
    // cluster's remaining steps end at (fewer registers live across the main loop).
    template <typename F>
    __device__ __forceinline__ void walk(int c, F&& body) const {
        int x = c;
        for (;;) {
            int u = x, k0 = 0, k1 = ktiles;
            if (x >= 0 && x < dp) {
                x += clusters;
            } else {
                if (!STREAMK) return;
                if (x >= 0) x = -1 - sk_begin(c + 1);
                const int end = -1 - x, left = end - sk_begin(c);    // steps not yet walked
                if (left <= 0) return;
                u = dp + (end - 1) / ktiles;
                k1 = (end - 1) % ktiles + 1;
                k0 = max(0, k1 - left);
                x += k1 - k0;
            }
            body(u, k0, k1);
        }
    }
};

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
