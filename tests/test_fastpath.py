"""gemmlab.gemm's fast path (core/fastpath.py) and the stream rules of a launch.

On the CPU, with stand-in arrays and a stand-in plan: what a call's signature holds, and what a hit
still checks on every call. On the GPU: repeated calls reuse one plan and stay correct on new data,
every bad input still raises, every rung captures into a CUDA graph once compiled, the texture
cache never synchronizes the device and is safe from several threads, and a CUDA Array Interface
operand's producer stream is waited for.
"""

from __future__ import annotations

import time

import pytest

import gemmlab
from gemmlab.core import fastpath, registry, textures
from gemmlab.core.problem import ArrayInfo, GemmProblem, describe_array


# ---- CPU: stand-ins -------------------------------------------------------------------------
class _Data:
    def __init__(self, ptr, device_id=0):
        self.ptr, self.device_id = ptr, device_id


class FakeArray:
    """Reads like a CuPy array to the signature: data.ptr, data.device_id, shape, strides, dtype."""

    def __init__(self, ptr, shape=(8, 8), strides=(32, 4), dtype="float32", device=0):
        self.data, self.shape, self.strides, self.dtype = _Data(ptr, device), shape, strides, dtype


class FakePlan:
    def __init__(self):
        self.launches = []

    def launch(self, a_ptr, b_ptr, c_ptr, alpha, beta):
        self.launches.append((a_ptr, b_ptr, c_ptr, alpha, beta))
        return True


def _info(ptr, col_major=False):
    return ArrayInfo(ptr, 8, 8, 8, col_major, "fp32", 0, "cupy")


def _remembered(c_col=False):
    """Three fake operands of an 8x8x8 fp32 problem whose plan is remembered."""
    fastpath.forget()
    a, b, c = FakeArray(0x10000), FakeArray(0x20000), FakeArray(0x30000)
    problem = GemmProblem(8, 8, 8, "fp32", _info(a.data.ptr), _info(b.data.ptr), _info(c.data.ptr, c_col), 1.0, 0.0)
    plan = FakePlan()
    fastpath.remember((a, b, c), "auto", None, plan, problem)
    return (a, b, c), plan


def test_an_array_type_never_seen_has_no_signature():
    class Unseen:
        pass

    assert fastpath.signature(Unseen(), Unseen(), Unseen(), "auto", None) is None


def test_the_signature_tells_apart_shape_strides_dtype_device_and_alignment():
    (a, b, c), _ = _remembered()
    key = fastpath.signature(a, b, c, "auto", None)[0]
    others = [FakeArray(0x30000, shape=(8, 4)), FakeArray(0x30000, strides=(4, 32)),
              FakeArray(0x30000, dtype="float16"), FakeArray(0x30000, device=1), FakeArray(0x30008)]
    for other in others:
        assert fastpath.signature(a, b, other, "auto", None)[0] != key
    assert fastpath.signature(a, b, FakeArray(0x90000), "auto", None)[0] == key   # another aligned pointer


def test_kernel_and_config_are_part_of_the_signature_and_a_dict_config_is_order_free():
    (a, b, c), _ = _remembered()
    k1 = fastpath.signature(a, b, c, "auto", {"BM": 64, "BN": 32})[0]
    assert k1 == fastpath.signature(a, b, c, "auto", {"BN": 32, "BM": 64})[0]
    assert k1 != fastpath.signature(a, b, c, "naive", {"BM": 64, "BN": 32})[0]


def test_an_unhashable_kernel_or_config_takes_the_full_path():
    (a, b, c), _ = _remembered()
    assert fastpath.signature(a, b, c, ["auto"], None) is None
    assert fastpath.signature(a, b, c, "auto", {"BM": [64]}) is None


def test_a_hit_launches_the_remembered_plan_on_the_new_pointers():
    (a, b, c), plan = _remembered()
    a2, b2, c2 = FakeArray(0x40000), FakeArray(0x50000), FakeArray(0x60000)
    assert fastpath.run(a2, b2, c2, "auto", None, None, 2.0, 0.5)
    assert plan.launches == [(0x40000, 0x50000, 0x60000, 2.0, 0.5)]


