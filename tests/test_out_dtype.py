"""An output dtype other than the operands': C of float32, float16 or bfloat16 from 16-bit operands,
rounded once in the GEMM's own stores (``matmul(..., out_dtype=)``, or ``gemm`` with such a C).
What a call may pass and which rung writes it (CPU, with stand-in device arrays), and that it is
computed right (GPU: fresh random data, odd shapes, every layout, alpha/beta with beta = 0 on
NaN-poisoned C, bias and activation, batches, against the float64 reference of
gemmlab.measure.verify)."""

import itertools
from dataclasses import replace

import numpy as np
import pytest

import gemmlab
from gemmlab.core import dispatch, epilogue
from gemmlab.core.epilogue import Epilogue, out_dtype_name
from gemmlab.core.problem import make_problem
from gemmlab.core.parts import Stores
from gemmlab.core.registry import LADDER, get
from gemmlab.core.rules import choose
from gemmlab.core.shapes import random_shapes
from gemmlab.measure.verify import verify
from test_bad_input import FakeDeviceArray, fake_devices  # noqa: F401  (the fixture is autouse)

F16, F32 = "<f2", "<f4"


def arr(*shape, typestr=F16, **kw):
    return FakeDeviceArray(shape, typestr=typestr, **kw)


# ---- what a call may pass ------------------------------------------------------------------------
def test_16_bit_operands_may_write_an_fp32_c():
    p = make_problem(arr(4, 5), arr(5, 3), arr(4, 3, typestr=F32))
    assert (p.dtype, p.c.dtype, p.out_dtype) == ("fp16", "fp32", "fp32")


def test_a_c_of_the_operands_dtype_has_no_output_dtype():
    assert make_problem(arr(4, 5), arr(5, 3), arr(4, 3)).out_dtype is None


def test_fp32_operands_write_fp32_only():
    with pytest.raises(TypeError, match="c is fp16 but a and b are fp32; float32 operands write a float32 result only"):
        gemmlab.gemm(arr(4, 5, typestr=F32), arr(5, 3, typestr=F32), arr(4, 3))


def test_the_two_operands_must_still_match():
    with pytest.raises(TypeError, match="mixed dtypes: a is fp16, b is fp32"):
        gemmlab.gemm(arr(4, 5), arr(5, 3, typestr=F32), arr(4, 3, typestr=F32))


@pytest.mark.parametrize("given,name", [("float32", "fp32"), ("fp32", "fp32"), ("bf16", "bf16"),
                                        (np.float16, "fp16"), (np.dtype("float32"), "fp32"), (None, None)])
def test_out_dtype_takes_gemmlabs_names_the_libraries_names_and_their_dtypes(given, name):
    assert out_dtype_name(given) == name


@pytest.mark.parametrize("given", ["int8", "float64", 3])
def test_an_out_dtype_gemmlab_does_not_write_is_refused_naming_the_choices(given):
    with pytest.raises(TypeError, match="is not a dtype gemmlab writes; choose float32, float16 or bfloat16"):
        out_dtype_name(given)


def test_out_and_an_out_dtype_that_disagree_are_refused():
    with pytest.raises(TypeError, match="out is fp16 but out_dtype is fp32"):
        gemmlab.matmul(arr(4, 5), arr(5, 3), out=arr(4, 3), out_dtype="float32")


# ---- which rung writes it ---------------------------------------------------------------------------
def test_auto_gives_an_fp32_output_to_the_rung_that_writes_it():
    p = make_problem(arr(40, 50), arr(50, 30), arr(40, 30, typestr=F32))
    assert choose(p, "auto", "sm_90a") is get("wgmma_ws")


def test_a_gpu_without_a_rung_that_writes_the_output_type_is_refused_naming_the_ones_that_do():
    p = make_problem(arr(40, 50), arr(50, 30), arr(40, 30, typestr=F32))
    with pytest.raises(ValueError, match=r"no rung supports fp16 writing a fp32 C \(rungs that do: wmma \(sm_80\+\), "
                                         r"mma_sync \(sm_80\+\), wgmma_tma \(sm_90 to sm_90\), wgmma_ws \(sm_90 to "
                                         r"sm_90\), decode \(sm_80\+, a side of at most 32\)\) on sm_75"):
        choose(p, "auto", "sm_75")


