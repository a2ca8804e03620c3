"""A base install (``pip install gemmlab``, no extra) without a second virtual environment: each
command runs as ``python -m gemmlab ...`` in a child process whose ``sitecustomize`` blocks what
the extras bring (cuda-python's ``cuda.bindings``, CuPy, PyTorch, matplotlib; ``cuda.pathfinder``
is a base dependency and stays). Every command then either works (``list``, ``--help``) or prints
ONE line on stderr naming the extra to install and exits 4 -- before any GPU question, so the
same holds on a GPU machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import gemmlab
from gemmlab.core.deps import MissingDependencyError, require, require_all
from gemmlab.measure import arrays

DATA = Path(__file__).parent / "data"
SRC = str(Path(gemmlab.__file__).resolve().parents[1])  # the folder holding this very gemmlab

# What the extras install: cu13/cu12 -> cuda.bindings + CuPy, torch -> PyTorch, report -> matplotlib
EXTRA_MODULES = ("cuda.bindings", "cupy", "cupy_backends", "torch", "matplotlib", "optuna")

SITECUSTOMIZE = '''
import importlib.abc, os, sys

_BLOCKED = tuple(m for m in os.environ.get("GEMMLAB_TEST_BLOCK", "").split(",") if m)


class _BaseInstall(importlib.abc.MetaPathFinder):
    """Behave as if the extras' packages were not installed."""

    def find_spec(self, name, path=None, target=None):
        if any(name == m or name.startswith(m + ".") for m in _BLOCKED):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _BaseInstall())