def test_a_hit_with_a_column_major_c_hands_the_kernel_b_then_a():
    (a, b, c), plan = _remembered(c_col=True)
    assert fastpath.run(a, b, c, "auto", None, None, 1.0, 0.0)
    assert plan.launches == [(0x20000, 0x10000, 0x30000, 1.0, 0.0)]


def test_a_hit_whose_c_overlaps_an_input_goes_to_the_full_path():
    (a, b, c), plan = _remembered()
    overlapping = FakeArray(a.data.ptr + 64)   # inside a's 256 bytes, still 16-byte aligned
    assert not fastpath.run(a, b, overlapping, "auto", None, None, 1.0, 0.0)
    assert plan.launches == []


@pytest.mark.parametrize("alpha", [True, "2", 1 + 0j, None])
def test_a_hit_with_an_alpha_that_is_not_a_plain_number_goes_to_the_full_path(alpha):
    (a, b, c), plan = _remembered()
    assert not fastpath.run(a, b, c, "auto", None, None, alpha, 0.0)
    assert plan.launches == []


def test_gemms_one_call_fast_path_launches_a_hit_and_declines_a_miss():
    (a, b, c), plan = _remembered()
    a2, b2, c2 = FakeArray(0x40000), FakeArray(0x50000), FakeArray(0x60000)
    assert fastpath.run(a2, b2, c2, "auto", None, None, 2.0, 0.5)
    assert not fastpath.run(a2, b2, c2, "naive", None, None, 1.0, 0.0)                 # another kernel
    assert not fastpath.run(a2, b2, FakeArray(0x60000, shape=(8, 4)), "auto", None, None, 1.0, 0.0)
    assert plan.launches == [(0x40000, 0x50000, 0x60000, 2.0, 0.5)]


def test_operands_of_two_array_types_of_one_library_share_the_flat_signature():
    class Subclass(FakeArray):   # as torch.nn.Parameter is to torch.Tensor
        pass

    (a, b, c), plan = _remembered()
    fastpath.register(Subclass(0), "cupy")
    mixed = fastpath.signature(a, Subclass(0x20000), c, "auto", None)
    assert mixed == fastpath.signature(a, b, c, "auto", None)
    assert fastpath.run(a, Subclass(0x50000), c, "auto", None, None, 1.0, 0.0)
    assert plan.launches == [(0x10000, 0x50000, 0x30000, 1.0, 0.0)]


def test_a_remembered_product_allocates_and_launches_without_the_full_path():
    (a, b, c), plan = _remembered()
    fresh = FakeArray(0x70000)
    fastpath.remember_product(a, b, c, "auto", None, lambda: fresh, "cupy")
    a2, b2 = FakeArray(0x40000), FakeArray(0x50000)
    assert fastpath.product(a2, b2, "auto", None) is fresh
    assert plan.launches == [(0x40000, 0x50000, 0x70000, 1.0, 0.0)]
    assert fastpath.product(a2, b2, "naive", None) is None   # another kernel: not remembered


def test_a_product_remembered_with_an_output_dtype_serves_only_calls_asking_for_it():
    (a, b, c), plan = _remembered()
    fresh = FakeArray(0x70000)
    fastpath.remember_product(a, b, c, "auto", None, lambda: fresh, "cupy", None, "fp32")
    a2, b2 = FakeArray(0x40000), FakeArray(0x50000)
    assert fastpath.product(a2, b2, "auto", None) is None            # the operands' own dtype: not this one
    assert fastpath.product(a2, b2, "auto", None, None, "fp32") is fresh


class _CAI:
    def __init__(self, stream):
        self.__cuda_array_interface__ = {"shape": (4, 4), "typestr": "<f4", "data": (0x1000, False),
                                         "version": 3, "strides": None, "stream": stream}


def test_a_cuda_array_interface_stream_0_is_refused_as_the_protocol_says():
    with pytest.raises(ValueError, match="stream 0, which the CUDA Array Interface forbids"):
        describe_array("a", _CAI(0))


def test_a_cuda_array_interface_stream_that_is_not_an_int_is_refused():
    with pytest.raises(TypeError, match=r"\['stream'\] must be an int or None"):
        describe_array("b", _CAI("default"))