def test_every_16_bit_rung_writes_fp32_and_the_other_16_bit_type():
    """Their stores round FP32 sums once, to whatever C is (gl_store_c8, the Hopper epilogue parts,
    rung 24's scalar stores): an output dtype never takes a plan the operands' own C would not."""
    for r in LADDER:
        if "fp16" in r.dtypes:
            assert set(r.outputs) == {"fp32", "fp16", "bf16"}, r.slug


def test_a_named_rung_that_writes_its_operands_dtype_only_is_refused_naming_the_ones_that_do():
    only_own = replace(get("mma_sync"), stores=Stores())
    with pytest.raises(ValueError, match="kernel 'mma_sync' writes a C of its operands' dtype only .fp16.; a fp32 C "
                                         "from fp16 operands is written by wmma, mma_sync, wgmma_tma, wgmma_ws, decode"):
        only_own.require("fp16", out="fp32")


def test_auto_gives_an_fp32_output_the_plan_of_the_16_bit_one():
    """Held-out shapes (a seed nothing was tuned on): the plan for an fp16 C serves an FP32 C, except
    where C's 16-byte access differs (the selection model weighs it)."""
    from test_dispatch import H100

    for M, N, K in random_shapes(24, 28):
        own = dispatch.decide(make_problem(arr(M, K), arr(K, N), arr(M, N)), "auto", None, H100)
        if (N * 2) % 16 != 0:
            continue
        fp32 = dispatch.decide(make_problem(arr(M, K), arr(K, N), arr(M, N, typestr=F32)), "auto", None, H100)
        assert (fp32.rung, fp32.config) == (own.rung, own.config), (M, N, K)


@pytest.mark.parametrize("M,slug", [(1, "decode"), (16, "decode"), (2000, "wgmma_ws"), (4096, "wgmma_ws")])
def test_auto_writes_an_fp32_c_with_the_rungs_that_write_it(M, slug):
    """A decoding step's few rows go to the decode rung (its scalar stores write any type), large
    problems to rung 21 (its FP32 epilogue part)."""
    from test_dispatch import H100

    p = make_problem(arr(M, 4096), arr(4096, 4096), arr(M, 4096, typestr=F32))
    assert dispatch.decide(p, "auto", None, H100).rung is get(slug)


def test_an_output_of_the_operands_dtype_is_the_plain_epilogue():
    assert epilogue.make(None, None, "bf16", False, "bf16") is epilogue.PLAIN
    assert Epilogue(out="fp32").defines() == {"GL_C_DTYPE": 0}
    assert Epilogue(out="fp32").plain   # alpha and beta alone: the deferred store's condition


# ---- the results (GPU) ------------------------------------------------------------------------------
SHAPES = [(1, 1, 1), (7, 13, 5), (127, 129, 65), (300, 520, 200), (1000, 777, 333), (2048, 1536, 1024)]
PAIRS = [("bf16", "fp32"), ("fp16", "fp32"), ("bf16", "fp16"), ("fp16", "bf16")]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,out", PAIRS)
def test_auto_writes_the_output_dtype_on_odd_shapes_every_layout_and_alpha_beta(dtype, out):
    failures = []
    for n, ((M, N, K), (a_col, b_col, c_col)) in enumerate(itertools.product(SHAPES, itertools.product((False, True),
                                                                                                        repeat=3))):
        alpha, beta = ((1.0, 0.0), (1.5, -0.75))[n % 2]
        r = verify("auto", M, N, K, dtype, a_col=a_col, b_col=b_col, c_col=c_col, alpha=alpha, beta=beta, out=out)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


