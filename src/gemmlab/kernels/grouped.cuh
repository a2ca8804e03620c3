// grouped.cuh — the grouped rungs' tile scheduler part and their arguments (rung 26, wgmma_grouped,
// and rung 27, wgmma_grouped_fp8): the groups' kernel arguments (GL_GROUP_PARAMS, which ws_entry.cuh
// puts after the maps), the schedule type (schedule.cuh: GlGroupedSchedule over groups of rows, or
// over K with GROUP_K=1, the weight gradient's GlGroupedKSchedule) and the bytes of its shared
// group table, which ws_entry.cuh fills after the barriers. The includer defines BM, BN, BK,
// CLUSTER, GROUP_CAP, GROUP_K and THREADS and includes ws.cuh (GROUP_U, STREAMK) first.
#pragma once
// the groups' arguments, after the maps (ws_entry.cuh): G, B's group stride (elements), the G ints
// on the device (cumulative ends, or counts with gl_group_rows > 0: rows per group of the masked form)
// (over K: gl_bsb is C's group stride, and the groups' maps follow, written by group_maps)
#define GL_GROUP_PARAMS , int gl_groups, long long gl_bsb, const int* __restrict__ gl_group_src, int gl_group_rows, \
                        const GlTensorMap* __restrict__ gl_group_maps

#if GROUP_K
using Schedule = GlGroupedKSchedule<BM, BN, BK, CLUSTER, GROUP_U>;
constexpr int GROUP_TABLE_B = 0;
#else
using Schedule = GlGroupedSchedule<BM, BN, BK, CLUSTER, GROUP_U, STREAMK>;
// the group table (GlGroupedSchedule::fill) after the barriers
constexpr int GROUP_TABLE_B = 4 * Schedule::table_ints(GROUP_CAP, THREADS / 32);
#endif
