// spin.cu — not a rung: the timing engine's idle kernels (gemmlab/measure/timing.py).
//
// Enqueued right before a timed launch's start event, a spin kernel keeps the GPU busy while the
// host enqueues the event and the launch, so the interval never contains host latency (an idle
// GPU would fire the start event at once and then wait for the host).
//
// spin: one thread spins on the global nanosecond timer. The SMs and the memory idle meanwhile.
// spin_busy: one block per SM spins the same way while every thread keeps reading a small
// buffer, so the SMs and the memory system stay active as under a back-to-back workload; the
// buffer is small (a few MB) next to the L2, so a cold-L2 flush before it stays a flush.
extern "C" __global__ void spin(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

extern "C" __global__ void spin_busy(unsigned long long ns, const float4* buf, unsigned long long n, float4* sink)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    do {
        for (int r = 0; r < 8; ++r, i += stride) {
            const float4 v = __ldcg(buf + i % n);   // L2, not L1: the memory system stays awake
            acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
    if (acc.x == 1.2345f && acc.y == -1.f)   // never true for the zero buffer: keeps the loads
        sink[0] = acc;
}
