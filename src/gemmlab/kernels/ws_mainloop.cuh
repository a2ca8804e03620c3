// ws_mainloop.cuh — the mainloop part of the warp-specialized WGMMA rungs with both operands read from
// the shared stages by descriptor (rung 21: fp16, bf16; rung 22: TF32 and 3xTF32's planes). One k tile
// of a consumer warpgroup: its KSTEPS x MI wgmmas as one commit group, after which the previous k
// tile's group is done and its stage is released (one group stays in flight while the next full
// barrier is awaited). 3xTF32 (LO_A, LO_B: the small parts' offsets in a stage) sums a k tile's three
// products into fresh partial sums, waits for them, releases the stage and adds them in FP32.
// A mainloop part gives ws_consume.cuh (the consumers' loop):
//   Mainloop(sm, wg, warp, lane)           the warpgroup's descriptors (its WM rows of A, all of B);
//   ktile(acc, s, later, prev, release)    k tile in stage s (later: not the piece's first k tile;
//                                          prev: the stage whose group is still in flight, updated);
//   drain(acc, prev, release)              after a piece's last k tile: every group done, the last
//                                          stage released (the producer refills it during the epilogue).
// Rung 22's register-A mainloop (an MN-major A read into registers) gives the same, in its file.
// The includer defines, before including: BN, MI, WM (hopper.cuh), KSTEPS, A_PANEL_B, B_PANEL_B,
// A_STAGE_B, B_STAGE_B (its k step and shared-memory carve-up) and includes ws.cuh (Smem).
#pragma once

template <int A_COL, int B_COL, int LO_A = 0, int LO_B = 0>
struct GlMainloopSS {
    static constexpr bool SPLIT = LO_A > 0;    // 3xTF32: partial sums per k tile
    const GlStageDescs<A_COL, B_COL, A_PANEL_B, B_PANEL_B> descs;
    __device__ __forceinline__ GlMainloopSS(const Smem& sm, int wg, int, int) : descs(sm.a_base, sm.b_base, wg * WM) {}

    template <typename Release>
    __device__ __forceinline__ void ktile(float (&acc)[MI][BN / 8][4], int s, bool later, int& prev,
                                          const Release& release) const {
        if constexpr (SPLIT) {   // the k tile's three products into fresh partial sums, then an FP32 add
            float part[MI][BN / 8][4];
            gl_wgmma_ktile<BN, MI, KSTEPS, A_COL, B_COL, LO_A, LO_B>(part, descs, s * A_STAGE_B, s * B_STAGE_B);
            release(s);          // its wgmmas are done: the stage is free while the sums are added
            gl_add_acc(acc, part);
        } else {
            gl_wgmma_ktile<BN, MI, KSTEPS, A_COL, B_COL>(acc, descs, s * A_STAGE_B, s * B_STAGE_B);
            if (later) release(prev);
            prev = s;
        }
    }

    template <typename Release>
    __device__ __forceinline__ void drain(float (&acc)[MI][BN / 8][4], int prev, const Release& release) const {
        if constexpr (!SPLIT) {
            gl_wgmma_wait<0>();
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) gl_fence_acc(acc[mi]);
            release(prev);
        }
    }
};
