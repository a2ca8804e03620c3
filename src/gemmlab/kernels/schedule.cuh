// schedule.cuh — the tile scheduler parts of the Hopper rungs: which output tiles, and which k tiles
// of them, a block (or a cluster) computes, and in what order.
//   GlTilePerBlock<TileK, GroupM, Tall> (rung 19): one tile per block, the blocks renumbered in groups
//     of GroupM row tiles; the tall grid (row tiles continued along grid.z) in plain order. Built
//     per block, Schedule(k_first, K) (a split's slice of K); it gives what the persistent schedule
//     gives the producer (tile, batch_of, the batch strides, walk), a walk of one tile.
//   GlPersistentSchedule<TileM, TileN, TileK, Cluster, GroupUnits, StreamK, Batched> (rungs 21 and
//     22, chosen by each rung): each cluster walks units of Cluster tiles in the same grouped order, with a
//     stream-K tail (StreamK) and over a batch (Batched); built per block, Schedule(M, N, K) or for a
//     batch Schedule(M, N, K, batch, strides). It gives tile(u, rank), batch_of(u), the batch strides,
//     walk(c, body), sk_begin(c) (the stream-K fixup's, ws.cuh), and a tile's number and back
//     (tile_number, tile_of_number: how the consumers keep a held tile).
#pragma once
#include "hopper.cuh"

// ---- one tile per block (rung 19) ------------------------------------------------------------------
// Blocks start in the order of their linear index (x fastest). Read as (column tile, row tile)
// that order sweeps a whole row of column tiles first: the ~132 blocks resident at once on an
// H100 then cover 4 row tiles x every column tile of a 8192-wide C, so every wave streams all of
// B from DRAM. Renumbered in groups of GroupM row tiles (the column tiles of one group before the
// next group), the resident blocks cover an 8 x 16 patch: a tile of A or B is read by many blocks
// at about the same time and served from L2 (unique bytes per wave: 8 x 128 + 16.5 x 256 rows of K
// instead of 4 x 128 + 32 x 256). The tall grid (row tiles continued along grid.z) keeps the plain
// order. grid.x and grid.y only: a split's grid.z leaves the tile as it is.
// The block's k tiles are [k0, ktiles): all of K, or with a split (common.cuh) its slice, whole
// tiles of TileK, none where the slice is empty (a cluster split's slices past a short K). It gives
// what the ring's producer (ring.cuh) reads of a schedule: walk, tile, batch_of and the batch
// strides (none), ktiles; the walk is this block's one tile.
template <int TileK, int GroupM, bool Tall>
struct GlTilePerBlock {
    int k0, ktiles;
    // k_first: the slice's first element of K (a multiple of TileK, or K itself for an empty slice);
    // K: its end
    __device__ __forceinline__ GlTilePerBlock(int k_first, int K)
        : k0(k_first / TileK), ktiles(k_first / TileK + GL_CEIL_DIV(K - k_first, TileK)) {}
    // this block's (row tile, column tile); u and rank as the persistent schedule's, always 0 here
    __device__ __forceinline__ int2 tile(int, int) const {
        if constexpr (Tall) {
            return make_int2(GL_TILE_ROW, blockIdx.x);
        } else {
            const long long tiles_n = gridDim.x, lin = (long long)blockIdx.y * tiles_n + blockIdx.x;
            return gl_group_raster<long long>(lin, tiles_n, (int)gridDim.y, GroupM);   // (row, column)
        }
    }
    __device__ __forceinline__ int batch_of(int) const { return 0; }
    static constexpr bool GROUPED = false;   // the tile's rows end at M (a grouped schedule's: its group's)
    static constexpr bool K_GROUPED = false;   // one K for every tile (GlGroupedKSchedule's: its group's)
    // the tile's first row (the includer's BM)
    __device__ __forceinline__ int row_of(int2 t) const { return t.x * BM; }
    __device__ __forceinline__ long long stride_a() const { return 0; }
    __device__ __forceinline__ long long stride_b() const { return 0; }
    template <typename F>
    __device__ __forceinline__ void walk(int, F&& body) const { body(0, k0, ktiles); }
};

