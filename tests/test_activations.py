"""Each fused activation is one definition (core/activations.py): its CUDA, its float64 reference, its
derivative, its largest slope and PyTorch's kernels of it. These tests hold the faces of each
definition to one another, and every consumer to the one table."""

import math

import numpy as np
import pytest

from gemmlab.core import activations, epilogue
from gemmlab.core.activations import ALL, MAX_SLOPE, cuda_header
from gemmlab.core.epilogue import Epilogue
from gemmlab.core.variant import Variant

X = np.linspace(-8.0, 8.0, 4001)


@pytest.mark.parametrize("act", ALL, ids=lambda a: a.name)
def test_the_derivative_is_the_slope_of_the_reference(act):
    h = 1e-6
    x = X[np.abs(X) > 1e-3]   # relu's kink at 0
    numeric = (act.reference(x + h, np) - act.reference(x - h, np)) / (2 * h)
    assert np.allclose(act.derivative(x, np), numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("act", ALL, ids=lambda a: a.name)
def test_max_slope_bounds_the_derivative_tightly(act):
    slope = np.abs(act.derivative(X, np)).max()
    assert slope <= act.max_slope <= slope * 1.01


def test_the_verification_scales_by_the_largest_slope_of_any_activation():
    from gemmlab.measure.verify import ACTIVATION_SLOPE

    assert ACTIVATION_SLOPE == MAX_SLOPE == max(a.max_slope for a in ALL)


def test_codes_are_distinct_and_nonzero():
    codes = [a.code for a in ALL]
    assert len(set(codes)) == len(codes) and 0 not in codes


def test_the_generated_header_has_one_case_per_activation_and_the_identity_otherwise():
    text = cuda_header()
    for a in ALL:
        assert f"#if GL_ACT == {a.code}   // {a.name}" in text or f"#elif GL_ACT == {a.code}   // {a.name}" in text
        assert a.cuda.splitlines()[0] in text
    assert text.rstrip().endswith("#else\n    return x;\n#endif\n}")


def test_every_consumer_reads_the_one_table():
    """The epilogue's codes, the argument checks and the CLI's choices are the table's names."""
    from gemmlab.cli.app import build_parser

    assert epilogue.ACTIVATIONS == {a.name: a.code for a in ALL}
    for a in ALL:
        assert epilogue.check_activation(a.name) == a.name
        assert Epilogue(a.name).defines() == {"GL_ACT": a.code}
    parser = build_parser()
    for command in ("verify", "bench"):
        sub = parser._subparsers._group_actions[0].choices[command]
        (opt,) = [o for o in sub._actions if "--activation" in o.option_strings]
        assert tuple(opt.choices) == activations.NAMES


def test_an_unknown_activation_is_refused_naming_the_ones_there_are():
    with pytest.raises(ValueError, match="unknown activation 'tanh'; gemmlab fuses relu, gelu, gelu_tanh, silu"):
        epilogue.check_activation("tanh")


def test_the_reference_is_the_activation_in_float64():
    assert epilogue.reference(np.array([-1.0, 2.0]), "relu", np).tolist() == [0.0, 2.0]
    x = np.array([0.5])
    assert epilogue.reference(x, "gelu", np)[0] == pytest.approx(0.5 * 0.5 * (1 + math.erf(0.5 / math.sqrt(2))), rel=1e-15)
    assert epilogue.reference(x, None, np) is x


@pytest.mark.parametrize("act", ALL, ids=lambda a: a.name)
def test_pytorchs_kernels_compute_the_same_function_and_slope(act):
    torch = pytest.importorskip("torch")
    z = torch.from_numpy(X)
    assert torch.allclose(act.forward_torch(z), act.reference(z, torch), rtol=1e-12, atol=1e-12)
    grad = torch.ones_like(z)
    keep = z.abs() > 1e-3
    assert torch.allclose(act.backward_torch(grad, z)[keep], act.derivative(z, torch)[keep], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("act", ALL, ids=lambda a: a.name)
@pytest.mark.parametrize("dtype,out", [("fp32", None), ("bf16", None), ("bf16", "fp32")])
def test_each_activation_compiles_into_a_rung_without_spills(act, dtype, out):
    """The generated gl_act is what NVRTC compiles (a 16-bit C with the approximations, an FP32 C
    with the accurate functions)."""
    from gemmlab.analysis import disasm

    slug = "async_simt" if dtype == "fp32" else "mma_sync"
    ck = Variant.make(slug, dtype, epilogue=Epilogue(act.name, out=out)).compile("sm_90a")
    res = disasm.resource_usage(ck.cubin, ck.log)
    assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0)
    sass = disasm.sass(ck.cubin)
    if act.name == "gelu_tanh":
        assert ("MUFU.TANH" in sass) == (dtype != "fp32" and out is None)
