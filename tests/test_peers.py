"""The peers (gemmlab.measure.peers): the registry, availability and its reasons, the Triton
autotune lists, describe() for the JSON; with Triton installed, the kernel under Triton's CPU
interpreter and compiled ahead of time for the H100 (no GPU needed); on a GPU, every peer against
the float64 reference in every layout."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import types

import pytest

from gemmlab.core.deps import install_hint
from gemmlab.core.dtypes import DTYPES
from gemmlab.core.dtypes import get as get_dtype
from gemmlab.measure import peers as P

HAVE_TRITON = importlib.util.find_spec("triton") is not None and importlib.util.find_spec("torch") is not None
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="Triton and PyTorch are not installed (pip install torch triton)")

# Triton's interpreter patches triton.language while it runs and does not always restore it (a
# device-function call leaks its patches in Triton 3.9), which breaks later compiles in the same
# process; so the interpreter tests run in a child pytest started with TRITON_INTERPRET=1.
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
in_interpreter = pytest.mark.skipif(not (HAVE_TRITON and INTERPRET),
                                    reason="runs in test_interpreter_suite's child process (TRITON_INTERPRET=1)")

LAYOUTS = list(itertools.product((False, True), repeat=3))   # (a_col, b_col, c_col): all 8


def _lay(a_col, b_col, c_col) -> str:
    return "".join("C" if x else "R" for x in (a_col, b_col, c_col))


@pytest.fixture
def no_triton(monkeypatch):
    """Make ``import triton`` fail, as on a machine without it."""
    monkeypatch.setitem(sys.modules, "triton", None)   # import of a None entry raises ImportError


# ---- the registry ------------------------------------------------------------------------------

def test_registry_names_the_two_peers():
    assert P.PEER_NAMES == ("cublas", "triton")
    got = P.peers(["cublas", "triton"], "fp32", "torch")
    assert [p.name for p in got] == ["cublas", "triton"]
    assert isinstance(got[0], P.CublasPeer) and isinstance(got[1], P.TritonPeer)
    assert all(isinstance(p, P.Peer) and p.lib == "torch" for p in got)


def test_peers_keep_the_order_asked_drop_duplicates_and_read_a_comma_list():
    assert [p.name for p in P.peers(["triton", "cublas", "Triton"], "fp16", "torch")] == ["triton", "cublas"]
    assert [p.name for p in P.peers("cublas, triton", "bf16", "torch")] == ["cublas", "triton"]


def test_unknown_peer_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"unknown peer 'cutlass'; choose from cublas, triton"):
        P.peers(["cublas", "cutlass"], "fp32", "torch")


def test_unknown_dtype_and_library_are_refused():
    with pytest.raises(ValueError, match="unknown dtype"):
        P.peers(["cublas"], "fp64", "torch")
    with pytest.raises(ValueError, match="unknown array library"):
        P.peers(["cublas"], "fp32", "numpy")


def test_default_peers_are_cublas_and_triton_when_it_imports_on_torch(monkeypatch):
    monkeypatch.setattr(P, "triton_importable", lambda: True)
    assert P.default_peer_names("fp32", "torch") == ["cublas", "triton"]
    assert P.default_peer_names("fp16", "cupy") == ["cublas"]
    assert [p.name for p in P.peers(None, "bf16", "torch")] == ["cublas", "triton"]
    monkeypatch.setattr(P, "triton_importable", lambda: False)
    assert P.default_peer_names("fp32", "torch") == ["cublas"]
    assert [p.name for p in P.peers(None, "fp32", "torch")] == ["cublas"]


def test_triton_importable_is_false_when_the_import_fails(no_triton):
    assert P.triton_importable() is False
    assert P.default_peer_names("fp32", "torch") == ["cublas"]


# ---- availability ------------------------------------------------------------------------------

def test_triton_is_unavailable_with_the_install_hint_when_it_does_not_import(no_triton):
    ok, why = P.TritonPeer("torch").available("fp32")
    assert not ok
    assert "pip install triton" in why and "Triton" in why and "\n" not in why


def test_the_install_hint_for_triton_names_what_it_is_for():
    assert install_hint("triton").endswith("pip install triton")
    assert "peer" in install_hint("triton")


def test_triton_needs_pytorch_operands():
    ok, why = P.TritonPeer("cupy").available("fp16")
    assert not ok and "PyTorch" in why


def test_triton_older_than_3_is_refused(monkeypatch):
    fake = types.ModuleType("triton")
    fake.__version__ = "2.3.1"
    monkeypatch.setitem(sys.modules, "triton", fake)
    ok, why = P.TritonPeer("torch").available("bf16")
    assert not ok and "2.3.1" in why and ">= 3.0" in why


def test_unknown_dtype_is_unavailable_with_a_reason():
    for peer in (P.CublasPeer("torch"), P.TritonPeer("torch")):
        ok, why = peer.available("fp64")
        assert not ok and "unknown dtype" in why


def test_cublas_on_cupy_has_no_bf16():
    ok, why = P.CublasPeer("cupy").available("bf16")
    assert not ok and "bfloat16" in why


def test_prepare_refuses_an_unavailable_peer(no_triton):
    ops = types.SimpleNamespace(dtype="fp32")
    with pytest.raises(RuntimeError, match="triton peer: .*pip install triton"):
        P.TritonPeer("torch").prepare(ops, "fp32")


def test_version_tuple_reads_release_and_local_versions():
    assert P._version_tuple("3.1.0") == (3, 1)
    assert P._version_tuple("3.0.0+git1234") == (3, 0)
    assert P._version_tuple("2.3.1") < P.MIN_TRITON <= P._version_tuple("3.6.0")


def test_importing_the_module_loads_neither_triton_nor_torch():
    code = ("import sys; import gemmlab.measure.peers as p; p.peers(None, 'fp32', 'cupy'); "
            "print(sorted(m for m in ('triton', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- the Triton configuration lists --------------------------------------------------------------

SMEM_PER_BLOCK = 227 * 1024   # the H100's largest shared memory per block


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def test_every_dtype_has_a_list():
    assert set(P.TRITON_CONFIGS) == set(DTYPES)
    assert P.TRITON_CONFIGS["fp16"] == P.TRITON_CONFIGS["bf16"] == P.HALF_CONFIGS
    assert P.TRITON_CONFIGS["fp32"] == P.FP32_CONFIGS


@pytest.mark.parametrize("dtype", DTYPES)
def test_configs_are_valid_tiles(dtype):
    cfgs = P.TRITON_CONFIGS[dtype]
    assert 4 <= len(cfgs) <= 12
    keys = {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"}
    assert all(set(c) == keys for c in cfgs)
    assert len({tuple(sorted(c.items())) for c in cfgs}) == len(cfgs), "duplicate configurations"
    itemsize = get_dtype(dtype).itemsize
    for c in cfgs:
        bm, bn, bk = c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
        assert all(_pow2(x) for x in (bm, bn, bk, c["GROUP_M"], c["num_warps"])), c
        assert min(bm, bn, bk) >= 16, f"tl.dot needs every side >= 16: {c}"
        assert max(bm, bn) <= 256 and bk <= 128, c
        assert c["num_warps"] in (4, 8), c
        assert 2 <= c["num_stages"] <= 5, c
        assert 1 <= c["GROUP_M"] <= 16, c
        smem = c["num_stages"] * (bm + bn) * bk * itemsize
        assert smem <= SMEM_PER_BLOCK, f"{c}: {smem} bytes of shared memory"
        acc_per_thread = bm * bn // (32 * c["num_warps"])
        if dtype == "fp32":
            # the FMA dot keeps A and B slices in registers too: > 64 accumulators spill (sm_90a)
            assert acc_per_thread <= 64, c
        else:
            assert acc_per_thread <= 128, c
            assert bk >= 32, f"16-bit tiles load at least 64 bytes of K per row: {c}"
            assert bm % (16 * c["num_warps"]) == 0, f"each warpgroup gets whole 64-row wgmma tiles: {c}"


def test_the_lists_cover_large_and_small_tiles():
    for cfgs in (P.FP32_CONFIGS, P.HALF_CONFIGS):
        areas = [c["BLOCK_M"] * c["BLOCK_N"] for c in cfgs]
        assert max(areas) >= 128 * 128 and min(areas) <= 64 * 128
    assert {"BLOCK_M": 128, "BLOCK_N": 128} in [{k: c[k] for k in ("BLOCK_M", "BLOCK_N")} for c in P.FP32_CONFIGS]
    assert any(c["BLOCK_K"] == 16 for c in P.FP32_CONFIGS) and any(c["BLOCK_K"] == 32 for c in P.FP32_CONFIGS)
    assert any(c["BLOCK_K"] == 64 and c["num_stages"] >= 3 for c in P.HALF_CONFIGS)


def test_the_autotune_key_names_shape_and_layout():
    assert P.TRITON_AUTOTUNE_KEY[:3] == ("M", "N", "K")
    assert set(P.TRITON_AUTOTUNE_KEY[3:]) == {"stride_am", "stride_ak", "stride_bk", "stride_bn"}


# ---- describe() --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", P.PEER_NAMES)
@pytest.mark.parametrize("lib", ("torch", "cupy"))
def test_describe_is_json(name, lib):
    peer = P.PEERS[name](lib)
    for dtype in (None, *DTYPES):
        d = peer.describe(dtype)
        assert d["name"] == name and d["library"] == lib
        assert json.loads(json.dumps(d)) == d


def test_triton_describe_lists_the_configs_tried_and_no_choice_before_a_run():
    d = P.TritonPeer("torch").describe("fp32")
    assert d["configs"] == [dict(c) for c in P.FP32_CONFIGS]
    assert d["input_precision"] == "ieee" and d["best_config"] is None and d["tuned"] == []
    assert "triton_version" in d and "autotune_key" in d
    assert set(P.TritonPeer("torch").describe()["configs"]) == set(DTYPES)


def test_cublas_describe_says_fp32_is_true_fp32():
    d = P.CublasPeer("torch").describe("fp32")
    assert d["precision"]["tf32"] is False
    assert d["call"] == "torch.matmul(a, b, out=c)"


def test_describe_reports_the_last_tuned_config():
    peer = P.TritonPeer("torch")
    rec = {"dtype": "fp16", "M": 1, "N": 2, "K": 3, "strides": {}, "config": dict(P.HALF_CONFIGS[2]),
           "autotune_ms": [{"config": dict(P.HALF_CONFIGS[2]), "ms": 0.5}]}
    peer._tuned.append(rec)
    assert peer.describe("fp16")["best_config"] == dict(P.HALF_CONFIGS[2])
    assert peer.describe("fp32")["best_config"] is None
    assert peer.describe()["tuned"] == [rec]
    assert P._median([0.25, 0.2, 0.3]) == 0.25 and P._median([math.inf] * 3) is None


# ---- with Triton installed, no GPU: the CPU interpreter ----------------------------------------

INTERPRETER_SHAPES = [(17, 33, 9), (1, 1, 1), (70, 5, 100), (64, 48, 64), (3, 130, 33)]


@needs_triton
@pytest.mark.skipif(INTERPRET, reason="already the interpreter's process")
def test_interpreter_suite():
    """The ``interp_`` tests below, in a child pytest under Triton's CPU interpreter."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::UserWarning",
           __file__, "-k", "interp_"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " failed" not in r.stdout, r.stdout[-3000:]