# ---- GPU ------------------------------------------------------------------------------------
def _cupy():
    return pytest.importorskip("cupy")


def _rel_err(cp, c, a, b):
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    return float(cp.linalg.norm(c.astype(cp.float64) - ref) / cp.linalg.norm(ref))


@pytest.mark.gpu
def test_repeated_cupy_calls_build_one_plan_and_stay_correct_on_new_data(plan_count):
    cp = _cupy()
    for _ in range(4):
        a, b = cp.random.standard_normal((97, 61), cp.float32), cp.random.standard_normal((61, 33), cp.float32)
        c = cp.full((97, 33), cp.nan, cp.float32)
        gemmlab.gemm(a, b, c, kernel="warp_tiling")
        assert _rel_err(cp, c, a, b) < 1e-5
    assert len(plan_count) == 1


@pytest.mark.gpu
def test_repeated_torch_calls_build_one_plan_and_stay_correct_on_new_data(plan_count):
    torch = pytest.importorskip("torch")
    for _ in range(4):
        a = torch.randn(70, 50, device="cuda", dtype=torch.float16)
        b = torch.randn(50, 90, device="cuda", dtype=torch.float16)
        c = gemmlab.matmul(a, b)
        ref = a.double() @ b.double()
        assert float((c.double() - ref).norm() / ref.norm()) < 1e-2
    assert len(plan_count) == 1


@pytest.mark.gpu
def test_a_view_of_another_alignment_gets_its_own_plan_and_is_correct(plan_count):
    cp = _cupy()
    flat = cp.random.standard_normal(1 + 64 * 64, cp.float32)
    b = cp.random.standard_normal((64, 64), cp.float32)
    for offset in (0, 1):   # 16-byte aligned, then 4 bytes past it: the scalar-load variant
        a = flat[offset:offset + 64 * 64].reshape(64, 64)
        c = cp.empty((64, 64), cp.float32)
        gemmlab.gemm(a, b, c, kernel="vectorized")
        assert _rel_err(cp, c, a, b) < 1e-5
    assert len(plan_count) == 2


@pytest.mark.gpu
def test_after_a_hit_an_output_aliasing_an_input_is_still_refused():
    cp = _cupy()
    a, b, c = (cp.random.standard_normal((32, 32), cp.float32) for _ in range(3))
    gemmlab.gemm(a, b, c)
    with pytest.raises(ValueError, match="c overlaps a in memory"):
        gemmlab.gemm(a, b, a)


@pytest.mark.gpu
def test_after_a_hit_a_bad_alpha_is_still_refused():
    cp = _cupy()
    a, b, c = (cp.random.standard_normal((32, 32), cp.float32) for _ in range(3))
    gemmlab.gemm(a, b, c)
    with pytest.raises(TypeError, match="alpha must be a real number"):
        gemmlab.gemm(a, b, c, alpha="2")


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype", [(r.slug, r.dtypes[0]) for r in gemmlab.kernels()])
def test_every_rung_captures_into_a_cuda_graph_once_compiled(slug, dtype):
    torch = pytest.importorskip("torch")
    tdt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a = torch.randn(77, 45, device="cuda", dtype=tdt)
    b = torch.randn(45, 38, device="cuda", dtype=tdt)
    c = torch.empty(77, 38, device="cuda", dtype=tdt)
    gemmlab.gemm(a, b, c, kernel=slug)   # compiles and remembers the plan
    torch.cuda.synchronize()
    g, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(g, stream=stream):
        gemmlab.gemm(a, b, c, kernel=slug, alpha=2.0)
    c.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    ref = 2.0 * (a.double() @ b.double())
    exact_fp32 = dtype == "fp32" and "fp32" in registry.get(slug).precisions   # not TF32
    assert float((c.double() - ref).norm() / ref.norm()) < (1e-5 if exact_fp32 else 1e-2)


