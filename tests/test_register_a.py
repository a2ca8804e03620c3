"""Rung 22's register-A path (TF32 only): wgmma reads an MN-major A from registers, so a problem
with row-major A and B runs transposed (C^T = B^T A^T: B^T is a column-major A, A^T a K-major B,
C written column-major) with no copy, and a column-major A is read where it is. On the GPU:
correctness of every preset across tile edges in all 8 layouts with alpha and beta, the plan
copying nothing and saying so, repeated calls through the fast path on other operands (the plan
swaps A and B at each launch), and graph capture. The CPU side (what the plan copies and the
variants it runs) is in test_pack.py, the SASS in test_static_guards.py."""

from __future__ import annotations

import itertools

import pytest

from gemmlab.core import registry

pytestmark = pytest.mark.gpu
RUNG = "wgmma_tf32"
TF32_REL = 5e-3    # TF32 operands (10 fraction bits, truncated) over K of a few thousand


def _torch():
    return pytest.importorskip("torch")


def _rel(c, ref) -> float:
    return float((c.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("preset", sorted(registry.get(RUNG).presets))
def test_every_tf32_preset_is_correct_across_tile_edges_in_every_layout(preset):
    from gemmlab.measure.verify import verify

    failures = []
    for (a_col, b_col, c_col), (M, N, K) in itertools.product(itertools.product((False, True), repeat=3),
                                                              ((300, 173, 229), (129, 513, 96))):
        r = verify(RUNG, M, N, K, "fp32", a_col=a_col, b_col=b_col, c_col=c_col, alpha=1.5, beta=-0.75,
                   config=preset, precision="tf32")
        if not r.ok:
            failures.append(r.message())
    assert not failures, "\n".join(failures)


def test_a_row_major_tf32_plan_runs_transposed_with_no_copy_and_matches():
    import gemmlab

    torch = _torch()
    a, b, c = (torch.randn(*s, device="cuda") for s in ((1000, 700), (700, 900), (1000, 900)))
    p = gemmlab.plan(a, b, c, kernel=RUNG, precision="tf32")
    assert not p.packs and "C col" in p.variant.describe() and (p.kp.M, p.kp.N) == (900, 1000)
    c.fill_(float("nan"))
    p.run()
    torch.cuda.synchronize()
    assert _rel(c, a.double() @ b.double()) < TF32_REL


def test_repeated_calls_on_other_operands_swap_them_at_each_launch():
    """The fast path launches a cached plan on new pointers in the kernel view's order; the plan
    of the transposed problem swaps them. Different data each call: a wrong swap would show."""
    import gemmlab

    torch = _torch()
    for _ in range(3):
        a, b = torch.randn(333, 520, device="cuda"), torch.randn(520, 250, device="cuda")
        c = torch.full((333, 250), float("nan"), device="cuda")
        gemmlab.gemm(a, b, c, kernel=RUNG, precision="tf32")
        torch.cuda.synchronize()
        assert _rel(c, a.double() @ b.double()) < TF32_REL


def test_a_register_a_call_captures_into_a_cuda_graph():
    import gemmlab

    torch = _torch()
    a, b, c = torch.randn(300, 2049, device="cuda"), torch.randn(2049, 200, device="cuda"), torch.empty(300, 200, device="cuda")
    gemmlab.gemm(a, b, c, kernel=RUNG, precision="tf32")
    torch.cuda.synchronize()
    g, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.graph(g, stream=stream):
        gemmlab.gemm(a, b, c, kernel=RUNG, precision="tf32", alpha=2.0)
    c.fill_(float("nan"))
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    assert _rel(c, 2.0 * (a.double() @ b.double())) < TF32_REL
