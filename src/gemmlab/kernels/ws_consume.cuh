// ws_consume.cuh — the consumer warpgroups of the warp-specialized WGMMA rungs (21 wgmma_ws, 22
// wgmma_tf32), composed of the rung's parts: the persistent walk (``Schedule``, schedule.cuh's: whole
// units, then stream-K pieces), the rung's mainloop part (``Mainloop``: mainloop.cuh's descriptor
// loop, or rung 22's register-A loop) over the mbarrier ring, the stream-K fixup (ws.cuh), and the
// epilogue part of C's type (ws_epi16.cuh or ws_epi32.cuh): direct, staged, TMA or deferred stores,
// after a scaled matmul's row-wise scales (scales.cuh).
// consume is a template over the three part types (Schedule, Mainloop, Epilogue: ws_entry.cuh says
// which); the includer defines BM, BN, MI, WM, CLUSTER and includes ws.cuh first.
#pragma once
#include "scales.cuh"   // a scaled matmul's scales (rung 25; the identity elsewhere)
// ---- main loop and epilogue: the consumer warpgroups ------------------------------------------
// The first row (a warp's, from warp_row), column and batch element of the tile numbered n.
template <class Schedule>
__device__ __forceinline__ void locate_held(const Schedule& sched, unsigned n, int warp_row, int& row, int& col,
                                            int& z) {
    int row_tile, col_tile;
    sched.tile_of_number(n, row_tile, col_tile, z);
    row = row_tile * BM + warp_row;
    col = col_tile * BN;
}
#if GL_GROUPED == 1
// Groups of rows (rung 26): a column bias holds one row of N per group; group g's functor reads its
// row g. A row bias runs along all the rows (the tokens'), as does the rest of the functor.
__device__ __forceinline__ GlEpi gl_group_epi(const GlEpi& ep, int g) {
    GlEpi e = ep;
#if GL_BIAS && !GL_BIAS_ROW
    e.bias += (size_t)g * e.bias_n;
#endif
    return e;
}
#endif
template <class Schedule, class Mainloop, class Epilogue>
__device__ __forceinline__ void consume(const Smem& sm, const Schedule& sched, int rank, int warp, int lane,
                                        int M, int N, const GlEpi& ep, const GlScales& sc, TC* C, int ldc,
                                        float* sk_ws, const GlTensorMap* tmC) {
    // this warpgroup (its WM rows: wg * WM ..), through a shuffle from lane 0, so that ptxas sees it is
    // the same in every lane (CUTLASS does the same) and keeps the descriptors in uniform registers
    const int wg = __shfl_sync(0xffffffffu, warp / 4, 0);
    // this warpgroup's mainloop: its descriptors (its WM rows of A, all of B), its fragments
    Mainloop ml(sm, wg, warp, lane);
    auto release = [&](int s) { sm.release(s, lane, rank); };
    // the first tile row this warp stores, and its staging (the epilogue part's)
    const int warp_row = Epilogue::epi_row(wg, warp);
    const unsigned stage = Epilogue::epi_stage(sm.epi, wg, warp);
    const bool tma = Epilogue::tma_store_now(M, N, ep.beta);
    Epilogue::epi_prefetch(tma, warp, lane, tmC);

    float acc[MI][BN / 8][4];
    Ring ring;
    // DEFERRED: the held tile, its first row (this warp's), column and batch element, and its next
    // box to write (NBOX: none held). A fused epilogue's builds keep the held tile's number instead and
    // find the three again before each write (locate_held): that frees the two registers its functor
    // needs beside the held tile (rung 21's 128x256 stream-K build with a bias spilled 8 bytes
    // without them). The plain builds keep the three, as they were measured.
    constexpr bool HELD_BY_NUMBER = !GL_EPI_PLAIN && !Schedule::GROUPED;   // a grouped tile's rows: any row
    unsigned held[Epilogue::NBOX][Epilogue::BOX_F][2];
    int held_row = 0, held_col = 0, held_z = 0, held_next = Epilogue::NBOX;
    unsigned held_n = 0;
    // box b of the held tile by TMA, b known at run time only (the registers are named by constants)
    auto write_held = [&](int b) {
        if constexpr (HELD_BY_NUMBER) locate_held(sched, held_n, warp_row, held_row, held_col, held_z);
#pragma unroll
        for (int c = 0; c < Epilogue::NBOX; ++c)
            if (c == b)
                Epilogue::write_held_box_tma(c, held[c], stage, lane, tmC, M, N, held_row, held_col, held_z);
    };
    // every box of the held tile not yet written
    auto write_rest = [&]() {
        if constexpr (HELD_BY_NUMBER) locate_held(sched, held_n, warp_row, held_row, held_col, held_z);
#pragma unroll
        for (int c = 0; c < Epilogue::NBOX; ++c)
            if (c >= held_next)
                Epilogue::write_held_box_tma(c, held[c], stage, lane, tmC, M, N, held_row, held_col, held_z);
        held_next = Epilogue::NBOX;
    };
#if GL_GROUPED == 1
    const GlEpi& ep_groups = ep;
#if GL_SCALE
    const GlScales& sc_groups = sc;
#endif
#endif
    sched.walk(blockIdx.x / CLUSTER, [&](int u, int k0, int k1) {
#if GL_GROUPED == 1
        const GlEpi ep = gl_group_epi(ep_groups, sched.batch_of(u));   // the group's own column bias
#if GL_SCALE
        const GlScales sc = sc_groups.group(sched.batch_of(u), N, sched.ktiles);   // and scale_b (rung 27)
#endif
#endif
        const int2 t = sched.tile(u, rank);
        const int row0 = sched.row_of(t), col0 = t.y * BN;
        // A grouped schedule's tile ends at its group's last row (rows_end); a warpgroup whose rows all
        // lie past it, or past M where the build asks for it, sits the tile out (ring.cuh's WGSKIP)
        constexpr bool SKIPS = Schedule::GROUPED ? WGSKIP : GL_WGSKIP_GIVEN;
        int m_end = M;
        if constexpr (Schedule::GROUPED) m_end = sched.rows_end(M);
        // (through a shuffle from lane 0, as wg: the group's end is read from shared memory, and a
        // test the compiler cannot see is the same in every lane took the k loop's counter and phase
        // out of the uniform registers, the loop of every tile)
        const bool idle = SKIPS && __shfl_sync(0xffffffffu, row0 + wg * WM >= m_end, 0);
        gl_zero_acc(acc);
        ep.prefetch_bias(row0, col0, BM, BN, lane);   // the bias the epilogue reads at the tile's end
        sc.template prefetch<MI, BN>(row0 + wg * WM, col0, warp, lane, M, N);   // and the row-wise scales
        ml.begin(sc, row0 + wg * WM, col0, k0, sched.ktiles, warp, lane, M, N);   // block scales: the piece's
        // the held tile's boxes go out during this piece, one every `gap` k tiles over its first half,
        // the first not before the second k tile (at the first, every block of the wave starts its
        // next tile's loads together)
        const int gap = max(1, (k1 - k0) / (2 * Epilogue::NBOX));
        int write_at = Epilogue::DEFERRED && held_next < Epilogue::NBOX ? k0 + gap / 2 + 1 : -1;

        // the piece's k tiles (ring.cuh's consume_ktiles: each waited for, then the mainloop part's
        // wgmmas). DEFERRED: in runs of k tiles up to the next box to write, which is written between
        // the runs with the run's last wgmmas in flight (inside the loop, the write made ptxas move the
        // loop's descriptors out of the uniform registers, and the loop grew)
        int prev = 0, kt = k0;
        for (;;) {
            const int stop = write_at >= 0 ? min(k1, write_at + 1) : k1;
            if (SKIPS && idle) skip_ktiles<Mainloop>(sm, ring, kt, stop, k0, prev, release);
            else consume_ktiles(ml, sm, ring, acc, kt, stop, k0, prev, release);
            if (!Epilogue::DEFERRED || kt >= k1) break;
            write_held(held_next);
            write_at = ++held_next < Epilogue::NBOX ? write_at + gap : -1;
        }
        // the tile's last stage: the producer refills it during the epilogue (a group over K with no k
        // tiles has none: it stores zeros)
        if (!Schedule::K_GROUPED || k1 > k0) ml.drain(acc, prev, release);
        if (Epilogue::DEFERRED) {   // what a short piece left of the held tile
            write_rest();
            Epilogue::hold_nothing(held);
        }
        // a stream-K piece: published for the CTA that stores the tile, or the others' added to it
        if (!sk_fixup(sched, acc, u, k0, k1, sk_ws)) return;
        // row-wise scales (GL_SCALE 2), once per tile: scale_b alone where the mainloop applied scale_a
        sc.template rows<Mainloop::ROW_SCALED>(acc, row0 + wg * WM, col0, warp, lane, M, N);

        // ---- epilogue: through the warp's own staging (the stages belong to the next tile by
        // now); a tile wholly below M (rank 1 of a cluster's last unit row) stores nothing; with
        // DEFERRED, a tile for TMA is held until the next piece's main loop (or the end of the walk)
        // A grouped tile that reaches past its group's end (m_end, into the next group's rows) is
        // stored by rows, bounded there; TMA clips only at M.
        const bool tma_tile = tma && (!Schedule::GROUPED || m_end == M || row0 + BM <= m_end);
        if (row0 < m_end) {
            if (Epilogue::DEFERRED && tma_tile) {
                Epilogue::hold_tile(held, acc, ep, row0 + warp_row, col0, lane);   // the whole functor, applied now
                if constexpr (HELD_BY_NUMBER) {
                    held_n = sched.tile_number(t, sched.batch_of(u));
                } else {
                    held_row = row0 + warp_row;
                    held_col = col0;
                    held_z = sched.batch_of(u);
                }
                held_next = 0;
            } else if (tma_tile) {
                Epilogue::store_tile_tma(acc, stage, wg, warp, lane, tmC, M, N, row0 + warp_row, col0,
                                         sched.batch_of(u), ep);
            } else {
#if !GL_TMA_STORE_ONLY   // the twin: the host launches it only where the TMA store serves
                Epilogue::store_rows(acc, stage, wg, warp, lane, C + sched.batch_of(u) * sched.stride_c(), ldc,
                                     m_end, N, row0 + warp_row, col0, ep);
#endif
            }
        }
    });
    if (Epilogue::DEFERRED) write_rest();   // the last tile
    Epilogue::epi_drain(tma, warp, lane);
}