# rung 21's paths: each tile class, stream-K, no TMA store, the thread copy, a bias and an activation
PATH_CASES = [(None, None, None), ("128x128", "same", "gelu_tanh"), ("STREAMK=1", "fp32", "silu"),
              ("EPI_TMA=0", None, "relu"), ("BM=128,BN=64,BK=64,WM=64,STAGES=4,CLUSTER=2", "fp32", "gelu"),
              ("CLUSTER=1", "same", None)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,out", PAIRS)
@pytest.mark.parametrize("config,bias,activation", PATH_CASES)
def test_wgmma_ws_writes_the_output_dtype_on_each_path(dtype, out, config, bias, activation):
    failures = []
    for (M, N, K), ld_pad, (alpha, beta) in zip([(1500, 1300, 700), (131, 67, 45), (300, 520, 200)], (0, 3, 0),
                                                ((1.0, 0.0), (1.0, 0.0), (0.5, 2.0))):
        r = verify("wgmma_ws", M, N, K, dtype, alpha=alpha, beta=beta, config=config, bias=bias,
                   activation=activation, ld_pad=ld_pad, out=out)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,out", PAIRS)
@pytest.mark.parametrize("config", ["m8", "n8", "m8,SPLITK=4,SKCLUSTER=1", "n8,SPLITK=6"])
def test_the_decode_rung_writes_the_output_dtype_alone_and_split(dtype, out, config):
    failures = []
    for (M, N, K), (alpha, beta), act in zip([(8, 1000, 3000), (5, 77, 2100)] if config.startswith("m") else
                                             [(1000, 8, 3000), (77, 5, 2100)], ((1.0, 0.0), (0.5, 2.0)), ("silu", None)):
        r = verify("decode", M, N, K, dtype, alpha=alpha, beta=beta, config=config, bias="fp32" if act else None,
                   activation=act, out=out)
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
def test_matmul_allocates_the_output_dtype_in_torch_and_cupy():
    torch = pytest.importorskip("torch")
    a = torch.randn(300, 200, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(200, 100, device="cuda", dtype=torch.bfloat16)
    for _ in range(2):   # the second call: the remembered plan
        out = gemmlab.matmul(a, b, out_dtype=torch.float32)
        assert out.dtype == torch.float32 and out.shape == (300, 100)
        torch.testing.assert_close(out.double(), a.double() @ b.double(), atol=1e-3, rtol=1e-5)
    plain = gemmlab.matmul(a, b)   # without out_dtype: the operands' own, not the remembered fp32 call's
    assert plain.dtype == torch.bfloat16
    cupy = pytest.importorskip("cupy")
    x, y = cupy.random.randn(64, 48).astype(cupy.float16), cupy.random.randn(48, 80).astype(cupy.float16)
    z = gemmlab.matmul(x, y, out_dtype="float32")
    assert z.dtype == cupy.float32
    cupy.testing.assert_allclose(z, x.astype(cupy.float64) @ y.astype(cupy.float64), atol=1e-3, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("a_shape,b_shape", [((6, 130, 70), (6, 70, 90)), ((3, 4, 100, 64), (64, 200)),
                                             ((5, 33, 17), (1, 17, 41))])
def test_a_batch_writes_the_output_dtype_in_one_launch_or_per_element(a_shape, b_shape):
    torch = pytest.importorskip("torch")
    a = torch.randn(*a_shape, device="cuda", dtype=torch.float16)
    b = torch.randn(*b_shape, device="cuda", dtype=torch.float16)
    bias = torch.randn(b_shape[-1], device="cuda", dtype=torch.float32)
    out = gemmlab.matmul(a, b, bias=bias, activation="silu", out_dtype=torch.float32)
    want = torch.nn.functional.silu(a.double() @ b.double() + bias.double())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), want, atol=2e-3, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("out", [None, "fp32"])
def test_empty_k_gives_the_activation_of_beta_c_plus_bias_in_16_bit_too(out):
    torch = pytest.importorskip("torch")
    a = torch.empty(5, 0, device="cuda", dtype=torch.bfloat16)
    b = torch.empty(0, 7, device="cuda", dtype=torch.bfloat16)
    c = torch.randn(5, 7, device="cuda", dtype=torch.float32 if out else torch.bfloat16)
    bias = torch.randn(7, device="cuda", dtype=torch.bfloat16)
    want = torch.nn.functional.gelu(0.5 * c.double() + bias.double()).to(c.dtype)
    gemmlab.gemm(a, b, c, beta=0.5, bias=bias, activation="gelu")
    torch.testing.assert_close(c, want)
