"""The timing engine on the GPU: cuBLAS timed first in a round, after a rung, and alone agrees
within 3 % (the bias the spin kernel removes), and the spin kernel really keeps the GPU busy."""

from __future__ import annotations

import statistics

import pytest

pytestmark = pytest.mark.gpu

N = 4096  # fp32 SGEMM ~2.8 ms on an H100: long enough to time, short enough for many samples


@pytest.fixture(scope="module")
def setup():
    from gemmlab.core import api
    from gemmlab.core.driver import device_info
    from gemmlab.measure.arrays import Lib, TrueFP32, available_libs, choose_lib, make_operands
    from gemmlab.measure.gpu_timing import CudaDevice
    from gemmlab.measure.timing import Candidate

    L = Lib(choose_lib(None, "fp32", available_libs()))
    info = device_info(0)
    ops = make_operands(L, N, N, N, "fp32", seed=11, beta_nonzero=False)
    plan = api.plan(ops.a, ops.b, ops.c, kernel="warp_tiling")
    dev = CudaDevice(L, 0, info.l2_bytes)
    with TrueFP32(L):
        yield dict(
            dev=dev,
            cublas=Candidate("cublas", lambda: L.matmul(ops.a, ops.b, out=ops.c)),
            rung=Candidate("warp_tiling", lambda: plan.run(dev.stream)),
        )


def test_cublas_first_in_a_round_after_a_rung_and_alone_agree_within_3_percent(setup):
    from gemmlab.measure.timing import Engine, Settings

    eng = Engine(setup["dev"], Settings(min_samples=20, max_samples=40, target_error=0.002, warmup=3))
    eng.warm_up([setup["cublas"], setup["rung"]])
    run = eng.measure([setup["cublas"], setup["rung"]])
    times = run.samples["cublas"].times_ms
    first = [t for t, r in zip(times, run.rounds) if r.order[0] == "cublas"]
    after = [t for t, r in zip(times, run.rounds) if r.order[0] != "cublas"]
    alone = eng.isolated(setup["cublas"]).median
    m_first, m_after = statistics.median(first), statistics.median(after)
    for m in (m_first, m_after):
        assert abs(m / alone - 1) <= 0.03, f"first {m_first:.4f} ms, after a rung {m_after:.4f} ms, alone {alone:.4f} ms"


def test_the_spin_kernel_keeps_the_gpu_busy_for_the_time_asked(setup):
    dev = setup["dev"]
    s, e = dev.new_event(), dev.new_event()
    dev.record(s)
    dev.spin(2_000_000)   # 2 ms
    dev.record(e)
    dev.synchronize()
    assert 1.9 <= dev.elapsed_ms(s, e) <= 2.5


def test_the_cold_l2_flush_reads_its_whole_buffer_and_writes_nothing_else():
    """flush_read XORs what each thread reads and writes its sink only for one 16-byte pattern: a
    pattern in the buffer's LAST element reaches the sink (the loop covers the buffer), a zero
    buffer leaves the sink alone (the flush leaves no dirty line of its own)."""
    import torch

    from gemmlab.core.compile import compile_source
    from gemmlab.core.driver import device_info
    from gemmlab.core.launch import current_stream, load_compiled
    from gemmlab.measure.gpu_timing import launch_l2_flush

    info = device_info(0)
    fn = load_compiled(compile_source("spin.cu", "flush_read", info.arch), 0, "spin.cu")
    words = 2 * info.l2_bytes // 4
    pattern = torch.tensor([0x9E3779B9, 0x7F4A7C15, 5, 7], dtype=torch.int64).to(torch.int32)

    def flush(buf, sink):
        launch_l2_flush(fn, 0, current_stream("torch", 0), info.sm_count, buf.data_ptr(), 4 * buf.numel(),
                        sink.data_ptr())
        torch.cuda.synchronize()

    buf = torch.zeros(words, dtype=torch.int32, device="cuda")
    sink = torch.zeros(4, dtype=torch.int32, device="cuda")
    flush(buf, sink)
    assert int(sink.abs().sum()) == 0 and int(buf.abs().sum()) == 0
    buf[-4:] = pattern.cuda()
    flush(buf, sink)
    assert sink.cpu().tolist() == pattern.tolist()


def test_sustained_blocks_time_the_same_calls_and_read_the_boards_energy(setup):
    """Sustained mode on the GPU: blocks of ~0.5 s of back-to-back SGEMMs give a time per call within
    10 % of the sampled one (the cold flush and the clock differ, the work does not), and NVML's
    energy counter (~100 ms steps) gives each block a board power between idle and the cap and an
    energy per call."""
    from gemmlab.analysis import environment
    from gemmlab.measure.gpu_timing import NvmlClocks, NvmlEnergy
    from gemmlab.measure.timing import Engine, Settings

    if environment.total_energy_mj(0) is None:
        pytest.skip("NVML reports no energy counter on this GPU or driver")
    sampled = Engine(setup["dev"], Settings(min_samples=5, max_samples=10, warmup=2)).isolated(setup["cublas"]).median
    eng = Engine(setup["dev"], Settings(sustained_s=0.5, sustained_rounds=2), NvmlClocks(0), NvmlEnergy(0))
    run = eng.measure([setup["cublas"], setup["rung"]])
    s = run.samples["cublas"]
    assert s.n == 2 and abs(s.median / sampled - 1) <= 0.10, f"sustained {s.median:.4f} ms, sampled {sampled:.4f} ms"
    for b in s.blocks + run.samples["warp_tiling"].blocks:
        assert b.calls >= 50 and not b.host_bound
        assert b.mj_per_call > 0 and 50 <= b.watts <= 1200 and b.sm_mhz > 0