// The persistent schedules' stream-K arithmetic, over a schedule's total units, dp whole ones
// (the units past dp are the tail), ktiles per unit and clusters (GlPersistentSchedule's, and
// GlGroupedSchedule's over the units the device counted).
// The first stream-K step of cluster c (steps count k tiles of the units past dp).
// floor(W c / G) for the W = (total - dp) ktiles steps and G clusters, in 32 bits: W = q G + r
// gives q c + floor(r c / G), r c < G^2. The 64-bit quotient it replaced was a called routine
// (CALL __cuda_sm20_div_s64). Removing it did not shorten the k-tile loop: with STREAMK=1 ptxas
// still keeps the ring state in vector registers, a longer loop than STREAMK=0's, for a reason
// not found (neither the fixup's publish nor its add is it: removing either alone left the loop
// as long).
template <class S>
__device__ __forceinline__ int gl_sk_begin(const S& s, int c) {
    const int w = (s.total - s.dp) * s.ktiles, q = w / s.clusters, r = w % s.clusters;
    return q * c + r * c / s.clusters;
}
// Cluster c's work in order: body(u, k0, k1) for unit u's k tiles [k0, k1), the whole units
// first, then its stream-K steps backwards (a grouped schedule's cursor located at u before each). The producer and the consumers of both CTAs of a
// cluster walk the same sequence. One call site of the body (it is the whole main loop and
// epilogue, inlined), and one cursor x: the next whole unit while x >= 0, then -1 - the step the
// cluster's remaining steps end at (fewer registers live across the main loop).
template <bool StreamK, class S, typename F>
__device__ __forceinline__ void gl_persistent_walk(const S& s, int c, F&& body) {
    int x = c;
    for (;;) {
        int u = x, k0 = 0, k1 = s.ktiles;
        if (x >= 0 && x < s.dp) {
            x += s.clusters;
        } else {
            if (!StreamK) return;
            if (x >= 0) x = -1 - gl_sk_begin(s, c + 1);
            const int end = -1 - x, left = end - gl_sk_begin(s, c);    // steps not yet walked
            if (left <= 0) return;
            u = s.dp + (end - 1) / s.ktiles;
            k1 = (end - 1) % s.ktiles + 1;
            k0 = max(0, k1 - left);
            x += k1 - k0;
        }
        if constexpr (S::GROUPED) s.locate(u);   // a grouped schedule's cursor to unit u's group
        body(u, k0, k1);
    }
}