'''

CU = ('"gemmlab[cu13]"', '"gemmlab[cu12]"')
TUNE = ('"gemmlab[tune]"',)
REPORT = ('"gemmlab[report]"',)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """run(*args) -> (rc, stdout, stderr) of `python -m gemmlab ARGS` as a base install would run it
    (``block``: the modules to hide; ``code``: run ``python -c CODE`` instead)."""
    site = tmp_path_factory.mktemp("base-install")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    cwd = tmp_path_factory.mktemp("cwd")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), SRC] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["COLUMNS"] = "120"

    def run(*args, code=None, block=EXTRA_MODULES, timeout=120):
        cmd = [sys.executable] + (["-c", code] if code else ["-m", "gemmlab", *args])
        p = subprocess.run(cmd, capture_output=True, text=True, env={**env, "GEMMLAB_TEST_BLOCK": ",".join(block)},
                           cwd=cwd, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    run.cwd = cwd
    return run


def test_the_blocker_hides_the_extras_but_not_the_base_dependencies(base):
    # if this failed, the commands below would run for real (on a GPU machine: benchmarks)
    code = ("import importlib\n"
            "for m in ('cuda.bindings.driver', 'cuda.bindings.nvrtc', 'cupy', 'torch', 'matplotlib.figure'):\n"
            "    try:\n        importlib.import_module(m)\n    except ImportError:\n        continue\n"
            "    raise SystemExit('importable: ' + m)\n"
            "import cuda.pathfinder, numpy, rich, pynvml, gemmlab\n"
            "print(gemmlab.__file__)\n")
    rc, out, err = base(code=code)
    assert rc == 0, err
    assert out.strip().startswith(SRC)


def test_python_m_gemmlab_help_exits_0(base):
    rc, out, err = base("--help")
    assert rc == 0 and "list" in out and "bench" in out and "report" in out and err == ""
    p = subprocess.run([sys.executable, "-m", "gemmlab", "--help"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))})
    assert p.returncode == 0 and "COMMAND" in p.stdout


@pytest.mark.parametrize("command", ["list", "bench", "verify", "inspect", "profile", "report", "tune"])
def test_every_command_has_help_in_a_base_install(base, command):
    rc, out, err = base(command, "--help")
    assert rc == 0 and out.startswith(f"usage: gemmlab {command}") and err == ""


def test_list_works_in_a_base_install(base):
    rc, out, err = base("list", "--slugs")
    assert rc == 0 and err == ""
    assert out.split() == [r.slug for r in gemmlab.kernels()]


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    return lines[0]


# every command that needs an extra, with small arguments (cheap should the blocker ever fail)
CASES = [
    ("bench", ["bench", "naive", "--shape", "64", "--max-samples", "1", "--min-samples", "1", "--warmup", "0", "--no-progress"], CU),
    ("bench", ["bench"], CU),
    ("verify", ["verify", "naive", "--shapes", "64x64x64"], CU),
    ("verify", ["verify"], CU),
    ("inspect", ["inspect", "wmma", "--dtype", "bf16", "--arch", "sm_80"], CU),
    ("inspect", ["inspect", "tile_2d", "--json"], CU),
    ("profile", ["profile", "naive", "--shape", "64"], CU),
    ("report", ["report", "--rungs", "naive", "--shape", "64", "--sweep-sizes", "64", "--sweep-rungs", "naive",
                "--no-profile", "--no-inspect", "--out", "rep"], CU + REPORT),
    ("report", ["report", "--from-json", str(DATA / "report_results.json"), "--out", "rep-json"], REPORT),
    ("tune", ["tune", "naive", "--shape", "64", "--budget", "1", "--no-progress"], TUNE),
    ("tune", ["tune", "naive", "--show"], TUNE),
]


@pytest.mark.parametrize("command,args,extras", CASES, ids=[" ".join(a[:2]) for _, a, _ in CASES])
def test_a_command_that_needs_an_extra_says_which_in_one_line_and_exits_4(base, command, args, extras):
    rc, out, err = base(*args)
    line = _one_line(err)
    assert rc == 4, (rc, out, err)
    assert line.startswith(f"gemmlab {command}: ")
    for extra in extras:
        assert extra in line, f"{extra} not named: {line}"
    assert "no GPU" not in line  # the dependency question comes first
    assert out == ""
    if command == "report":
        assert not any(run_dir.exists() for run_dir in (base.cwd / "rep", base.cwd / "rep-json"))


def test_report_from_json_with_matplotlib_needs_no_other_extra(base, tmp_path):
    # gemmlab[report] alone (cuda-python, CuPy, PyTorch hidden): the page is rebuilt, exit 0
    pytest.importorskip("matplotlib")
    rc, out, err = base("report", "--from-json", str(DATA / "report_results.json"), "--out", str(tmp_path),
                        block=("cuda.bindings", "cupy", "cupy_backends", "torch"))
    assert rc == 0, err
    assert (tmp_path / "report.html").is_file() and (tmp_path / "report.md").is_file()


# ---- the pieces, in process --------------------------------------------------------------------
def test_require_names_the_extra_in_one_line():
    with pytest.raises(MissingDependencyError) as e:
        require("matplotlib_not_a_real_module")
    assert "\n" not in str(e.value)
    with pytest.raises(MissingDependencyError) as e:
        require_all("cuda.bindings_not_real", "matplotlib.not_real", "matplotlib.also_not_real")
    msg = str(e.value)
    assert "\n" not in msg and '"gemmlab[cu13]"' in msg and '"gemmlab[report]"' in msg
    assert msg.count("gemmlab[report]") == 1  # one hint per extra
    require_all("json", "os.path")  # present: no error


def test_no_array_library_installed_is_a_missing_extra(monkeypatch):
    monkeypatch.setattr(arrays, "_installed", lambda name: False)
    with pytest.raises(MissingDependencyError, match=r'gemmlab\[cu13\].*gemmlab\[torch\]'):
        arrays.choose_lib(None, "fp32", [])
    with pytest.raises(MissingDependencyError, match="bf16 needs"):
        arrays.choose_lib(None, "bf16", [])
    # installed but not usable (no GPU, or a broken CUDA install): not an install question
    monkeypatch.setattr(arrays, "_installed", lambda name: name == "cupy")
    with pytest.raises(RuntimeError, match="no GPU array library"):
        arrays.choose_lib(None, "fp32", [])


def test_a_missing_results_file_is_refused_input_not_a_traceback(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from gemmlab.cli import main

    assert main(["report", "--from-json", str(tmp_path / "nope.json"), "--out", str(tmp_path / "rep")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gemmlab report: error:") and "nope.json" in err and len(err.splitlines()) == 1


def test_import_gemmlab_does_not_import_torch_and_gemmlab_torch_names_the_extra(base):
    # nothing blocked: even where PyTorch is installed, importing gemmlab leaves it alone
    rc, out, err = base(code="import sys, gemmlab\nprint('torch' in sys.modules)\n", block=())
    assert rc == 0 and out.strip() == "False", err
    # PyTorch blocked: gemmlab.torch (lazy attribute or import) is one line naming the extra
    for code in ("import gemmlab\ngemmlab.torch\n", "import gemmlab.torch\n"):
        rc, out, err = base(code=code)
        assert rc != 0 and "MissingDependencyError" in err and 'pip install "gemmlab[torch]"' in err, err
