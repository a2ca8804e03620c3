"""Any configuration the registry accepts is a configuration the kernel was written for: it compiles
(the kernels' static_asserts restate the registry's constraints) without spills, and on the GPU it
is correct on odd shapes with beta != 0 (every element written once, no block overlapping another).

The configurations are drawn from a grid of powers of two for every parameter of every rung, kept
when the registry accepts them, and sampled with a fixed seed so CI stays fast."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from gemmlab.analysis import disasm
from gemmlab.core.registry import kernels
from gemmlab.core.variant import SpillError, Variant

VALUES = {"BM": (16, 32, 64, 128, 256), "BN": (16, 32, 64, 128, 256), "BK": (4, 8, 16, 32, 64),
          "TM": (2, 4, 8, 16), "TN": (2, 4, 8, 16), "WM": (16, 32, 64, 128), "WN": (16, 32, 64, 128),
          "THREADS": (128, 256, 512, 1024), "STAGES": (2, 3, 4), "SPLITK": (1, 4), "CLUSTER": (1, 2),
          "PACK": (0, 1), "EPI_TMA": (0, 1), "SKCLUSTER": (0, 1), "GROUP": (8, 16), "STREAMK": (0, 1),
          "DEFER": (0, 1), "SPREAD": (0, 1), "SNAKE": (0, 1), "KREV": (0, 1), "L2PROMO": (0, 128),
          "BALANCE": (0, 1), "ABOX": (0, 1), "WGSKIP": (0, 1)}
# rung 23 (thin): a thin side of 4..32 and K tiles of whole chunks per thread
# rung 24 (decode): a thin side of 8..32 against whole 64-row warps, its warps along K, ring depth and place
VALUES_OF = {"thin": {"BM": (4, 8, 16, 32), "BN": (4, 8, 16, 32), "BK": (64, 128, 256)},
             "decode": {"BM": (8, 16, 32, 64, 128), "BN": (8, 16, 32, 64, 128), "BK": (32, 64, 128, 256),
                        "WK": (1, 2, 4, 8), "DEPTH": (2, 3, 4, 6), "L2PF": (0, 1), "ASYNC": (0, 1)},
             "wgmma_fp8": {"BK": (128, 256), "STAGES": (2, 4, 6, 8)},   # rung 25: k tiles of whole FP8 swizzle rows
             # rung 28 (decode_fp8): rung 24's sides and warps, 64-k chunks, warps along the thin side,
             # its split in a cluster only
             "decode_fp8": {"BM": (8, 16, 32, 64, 128), "BN": (8, 16, 32, 64, 128), "BK": (64, 128, 256, 512),
                            "WK": (1, 2, 4, 8), "WT": (1, 2), "DEPTH": (2, 3, 4, 6), "L2PF": (0, 1), "SPLITK": (1, 2, 4)},
             "wgmma_grouped": {"GROUP_CAP": (1, 8, 128), "GROUP_K": (0,)},   # rung 26: its group table's capacity (a plain call is a group of rows)
             "wgmma_grouped_fp8": {"BK": (128, 256), "STAGES": (2, 4, 6, 8), "GROUP_CAP": (1, 8, 128),
                                   "GROUP_K": (0,)}}   # rung 27: rung 25's k tiles, rung 26's table
PER_RUNG = 4
# A grid up to this many points is checked point by point and sampled from its accepted
# configurations; a larger one is sampled by drawing points of it until PER_RUNG are accepted (the
# same distribution: uniform over the accepted ones). Rung 18's grid has 6.1 million points, and
# checking each took 22 s of every collection of this file (of each worker's, under pytest-xdist).
ENUMERATED_UP_TO = 200_000


def grid(rung) -> dict[str, tuple[int, ...]]:
    values = {**VALUES, **VALUES_OF.get(rung.slug, {})}
    return {n: values[n] for n in rung.params}


def _accepted(rung) -> list[dict]:
    names, values = list(rung.params), grid(rung).values()
    return [cfg for cfg in (dict(zip(names, combo)) for combo in itertools.product(*values))
            if not rung.check_config(cfg)]


def _drawn(rung, rng: random.Random, default: dict) -> list[dict]:
    g = grid(rung)
    out: list[dict] = []
    for _ in range(1_000_000):
        cfg = {n: rng.choice(v) for n, v in g.items()}
        if cfg != default and cfg not in out and not rung.check_config(cfg):
            out.append(cfg)
            if len(out) == PER_RUNG:
                return out
    raise AssertionError(f"{rung.slug}: fewer than {PER_RUNG} accepted configurations in a million draws of its grid")


def sample(rung) -> list[dict]:
    default = dict(rung.params)
    rng = random.Random(rung.number)
    if math.prod(len(v) for v in grid(rung).values()) > ENUMERATED_UP_TO:
        return [default] + _drawn(rung, rng, default)
    rest = [c for c in _accepted(rung) if c != default]
    return [default] + rng.sample(rest, min(PER_RUNG, len(rest)))


CASES = [(r, cfg) for r in kernels() for cfg in sample(r)]


@pytest.fixture(scope="module", autouse=True)
def _compiled_ahead(compile_ahead):
    variants = [Variant.make(r, r.dtypes[0], b_col=r.k_major, vec_a=vec, vec_b=vec, vec_c=vec, config=cfg)
                for r, cfg in CASES for vec in (True, False) if r.compiles(False, r.k_major, vec, vec)]
    compile_ahead({"sm_90a": variants}, len(CASES) // 2)


def test_every_rung_accepts_its_defaults_and_more_than_one_configuration():
    for r in kernels():
        default = dict(r.params)
        assert all(v in grid(r)[k] for k, v in default.items()), r.slug   # on the grid the samples come from
        assert not r.check_config(default), r.slug
        assert len(sample(r)) > 1, r.slug


@pytest.mark.parametrize("rung, cfg", CASES, ids=[f"{r.slug}-{','.join(f'{k}{v}' for k, v in c.items())}" for r, c in CASES])
def test_an_accepted_configuration_compiles_without_spills_or_is_refused_naming_them(rung, cfg):
    for vec in (True, False):   # aligned operands (vector access) and the scalar fallback
        if not rung.compiles(False, rung.k_major, vec, vec):   # a k_major rung reads packed copies only
            continue
        v = Variant.make(rung, rung.dtypes[0], b_col=rung.k_major, vec_a=vec, vec_b=vec, vec_c=vec, config=cfg)
        try:
            ck = v.compile("sm_90a")
        except SpillError as exc:   # the registry's register estimate let it through; the compile did not
            assert "spills" in str(exc) and "smaller thread tile" in str(exc)
            continue
        res = disasm.resource_usage(ck.cubin, ck.log)
        assert res.local == 0 and (res.spill_stores, res.spill_loads) == (0, 0), f"{v.describe()}"


def test_a_configuration_that_spills_is_refused_with_a_clear_error():
    from gemmlab.core.registry import get

    cfg = {"BM": 256, "BN": 32, "BK": 16, "TM": 16, "TN": 8}   # 128 accumulators per thread
    with pytest.raises(SpillError, match="spills .* bytes"):
        Variant.make(get("double_buffer"), "fp32", config=cfg).compile("sm_90a")


def test_the_naive_rung_refuses_a_block_that_does_not_cover_its_tile():
    from gemmlab.core.registry import get

    for bad in ({"THREADS": 512}, {"BM": 64}, {"BN": 16}):
        with pytest.raises(ValueError, match="must be BM\\*BN"):
            get("naive").config(bad)


@pytest.mark.gpu
@pytest.mark.parametrize("rung, cfg", CASES, ids=[f"{r.slug}-{','.join(f'{k}{v}' for k, v in c.items())}" for r, c in CASES])
def test_an_accepted_configuration_is_correct_on_odd_shapes_with_beta(rung, cfg):
    from gemmlab.measure.verify import verify

    dtype = rung.dtypes[0]
    lib = "torch" if dtype == "bf16" else None
    for lay, vec in itertools.product((False, True), (False, True)):   # the variants these calls can pick
        if not rung.compiles(lay, lay, vec, vec):   # a k_major rung: these operands are packed first
            continue
        try:
            Variant.make(rung, dtype, a_col=lay, b_col=lay, vec_a=vec, vec_b=vec, vec_c=vec, config=cfg).compile("sm_90a")
        except SpillError as exc:
            pytest.skip(f"refused by the API for some operand alignments: {exc}")
    for (M, N, K), lay in itertools.product([(131, 67, 45), (257, 129, 33)], [(0, 0, 0), (1, 1, 1)]):
        r = verify(rung.slug, M, N, K, dtype, lib=lib, a_col=lay[0], b_col=lay[1], c_col=lay[2], alpha=1.5,
                   beta=-0.75, config=cfg)
        assert r.ok, r.message()