// ---- the persistent schedule (rungs 21 and 22) -----------------------------------------------------
// The grid has min(units, SMs / CLUSTER) clusters (core/schema.py, Rung.persistent_grid), or with
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
// ---- stream-K tail (STREAMK=1) -----------------------------------------------------------------
// Without it the last wave is partial: 512 tiles of 128x256 at 4096^3 on 132 SMs are 3.88 waves
// that take 4 tile times, 2048 at 8192^3 are 15.52 that take 16. With it,
// the units past the last whole wave (and one wave more when they would fill less than half of
// one: each cluster then still gets at least half a unit of k tiles, so a unit has at most three
// pieces) are cut into a contiguous run of (unit, k tile) steps split evenly over the clusters:
// cluster c takes steps [c W / G, (c + 1) W / G) of the W = units x ktiles (below 2^31: the host's
// schema.streamk_tail). A cluster walks its steps BACKWARDS, its pieces in falling order: its
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
// Units and steps are 32-bit: a unit is at least 128 x 64 outputs, so 2^31 of them would need a C of
// 2^44 elements (the host also keeps a stream-K tail's steps below 2^31), and every int that is not
// 64-bit is a register the consumers keep beside their 128 accumulators.
// A batch (GL_BATCHED, hopper.cuh): the units of element 0, then those of element 1, ...; each
// element's in the grouped order above. A wave of small elements then covers several whole elements.
template <int TileM, int TileN, int TileK, int Cluster, int GroupUnits, bool StreamK, bool Batched>
struct GlPersistentSchedule {
    int units_m, tiles_n, ktiles, clusters;
    int total, dp;           // units; the first dp go whole to one cluster each (data-parallel)
    int per;                 // a batch's: units of one batch element
    long long sa, sb, sc;    // a batch's: the operands' batch strides, elements
    __device__ __forceinline__ GlPersistentSchedule(int M, int N, int K, int batch, long long bsa, long long bsb,
                                                    long long bsc)
        : GlPersistentSchedule(M, N, K, batch) {
        per = units_m * tiles_n;
        sa = bsa, sb = bsb, sc = bsc;
    }
    __device__ __forceinline__ GlPersistentSchedule(int M, int N, int K, int batch = 1)
        : units_m(GL_CEIL_DIV(GL_CEIL_DIV(M, TileM), Cluster)), tiles_n(GL_CEIL_DIV(N, TileN)),
          ktiles(GL_CEIL_DIV(K, TileK)), clusters((int)gridDim.x / Cluster), total(units_m * tiles_n * batch),
          dp(total) {
        if (StreamK && total > clusters) {
            const int rem = total % clusters;
            if (rem) dp = total - rem - (2 * rem >= clusters ? 0 : clusters);
        }
    }
    // The batch element of unit u (0 without a batch).
    __device__ __forceinline__ int batch_of(int u) const {
        if constexpr (Batched) return u / per;
        return 0;
    }
    __device__ __forceinline__ long long stride_a() const {
        if constexpr (Batched) return sa;
        return 0;
    }
    __device__ __forceinline__ long long stride_b() const {
        if constexpr (Batched) return sb;
        return 0;
    }
    __device__ __forceinline__ long long stride_c() const {
        if constexpr (Batched) return sc;
        return 0;
    }
    static constexpr bool GROUPED = false, K_GROUPED = false;   // GlTilePerBlock's
    __device__ __forceinline__ int row_of(int2 t) const { return t.x * TileM; }
    // Unit u's tile for the CTA of cluster rank `rank`: (row tile, column tile) in its batch element.
    // With CLUSTER = 2 and an odd number of row tiles, rank 1's tile of the last unit row lies wholly
    // below M: it loads zeros (TMA fills, the copy path guards) and stores nothing, and keeps the two
    // CTAs in step.
    __device__ __forceinline__ int2 tile(int u, int rank) const {
        if constexpr (Batched) u -= batch_of(u) * per;
        const int2 t = gl_group_raster<int>(u, tiles_n, units_m, GroupUnits);   // (unit row, column tile)
        return make_int2(t.x * Cluster + rank, t.y);
    }
    // A tile (row tile, column tile) of batch element z as one number, (z x row tiles + row tile) x
    // column tiles + column tile (below 2^32: the units, Cluster tiles each, are below 2^31), and
    // back. One division back without a batch, where a unit's grouped raster (tile) takes two: the
    // consumers keep a held tile so (ws_consume.cuh).
    __device__ __forceinline__ unsigned tile_number(int2 t, int z) const {
        const unsigned rows = (unsigned)(units_m * Cluster);
        return ((unsigned)z * rows + (unsigned)t.x) * (unsigned)tiles_n + (unsigned)t.y;
    }
    __device__ __forceinline__ void tile_of_number(unsigned n, int& row_tile, int& col_tile, int& z) const {
        const unsigned q = n / (unsigned)tiles_n;
        col_tile = (int)(n - q * (unsigned)tiles_n);
        const unsigned rows = (unsigned)(units_m * Cluster);
        const unsigned e = Batched ? q / rows : 0u;
        z = (int)e;
        row_tile = (int)(q - e * rows);
    }
    // the first stream-K step of cluster c, and cluster c's work in order (gl_persistent_walk)
    __device__ __forceinline__ int sk_begin(int c) const { return gl_sk_begin(*this, c); }
    template <typename F>
    __device__ __forceinline__ void walk(int c, F&& body) const { gl_persistent_walk<StreamK>(*this, c, body); }
};

// ---- the grouped schedule (rung 26, GL_GROUPED) -------------------------------------------------
// G products that share N and K but not M: group g's rows are [start_g, end_g) of A and C (tokens
// sorted by expert), its B the g-th element of a batch of weights. The groups' row counts live on
// the device (the host does not know them: no synchronization, and a CUDA graph replays with new
// ones), as the cumulative ends an MoE router's counts give (rows_per == 0: start_g = end_{g-1}) or
// as counts in a padded (G, rows_per, K) buffer (rows_per > 0, the masked form: start_g = g rows_per,
// end_g = start_g + count_g). Every block reads them at its start into a table in shared memory
// (``fill``, all threads, before the role split): the units before each group (an exclusive scan of
// each group's ceil(rows / (TileM Cluster)) x column tiles) and each group's end. Then the walk is
// the persistent one: cluster c takes units c, c + clusters, ... of the total, and a unit's group is
// found by a cursor that only moves forward (the units a cluster walks increase), one shared read
// per group passed; empty groups have no units and are passed over. Within a group the units are in
// the grouped raster of GlPersistentSchedule. A tile's rows past its group's end belong to the next
// group (or lie past A's last row: TMA's zeros): their products are computed and never stored, the
// store bounded at the group's end (ws_consume.cuh's m_end). Values out of range (an end past M, a
// negative count) are clamped, so a bad table can lose rows but never store outside C. The masked
// form's padding past a group's count is not read where a whole box of A lies past it (ring.cuh's
// GROUP_BOXES: the producer loads a tile's boxes up to its group's end).
template <int TileM, int TileN, int TileK, int Cluster, int GroupUnits, bool StreamK = false>
struct GlGroupedSchedule {
    // the table's ints: cum[G + 1] (units before each group; cum[G] the total), then end[G], then a
    // warp total per warp of the block for fill's scan
    static __host__ __device__ constexpr int table_ints(int groups, int warps) { return 2 * groups + 1 + warps; }
    static constexpr bool GROUPED = true;   // a tile's rows end at its group's end (rows_end)
    static constexpr bool K_GROUPED = false;
    int tiles_n, ktiles, clusters, total, dp, groups, rows_per;
    long long sb;            // B's group stride, elements
    const int* cum;          // shared: the table
    const int* ends;
    // the cursor (each thread's own copy of the schedule): the group of the unit walked now, its
    // first unit, first and end rows and unit rows
    mutable int g = 0, ubase = 0, start = 0, end = 0, units_m = 0;

