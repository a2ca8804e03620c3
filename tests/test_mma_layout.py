"""Rung 17's index math on the CPU: tools/check_mma_layout.py restates the kernel's swizzle, copy
split, fragment addressing, pipeline accounting and epilogue, and checks them against the PTX
ISA's ldmatrix / mma.m16n8k16 definitions (conflict-free shared accesses, C = A @ B on ragged
shapes through an emulation of the whole block). The kernel itself runs in the GPU tests."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest

from gemmlab.core.registry import get

_PATH = Path(__file__).resolve().parents[1] / "tools" / "check_mma_layout.py"
_spec = importlib.util.spec_from_file_location("check_mma_layout", _PATH)
lay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lay)

LAYOUTS = list(itertools.product((False, True), (False, True)))


def _tile(cfg: dict) -> dict:
    """The parameters the emulation models (SPLITK and SKCLUSTER only pick the K range a block walks
    and where its partial tile is summed; PACK what the host copies before the launch)."""
    return {k: v for k, v in cfg.items() if k not in ("SPLITK", "SKCLUSTER", "PACK")}


def test_the_emulated_default_and_presets_are_the_registrys():
    rung = get("mma_sync")
    assert lay.DEFAULT == _tile(rung.config())
    for name in rung.presets:
        assert _tile(rung.config(name)) in lay.CONFIGS


@pytest.mark.parametrize("cfg", lay.CONFIGS, ids=lambda c: "x".join(str(c[k]) for k in ("BM", "BN", "BK", "WM", "WN", "STAGES")))
@pytest.mark.parametrize("a_col, b_col", LAYOUTS, ids=["rr", "rc", "cr", "cc"])
def test_copies_and_fragment_reads_are_bijective_and_bank_conflict_free(cfg, a_col, b_col):
    g = lay.geometry(cfg, a_col, b_col)
    lay.check_copies(g)
    lay.check_fragment_addresses(g, a_col, b_col)


@pytest.mark.parametrize("cfg", lay.CONFIGS[2:], ids=["32x64x64", "16x16x32", "64x64x32"])
@pytest.mark.parametrize("a_col, b_col", LAYOUTS, ids=["rr", "rc", "cr", "cc"])
def test_an_emulated_block_grid_computes_a_at_b_on_ragged_shapes(cfg, a_col, b_col):
    for M, N, K in lay.shapes_for(cfg):
        lay.check_gemm(cfg, a_col, b_col, M, N, K)


@pytest.mark.parametrize("a_col, b_col", [(False, False), (True, True)], ids=["rr", "cc"])
def test_the_default_tile_computes_a_at_b_with_a_ragged_k_edge(a_col, b_col):
    M, N, K = lay.shapes_for(lay.DEFAULT)[0]
    lay.check_gemm(lay.DEFAULT, a_col, b_col, M, N, K)


def test_the_emulation_catches_a_wrong_ldmatrix_transpose(monkeypatch):
    ld = lay.ldmatrix_x4
    monkeypatch.setattr(lay, "ldmatrix_x4", lambda s, a, trans: ld(s, a, not trans))
    with pytest.raises(AssertionError, match="C != A @ B"):
        lay.check_gemm(lay.CONFIGS[3], False, False, 21, 19, 37)


def test_the_emulation_catches_a_read_before_the_copies_are_waited_for(monkeypatch):
    wait = lay.Pipeline.wait
    monkeypatch.setattr(lay.Pipeline, "wait", lambda self, pending: wait(self, pending + 1))
    with pytest.raises(AssertionError, match="before its copies were waited for"):
        lay.check_gemm(lay.CONFIGS[3], False, False, 21, 19, 37)
