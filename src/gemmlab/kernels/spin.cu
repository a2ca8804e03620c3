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
//
// flush_read: the cold-L2 flush. Every thread reads its share of a buffer of twice the L2 size,
// so the lines of the last launch's operands (and its dirty output, written back here) make room
// for clean lines of the buffer. A memset did the same eviction but left ~L2-size of DIRTY lines,
// whose write-back then ran inside the next timed interval: at bf16 128x14336x4096 (117 MB
// streamed, a short launch) every contender took markedly longer
// (benchmarks/results/h100_flushprobe_{write,read}_bf16_128x14336x4096.json), while 4096^3 barely
// moved (h100_flushprobe_*_bf16_4096.json).
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

extern "C" __global__ void flush_read(const uint4* buf, unsigned long long n, uint4* sink)
{
    uint4 acc = make_uint4(0u, 0u, 0u, 0u);
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        const uint4 v = __ldcg(buf + i);      // allocates in L2 (not L1), as an operand's load would
        acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
    }
    if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u)   // never true for the zero buffer: keeps the loads
        sink[0] = acc;
}
