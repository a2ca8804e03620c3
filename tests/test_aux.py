"""The auxiliary output: ``gemm(..., activation=..., aux=z)`` writes the pre-activation
z = alpha * a @ b + beta * c + bias beside c = act(z), from the same stores (GL_AUX; the saved input
of the activation's backward). What a call may pass (CPU, stand-in device arrays), that the rungs
compile it without spilling (CPU), and that every store path writes both outputs right (GPU: fresh
random data, odd shapes, NaN-poisoned c and aux, against float64)."""

import pytest

import gemmlab
from gemmlab.analysis import disasm
from gemmlab.core import epilogue
from gemmlab.core.epilogue import Epilogue
from gemmlab.core.variant import Variant
from test_bad_input import FakeDeviceArray, fake_devices  # noqa: F401  (the fixture is autouse)


def arr(*shape, **kw):
    return FakeDeviceArray(shape, **kw)


# ---- what a call may pass ------------------------------------------------------------------------
def test_aux_needs_an_activation():
    with pytest.raises(ValueError, match=r"aux \(the pre-activation\) needs an activation"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), aux=arr(4, 3))


def test_aux_of_another_shape_than_the_result_is_refused():
    with pytest.raises(ValueError, match=r"aux is 3x4 but the result is 4x3; they must match"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), activation="relu", aux=arr(3, 4))


def test_aux_of_another_dtype_than_the_result_is_refused():
    with pytest.raises(TypeError, match=r"aux is fp16 but the result is fp32; they must match"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), activation="relu", aux=arr(4, 3, typestr="<f2"))


def test_aux_with_other_strides_than_the_result_is_refused_naming_them():
    with pytest.raises(ValueError, match=r"aux must have the result's layout and strides \(row-major, leading "
                                         r"dimension 3\); got row-major with 8"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), arr(4, 3), activation="silu", aux=arr(4, 3, strides=(8, 1)))


def test_aux_less_aligned_than_the_result_is_refused():
    with pytest.raises(ValueError, match=r"aux must be 16-byte aligned like the result"):
        gemmlab.gemm(arr(4, 5), arr(5, 8), arr(4, 8), activation="gelu", aux=arr(4, 8, ptr=(1 << 50) + 4))


def test_aux_overlapping_the_result_is_refused():
    c = arr(4, 3)
    with pytest.raises(ValueError, match=r"aux overlaps c in memory"):
        gemmlab.gemm(arr(4, 5), arr(5, 3), c, activation="relu", aux=c)


def test_aux_overlapping_an_input_is_refused():
    a = arr(4, 3)
    with pytest.raises(ValueError, match=r"aux overlaps a in memory"):
        gemmlab.gemm(a, arr(3, 3), arr(4, 3), activation="relu", aux=a)


def test_a_batch_takes_no_aux():
    with pytest.raises(ValueError, match=r"aux is written for a single matrix product"):
        gemmlab.matmul(arr(2, 4, 5), arr(2, 5, 3), activation="relu", aux=arr(2, 4, 3))


def test_aux_defines_gl_aux_and_has_no_store_twin():
    epi = Epilogue("gelu_tanh", "same", aux=True)
    assert epi.defines() == {"GL_ACT": 3, "GL_BIAS": 1, "GL_AUX": 1}
    assert "aux" in epi.describe()
    assert Variant.make("wgmma_ws", "bf16", epilogue=epi).store_twin(4096) is None
    assert Variant.make("wgmma_ws", "bf16", epilogue=Epilogue("gelu_tanh", "same")).store_twin(4096) is not None


def test_check_aux_returns_the_arrays_description():
    c = epilogue.describe_array("c", arr(4, 8))
    info = epilogue.check_aux(arr(4, 8), "relu", c)
    assert (info.rows, info.cols, info.dtype) == (4, 8, "fp32")
    assert epilogue.check_aux(None, "relu", c) is None


# ---- the builds ----------------------------------------------------------------------------------
AUX_BUILDS = [("wgmma_ws", "bf16", None, None), ("wgmma_ws", "fp16", None, "fp32"), ("wgmma_tma", "bf16", "SPLITK=4", None),
              ("mma_sync", "fp16", None, None), ("async_simt", "fp32", None, None), ("decode", "bf16", "m8", None),
              ("thin", "fp32", None, None)]


@pytest.mark.parametrize("slug,dtype,config,out", AUX_BUILDS)
def test_rungs_compile_the_aux_output_without_spills(slug, dtype, config, out):
    ck = Variant.make(slug, dtype, config=config, epilogue=Epilogue("silu", "fp32", out=out, aux=True)).compile("sm_90a")
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0)


def test_rung_21_with_aux_stores_by_rows_not_by_tma():
    """Its aux build never takes the TMA store at run time (tma_store_now): C and aux leave through
    16-byte stores from the staged rows, two per 8 outputs."""
    plain = disasm.sass(Variant.make("wgmma_ws", "bf16", epilogue=Epilogue("relu")).compile("sm_90a").cubin)
    aux = disasm.sass(Variant.make("wgmma_ws", "bf16", epilogue=Epilogue("relu", aux=True)).compile("sm_90a").cubin)
    assert aux.count("STG.E.128") >= 2 * plain.count("STG.E.128") > 0


