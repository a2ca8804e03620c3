"""The ``gemmlab`` command. Each subcommand lives in its own module of this package, which
provides ``register(subparsers)`` (adds its parser and sets ``func``); this file only wires them
up and turns the library's exceptions into one-line messages and the exit status of
``EXIT_STATUS``, the one place it is written down (``gemmlab --help`` shows it; the README's copy
is generated from it).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from ..core.deps import MissingDependencyError
from ..core.driver import NoGPUError
from .common import UsageError

# subcommand -> module of this package, in the order `gemmlab --help` lists them
COMMANDS = {"list": "listing", "bench": "bench", "verify": "verify", "inspect": "inspect",
            "profile": "profile", "tune": "tune", "report": "report", "compile": "compile"}

EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU, EXIT_MISSING = 1, 2, 3, 4
# the same in every command: form (2) is what can be judged from the command line alone; a
# well-formed request that gemmlab refuses after reading it (1) names what it refused
EXIT_STATUS = (
    ("0", "success"),
    ("1", "a check failed (verify, a failed compile or tuning worker), or the input was refused: an unknown "
          "rung, a dtype or architecture a rung does not support, an invalid configuration, options that do "
          "not go together, a file that is not what the command reads; the message names it"),
    ("2", "usage: the command line is malformed (an unknown option, a missing argument or value, a value "
          "not of its form: a shape, a dtype, a suite, a number); the message names the option"),
    ("3", "no usable NVIDIA GPU for a command that needs one"),
    ("4", "an optional dependency is missing; the message names the extra to install"),
    ("130", "interrupted"),
)
NO_GPU_HINT = ("Without a GPU: `gemmlab list`, `gemmlab inspect RUNG --arch sm_90a`, and "
               "`gemmlab report --from-json benchmarks/results/report_h100/results.json` "
               "(the worklog measured on an H100 on 2026-11-22, before rungs 20 and 22-24).")


class _EpilogAsWritten(argparse.HelpFormatter):
    """Keeps the epilog's line breaks (the exit status, one code a line), wrapping each long line
    under its text; the description and arguments are wrapped as usual."""

    def _fill_text(self, text, width, indent):
        import textwrap

        lines = []
        for line in text.splitlines():
            head = 7 if line.startswith("  ") else 0   # "  NNN  ": a code's text starts in column 7
            lines += textwrap.wrap(line, width, initial_indent=indent, subsequent_indent=indent + " " * head) or [""]
        return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    from ..core.version import __version__

    p = argparse.ArgumentParser(
        prog="gemmlab",
        description="The GEMM optimization ladder on your GPU: run, verify, time, inspect and profile every rung against cuBLAS.",
        epilog="exit status, the same in every command:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_STATUS),
        formatter_class=_EpilogAsWritten,
    )
    p.add_argument("--version", action="version", version=f"gemmlab {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        importlib.import_module(f"{__package__}.{module}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # a library call that compiles logs a warning (core.launch.compile_for_launch); the commands
    # compile by design, behind their progress bars, so only errors are worth a line here
    logging.getLogger("gemmlab").setLevel(logging.ERROR)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except MissingDependencyError as exc:
        print(f"gemmlab {args.command}: {exc}", file=sys.stderr)
        return EXIT_MISSING
    except NoGPUError as exc:
        print(f"gemmlab {args.command}: needs an NVIDIA GPU, and none is usable here ({exc}).\n{NO_GPU_HINT}",
              file=sys.stderr)
        return EXIT_NO_GPU
    except UsageError as exc:
        print(f"gemmlab {args.command}: error: {exc} (gemmlab {args.command} --help)", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, TypeError, RuntimeError, OSError) as exc:  # OSError: a file named on the command line
        print(f"gemmlab {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
