// group_maps.cuh — rung 26's second entry point over K (GROUP_K=1, the weight gradient): the kernel
// that writes each group's own tensor maps before the GEMM (launched by core/launch.py,
// Plan.launch_groups). Included at the END of the rung's file, after the GEMM's entry (ws_entry.cuh),
// so that the cubin lists the GEMM first.
#pragma once
#if GROUP_K
// ---- the groups' tensor maps, launched before the GEMM on the same stream ------------------------------
// For each group g, copies of A's and B's maps (the host's, over all of K) whose K extent is cut at
// the group's end (ends[g], clamped to K), into dst[2g] and dst[2g + 1]: the GEMM loads group g's k
// tiles from its first k through these, and the copy engine fills zeros past the end instead of
// reading the next group's k. One warp per map, as the PTX ISA's device-side map update goes: the
// map copied into shared memory, its extent replaced there by one lane, then the warp's
// tensormap.cp_fenceproxy copies it to global memory with a release of the tensormap proxy, which
// the GEMM's producer acquires (gl_tensormap_acquire) before its first load through it.
template <int ORD>
__device__ __forceinline__ void gl_tensormap_set_dim(unsigned smem_map, int extent) {
    asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], %1, %2;\n"
                 :: "r"(smem_map), "n"(ORD), "r"(extent) : "memory");
}
// ints: the groups' cumulative end k; n: K
extern "C" __global__ void __launch_bounds__(64) group_maps(const __grid_constant__ GlTensorMap tmA,
                                                            const __grid_constant__ GlTensorMap tmB,
                                                            const int* __restrict__ ints, int G, int n,
                                                            GlTensorMap* __restrict__ dst) {
    // the GEMM after it is launched programmatically (core/launch.py): its blocks may start their
    // prologue (barriers, the schedule) now, and wait in gl_pdl_wait for these maps
    gl_pdl_trigger();
    __shared__ alignas(128) GlTensorMap maps[2];   // each on 128 bytes, as the tensormap instructions take it
    const int g = (int)blockIdx.x, operand = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    if (g >= G) return;
    const GlTensorMap& src = operand ? tmB : tmA;
    if (lane < 16) maps[operand].opaque[lane] = src.opaque[lane];
    __syncwarp();
    const unsigned smem_map = static_cast<unsigned>(__cvta_generic_to_shared(&maps[operand]));
    // K, the outer dimension of both (a column-major A, a row-major B); an extent of at least 1 (an
    // empty group loads nothing)
    const int extent = min(max(ints[g], 0), n);
    if (lane == 0) gl_tensormap_set_dim<1>(smem_map, max(extent, 1));
    __syncwarp();
    asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], 128;\n"
                 :: "l"(reinterpret_cast<unsigned long long>(dst + 2 * g + operand)), "r"(smem_map) : "memory");
}
#endif
