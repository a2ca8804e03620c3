// ws.cuh — what the warp-specialized persistent WGMMA rungs (21 wgmma_ws, 22 wgmma_tf32) share:
// the static persistent schedule, the mbarrier ring bookkeeping, the shared-memory handles and the
// producer warpgroup's load loop. Rung 21's header explains the design; this file holds it once.
// The includer defines, before including: BM, BN, BK, STAGES, CLUSTER (defines), T, and the
// constants A_PANELS, A_ROWS, B_PANELS, B_ROWS, A_STAGE_B, B_STAGE_B, TMA_ONLY, MCAST_B, TX_BYTES
// (its shared-memory carve-up and barrier counts). sm_90a only (hopper.cuh).
// GL_PLANES (default 1): planes per operand, 2 for rung 22's 3xTF32 (big and small TF32 parts, the
// TMA boxes of both in one stage, counted in A_STAGE_B / B_STAGE_B and TX_BYTES by the includer).
#pragma once
#include "hopper.cuh"
#ifndef GL_PLANES
#define GL_PLANES 1
#endif
// ---- the persistent schedule ------------------------------------------------------------------
// The grid has min(units, SMs / CLUSTER) clusters (core/registry.py, Rung.launch); a unit is
// CLUSTER vertically adjacent output tiles (one per CTA of the cluster) of one column tile. Cluster
// c takes units c, c + clusters, c + 2 clusters, ...: a static schedule that its producer and its
// consumers, and both CTAs of a cluster, walk identically, so no atomics are needed and every
// barrier sees the same sequence of tiles and k tiles. Units are numbered in groups of GROUP_M
// row tiles, the column tiles of one group before the next (rung 19's launch order): the ~132
// units in flight at a time cover an 8 x 16 patch of C, whose tiles of A and B are served by L2.
// A wave reads from DRAM each row panel of A and each column panel of B of its patch once: with
// 128x256 tiles an 8 x 16.5 patch reads (8 x 128 + 16.5 x 256) rows of K, a 16 x 8.25 one (16 x 128
// + 8.25 x 256): a fifth less (rung 22's GROUP = 16).
#ifndef GROUP
#define GROUP 8                                 // rung 22's GROUP parameter; rung 21: 8
#endif
constexpr int GROUP_M = GROUP;
static_assert(GROUP_M % CLUSTER == 0, "a group is whole units (CLUSTER row tiles each)");
constexpr int GROUP_U = GROUP_M / CLUSTER;      // unit rows per group
struct Schedule {
    int units_m, tiles_n;
    long long total;
    __device__ __forceinline__ Schedule(int M, int N)
        : units_m(GL_CEIL_DIV(GL_CEIL_DIV(M, BM), CLUSTER)), tiles_n(GL_CEIL_DIV(N, BN)),
          total((long long)units_m * tiles_n) {}
    // Unit u's tile for the CTA of cluster rank `rank`: (row tile, column tile). With CLUSTER = 2 and
    // an odd number of row tiles, rank 1's tile of the last unit row lies wholly below M: it loads
    // zeros (TMA fills, the copy path guards) and stores nothing, and keeps the two CTAs in step.
    __device__ __forceinline__ int2 tile(long long u, int rank) const {
        const long long per_group = (long long)GROUP_U * tiles_n;
        const int first = (int)(u / per_group) * GROUP_U;
        const int rows = min(units_m - first, GROUP_U);     // the last group may be shorter
        const int in_group = (int)(u % per_group);
        return make_int2((first + in_group % rows) * CLUSTER + rank, in_group / rows);
    }
};

// ---- mbarrier bookkeeping (both roles) ---------------------------------------------------------
// A block's k tiles are numbered g = 0, 1, 2, ... across ALL its output tiles (ktiles per tile,
// the same for every tile). k tile g lives in stage s = g % STAGES in round r = g / STAGES; each
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
};

// ---- load: the producer warpgroup ------------------------------------------------------------
__device__ __forceinline__ void produce(const Smem& sm, const Schedule& sched, int ktiles, int rank, int ptid,
                                        int M, int N, int K, const T* A, int lda, const T* B, int ldb,
                                        const GlTensorMap* tmA, const GlTensorMap* tmB) {
#if GL_A_COL
    const GlOperand<A_PANELS, A_ROWS, GL_PLANES> opa{A, lda, K, M, tmA};    // A(m, k) at A[k*lda + m]
#else
    const GlOperand<A_PANELS, A_ROWS, GL_PLANES> opa{A, lda, M, K, tmA};    // A(m, k) at A[m*lda + k]
#endif
#if GL_B_COL
    const GlOperand<B_PANELS, B_ROWS, GL_PLANES> opb{B, ldb, N, K, tmB};    // B(k, n) at B[n*ldb + k]
#else
    const GlOperand<B_PANELS, B_ROWS, GL_PLANES> opb{B, ldb, K, N, tmB};    // B(k, n) at B[k*ldb + n]
#endif
    if (TMA_ONLY && ptid != 0) return;       // TMA only: one thread issues everything
    if (ptid == 0) {
        if (GL_VEC_A) gl_tma_prefetch(tmA);
        if (GL_VEC_B) gl_tma_prefetch(tmB);
    }
    Ring ring;
    for (long long u = blockIdx.x / CLUSTER; u < sched.total; u += gridDim.x / CLUSTER) {
        const int2 t = sched.tile(u, rank);
        const int row0 = t.x * BM, col0 = t.y * BN;
        for (int kt = 0; kt < ktiles; ++kt) {
            const int k0 = kt * BK, s = ring.s;
            const unsigned full = sm.full(s), a_dst = sm.a_base + s * A_STAGE_B, b_dst = sm.b_base + s * B_STAGE_B;
            gl_mbar_wait(sm.empty(s), ring.phase ^ 1u);     // round r - 1 of stage s released (see Ring)
            if (ptid == 0 && TX_BYTES) {
                if (TMA_ONLY) gl_mbar_arrive_tx(full, TX_BYTES);
                else gl_mbar_expect_tx(full, TX_BYTES);
            }
#if GL_A_COL
            opa.load<GL_VEC_A>(a_dst, row0, k0, full, ptid);
#else
            opa.load<GL_VEC_A>(a_dst, k0, row0, full, ptid);
#endif
#if GL_B_COL
            const int b_inner = k0, b_outer = col0;
#else
            const int b_inner = col0, b_outer = k0;
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
    }
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