    // All THREADS threads, before a __syncthreads: the table at `table` (table_ints ints) from the
    // G ints at `src` (cumulative ends, or counts with rows_per > 0) for an M-row A.
    static __device__ __forceinline__ void fill(int* table, const int* __restrict__ src, int G, int rows_per, int M,
                                                int N) {
        int* cum = table;
        int* ends = table + G + 1;
        int* warp_total = ends + G;
        const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = (int)blockDim.x / 32;
        const int tiles_n = GL_CEIL_DIV(N, TileN);
        int carry = 0;
        for (int g0 = 0; g0 < G; g0 += (int)blockDim.x) {
            const int g = g0 + tid;
            int units = 0;
            if (g < G) {
                int lo, hi;
                if (rows_per > 0) {   // counts (no ints at all: every group full, a plain call's one group)
                    lo = g * rows_per;
                    hi = lo + min(max(src ? src[g] : rows_per, 0), rows_per);
                } else {
                    lo = g ? min(max(src[g - 1], 0), M) : 0;
                    hi = min(max(src[g], 0), M);
                }
                ends[g] = hi;
                units = hi > lo ? GL_CEIL_DIV(hi - lo, TileM * Cluster) * tiles_n : 0;
            }
            int x = units;   // the warp's inclusive scan
#pragma unroll
            for (int d = 1; d < 32; d *= 2) {
                const int y = __shfl_up_sync(0xffffffffu, x, d);
                if (lane >= d) x += y;
            }
            if (lane == 31) warp_total[warp] = x;
            __syncthreads();
            int before = carry, chunk = 0;
            for (int w = 0; w < warps; ++w) {
                const int t = warp_total[w];
                if (w < warp) before += t;
                chunk += t;
            }
            if (g < G) cum[g] = before + x - units;
            carry += chunk;
            __syncthreads();   // warp_total is the next chunk's
        }
        if (tid == 0) cum[G] = carry;
    }

    __device__ __forceinline__ GlGroupedSchedule(const int* table, int G, int rows_per_group, int N, int K,
                                                 long long bsb, const GlTensorMap*)   // no maps of its own
        : tiles_n(GL_CEIL_DIV(N, TileN)), ktiles(GL_CEIL_DIV(K, TileK)), clusters((int)gridDim.x / Cluster),
          total(table[G]), dp(table[G]), groups(G), rows_per(rows_per_group), sb(bsb), cum(table),
          ends(table + G + 1) {
        // A stream-K tail from the units the device counted (the host, not knowing the group sizes,
        // cannot tell how full the last wave is), taken only where the last wave is less than half
        // full: a fuller one lost more to its split units' fix-up than it won
        // (benchmarks/results/h200_moe_tiles.json.gz). Its units alone are split over every cluster,
        // unless it is under an eighth full: then it and the wave before it, as GlPersistentSchedule
        // splits (a sliver of a wave split alone cuts each unit into many short pieces, each with
        // its fix-up); benchmarks/results/h200_moe_streamk_fills.txt
        if (StreamK && total > clusters) {
            const int rem = total % clusters;
            if (rem && 2 * rem < clusters) dp = total - rem - (8 * rem < clusters ? clusters : 0);
        }
    }

