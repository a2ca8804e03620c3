"""What the probes that time candidates share: the one timing engine (cold L2, a spin before every
launch, NVML clocks sampled while the GPU works) with its result document, and one round of
candidates timed together, as TFLOP/s of a product of ``flop`` operations."""
from __future__ import annotations

from gemmlab.analysis import environment
from gemmlab.core.driver import device_info
from gemmlab.measure.arrays import Lib
from gemmlab.measure.gpu_timing import CudaDevice, NvmlClocks
from gemmlab.measure.timing import Engine, Settings


def engine_and_doc(max_samples: int = 30, time_cap_s: float = 1.5):
    """The timing engine on GPU 0 and the result document a probe fills (its ``runs`` empty)."""
    info = device_info(0)
    st = Settings(l2="cold", max_samples=max_samples, time_cap_s=time_cap_s)
    engine = Engine(CudaDevice(Lib("torch"), 0, info.l2_bytes, flush=True, spin=st.spin), st, NvmlClocks(0))
    return engine, {"gpu": info.name, "environment": environment.collect(0), "settings": st.as_dict(), "runs": []}


def measure(engine, cands: list, flop: float) -> tuple[dict, dict]:
    """The candidates warmed up and timed together: (each one's samples as a dict, its TFLOP/s)."""
    engine.warm_up(cands)
    run = engine.measure(cands)
    res = {n: s.as_dict() for n, s in run.samples.items()}
    return res, {n: flop / (s["median_ms"] / 1e3) / 1e12 for n, s in res.items() if s.get("median_ms")}
