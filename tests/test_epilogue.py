"""The fused epilogue, c = act(alpha * a @ b + beta * c + bias): what a call may pass (CPU, with
stand-in device arrays), that every rung compiles every epilogue without spilling (CPU), and that
every rung computes it (GPU: fresh random data, odd shapes, layouts, alpha/beta, NaN-poisoned C,
each activation, each bias type, against the float64 reference of gemmlab.measure.verify)."""

import itertools

import numpy as np
import pytest

import gemmlab
from gemmlab.core import epilogue
from gemmlab.core.epilogue import ACTIVATIONS, Epilogue
from gemmlab.core.precision import applies
from gemmlab.core.variant import SpillError, Variant, fused_configs
from gemmlab.measure.verify import verify
from test_bad_input import FakeDeviceArray, fake_devices  # noqa: F401  (the fixture is autouse)


def arr(*shape, **kw):
    return FakeDeviceArray(shape, **kw)


# ---- what a call may pass ------------------------------------------------------------------------
def test_unknown_activation_is_refused_naming_the_ones_gemmlab_fuses():
    with pytest.raises(ValueError, match=r"unknown activation 'tanh'; gemmlab fuses relu, gelu, gelu_tanh, silu"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), activation="tanh")


def test_activation_must_be_a_string():
    with pytest.raises(TypeError, match="activation must be a string"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), activation=1)


def test_bias_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match=r"bias has length 4 but c has N = 3 columns"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), bias=arr(4))


def test_bias_must_be_one_dimensional():
    with pytest.raises(ValueError, match=r"bias must be 1-D, got 2-D with shape \(1, 3\)"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), bias=arr(1, 3))


def test_bias_of_another_dtype_than_the_operands_or_float32_is_refused():
    a, b, c = arr(4, 5, typestr="<f2"), arr(5, 3, typestr="<f2"), arr(4, 3, typestr="<f2")
    with pytest.raises(TypeError, match=r"bias is fp64|bias has"):
        gemmlab.gemm(a, b, c, bias=arr(3, typestr="<f8"))


def test_float32_bias_is_accepted_beside_16_bit_operands_and_the_same_dtype_too():
    info = epilogue.check_bias(arr(3, typestr="<f4"), 3, "fp16", 0, "cai")
    assert epilogue.make(None, info, "fp16", False) == Epilogue(None, "fp32")
    info = epilogue.check_bias(arr(3, typestr="<f2"), 3, "fp16", 0, "cai")
    assert epilogue.make("relu", info, "fp16", True) == Epilogue("relu", "same", True)


def test_bias_on_another_device_is_refused():
    with pytest.raises(ValueError, match=r"bias is on device 1 but c is on device 0"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), bias=arr(3, device=1))


def test_strided_bias_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"bias must be contiguous.*bias.contiguous\(\)"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), bias=arr(3, strides=(2,)))


def test_bias_overlapping_c_is_refused():
    c = arr(4, 3)
    inside_c = FakeDeviceArray((3,), ptr=c.__cuda_array_interface__["data"][0] + 12)
    with pytest.raises(ValueError, match="bias overlaps c"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), c, bias=inside_c)


def test_plain_epilogue_defines_nothing_so_plain_builds_keep_their_cache_keys():
    assert Epilogue().defines() == {}
    assert Variant.make("naive", "fp32").defines() == Variant.make("naive", "fp32", epilogue=Epilogue()).defines()


def test_epilogue_defines_name_the_activation_the_bias_type_and_its_direction():
    assert Epilogue("gelu_tanh", "fp32", True).defines() == {"GL_ACT": 3, "GL_BIAS": 2, "GL_BIAS_ROW": 1}
    assert Epilogue("silu").defines() == {"GL_ACT": 4}


