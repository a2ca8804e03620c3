"""The Hopper kernels' shape (issue 41): the WGMMA rungs are compositions of named part types, the
stage ring and its producer, the tile order and the k-tile wait are written once, and the consumers
reach the epilogue only through the part the rung chose. Read from the kernel sources (no compile)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[1] / "src" / "gemmlab" / "kernels"
WS_RUNGS = ("21_wgmma_ws.cu", "22_wgmma_tf32.cu")
HOPPER_RUNGS = ("19_wgmma_tma.cu",) + WS_RUNGS
# what an epilogue part gives the consumers (ws_epi16.cuh's list)
EPILOGUE_MEMBERS = ("epi_row", "epi_stage", "tma_store_now", "epi_prefetch", "store_tile_tma", "store_rows", "hold_tile",
                    "hold_nothing", "write_held_box_tma", "epi_drain")


def _code(name: str) -> str:
    """The file's text without its comments."""
    text = (KERNELS / name).read_text()
    return re.sub(r"//[^\n]*", "", text)


@pytest.mark.parametrize("rung", WS_RUNGS)
def test_each_warp_specialized_rung_chooses_its_schedule_mainloop_and_epilogue_by_type(rung):
    code = _code(rung)
    assert re.search(r"using Schedule = GlPersistentSchedule<", code)
    assert re.search(r"using Mainloop = \w+", code)
    assert re.search(r"using Epilogue = GlWsEpi(16|32);", code)


def test_rung_19_chooses_its_schedule_and_mainloop_by_type():
    code = _code("19_wgmma_tma.cu")
    assert re.search(r"using Schedule = GlTilePerBlock<", code)
    assert re.search(r"using Mainloop = GlMainloopSS<", code)


def test_rung_19_loads_through_the_rings_producer_and_waits_through_its_consumers():
    code = _code("19_wgmma_tma.cu")
    assert "produce(sm, sched," in code
    assert "consume_ktiles(ml, sm, ring," in code


@pytest.mark.parametrize("rung", HOPPER_RUNGS)
def test_no_hopper_rung_writes_its_own_loads_waits_or_wgmmas(rung):
    code = _code(rung)
    for call in ("gl_mbar_wait(", "GlOperand<", "GlWgmma<", "gl_wgmma_ktile<"):
        assert call not in code, call


def test_the_stage_ring_is_written_once():
    """The mbarrier waits of the load loop and the k-tile loop, and the stages' carve-up, in ring.cuh alone."""
    waits = sorted(p.name for p in KERNELS.glob("*.cu*") if p.name != "hopper.cuh" and "gl_mbar_wait(" in _code(p.name))
    assert waits == ["ring.cuh"]
    carve = sorted(p.name for p in KERNELS.glob("*.cu*") if re.search(r"constexpr int A_PANELS\b", _code(p.name)))
    assert carve == ["ring.cuh"]


def test_rung_22s_register_a_mainloop_is_a_part_beside_the_descriptor_one():
    assert re.search(r"struct GlMainloopRegA \{", _code("mainloop.cuh"))


@pytest.mark.parametrize("rung", WS_RUNGS)
def test_a_warp_specialized_rung_defines_no_part_of_its_own(rung):
    """Its file is geometry and part choices: no struct and no device function of its own."""
    code = _code(rung)
    assert not re.search(r"\bstruct\b", code)
    assert not re.search(r"__device__", code)


def test_the_entry_composes_the_three_parts():
    assert "consume<Schedule, Mainloop, Epilogue>(" in _code("ws_entry.cuh")


def test_the_grouped_tile_order_is_called_from_the_schedulers_alone():
    callers = sorted(p.name for p in KERNELS.glob("*.cu*") if re.search(r"gl_group_raster<\w+>\(", _code(p.name)))
    assert callers == ["schedule.cuh"]


@pytest.mark.parametrize("part,struct", [("ws_epi16.cuh", "GlWsEpi16"), ("ws_epi32.cuh", "GlWsEpi32")])
def test_each_epilogue_part_is_one_type_giving_the_consumers_interface(part, struct):
    code = _code(part)
    assert re.search(rf"\bstruct {struct} \{{", code)
    for member in EPILOGUE_MEMBERS:
        assert re.search(rf"static __device__ __forceinline__ \w+ {member}\(", code), member


def test_the_consumers_reach_the_epilogue_only_through_the_chosen_part():
    code = _code("ws_consume.cuh")
    for member in EPILOGUE_MEMBERS:
        assert re.search(rf"Epilogue::{member}\(", code), member
        assert not re.search(rf"(?<![\w:]){member}\(", code), f"{member} called without the part"