    // the cursor to unit u's group: forward along the whole units, back a little along a stream-K
    // tail (walked backwards)
    __device__ __forceinline__ void locate(int u) const {
        if (units_m && u >= ubase && u < cum[g + 1]) return;
        while (cum[g + 1] <= u) ++g;
        while (cum[g] > u) --g;
        ubase = cum[g];
        start = rows_per > 0 ? g * rows_per : (g ? ends[g - 1] : 0);
        end = ends[g];
        units_m = GL_CEIL_DIV(end - start, TileM * Cluster);
    }
    __device__ __forceinline__ int batch_of(int) const { return g; }
    __device__ __forceinline__ long long stride_a() const { return 0; }
    __device__ __forceinline__ long long stride_b() const { return sb; }
    __device__ __forceinline__ long long stride_c() const { return 0; }
    // unit u's tile in its group (after locate(u)): (row tile, column tile) of the group's rows
    __device__ __forceinline__ int2 tile(int u, int rank) const {
        const int2 t = gl_group_raster<int>(u - ubase, tiles_n, units_m, GroupUnits);
        return make_int2(t.x * Cluster + rank, t.y);
    }
    __device__ __forceinline__ int row_of(int2 t) const { return start + t.x * TileM; }
    __device__ __forceinline__ int rows_end(int) const { return end; }
    // the persistent schedules' stream-K arithmetic over the units the device counted: the first step
    // of cluster c, and cluster c's work (whole units, then its tail steps backwards), each unit
    // located before its body runs
    __device__ __forceinline__ int sk_begin(int c) const { return gl_sk_begin(*this, c); }
    template <typename F>
    __device__ __forceinline__ void walk(int c, F&& body) const { gl_persistent_walk<StreamK>(*this, c, body); }
};

// ---- groups over K (rung 26, GROUP_K=1: the weight gradient of a grouped product) ---------------------
// G products of one M x N that share A's rows and B's columns but not K: group g sums k in
// [end_{g-1}, end_g) of A (M x K) and B (K x N) into its own C (the g-th M x N element of C, a 3-D
// map). Every group has the same units, so unit u is group u / per; the group's k range is read from
// the device's ends when the walk reaches it. The operands' maps are the group's own (written by
// the group_maps kernel before this one: A's and B's K extent cut at the group's end, so the copy
// engine fills zeros past it and the last k tile reads nothing of the next group), acquired by the
// producer before its first load through them (ring.cuh). A group of no k tiles stores zeros.
template <int TileM, int TileN, int TileK, int Cluster, int GroupUnits>
struct GlGroupedKSchedule {
    static constexpr bool GROUPED = false, K_GROUPED = true;
    int units_m, tiles_n, clusters, per, total, dp, K;
    long long sc;                  // C's group stride, elements
    const int* ends;               // the groups' cumulative ends over K (device)
    const GlTensorMap* maps;       // A's and B's map of each group (group_maps)
    mutable int g = -1, k_base = 0, ktiles = 0;   // the cursor: the group walked now, its first k, its k tiles

    __device__ __forceinline__ GlGroupedKSchedule(int M, int N, int K_total, int G, long long bsc, const int* src,
                                                  const GlTensorMap* group_maps)
        : units_m(GL_CEIL_DIV(GL_CEIL_DIV(M, TileM), Cluster)), tiles_n(GL_CEIL_DIV(N, TileN)),
          clusters((int)gridDim.x / Cluster), per(units_m * tiles_n), total(units_m * tiles_n * G),
          dp(units_m * tiles_n * G), K(K_total), sc(bsc), ends(src), maps(group_maps) {}

    __device__ __forceinline__ void locate(int u) const {
        const int g2 = u / per;
        if (g2 == g) return;
        g = g2;
        const int lo = g ? min(max(__ldg(ends + g - 1), 0), K) : 0, hi = min(max(__ldg(ends + g), 0), K);
        k_base = lo;
        ktiles = hi > lo ? GL_CEIL_DIV(hi - lo, TileK) : 0;
    }
    __device__ __forceinline__ int batch_of(int) const { return g; }
    __device__ __forceinline__ long long stride_a() const { return 0; }
    __device__ __forceinline__ long long stride_b() const { return 0; }
    __device__ __forceinline__ long long stride_c() const { return sc; }
    __device__ __forceinline__ const GlTensorMap* map_a() const { return maps + 2 * g; }
    __device__ __forceinline__ const GlTensorMap* map_b() const { return maps + 2 * g + 1; }
    __device__ __forceinline__ int2 tile(int u, int rank) const {
        const int2 t = gl_group_raster<int>(u - g * per, tiles_n, units_m, GroupUnits);
        return make_int2(t.x * Cluster + rank, t.y);
    }
    __device__ __forceinline__ int row_of(int2 t) const { return t.x * TileM; }
    __device__ __forceinline__ int sk_begin(int) const { return 0; }   // no stream-K tail (STREAMK=0)
    template <typename F>
    __device__ __forceinline__ void walk(int c, F&& body) const {
        for (int u = c; u < total; u += clusters) {
            locate(u);
            body(u, 0, ktiles);
        }
    }
};
