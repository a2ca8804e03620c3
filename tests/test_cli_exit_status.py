"""The command line's exit status is the same in every command: 2 for a malformed command line, 1
for a well-formed one that gemmlab refuses, and `gemmlab --help` is where it is written down."""

from __future__ import annotations

import pytest

from gemmlab.cli import main
from gemmlab.cli.app import EXIT_STATUS


def _exit(argv) -> int:
    """main's status whether argparse exits (SystemExit) or the command returns it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize("argv", [
    ["bench", "--shape", "12xfoo"],
    ["verify", "naive", "--shapes", "0x1x1"],
    ["profile", "naive", "--shape", "abc"],
    ["report", "--shape", "q"],
    ["report", "--sweep-sizes", "256,big"],
    ["tune", "naive", "--shape", "4096x7"],
    ["tune", "naive", "--shape", "64", "--devices", "first"],
    ["compile", "naive", "--layouts", "zz"],
    ["bench", "--dtype", "fp64"],
    ["bench", "--suite", "nope"],
])
def test_a_value_not_of_its_form_exits_2_naming_the_option(argv, capsys):
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    assert f"gemmlab {argv[0]}: error: argument --" in err


@pytest.mark.parametrize("argv, missing", [(["inspect"], "name a rung"), (["tune", "naive"], "--shape or --suite")])
def test_a_missing_argument_exits_2_and_points_to_the_help(argv, missing, capsys):
    pytest.importorskip("optuna")   # tune asks for its extra before reading its arguments
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    assert missing in err and f"gemmlab {argv[0]} --help" in err


@pytest.mark.parametrize("argv", [["bench", "nosuch"], ["verify", "nosuch"], ["inspect", "nosuch"],
                                  ["profile", "nosuch"], ["compile", "nosuch"], ["tune", "nosuch", "--shape", "64"]])
def test_an_unknown_rung_is_refused_input_in_every_command(argv, capsys):
    pytest.importorskip("optuna")
    assert _exit(argv) == 1
    assert "unknown kernel 'nosuch'" in capsys.readouterr().err


def test_a_configuration_the_rung_cannot_build_is_refused_input(capsys):
    assert _exit(["inspect", "naive", "--config", "BM=7"]) == 1
    assert "invalid configuration for rung 'naive'" in capsys.readouterr().err


def test_help_lists_every_exit_status_once(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert out.count("exit status") == 1
    for code, _ in EXIT_STATUS:
        assert f"  {code:>3}  " in out
