// ring.cuh — the stage ring of the Hopper WGMMA rungs (19 wgmma_tma, 21 wgmma_ws, 22 wgmma_tf32):
// the stages' shared-memory carve-up, how the operands arrive (TMA, multicast, or the producer
// warpgroup's thread copy), the mbarriers' counts and bookkeeping, the producer's load loop over the
// rung's tile schedule (schedule.cuh) and the consumers' wait for each k tile before the rung's
// mainloop part (mainloop.cuh) reads it. Rung 19's header explains the ring; rung 21's what the
// persistent rungs add (ws.cuh).
// The includer defines, before including: BM, BN, BK, STAGES, CLUSTER (1: a CTA loads alone), T,
// GL_A_COL, GL_B_COL, GL_VEC_A, GL_VEC_B (common.cuh) and CWARPS (hopper.cuh).
// GL_PLANES (default 1): planes per operand, 2 for rung 22's 3xTF32 (big and small TF32 parts, the
// TMA boxes of both in one stage).
#pragma once
#include "hopper.cuh"
#include "schedule.cuh"
#ifndef GL_PLANES
#define GL_PLANES 1
#endif

// ---- the stages' carve-up (128-byte swizzle; every panel starts 1024-byte aligned, the swizzle's period) --
// An operand tile is PANELS panels of ROWS swizzled rows of 128 bytes (SWIZZLE_E elements):
//   K-major operand (row-major A, column-major B): BK / SWIZZLE_E panels of [rows][SWIZZLE_E k], one
//   TMA box each;
//   MN-major operand (column-major A, row-major B): rows / SWIZZLE_E panels of [BK k][SWIZZLE_E m or n].
// A stage holds A's tile then B's, each plane after plane (3xTF32: the small parts right after the big).
constexpr int SWIZZLE_E = GL_ROW_B / (int)sizeof(T);
#if GL_A_COL
constexpr int A_PANELS = BM / SWIZZLE_E, A_ROWS = BK;
#else
constexpr int A_PANELS = BK / SWIZZLE_E, A_ROWS = BM;
#endif
#if GL_B_COL
constexpr int B_PANELS = BK / SWIZZLE_E, B_ROWS = BN;
#else
constexpr int B_PANELS = BN / SWIZZLE_E, B_ROWS = BK;
#endif
constexpr int A_PANEL_B = A_ROWS * GL_ROW_B, B_PANEL_B = B_ROWS * GL_ROW_B;
constexpr int A_PLANE_B = A_PANELS * A_PANEL_B, B_PLANE_B = B_PANELS * B_PANEL_B;
constexpr int A_STAGE_B = GL_PLANES * A_PLANE_B, B_STAGE_B = GL_PLANES * B_PLANE_B;
constexpr int PIPE_B = STAGES * (A_STAGE_B + B_STAGE_B);
static_assert(BK % SWIZZLE_E == 0 && BK <= 256, "BK is whole 128-byte swizzle rows and a TMA box side (<= 256)");
static_assert(A_PANEL_B % 1024 == 0 && B_PANEL_B % 1024 == 0 && PIPE_B % 1024 == 0,
              "panels (and what follows the stages) keep the 1024-byte swizzle alignment");

