"""``gemmlab.torch``: the ``gemmlab::matmul`` PyTorch operator.

Without a GPU: the registration, the fake implementation (shapes, dtypes, the same errors as the
real one), the autograd formula's structure (traced with fake tensors), and a
``torch.compile(fullgraph=True)`` trace. On a GPU (marked ``gpu``): forward and both gradients
against float64 references, ``torch.library.opcheck``, and a compiled training step vs eager.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the optional gemmlab[torch] extra)")
if not hasattr(torch.library, "custom_op"):  # pragma: no cover
    pytest.skip(f"gemmlab.torch needs PyTorch >= 2.4, found {torch.__version__}", allow_module_level=True)

import gemmlab  # noqa: E402
import gemmlab.torch as gt  # noqa: E402
from gemmlab.measure.verify import tolerance  # noqa: E402

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
OP = torch.ops.gemmlab.matmul.default


def _meta(*shape, dtype=torch.float32, requires_grad=False):
    return torch.empty(shape, dtype=dtype, device="meta", requires_grad=requires_grad)


# ---- registration and the fake implementation (CPU) ---------------------------------------------

def test_the_operator_is_registered_as_gemmlab_matmul():
    assert gemmlab.torch is gt  # the lazy attribute of the package is the facade module
    assert gt.op is OP
    assert str(OP._schema) == ("gemmlab::matmul(Tensor a, Tensor b, str kernel, str? precision=None, "
                               "ScalarType? out_dtype=None) -> Tensor")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("gemmlab::matmul", "CompositeExplicitAutograd") \
        or torch._C._dispatch_has_kernel_for_dispatch_key("gemmlab::matmul", "CUDA")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("gemmlab::matmul", "Meta")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("gemmlab::matmul", "Autograd")


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("mkn", [(33, 17, 9), (127, 65, 129), (1, 1, 1), (0, 5, 3), (4, 0, 6)])
def test_the_fake_implementation_gives_shape_and_dtype(dtype, mkn):
    from torch._subclasses.fake_tensor import FakeTensorMode

    M, K, N = mkn
    y = gt.matmul(_meta(M, K, dtype=dtype), _meta(K, N, dtype=dtype))
    assert y.device.type == "meta" and y.shape == (M, N) and y.dtype == dtype
    with FakeTensorMode():
        a, b = torch.empty(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype)
        y = gt.matmul(a, b.t().contiguous().t(), "auto")  # a column-major b is fine too
        assert y.shape == (M, N) and y.dtype == dtype


@pytest.mark.parametrize("dtype,out", [(torch.bfloat16, torch.float32), (torch.float16, torch.float32),
                                       (torch.float16, torch.bfloat16), (torch.float32, torch.float32)])
def test_the_fake_implementation_gives_the_output_dtype(dtype, out):
    a, b, bias = _meta(33, 17, dtype=dtype), _meta(17, 9, dtype=dtype), _meta(9, dtype=dtype)
    assert gt.matmul(a, b, out_dtype=out).dtype == out
    assert gt.matmul(a, b, bias=bias, activation="relu", out_dtype=out).dtype == out
    y = gt.matmul(a.requires_grad_(), b, bias=bias, activation="gelu", out_dtype=out)   # the saving operator
    assert y.dtype == out and y.shape == (33, 9)


def test_an_output_dtype_float32_operands_cannot_write_is_refused():
    with pytest.raises(TypeError, match="float32 operands write a float32 result only"):
        gt.matmul(_meta(3, 4), _meta(4, 5), out_dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="is not a dtype gemmlab writes"):
        gt.matmul(_meta(3, 4, dtype=torch.float16), _meta(4, 5, dtype=torch.float16), out_dtype=torch.float64)


@pytest.mark.parametrize("a, b, kernel, err, match", [
    ((3, 4), (5, 6), "auto", ValueError, r"shape mismatch: a is \(3, 4\), b is \(5, 6\)"),
    ((2, 3, 4), (3, 4, 6), "auto", ValueError, r"batch dimensions \(2,\) of a and \(3,\) of b do not broadcast"),
    ((3, 4), (4,), "auto", ValueError, r"b must have at least 2 dimensions"),
    ((3, 4), (4, 6), "no_such_rung", Exception, r"no_such_rung"),
])
def test_the_fake_implementation_rejects_bad_operands_clearly(a, b, kernel, err, match):
    with pytest.raises(err, match=match):
        gt.matmul(_meta(*a), _meta(*b), kernel)


@pytest.mark.parametrize("a, b, out", [((5, 33, 17), (17, 9), (5, 33, 9)), ((2, 1, 33, 17), (3, 17, 9), (2, 3, 33, 9)),
                                      ((33, 17), (4, 17, 9), (4, 33, 9))])
def test_the_fake_implementation_broadcasts_batch_dimensions_as_torch_matmul(a, b, out):
    assert gt.matmul(_meta(*a), _meta(*b)).shape == out == torch.matmul(_meta(*a), _meta(*b)).shape


def test_mixed_and_unsupported_dtypes_are_type_errors():
    with pytest.raises(TypeError, match="mixed dtypes: a is torch.float16, b is torch.float32"):
        gt.matmul(_meta(3, 4, dtype=torch.float16), _meta(4, 5))
    with pytest.raises(TypeError, match="unsupported dtype float64"):
        gt.matmul(_meta(3, 4, dtype=torch.float64), _meta(4, 5, dtype=torch.float64))


def test_a_rung_that_does_not_take_the_dtype_is_refused_before_any_launch():
    fp32_only = [r.slug for r in gemmlab.kernels() if "fp16" not in r.dtypes]
    if not fp32_only:
        pytest.skip("every rung takes fp16")
    with pytest.raises(ValueError, match="does not support dtype fp16"):
        gt.matmul(_meta(8, 8, dtype=torch.float16), _meta(8, 8, dtype=torch.float16), fp32_only[0])


def test_cpu_tensors_get_a_clear_type_error():
    with pytest.raises(TypeError, match="gemmlab::matmul computes on the GPU: got tensors on cpu"):
        gt.matmul(torch.ones(3, 4), torch.ones(4, 5))
    with pytest.raises(TypeError, match="mixed dtypes"):  # the operand checks come first
        gt.matmul(torch.ones(3, 4), torch.ones(4, 5, dtype=torch.float16))


# ---- autograd (CPU: traced with fake tensors) ----------------------------------------------------

def _gemmlab_calls(graph):
    return [n for n in graph.nodes if n.op == "call_function" and n.target is OP]


def test_backward_is_two_gemmlab_products_on_transposed_views():
    from torch.fx.experimental.proxy_tensor import make_fx

    def step(a, b, g):
        y = gt.matmul(a, b)
        return (y, *torch.autograd.grad(y, (a, b), g))

    a = torch.randn(33, 17, requires_grad=True)
    b = torch.randn(17, 9, requires_grad=True)
    gm = make_fx(step, tracing_mode="fake")(a, b, torch.randn(33, 9))
    calls = _gemmlab_calls(gm.graph)
    assert len(calls) == 3, gm.code  # forward, grad_a, grad_b: no other matmul
    assert not [n for n in gm.graph.nodes if n.op == "call_function" and n.target is not OP
                and str(n.target).split(".")[1] in ("mm", "matmul", "addmm", "bmm")], gm.code
    shapes = sorted(tuple(n.meta["val"].shape) for n in calls)
    assert shapes == [(17, 9), (33, 9), (33, 17)]
    # the transposed operands are views (t / transpose / permute), never copies
    views = [arg for n in calls for arg in n.args[:2] if isinstance(arg, torch.fx.Node) and arg.op == "call_function"]
    assert len(views) == 2 and all(str(v.target).split(".")[1] in ("t", "transpose", "permute") for v in views), gm.code
    assert not [n for n in gm.graph.nodes if "clone" in str(n.target) or "contiguous" in str(n.target)], gm.code


def test_backward_computes_only_the_gradients_asked_for():
    a = _meta(33, 17, requires_grad=True)
    b = _meta(17, 9)
    gt.matmul(a, b).sum().backward()
    assert a.grad is not None and a.grad.shape == (33, 17) and b.grad is None

    from torch.fx.experimental.proxy_tensor import make_fx

    def grad_b_only(a, b, g):
        return torch.autograd.grad(gt.matmul(a, b), b, g)

    gm = make_fx(grad_b_only, tracing_mode="fake")(torch.randn(5, 4), torch.randn(4, 3, requires_grad=True),
                                                    torch.randn(5, 3))
    assert [tuple(n.meta["val"].shape) for n in _gemmlab_calls(gm.graph)] == [(5, 3), (4, 3)], gm.code


def test_a_shared_weights_gradient_under_a_batch_is_one_gemm_over_the_folded_batch():
    from torch.fx.experimental.proxy_tensor import make_fx

    def step(a, b, g):
        return torch.autograd.grad(gt.matmul(a, b), (a, b), g)

    gm = make_fx(step, tracing_mode="fake")(torch.randn(4, 33, 17, requires_grad=True),
                                            torch.randn(17, 9, requires_grad=True), torch.randn(4, 33, 9))
    assert sorted(tuple(n.meta["val"].shape) for n in _gemmlab_calls(gm.graph)) == [(4, 33, 9), (4, 33, 17), (17, 9)]


def _targets(graph) -> list[str]:
    return [str(n.target) for n in graph.nodes if n.op == "call_function" and "gemmlab" in str(n.target)]


def test_a_layer_that_wants_gradients_saves_its_pre_activation_instead_of_recomputing_it():
    from torch.fx.experimental.proxy_tensor import make_fx

    def step(x, w, bias, g):
        return torch.autograd.grad(gt.matmul(x, w, bias=bias, activation="gelu"), (x, w, bias), g)

    gm = make_fx(step, tracing_mode="fake")(torch.randn(33, 17, requires_grad=True), torch.randn(17, 9, requires_grad=True),
                                            torch.randn(9, requires_grad=True), torch.randn(33, 9))
    targets = _targets(gm.graph)
    assert sum("matmul_epilogue_saved" in t for t in targets) == 1, gm.code    # the forward, keeping z
    assert sum(t.startswith("gemmlab.matmul.") for t in targets) == 2, gm.code  # grad_x and grad_w, no recompute
    assert not [t for t in targets if t.startswith("gemmlab.matmul_epilogue.")], gm.code


def test_inference_fuses_the_activation_into_the_gemm():
    from torch.fx.experimental.proxy_tensor import make_fx

    def infer(x, w, bias):
        with torch.no_grad():
            return gt.matmul(x, w, bias=bias, activation="gelu")

    gm = make_fx(infer, tracing_mode="fake")(torch.randn(33, 17, requires_grad=True), torch.randn(17, 9), torch.randn(9))
    assert [t for t in _targets(gm.graph) if "matmul" in t] == ["gemmlab.matmul_epilogue.default"], gm.code


# ---- torch.compile (CPU: the trace; running needs the GPU) ----------------------------------------

def test_torch_compile_fullgraph_traces_the_operator_without_a_graph_break():
    torch._dynamo.reset()
    graphs = []

    def recording_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @torch.compile(fullgraph=True, backend=recording_backend)
    def mlp(x, w1, w2):
        return gt.matmul(torch.relu(gt.matmul(x, w1)), w2, "auto")

    x, w1, w2 = torch.randn(8, 16), torch.randn(16, 32), torch.randn(32, 4)
    # fullgraph=True raises on any graph break during the trace; the traced graph then runs on
    # these CPU tensors and reaches the real implementation, which refuses the CPU
    with pytest.raises(TypeError, match="computes on the GPU"):
        mlp(x, w1, w2)
    assert len(graphs) == 1
    targets = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert sum("gemmlab.matmul" in t for t in targets) == 2, targets


# ---- on the GPU ---------------------------------------------------------------------------------

def _rel(x, ref) -> float:
    return float((x.detach().double() - ref).norm() / max(float(ref.norm()), 1e-300))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
@pytest.mark.parametrize("mkn", [(33, 17, 9), (127, 65, 129), (1, 7, 1)])
@pytest.mark.parametrize("b_col_major", [False, True])
def test_forward_and_both_gradients_match_float64(dtype, mkn, b_col_major):
    M, K, N = mkn
    torch.manual_seed(0)
    td = DTYPES[dtype]
    a = torch.randn(M, K, device="cuda", dtype=td, requires_grad=True)
    b0 = torch.randn(N, K, device="cuda", dtype=td).t() if b_col_major else torch.randn(K, N, device="cuda", dtype=td)
    b = b0.detach().requires_grad_(True)
    g = torch.randn(M, N, device="cuda", dtype=td)
    y = gt.matmul(a, b)
    ga, gb = torch.autograd.grad(y, (a, b), g)
    A, B, G = a.double(), b.double(), g.double()
    assert y.dtype == td and ga.dtype == td and gb.dtype == td
    assert ga.shape == a.shape and gb.shape == b.shape
    assert _rel(y, A @ B) < tolerance(dtype, K)
    assert _rel(ga, G @ B.t()) < tolerance(dtype, N)
    assert _rel(gb, A.t() @ G) < tolerance(dtype, M)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("activation", [None, "gelu_tanh"])
def test_an_fp32_result_of_16_bit_operands_and_its_gradients_match_float64(dtype, activation):
    """The forward rounds once to FP32; the backward's GEMMs take the FP32 gradient rounded to the
    operands' dtype (the reference rounds it so too); the bias's gradient stays in FP32 until the end."""
    torch.manual_seed(0)
    td = DTYPES[dtype]
    M, K, N = 130, 70, 90
    a = torch.randn(M, K, device="cuda", dtype=td, requires_grad=True)
    b = torch.randn(K, N, device="cuda", dtype=td, requires_grad=True)
    bias = torch.randn(N, device="cuda", dtype=torch.float32, requires_grad=True)
    g = torch.randn(M, N, device="cuda", dtype=torch.float32)
    y = gt.matmul(a, b, bias=bias, activation=activation, out_dtype=torch.float32)
    ga, gb, gbias = torch.autograd.grad(y, (a, b, bias), g)
    A, B, Z = a.double(), b.double(), a.double() @ b.double() + bias.double()
    want = Z if activation is None else torch.nn.functional.gelu(Z, approximate="tanh")
    gz = g.double() if activation is None else torch.autograd.grad(
        torch.nn.functional.gelu(Z.requires_grad_(), approximate="tanh"), Z, g.double())[0]
    G = gz.to(td).double()
    assert y.dtype == torch.float32 and ga.dtype == td and gb.dtype == td and gbias.dtype == torch.float32
    assert _rel(y, want) < tolerance("fp32", K)
    assert _rel(ga, G @ B.t()) < tolerance(dtype, N)
    assert _rel(gb, A.t() @ G) < tolerance(dtype, M)
    assert _rel(gbias, gz.sum(0)) < tolerance("fp32", M)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
@pytest.mark.parametrize("ashape,bshape", [((5, 33, 17), (5, 17, 9)), ((2, 1, 33, 17), (3, 17, 9)),
                                           ((4, 33, 17), (17, 9)), ((33, 17), (4, 17, 9))])
def test_batched_forward_and_gradients_match_float64_and_sum_over_broadcast_dimensions(dtype, ashape, bshape):
    torch.manual_seed(0)
    td = DTYPES[dtype]
    a = torch.randn(*ashape, device="cuda", dtype=td, requires_grad=True)
    b = torch.randn(*bshape, device="cuda", dtype=td, requires_grad=True)
    y = gt.matmul(a, b)
    g = torch.randn_like(y)
    ga, gb = torch.autograd.grad(y, (a, b), g)
    A, B = a.detach().double().requires_grad_(True), b.detach().double().requires_grad_(True)
    Y = torch.matmul(A, B)
    GA, GB = torch.autograd.grad(Y, (A, B), g.double())
    assert y.shape == Y.shape and ga.shape == a.shape and gb.shape == b.shape
    assert _rel(y, Y) < tolerance(dtype, 17)
    assert _rel(ga, GA) < tolerance(dtype, 9 * 4)
    assert _rel(gb, GB) < tolerance(dtype, 33 * 6)


@pytest.mark.gpu
def test_batched_fused_epilogue_gradients_match_float64():
    torch.manual_seed(0)
    a = torch.randn(3, 40, 32, device="cuda", requires_grad=True)
    b = torch.randn(3, 32, 24, device="cuda", requires_grad=True)
    bias = torch.randn(24, device="cuda", requires_grad=True)
    y = gt.matmul(a, b, bias=bias, activation="gelu")
    g = torch.randn_like(y)
    grads = torch.autograd.grad(y, (a, b, bias), g)
    ref = [t.detach().double().requires_grad_(True) for t in (a, b, bias)]
    Y = torch.nn.functional.gelu(torch.matmul(ref[0], ref[1]) + ref[2])
    want = torch.autograd.grad(Y, ref, g.double())
    assert _rel(y, Y) < tolerance("fp32", 32)
    for got, w in zip(grads, want):
        assert got.shape == w.shape and _rel(got, w) < tolerance("fp32", 120)


@pytest.mark.gpu
@pytest.mark.parametrize("op_name", ["matmul_epilogue", "matmul_epilogue_saved"])
def test_both_ways_to_the_activations_gradient_match_float64(op_name):
    torch.manual_seed(0)
    a = torch.randn(40, 32, device="cuda", requires_grad=True)
    b = torch.randn(32, 24, device="cuda", requires_grad=True)
    bias = torch.randn(24, device="cuda", requires_grad=True)
    out = getattr(torch.ops.gemmlab, op_name)(a, b, bias, "silu", "auto", None)
    y = out[0] if isinstance(out, (tuple, list)) else out
    g = torch.randn_like(y)
    grads = torch.autograd.grad(y, (a, b, bias), g)
    ref = [t.detach().double().requires_grad_(True) for t in (a, b, bias)]
    Y = torch.nn.functional.silu(ref[0] @ ref[1] + ref[2])
    for got, want in zip(grads, torch.autograd.grad(Y, ref, g.double())):
        assert _rel(got, want) < tolerance("fp32", 40)


@pytest.mark.gpu
def test_an_expanded_gradient_is_accepted():
    a = torch.randn(33, 17, device="cuda", requires_grad=True)
    b = torch.randn(17, 9, device="cuda", requires_grad=True)
    gt.matmul(a, b).sum().backward()  # the incoming gradient is ones expanded: stride (0, 0)
    ones = torch.ones(33, 9, device="cuda", dtype=torch.float64)
    assert _rel(a.grad, ones @ b.double().t()) < tolerance("fp32", 9)
    assert _rel(b.grad, a.double().t() @ ones) < tolerance("fp32", 33)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
def test_opcheck_on_cuda_tensors(dtype):
    td = DTYPES[dtype]
    a = torch.randn(33, 17, device="cuda", dtype=td, requires_grad=True)
    b = torch.randn(17, 9, device="cuda", dtype=td, requires_grad=True)
    # test_aot_dispatch_dynamic compares against eager with torch's default tolerances; for 16-bit
    # the fused vs unfused rounding can differ, so the schema, fake and autograd checks run for all
    tests = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(OP, (a, b, "auto"), test_utils=tests if dtype == "fp32" else tests[:3])


@pytest.mark.gpu
def test_a_compiled_training_step_matches_eager():
    torch.manual_seed(0)
    torch._dynamo.reset()
    x = torch.randn(64, 33, device="cuda")
    target = torch.randn(64, 5, device="cuda")
    w1 = torch.randn(33, 47, device="cuda", requires_grad=True)
    w2 = torch.randn(47, 5, device="cuda", requires_grad=True)

    def step(x, w1, w2):
        loss = ((gt.matmul(torch.relu(gt.matmul(x, w1)), w2) - target) ** 2).mean()
        loss.backward()
        return loss

    def grads(fn):
        w1.grad = w2.grad = None
        loss = fn(x, w1, w2)
        return loss.detach(), w1.grad.clone(), w2.grad.clone()

    # the forward is compiled with fullgraph=True (no graph break); backward runs the compiled
    # backward graph AOTAutograd made from the registered formula
    compiled_fwd = torch.compile(lambda x, w1, w2: gt.matmul(torch.relu(gt.matmul(x, w1)), w2), fullgraph=True)

    def compiled_step(x, w1, w2):
        loss = ((compiled_fwd(x, w1, w2) - target) ** 2).mean()
        loss.backward()
        return loss

    eager, comp = grads(step), grads(compiled_step)
    for e, c in zip(eager, comp):
        assert torch.allclose(e, c, rtol=1e-5, atol=1e-6), (e, c)

    def torch_step(x, w1, w2):  # the same step with torch.matmul: gemmlab's products agree with it
        loss = ((torch.relu(x @ w1) @ w2 - target) ** 2).mean()
        loss.backward()
        return loss

    for e, r in zip(eager, grads(torch_step)):
        assert _rel(e, r.double()) < 1e-4