# ---- the results (GPU) ---------------------------------------------------------------------------
TORCH = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
GPU_CASES = [
    # slug, dtype, config, out dtype, (M, N, K), beta, bias, c column-major, precision
    ("wgmma_ws", "bf16", None, None, (300, 520, 200), 0.0, "same", False, None),
    ("wgmma_ws", "fp16", "128x128", None, (131, 67, 45), 0.5, "fp32", False, None),
    ("wgmma_ws", "bf16", None, "fp32", (190, 264, 96), 0.0, "fp32", False, None),
    ("wgmma_ws", "fp16", "STREAMK=1,BALANCE=0", None, (2000, 1500, 448), 0.0, "same", False, None),
    ("wgmma_tma", "bf16", "SPLITK=4", None, (64, 200, 2048), 0.0, "same", False, None),
    ("wgmma_tma", "fp16", None, "fp32", (129, 77, 70), -0.75, None, True, None),
    ("mma_sync", "fp16", None, None, (200, 136, 96), 0.0, "same", False, None),
    ("wmma", "bf16", "32x32", None, (77, 100, 50), 0.0, "fp32", False, None),
    ("async_simt", "fp32", None, None, (257, 130, 129), 0.0, "same", False, None),
    ("async_simt", "fp32", "SPLITK=4,SKCLUSTER=1", None, (128, 256, 2048), 1.0, "same", False, None),
    ("wgmma_tf32", "fp32", None, None, (300, 264, 200), 0.0, "same", False, "tf32"),
    ("decode", "bf16", "m8", None, (8, 1000, 3000), 0.0, "same", False, None),
    ("decode", "fp16", "n8,SPLITK=6", "fp32", (600, 7, 3000), 0.0, "fp32", False, None),
    ("thin", "fp32", None, None, (4096, 16, 512), 0.0, "same", False, None),
    ("vectorized", "fp32", None, None, (130, 68, 33), 0.5, None, False, None),
    ("auto", "bf16", None, None, (1000, 777, 333), 0.0, "same", True, None),
]


@pytest.mark.gpu
@pytest.mark.parametrize("activation", ["gelu_tanh", "silu", "relu"])
@pytest.mark.parametrize("slug,dtype,config,out,shape,beta,bias,c_col,precision", GPU_CASES)
def test_every_store_path_writes_the_result_and_its_pre_activation(slug, dtype, config, out, shape, beta, bias, c_col,
                                                                   precision, activation):
    torch = pytest.importorskip("torch")
    from gemmlab.core.activations import get as get_activation
    from gemmlab.measure.verify import tolerance

    M, N, K = shape
    dt, ot = getattr(torch, TORCH[dtype]), getattr(torch, TORCH[out or dtype])
    torch.manual_seed(M * N + K)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(K, N, device="cuda", dtype=dt)
    c = torch.randn(N, M, device="cuda", dtype=ot).t() if c_col else torch.randn(M, N, device="cuda", dtype=ot)
    c0 = c.double()
    if beta == 0.0:
        c.fill_(float("nan"))            # beta == 0 reads nothing of c
    aux = torch.full_like(c, float("nan"))   # every element written
    vec = torch.randn(N, device="cuda", dtype=dt if bias == "same" else torch.float32) if bias else None
    gemmlab.gemm(a, b, c, beta=beta, bias=vec, activation=activation, aux=aux, kernel=slug, config=config,
                 precision=precision)
    torch.cuda.synchronize()
    z = a.double() @ b.double() + beta * c0 + (vec.double() if vec is not None else 0.0)
    y = get_activation(activation).reference(z, torch)
    tol = tolerance(out or dtype, K, precision) * 2   # the pre-activation may be rounded twice (staged rows)
    for name, got, want in (("result", c, y), ("aux", aux, z)):
        assert not torch.isnan(got).any(), f"{name}: NaN (an element not written)"
        err = float((got.double() - want).norm() / want.norm())
        assert err <= tol, f"{name}: relative error {err:.2e} > {tol:.2e}"


@pytest.mark.gpu
def test_a_repeated_call_writes_the_aux_it_is_given_not_the_first_ones():
    """The fast path launches the remembered plan on each call's aux pointer."""
    torch = pytest.importorskip("torch")
    a = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(128, 192, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(256, 192, device="cuda", dtype=torch.bfloat16)
    first, second = torch.zeros_like(c), torch.zeros_like(c)
    gemmlab.gemm(a, b, c, activation="relu", aux=first)
    gemmlab.gemm(2 * a, b, c, activation="relu", aux=second)
    torch.cuda.synchronize()
    z = (a.float() @ b.float())
    assert torch.allclose(first.float(), z, rtol=2e-2, atol=0.5)
    assert torch.allclose(second.float(), 2 * z, rtol=2e-2, atol=1.0)


@pytest.mark.gpu
def test_empty_k_writes_beta_c_plus_bias_to_aux():
    torch = pytest.importorskip("torch")
    c = torch.randn(5, 7, device="cuda")
    bias = torch.randn(7, device="cuda")
    c0, aux = c.clone(), torch.full_like(c, float("nan"))
    gemmlab.gemm(torch.empty(5, 0, device="cuda"), torch.empty(0, 7, device="cuda"), c, beta=0.5, bias=bias,
                 activation="relu", aux=aux)
    torch.cuda.synchronize()
    assert torch.allclose(aux, 0.5 * c0 + bias) and torch.allclose(c, torch.relu(0.5 * c0 + bias))


@pytest.mark.gpu
def test_the_saving_torch_operator_returns_y_and_its_pre_activation():
    torch = pytest.importorskip("torch")
    import gemmlab.torch  # noqa: F401  (registers the operators)

    x = torch.randn(3, 40, 96, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(96, 72, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(72, device="cuda", dtype=torch.bfloat16)
    y, z = torch.ops.gemmlab.matmul_epilogue_saved(x, w, bias, "gelu", "auto", None)
    want = x.double() @ w.double() + bias.double()
    assert y.shape == z.shape == (3, 40, 72)
    assert float((z.double() - want).norm() / want.norm()) < 1e-2
    want_y = torch.nn.functional.gelu(want)
    assert float((y.double() - want_y).norm() / want_y.norm()) < 1e-2