@pytest.mark.gpu
def test_a_call_made_while_another_context_is_current_is_still_launched_and_right(another_context):
    cp = _cupy()
    a, b = cp.random.standard_normal((40, 24), cp.float32), cp.random.standard_normal((24, 56), cp.float32)
    c = cp.full((40, 56), cp.nan, cp.float32)
    gemmlab.gemm(a, b, c, kernel="tile_2d")                 # plan made, primary context current
    c.fill(cp.nan)
    cp.cuda.Device().synchronize()
    with another_context():        # a second context of the device is current (CuPy's kernels too
        gemmlab.gemm(a, b, c, kernel="tile_2d", alpha=-1.0)   # would be refused in it)
    cp.cuda.Device().synchronize()
    assert _rel_err(cp, -c, a, b) < 1e-5


_SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


def _spin(cp, stream, ms: float):
    """Keep ``stream`` busy for about ``ms`` milliseconds (one thread spinning on clock64)."""
    kernel = cp.RawKernel(_SPIN, "spin")
    rate_khz = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["clockRate"]
    with stream:
        kernel((1,), (1,), (cp.int64(int(ms * rate_khz)),))


@pytest.mark.gpu
def test_texture_cache_eviction_never_waits_for_the_device():
    cp = _cupy()
    pairs = [(cp.random.standard_normal((24, 40), cp.float32), cp.random.standard_normal((40, 16), cp.float32))
             for _ in range(textures.CAPACITY)]   # 2 textures each: the cache must evict
    outs = [cp.empty((24, 16), cp.float32) for _ in pairs]
    gemmlab.gemm(*pairs[0], outs[0], kernel="texture")   # compiled, plan remembered
    cp.cuda.Device().synchronize()
    busy, work = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    _spin(cp, busy, 2000.0)
    t0 = time.perf_counter()
    with work:
        for (a, b), c in zip(pairs, outs):
            gemmlab.gemm(a, b, c, kernel="texture")
    host_s = time.perf_counter() - t0
    busy_still = not busy.done
    cp.cuda.Device().synchronize()
    assert busy_still and host_s < 1.0, f"the calls took {host_s:.2f} s of host time while another stream was busy"
    assert max(_rel_err(cp, c, a, b) for (a, b), c in zip(pairs, outs)) < 1e-5


@pytest.mark.gpu
def test_texture_rungs_are_correct_from_several_threads_at_once(on_threads):
    cp = _cupy()

    def call(stream):
        a = cp.random.standard_normal((33, 20), cp.float32)
        b = cp.random.standard_normal((20, 28), cp.float32)
        c = cp.empty((33, 28), cp.float32)
        gemmlab.gemm(a, b, c, kernel="vec_texture")
        stream.synchronize()
        return _rel_err(cp, c, a, b)

    results = on_threads(call, threads=6, calls=12)
    assert len(results) == 72 and max(results) < 1e-5


class _Exported:
    """A bare CUDA Array Interface object over a CuPy array, naming the stream it was written on."""

    def __init__(self, x, stream):
        cai = dict(x.__cuda_array_interface__)
        cai["stream"] = stream
        self.__cuda_array_interface__ = cai


@pytest.mark.gpu
def test_a_cuda_array_interface_operand_is_read_after_its_producer_stream_writes_it():
    cp = _cupy()
    src = cp.random.standard_normal((256, 128), cp.float32)
    b = cp.random.standard_normal((128, 64), cp.float32)
    a = cp.zeros_like(src)
    c = cp.empty((256, 64), cp.float32)
    gemmlab.gemm(a, b, c, kernel="tile_2d")   # compiled before the timed part
    cp.cuda.Device().synchronize()
    producer = cp.cuda.Stream(non_blocking=True)
    _spin(cp, producer, 200.0)
    with producer:
        a[...] = src                           # lands only after the spin
    gemmlab.gemm(_Exported(a, producer.ptr), b, c, kernel="tile_2d")
    cp.cuda.Device().synchronize()
    assert _rel_err(cp, c, src, b) < 1e-5


@pytest.mark.gpu
def test_the_overhead_benchmark_verifies_and_times_every_contender():
    from gemmlab.bench.overhead import run_overhead

    result = run_overhead((32, 32, 32), "fp32", "auto", calls=5, batches=2)
    for entry in result["libs"]:
        assert entry["verified"]
        assert len(entry["results"]) == 4
        assert all(r["median_us"] > 0 for r in entry["results"].values())
