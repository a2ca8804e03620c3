// ws_entry.cuh — the kernel entry of the warp-specialized persistent WGMMA rungs (21 wgmma_ws,
// 22 wgmma_tf32): the shared-memory carve-up, the mbarriers' initialization, and the split into the
// producer warpgroup (setmaxnreg down, ring.cuh's produce) and the consumer warpgroups (setmaxnreg up,
// ws_consume.cuh's consume of the rung's parts). Included at the END of the rung's file, after it
// has defined THREADS, CLUSTER, STAGES, A_STAGE_B, PIPE_B, CONSUMERS, CWARPS (ring.cuh adds
// FULL_ARRIVALS, EMPTY_ARRIVALS, ws.cuh PRODUCER_REGS, CONSUMER_REGS) and chosen its parts, the types
// ``Schedule`` (schedule.cuh), ``Mainloop`` (mainloop.cuh's, or rung 22's register-A one) and
// ``Epilogue`` (ws_epi16.cuh's GlWsEpi16 or ws_epi32.cuh's GlWsEpi32; its EPI_B: the staging's bytes,
// 0 for none); ws_consume.cuh gives
//   consume<Schedule, Mainloop, Epilogue>(sm, sched, rank, warp, lane, M, N, ep, sc, C, ldc, sk_ws[, &tmC])
//   (C of C's type TC; ep: epilogue.cuh's functor; with GL_C_COL, rung 22's column-major C of the
//   transposed problem, the stored rows are the kernel's columns).
// GL_WS_C_MAP 1 (rung 21): the kernel takes a third tensor map, of C, after A's and B's (its TMA
// store epilogue), and passes it to consume last; the host always passes its 128 bytes.
// STREAMK 1 (ws.cuh): the next argument is the stream-K workspace (its flags zeroed by the host
// before the launch); without it consume gets a null pointer it never reads.
// GL_BATCHED 1 (hopper.cuh, rung 21): then the batch's count and strides (GL_BATCH_PARAMS), which
// the Schedule holds; GL_GROUPED 1 (rung 26): the groups' (GL_GROUP_PARAMS), from which every thread
// fills the grouped schedule's table in shared memory before the barriers' initialization; then the epilogue's (GL_EPI_PARAMS); last a scaled matmul's two scale pointers
// (GL_SCALE_PARAMS, scales.cuh: rung 25).
#pragma once
#ifndef GL_WS_C_MAP
#define GL_WS_C_MAP 0
#endif
#ifndef GL_C_COL
#define GL_C_COL 0
#endif
#ifndef GL_GROUPED
#define GL_GROUPED 0
#endif
#ifndef GL_GROUP_PARAMS
#define GL_GROUP_PARAMS
#endif
#if CLUSTER > 1
#define GL_CLUSTER_DIMS __cluster_dims__(CLUSTER, 1, 1)
#else
#define GL_CLUSTER_DIMS
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1) GL_CLUSTER_DIMS
gemm(int M, int N, int K, float alpha, const T* A, int lda, const T* B, int ldb, float beta, TC* C, int ldc,
     const __grid_constant__ GlTensorMap tmA, const __grid_constant__ GlTensorMap tmB
#if GL_WS_C_MAP
     , const __grid_constant__ GlTensorMap tmC
#endif
#if STREAMK
     , float* __restrict__ sk_ws
#endif
     GL_BATCH_PARAMS GL_GROUP_PARAMS GL_EPI_PARAMS GL_SCALE_PARAMS)
{
    gl_pdl_wait();   // after an operand copy launched programmatically: the copy done (pack.cu)
    // One raw buffer: [STAGES A tiles][STAGES B tiles][epilogue staging, Epilogue::EPI_B bytes], then
    // full[STAGES] and empty[STAGES]. Its base is rounded up to the swizzle's 1024 bytes (the same
    // offset in every CTA: multicast writes each CTA's copy at the offset the issuing CTA names).
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
    unsigned base = (raw + 1023u) & ~1023u;
    // opaque from here on: ptxas otherwise recomputed the base from the cluster CTA id in every k
    // tile of the consumers' loop (a few instructions per trip) instead of keeping one register
    asm("" : "+r"(base));
    const Smem sm{base, base + STAGES * A_STAGE_B, base + PIPE_B, base + PIPE_B + Epilogue::EPI_B};
    const int tid = threadIdx.x, warp = tid / 32;
    const int rank = CLUSTER > 1 ? (int)gl_cluster_rank() : 0;
#if GL_GROUPED == 2
    const Schedule sched(M, N, K, gl_groups, gl_bsb, gl_group_src, gl_group_maps);
#elif GL_GROUPED
    // the group table after the barriers, filled by every thread (its last write is ordered before
    // any read by the barrier below)
    int* const group_table = reinterpret_cast<int*>(smem_raw + (sm.bars + 16u * STAGES - raw));
    Schedule::fill(group_table, gl_group_src, gl_groups, gl_group_rows, M, N);
#elif GL_BATCHED
    const Schedule sched(M, N, K, gl_batch, gl_bsa, gl_bsb, gl_bsc);
#else
    const Schedule sched(M, N, K);
#endif
#if !STREAMK
    float* const sk_ws = nullptr;
#endif

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            gl_mbar_init(sm.full(s), FULL_ARRIVALS);
            gl_mbar_init(sm.empty(s), EMPTY_ARRIVALS);
        }
        // the initialized barriers visible to the copy engine and to the cluster before any use
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    // with a cluster: the peer's multicasts and arrivals may target this CTA's barriers only once
    // they are initialized
    if (CLUSTER > 1) gl_cluster_sync();
    else __syncthreads();
#if GL_GROUPED == 1
    const Schedule sched(group_table, gl_groups, gl_group_rows, N, K, gl_bsb, gl_group_maps);
#endif

    // One if/else on the warpgroup's role, a setmaxnreg at the top of each branch.
    if (warp >= CWARPS) {
        gl_setmaxnreg_dec<PRODUCER_REGS>();
        produce(sm, sched, rank, tid - CONSUMERS, M, N, K, A, lda, B, ldb, &tmA, &tmB);
    } else {
        gl_setmaxnreg_inc<CONSUMER_REGS>();
        const GlScales sc{GL_SCALE_ARGS};
        consume<Schedule, Mainloop, Epilogue>(sm, sched, rank, warp, tid % 32, M, N,
                                              GL_EPI_MAKE(sc.alpha(alpha), beta, GL_C_COL ? N : M, GL_C_COL ? M : N),
                                              sc, C, ldc, sk_ws
#if GL_WS_C_MAP
                , &tmC
#endif
                );
    }
}
