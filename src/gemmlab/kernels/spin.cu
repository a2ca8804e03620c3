// spin.cu — not a rung: the timing engine's idle kernel (gemmlab/measure/timing.py).
//
// One thread spins on the global nanosecond timer for a given time. Enqueued right before a
// timed launch's start event, it keeps the GPU busy while the host enqueues the event and the
// launch, so the interval never contains host latency (an idle GPU would fire the start event
// at once and then wait for the host).
extern "C" __global__ void spin(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