// ---- how the operands arrive ---------------------------------------------------------------------
// TMA_ONLY: both operands come by TMA, issued by one thread; otherwise the producer warpgroup's 128
// threads copy what TMA cannot describe (GlOperand::copy) and each arrives on the full barrier.
constexpr bool TMA_ONLY = GL_VEC_A && GL_VEC_B;
// B multicast: the CLUSTER CTAs of a cluster compute vertically adjacent tiles of one column tile,
// so they need the same B tile; each loads 1/CLUSTER of it and the copy engine writes it to all.
constexpr bool MCAST_B = CLUSTER > 1 && GL_VEC_B;
// Bytes the copy engine delivers to THIS CTA per stage: its A tile and the whole B tile (with
// multicast, part of B comes from the peer's TMA, counted on this CTA's barrier all the same).
constexpr unsigned TX_BYTES = (GL_VEC_A ? A_STAGE_B : 0) + (GL_VEC_B ? B_STAGE_B : 0);
// A grouped rung's row-major A by TMA (GL_GROUPED 1, ABOX=1): boxes of GL_GROUP_BOX_ROWS rows (the
// host's map of A, core/launch.py), a tile's boxes loaded only up to its group's end (``produce``).
// A box wholly past the end would read the next group's tokens, or the masked form's padding, only
// to multiply rows that are never stored; one partly past M is filled with zeros by the copy engine.
// ABOX=0: one box of the tile's BM rows, every row read.
constexpr int GL_GROUP_BOX_ROWS = 64;
#ifndef ABOX
#define ABOX 1
#endif
#if defined(GL_GROUPED) && GL_GROUPED == 1
constexpr bool GROUP_BOXES = ABOX && !GL_A_COL && GL_VEC_A && TMA_ONLY;
#else
constexpr bool GROUP_BOXES = false;
#endif
constexpr unsigned GROUP_BOX_B = A_PANELS * GL_GROUP_BOX_ROWS * GL_ROW_B;   // one box row of every panel
// A grouped rung's consumer warpgroup whose WM rows of a tile all lie past the tile's group's end
// (WGSKIP=1): it sits the tile out (``skip_ktiles``), its products never stored, so the other
// warpgroup's wgmmas have the tensor cores alone and a group's last, part-filled row tile costs
// about half of a full one where its rows fit one warpgroup. WGSKIP=0: both multiply every k tile.
// Another rung takes it only where its build defines WGSKIP=1 (GL_WGSKIP_GIVEN; rung 25, whose
// rule does where M fits one warpgroup): past M, as past a group's end.
#ifdef WGSKIP
#define GL_WGSKIP_GIVEN WGSKIP
#else
#define GL_WGSKIP_GIVEN 0
#define WGSKIP 1
#endif

