"""The compile layer: NVRTC through cuda-python, no GPU needed; the disk cache."""

import os
import subprocess
import sys
import textwrap

import pytest

from gemmlab.core import compile as glc
from gemmlab.core.variant import Variant


def test_compiles_for_an_explicit_architecture_without_a_gpu(fresh_cache):
    ck = Variant.make("naive").compile("sm_90a")
    assert ck.cubin[:4] == b"\x7fELF"
    assert ".target sm_90a" in ck.ptx
    assert ck.arch == "sm_90a"


def test_parameters_reach_the_kernel_as_defines_not_source_edits(fresh_cache):
    ck = Variant.make("tile_2d", config={"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4}).compile("sm_80")
    assert "-DBM=64" in ck.options and "-DTM=4" in ck.options and "-DTHREADS=256" in ck.options


def test_second_compile_is_served_from_the_disk_cache(fresh_cache):
    first = Variant.make("naive").compile("sm_80")
    glc.clear_memory_cache()
    second = Variant.make("naive").compile("sm_80")
    assert not first.cache_hit and second.cache_hit
    assert second.cubin == first.cubin


def test_cache_key_changes_with_options_and_architecture(fresh_cache):
    a = Variant.make("naive").compile("sm_80")
    b = Variant.make("naive").compile("sm_90a")
    c = Variant.make("naive", a_col=True).compile("sm_80")
    assert len({a.key, b.key, c.key}) == 3


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupt_cache_entry_is_detected_and_rebuilt(fresh_cache, damage):
    good = Variant.make("naive").compile("sm_80")
    path = glc.cache_entry_path(good)
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        path.write_bytes(blob[:-10] + bytes([blob[-10] ^ 0xFF]) + blob[-9:])
    else:
        path.write_bytes(b"not a cubin at all")
    glc.clear_memory_cache()
    again = Variant.make("naive").compile("sm_80")
    assert not again.cache_hit
    assert again.cubin == good.cubin
    assert path.read_bytes() == blob  # rewritten whole


def test_cache_writes_leave_no_partial_files(fresh_cache):
    Variant.make("naive").compile("sm_80")
    leftovers = [p for p in fresh_cache.rglob("*") if p.is_file() and p.name.startswith(".tmp-")]
    assert leftovers == []


def test_concurrent_processes_share_the_cache_safely(fresh_cache):
    code = textwrap.dedent("""
        from gemmlab.core.variant import Variant
        for arch in ("sm_80", "sm_86", "sm_90a"):
            ck = Variant.make("coalesced").compile(arch)
            assert ck.cubin[:4] == b"\\x7fELF"
    """)
    env = dict(os.environ, GEMMLAB_CACHE_DIR=str(fresh_cache))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for _ in range(4)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0, 0]


def test_cache_dir_can_be_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMLAB_CACHE_DIR", "off")
    glc.clear_memory_cache()
    assert glc.cache_dir() is None
    assert Variant.make("naive").compile("sm_80").cubin


def test_compile_error_carries_kernel_name_options_and_log(fresh_cache, tmp_path, monkeypatch):
    bad = tmp_path / "kernels"
    bad.mkdir()
    (bad / "broken.cu").write_text('extern "C" __global__ void broken() { this is not C++; }\n')
    monkeypatch.setattr(glc, "KERNEL_DIR", bad)
    with pytest.raises(glc.CompileError) as info:
        glc.compile_source("broken.cu", "broken", "sm_80", {"BM": 7})
    err = info.value
    assert err.kernel == "broken"
    assert "-DBM=7" in err.options
    assert "error" in err.log and "broken.cu" in err.log
    assert "broken" in str(err) and "-DBM=7" in str(err)


def test_unknown_architecture_is_a_clear_error():
    with pytest.raises(ValueError, match="sm_XY"):
        Variant.make("naive").compile("hopper")


def test_a_kernel_compiled_in_this_process_is_returned_without_reading_its_source(fresh_cache, monkeypatch):
    first = Variant.make("naive").compile("sm_80")
    monkeypatch.setattr(glc, "_headers", lambda: (_ for _ in ()).throw(AssertionError("headers re-read")))
    assert Variant.make("naive").compile("sm_80") is first


def test_an_empty_nvrtc_log_is_read_into_a_fresh_buffer_not_the_shared_one_byte_bytes(fresh_cache, monkeypatch):
    """NVRTC reports a log of size 1 (just the terminator) when ptxas did not run; b" " * 1 would
    hand it the interpreter's shared b" " object to overwrite."""
    from gemmlab.core import toolchain

    nv = toolchain.nvrtc_module()
    handed = []
    monkeypatch.setattr(nv, "nvrtcGetProgramLogSize", lambda prog: (nv.nvrtcResult.NVRTC_SUCCESS, 1))
    monkeypatch.setattr(nv, "nvrtcGetProgramLog", lambda prog, buf: (handed.append(buf), (nv.nvrtcResult.NVRTC_SUCCESS,))[1])
    Variant.make("naive").compile("sm_80")
    shared = b" "
    assert handed and all(b is not shared and len(b) >= 1 for b in handed)
    assert b" " == bytes([32]) and " ".join("ab") == "a b"


def test_a_log_without_the_ptxas_report_is_compiled_again_until_ptxas_reports(fresh_cache, monkeypatch):
    """NVRTC 12.9+ serves programs from its own cache without running ptxas (an empty log): the
    compile is redone under a fresh unused macro, so the spill report is never missing."""
    sources = []
    real = glc._nvrtc_compile

    def first_one_from_nvrtcs_cache(kernel, source_name, source, headers, options):
        sources.append(source)
        cubin, ptx, log = real(kernel, source_name, source, headers, options)
        return (cubin, ptx, "") if len(sources) == 1 else (cubin, ptx, log)

    monkeypatch.setattr(glc, "_nvrtc_compile", first_one_from_nvrtcs_cache)
    ck = Variant.make("naive").compile("sm_80")
    assert len(sources) == 2 and sources[1].startswith(sources[0]) and "gl_ptxas_report_nonce" in sources[1]
    assert "gl_ptxas_report_nonce" in ck.ptx and ck.spill_bytes == 0