@pytest.fixture
def interpreter():
    torch = pytest.importorskip("torch")
    tg = P._triton_gemm()
    assert tg.interpreting()
    return torch, tg


def _cpu_operand(torch, rows, cols, col_major, dtype, gen, pad=0):
    """(rows x cols) CPU tensor, column-major when asked, with ``pad`` extra elements per leading dim."""
    outer, inner = (cols, rows) if col_major else (rows, cols)
    m = torch.randn(outer, inner + pad, generator=gen, dtype=torch.float64)[:, :inner].to(dtype)
    return m.T if col_major else m


def _interpret_check(torch, dtype, M, N, K, layout, config, pad=0):
    a_col, b_col, c_col = layout
    gen = torch.Generator().manual_seed(M * 10007 + N * 101 + K)
    tdt = getattr(torch, get_dtype(dtype).array_name)
    a = _cpu_operand(torch, M, K, a_col, tdt, gen, pad)
    b = _cpu_operand(torch, K, N, b_col, tdt, gen, pad)
    c = _cpu_operand(torch, M, N, c_col, tdt, gen, pad).fill_(float("nan"))
    P.triton_matmul(a, b, c, config=config)
    ref = a.double() @ b.double()
    got = c.double()
    assert torch.isfinite(got).all(), f"{dtype} {M}x{N}x{K} {_lay(*layout)} {config}: unwritten or non-finite C"
    err = float((got - ref).norm() / ref.norm())
    return err