// ---- the barriers' counts ---------------------------------------------------------------------
// Full: one arrival (the thread that issues every TMA, with the stage's bytes) where both operands
// come by TMA, else one per producer thread (GlOperand::copy). Empty: a stage may be refilled once
// every consumer warp that reads it has released it; with multicast the peer's producer writes this
// CTA's stage too, so the consumers of BOTH CTAs arrive on the empty barrier of each (one arrival per
// consumer warp per CTA).
constexpr unsigned FULL_ARRIVALS = TMA_ONLY ? 1 : GL_WARPGROUP;
constexpr unsigned EMPTY_ARRIVALS = CWARPS * CLUSTER;
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
    // cluster one on the peer's, whose producer multicasts into this CTA's stage too (every rung's
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
    [[maybe_unused]] int acquired = -1;   // grouped: the group whose own maps this thread acquired last
    sched.walk(blockIdx.x / CLUSTER, [&](int u, int k0, int k1) {
        const int2 t = sched.tile(u, rank);
        const int row0 = sched.row_of(t), col0 = t.y * BN;
        const int element = sched.batch_of(u);      // 0 without a batch: opa, opb are op_a, op_b
        auto opa = op_a.at(element, sched.stride_a());
        auto opb = op_b.at(element, sched.stride_b());
        int k_origin = 0;   // a group over K (GlGroupedKSchedule): its first k and its own maps
        // groups of rows: A's boxes up to the group's end (GROUP_BOXES), and the stage's bytes without the others
        [[maybe_unused]] int a_boxes = A_ROWS / GL_GROUP_BOX_ROWS;
        [[maybe_unused]] unsigned tx = TX_BYTES;
        if constexpr (GROUP_BOXES) {
            a_boxes = min(a_boxes, max(0, GL_CEIL_DIV(sched.rows_end(M) - row0, GL_GROUP_BOX_ROWS)));
            tx = TX_BYTES - (A_ROWS / GL_GROUP_BOX_ROWS - a_boxes) * GROUP_BOX_B;
        }
        if constexpr (Schedule::K_GROUPED) {
            opa.map = sched.map_a();
            opb.map = sched.map_b();
            k_origin = sched.k_base;
            if (element != acquired) {   // maps written by group_maps: acquired before the first load through them
                acquired = element;
                gl_tensormap_acquire(opa.map);
                gl_tensormap_acquire(opb.map);
            }
        }
        const bool back = KREV && odd;
        odd = !odd;
        for (int kt = k0; kt < k1; ++kt) {
            const int k_at = (back ? sched.ktiles - 1 - kt : kt) * BK + k_origin, s = ring.s;   // the k tile's first element
            const unsigned full = sm.full(s), a_dst = sm.a_base + s * A_STAGE_B, b_dst = sm.b_base + s * B_STAGE_B;
            gl_mbar_wait(sm.empty(s), ring.phase ^ 1u);     // round r - 1 of stage s released (see Ring)
            if (ptid == 0 && TX_BYTES) {
                if (TMA_ONLY) gl_mbar_arrive_tx(full, GROUP_BOXES ? tx : TX_BYTES);
                else gl_mbar_expect_tx(full, TX_BYTES);
            }
#if GL_A_COL
            opa.load<GL_VEC_A>(a_dst, row0, k_at, full, ptid);
#else
            if constexpr (GROUP_BOXES) opa.template tma_rows<GL_GROUP_BOX_ROWS>(a_dst, k_at, row0, full, a_boxes);
            else opa.load<GL_VEC_A>(a_dst, k_at, row0, full, ptid);
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

// ---- wait: the consumer warpgroups ---------------------------------------------------------------
// The next k tile's stage, once full, the ring and the k tile count moved on past it (a PAIRED
// mainloop part's walk: mainloop.cuh's block-scaled run).
__device__ __forceinline__ int take_stage(const Smem& sm, Ring& ring, int& kt) {
    const int s = ring.s;
    gl_mbar_wait(sm.full(s), ring.phase);
    ring.next();
    ++kt;
    return s;
}

// k tiles [kt, stop) of a piece that began at k0: each waited for on its full barrier, then the
// mainloop part's wgmmas, which release the stages it is done with (mainloop.cuh). kt ends at stop.
// A PAIRED part takes the run whole.
template <class Mainloop, class Release>
__device__ __forceinline__ void consume_ktiles(Mainloop& ml, const Smem& sm, Ring& ring, float (&acc)[MI][BN / 8][4],
                                               int& kt, int stop, int k0, int& prev, const Release& release) {
    if constexpr (Mainloop::PAIRED) {   // the mainloop part walks the run itself (mainloop.cuh says why)
        ml.run(sm, ring, acc, kt, stop, prev, release);
    } else {
        for (; kt < stop; ++kt) {
            const int s = ring.s;
            gl_mbar_wait(sm.full(s), ring.phase);
            ml.ktile(acc, s, kt > k0, prev, release);
            ring.next();
        }
    }
}

// k tiles [kt, stop) sat out by a consumer warpgroup (WGSKIP): each stage waited for, then released as
// the mainloop part would release it (HOLDS_STAGE: one k tile later, the last by its drain, which
// the caller runs as after consume_ktiles). The wait keeps the warpgroup's arrivals in step with
// the stages' rounds: the empty barrier completes a round only with every consumer warp's arrival.
template <class Mainloop, class Release>
__device__ __forceinline__ void skip_ktiles(const Smem& sm, Ring& ring, int& kt, int stop, int k0, int& prev,
                                            const Release& release) {
    for (; kt < stop; ++kt) {
        const int s = ring.s;
        gl_mbar_wait(sm.full(s), ring.phase);
        if constexpr (Mainloop::HOLDS_STAGE) {
            if (kt > k0) release(prev);
            prev = s;
        } else {
            release(s);
        }
        ring.next();
    }
}