def test_reference_activations_match_their_formulas():
    x = np.linspace(-6.0, 6.0, 241)
    from math import erf, pi, sqrt, tanh

    want = {"relu": [max(v, 0.0) for v in x], "gelu": [0.5 * v * (1 + erf(v / sqrt(2))) for v in x],
            "gelu_tanh": [0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v ** 3))) for v in x],
            "silu": [v / (1 + np.exp(-v)) for v in x]}
    for name in ACTIVATIONS:
        np.testing.assert_allclose(epilogue.reference(x, name, np), want[name], rtol=1e-12, atol=1e-15)


# ---- every rung compiles a fused epilogue without spilling (CPU: NVRTC) ----------------------------
# Two heavy epilogues for the rungs auto chooses from (16-24), one for the teaching rungs: a compile
# each costs seconds in CI. tools/gpu_suite.sh's epilogue stages and .scratch sweeps cover the rest.
HEAVY = (Epilogue("gelu_tanh", "same"), Epilogue("silu", "fp32", True))
LIGHT = (Epilogue("gelu", "fp32"),)
COMPILE_CASES = [(r.slug, dt, p, e) for r in gemmlab.kernels() if r.runs_on("sm_90a") for dt in r.dtypes
                 for p in r.precisions if applies(p, dt) and (r.number >= 16 or dt == r.dtypes[0])
                 for e in (HEAVY if r.number >= 16 else LIGHT)]


@pytest.mark.parametrize("slug,dtype,precision,epi", COMPILE_CASES, ids=lambda x: getattr(x, "describe", lambda: x)())
def test_rung_compiles_a_fused_epilogue_without_spills(slug, dtype, precision, epi):
    """The default configuration, or the first fallback a plan takes (variant.fused_configs)."""
    rung = gemmlab.core.registry.get(slug)
    spilled = []
    for cfg in fused_configs(rung, None, precision):
        try:
            ck = Variant.make(slug, dtype, b_col=rung.k_major, precision=precision, epilogue=epi,
                              config=cfg).compile("sm_90a")
        except SpillError as exc:
            spilled.append(str(exc))
            continue
        assert ck.spill_bytes == 0
        return
    pytest.fail("every fallback spills:\n" + "\n".join(spilled))


def test_a_spilling_stream_k_build_falls_back_to_storing_at_the_tile_end_then_to_no_tail():
    rung = gemmlab.core.registry.get("wgmma_ws")
    configs = fused_configs(rung, "STREAMK=1", "bf16")
    assert configs[0] == "STREAMK=1" and len(configs) == 3
    assert configs[1] == {**rung.config("STREAMK=1", "bf16"), "DEFER": 0}
    assert configs[2] == {**rung.config("STREAMK=1", "bf16"), "STREAMK": 0}
    assert fused_configs(rung, "DEFER=0", "bf16") == ["DEFER=0"]     # STREAMK=0 and DEFER=0 already
    assert fused_configs(gemmlab.core.registry.get("naive"), None, "fp32") == [None]


# Rung 21 defers a fused tile's stores into the next tile's main loop as it does a plain one's (its
# boxes written between k-tile runs: more TMA stores in the build than the tile has boxes), with the
# activations that fit beside the held tile, on the default tile and on its stream-K twin.
@pytest.mark.parametrize("config", [None, "STREAMK=1"])
def test_rung_21_defers_a_fused_tile_with_bias_and_gelu_tanh(config):
    from gemmlab.analysis import disasm
    epi = Epilogue("gelu_tanh", "same")

    def tma_stores(defer):
        cfg = dict(gemmlab.core.registry.get("wgmma_ws").config(config, "bf16"), DEFER=defer)
        ck = Variant.make("wgmma_ws", "bf16", epilogue=epi, config=cfg).compile("sm_90a")
        assert ck.spill_bytes == 0
        return sum(op.startswith("UTMASTG") for op in disasm.opcodes(disasm.sass(ck.cubin)))

    assert tma_stores(1) > tma_stores(0)


# ---- every rung computes it (GPU) ------------------------------------------------------------------
SHAPES = [(7, 5, 3), (130, 257, 129), (257, 31, 300), (1, 515, 77), (300, 1, 129)]
GPU_CASES = [(r.slug, dt, p) for r in gemmlab.kernels() for dt in r.dtypes for p in r.precisions if applies(p, dt)]