@in_interpreter
@pytest.mark.parametrize("shape", INTERPRETER_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_interp_fp32_matches_float64_in_every_layout(interpreter, shape):
    torch, _ = interpreter
    for i, layout in enumerate(LAYOUTS):
        config = P.FP32_CONFIGS[i % len(P.FP32_CONFIGS)]
        err = _interpret_check(torch, "fp32", *shape, layout, config, pad=i % 3)
        assert err < 1e-5, f"fp32 {shape} {_lay(*layout)} {config}: rel. error {err:.2e}"


@in_interpreter
@pytest.mark.parametrize("dtype", DTYPES)
def test_interp_every_config_of_the_list(interpreter, dtype):
    torch, tg = interpreter
    if dtype == "bf16" and not _interpreter_bf16_dot_is_right(torch, tg):
        pytest.skip("this Triton's interpreter multiplies bf16 bit patterns in tl.dot (NumPy has no bfloat16)")
    from gemmlab.measure.verify import tolerance

    for config, layout in zip(P.TRITON_CONFIGS[dtype], itertools.cycle(LAYOUTS[::-1])):
        M, N, K = 19, 37, 45
        err = _interpret_check(torch, dtype, M, N, K, layout, config)
        tol = 1e-5 if dtype == "fp32" else tolerance(dtype, K)
        assert err < tol, f"{dtype} {_lay(*layout)} {config}: rel. error {err:.2e} (tol {tol:.1e})"


def _interpreter_bf16_dot_is_right(torch, tg) -> bool:
    a = torch.ones(16, 16, dtype=torch.bfloat16)
    c = torch.empty(16, 16, dtype=torch.float32)
    P.triton_matmul(a, a, c, config=P.HALF_CONFIGS[-1])
    return bool((c == 16).all())


@in_interpreter
def test_interp_64_bit_offsets_give_the_same_product(interpreter):
    torch, tg = interpreter
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(17, 9, generator=gen).T.contiguous().T       # column-major A
    b = torch.randn(9, 33, generator=gen)
    c = torch.full((17, 33), float("nan"))
    cfg = P.FP32_CONFIGS[-1]
    launch = tg.kernels(P._FAMILY_CONFIGS, P.TRITON_AUTOTUNE_KEY).kernel.fn[tg.grid(17, 33)]
    launch(*tg.launch_args(a, b, c), **{k: cfg[k] for k in tg.TILE_KEYS}, EVEN_K=False, INDEX_64=True,
           num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-5


@needs_triton
def test_launch_heuristics():
    tg = P._triton_gemm()
    args = {"M": 4096, "N": 4096, "K": 4096, "BLOCK_K": 64, "stride_am": 4096, "stride_ak": 1,
            "stride_bk": 4096, "stride_bn": 1, "stride_cm": 4096, "stride_cn": 1}
    assert tg.even_k(args) and not tg.index_64(args)
    assert not tg.even_k({**args, "K": 4095})
    big = {**args, "M": 2**20, "stride_am": 4096, "stride_cm": 4096}   # 2^32 elements of A
    assert tg.index_64(big)
    assert tg.index_64({**args, "stride_am": 1, "stride_ak": 2**31 // 4096})  # column-major, huge ld


@needs_triton
def test_triton_matmul_refuses_shapes_that_do_not_chain():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="do not chain"):
        P.triton_matmul(torch.empty(2, 3), torch.empty(4, 5), torch.empty(2, 5))


# ---- with Triton installed, no GPU: compiled ahead of time for the H100 ---------------------------

@needs_triton
@pytest.mark.skipif(INTERPRET, reason="compiling needs the compiler, not the interpreter")
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_config_compiles_for_sm90_without_local_memory(dtype):
    """Each configuration compiled for the H100 (capability 9.0): within shared memory, no spills
    in the common layouts, FFMA only for fp32 (strict FP32: no tensor-core instruction) and
    warpgroup MMA (HGMMA) for fp16/bf16."""
    from gemmlab.analysis import disasm

    tg = P._triton_gemm()
    variants = [{}] if dtype == "bf16" else [{}, {"a_col": True, "b_col": True, "even_k": False}]
    for config in P.TRITON_CONFIGS[dtype]:
        for v in variants:
            k = tg.compile_config(config, dtype, capability=90, **v)
            what = f"{dtype} {config} {v}"
            assert k.metadata.shared <= SMEM_PER_BLOCK, f"{what}: {k.metadata.shared} bytes of shared memory"
            res = disasm.resource_usage(k.asm["cubin"])
            assert res.local == 0, f"{what}: {res.local} bytes of local memory (spills)"
            ops = disasm.opcodes(disasm.sass(k.asm["cubin"]))
            tensor = [o for o in ops if o.startswith(("HMMA", "HGMMA"))]
            if dtype == "fp32":
                assert not tensor and any(o.startswith("FFMA") for o in ops), f"{what}: not strict FP32"
            else:
                assert any(o.startswith("HGMMA") for o in ops), f"{what}: no warpgroup MMA"


# ---- on a GPU ------------------------------------------------------------------------------------

GPU_SHAPES = [(17, 33, 9), (1, 1, 1), (130, 67, 257)]


def _torch_lib():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from gemmlab.measure.arrays import Lib

    L = Lib("torch")
    if not L.xp.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return L


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gpu_triton_peer_matches_the_float64_reference_in_every_layout(dtype, shape):
    from gemmlab.measure.arrays import make_operands
    from gemmlab.measure.verify import check

    L = _torch_lib()
    peer = P.TritonPeer(L)
    assert peer.available(dtype)[0], peer.available(dtype)[1]
    for i, (a_col, b_col, c_col) in enumerate(LAYOUTS):
        ops = make_operands(L, *shape, dtype, a_col=a_col, b_col=b_col, c_col=c_col, ld_pad=i % 2,
                            offset=i % 3, seed=i, beta_nonzero=False)
        run = peer.prepare(ops, dtype)
        L.fill_nan(ops.c)          # the callable itself must write every element
        run()
        L.synchronize()
        res = check(ops, 1.0, 0.0, f"triton {dtype} {'x'.join(map(str, shape))} {_lay(a_col, b_col, c_col)}")
        assert res.ok, res.message()
    d = peer.describe(dtype)
    assert json.loads(json.dumps(d)) == d
    assert d["best_config"] in d["configs"] and len(d["tuned"]) == len(LAYOUTS)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_every_triton_config_is_correct(dtype):
    from gemmlab.measure.arrays import make_operands
    from gemmlab.measure.verify import check

    L = _torch_lib()
    for config, (a_col, b_col, c_col) in zip(P.TRITON_CONFIGS[dtype], itertools.cycle(LAYOUTS)):
        ops = make_operands(L, 300, 275, 129, dtype, a_col=a_col, b_col=b_col, c_col=c_col, seed=1,
                            beta_nonzero=False)
        P.triton_matmul(ops.a, ops.b, ops.c, config=config)
        L.synchronize()
        res = check(ops, 1.0, 0.0, f"triton {dtype} {config} {_lay(a_col, b_col, c_col)}")
        assert res.ok, res.message()


@pytest.mark.gpu
def test_gpu_triton_fp32_is_strict_fp32_at_large_k():
    """TF32 would miss the fp32 tolerance by an order of magnitude at K = 4096."""
    from gemmlab.measure.arrays import make_operands
    from gemmlab.measure.verify import check

    L = _torch_lib()
    ops = make_operands(L, 256, 256, 4096, "fp32", seed=5, beta_nonzero=False)
    P.TritonPeer(L).prepare(ops, "fp32")()
    L.synchronize()
    res = check(ops, 1.0, 0.0, "triton fp32 256x256x4096")
    assert res.ok, res.message()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_cublas_peer_matches_the_reference_and_keeps_fp32_strict(dtype):
    from gemmlab.measure.arrays import make_operands
    from gemmlab.measure.verify import check

    L = _torch_lib()
    m = L.xp.backends.cuda.matmul
    # TF32 on outside (the API TrueFP32 uses): the peer must still run true FP32, and restore it
    flag, on = ("fp32_precision", "tf32") if hasattr(m, "fp32_precision") else ("allow_tf32", True)
    prev = getattr(m, flag)
    setattr(m, flag, on)
    try:
        peer = P.CublasPeer(L)
        for i, (a_col, b_col, c_col) in enumerate(LAYOUTS):
            ops = make_operands(L, 130, 67, 2049, dtype, a_col=a_col, b_col=b_col, c_col=c_col, seed=i,
                                beta_nonzero=False)
            peer.prepare(ops, dtype)()
            L.synchronize()
            res = check(ops, 1.0, 0.0, f"cublas {dtype} {_lay(a_col, b_col, c_col)}")
            assert res.ok, res.message()
        assert getattr(m, flag) == on, "the peer must restore the library's setting"
        d = peer.describe(dtype)
        assert json.loads(json.dumps(d)) == d
    finally:
        setattr(m, flag, prev)