def _lib(dtype):
    return "torch" if dtype == "bf16" else None


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype,precision", GPU_CASES)
def test_rung_fuses_bias_and_each_activation_on_odd_shapes_and_layouts(slug, dtype, precision):
    """Each activation with each bias type in turn, C row- and column-major (the bias then runs
    along the stored rows), alpha/beta with beta = 0 on NaN-poisoned C and beta != 0."""
    failures = []
    acts = (None, *ACTIVATIONS)
    biases = (None, "same", "fp32")
    for n, ((M, N, K), (a_col, b_col, c_col), (alpha, beta)) in enumerate(itertools.product(
            SHAPES, ((False, False, False), (True, True, True), (False, True, True)), ((1.0, 0.0), (1.5, -0.75)))):
        act, bias = acts[n % len(acts)], biases[n % len(biases)]
        if act is None and bias is None:
            act = "relu"
        r = verify(slug, M, N, K, dtype, lib=_lib(dtype), a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha,
                   beta=beta, precision=precision, bias=bias, activation=act)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


# The launch paths beyond one plain kernel: the split-K reduction applies the epilogue, the cluster
# split's and stream-K's finishers apply it, the deferred TMA store holds it (or, where beta != 0, falls back
# to the direct one).
PATH_CASES = [
    ("async_simt", "fp32", "SPLITK=4", (64, 96, 4000)),
    ("async_simt", "fp32", "SPLITK=4,SKCLUSTER=1", (64, 96, 4000)),
    ("async_simt", "fp32", "STREAMK=1", (1000, 1100, 700)),
    ("mma_sync", "bf16", "SPLITK=4", (70, 130, 3000)),
    ("wgmma_tma", "fp16", "SPLITK=3", (130, 260, 3000)),
    ("wgmma_ws", "bf16", "STREAMK=1", (1500, 1300, 700)),
    ("wgmma_ws", "bf16", "DEFER=1", (300, 520, 200)),
    ("wgmma_ws", "fp16", "DEFER=1", (2900, 2600, 200)),        # two units a cluster: held into the next
    ("wgmma_ws", "fp16", "EPI_TMA=0", (300, 520, 200)),
    ("decode", "bf16", None, (8, 4096, 4096)),
    ("thin", "fp32", None, (5, 3000, 2000)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("slug,dtype,config,shape", PATH_CASES)
def test_split_streamk_and_tma_store_paths_apply_the_epilogue_once(slug, dtype, config, shape):
    M, N, K = shape
    failures = []
    for act, bias, (alpha, beta) in (("gelu_tanh", "same", (1.0, 0.0)), ("silu", "fp32", (0.5, 2.0)),
                                     ("relu", "fp32", (1.0, 0.0))):
        r = verify(slug, M, N, K, dtype, lib=_lib(dtype), alpha=alpha, beta=beta, config=config, bias=bias,
                   activation=act)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_auto_fuses_across_its_selection_on_odd_shapes(dtype):
    failures = []
    for (M, N, K), act in zip([(1, 4096, 4096), (96, 171, 159), (1000, 1000, 1000), (4093, 515, 257),
                               (33, 14336, 4096)], itertools.cycle(ACTIVATIONS)):
        r = verify("auto", M, N, K, dtype, lib=_lib(dtype), bias="same", activation=act)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
def test_empty_k_gives_the_activation_of_beta_c_plus_bias():
    torch = pytest.importorskip("torch")
    a, b = torch.empty(5, 0, device="cuda"), torch.empty(0, 7, device="cuda")
    c = torch.randn(5, 7, device="cuda")
    bias = torch.randn(7, device="cuda")
    want = torch.nn.functional.silu(0.5 * c + bias)
    gemmlab.gemm(a, b, c, beta=0.5, bias=bias, activation="silu")
    torch.testing.assert_close(c, want)


@pytest.mark.gpu
def test_a_repeated_call_reads_the_bias_it_is_given_not_the_first_ones():
    torch = pytest.importorskip("torch")
    a = torch.randn(200, 300, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(300, 100, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):   # the second and third calls take the fast path
        bias = torch.randn(100, device="cuda", dtype=torch.bfloat16)
        out = gemmlab.matmul(a, b, bias=bias, activation="gelu")
        want = torch.nn.functional.gelu(a.double() @ b.double() + bias.double())
        torch.testing.assert_close(out.double(), want, atol=0.05, rtol=0.02)


# ---- the PyTorch operator: autograd and torch.compile ----------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("activation", [None, *ACTIVATIONS])
def test_torch_operator_differentiates_bias_and_activation_like_pytorch(activation):
    torch = pytest.importorskip("torch")
    import gemmlab.torch as gt

    act = {None: lambda z: z, "relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
           "gelu_tanh": lambda z: torch.nn.functional.gelu(z, approximate="tanh")}[activation]
    a = torch.randn(67, 45, device="cuda", requires_grad=True)
    b = torch.randn(45, 33, device="cuda", requires_grad=True)
    bias = torch.randn(33, device="cuda", requires_grad=True)
    g = torch.randn(67, 33, device="cuda")
    y = gt.matmul(a, b, bias=bias, activation=activation)
    y.backward(g)
    a64, b64, bias64 = (x.detach().double().requires_grad_() for x in (a, b, bias))
    y64 = act(a64 @ b64 + bias64)
    y64.backward(g.double())
    torch.testing.assert_close(y.double(), y64, rtol=1e-4, atol=1e-4)
    for got, want in ((a.grad, a64.grad), (b.grad, b64.grad), (bias.grad, bias64.grad)):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_torch_compile_traces_the_fused_operator_without_graph_breaks():
    torch = pytest.importorskip("torch")
    import gemmlab.torch as gt

    def layer(x, w, bias):
        return gt.matmul(x, w, bias=bias, activation="gelu_tanh")

    compiled = torch.compile(layer, fullgraph=True)
    x = torch.randn(64, 128, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(128, 96, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(96, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(compiled(x, w, bias), layer(x, w, bias))


# ---- a static guard: every entry point takes the epilogue's argument --------------------------------
def _entry_parameter_lists(text: str) -> list[str]:
    """The parameter list of each extern "C" __global__ function in a CUDA source that writes C: all
    but rung 26's group_maps (core/groups.py, MAPS_KERNEL), which writes the groups' tensor maps."""
    import re

    from gemmlab.core.groups import MAPS_KERNEL

    lists = []
    entry = r'extern "C" __global__.*?\b(?!__launch_bounds__|__cluster_dims__)([A-Za-z_]\w*)\s*\('
    for m in re.finditer(entry, text, re.S):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        if m.group(1) != MAPS_KERNEL:
            lists.append(text[m.end():i - 1])
    return lists


@pytest.mark.parametrize("source", sorted({r.source for r in gemmlab.kernels()}) + ["splitk_reduce.cu"])
def test_every_gemm_entry_point_ends_its_parameters_with_the_epilogues(source):
    """A rung (or helper) whose kernel lacks GL_EPI_PARAMS would read no bias where the host passes one."""
    from gemmlab.core.compile import KERNEL_DIR

    text = (KERNEL_DIR / source).read_text()
    if '#include "ws_entry.cuh"' in text:
        text += (KERNEL_DIR / "ws_entry.cuh").read_text()
    lists = _entry_parameter_lists(text)
    assert lists, f"{source}: no entry point found"
    for params in lists:   # a scaled matmul's scale pointers come after them (kernels/scales.cuh), last
        assert params.rstrip().removesuffix("GL_SCALE_PARAMS").rstrip().endswith("GL_EPI_PARAMS"), \
            f"{source}: an entry point does not end with GL_EPI_PARAMS (GL_SCALE_PARAMS after it)"
