"""The ``gemmlab`` command. Each subcommand lives in its own module of this package, which
provides ``register(subparsers)`` (adds its parser and sets ``func``); this file only wires them
up and turns the library's exceptions into one-line messages and exit codes:

* 0 success; 1 a check failed or the input was refused (the message names the problem);
* 2 usage error (argparse); 3 no usable GPU; 4 an optional dependency is missing (the message
  names the extra to install); 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from ..core.deps import MissingDependencyError
from ..core.driver import NoGPUError

# subcommand -> module of this package, in the order `gemmlab --help` lists them
COMMANDS = {"list": "listing", "bench": "bench", "verify": "verify", "inspect": "inspect",
            "profile": "profile", "tune": "tune", "report": "report", "compile": "compile"}

EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU, EXIT_MISSING = 1, 2, 3, 4
NO_GPU_HINT = ("Without a GPU: `gemmlab list`, `gemmlab inspect RUNG --arch sm_90a`, and "
               "`gemmlab report --from-json benchmarks/results/report_h100/results.json` "
               "(the worklog measured on an H100).")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    p = argparse.ArgumentParser(
        prog="gemmlab",
        description="The GEMM optimization ladder on your GPU: run, verify, time, inspect and profile every rung against cuBLAS.",
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
    except (ValueError, TypeError, RuntimeError, OSError) as exc:  # OSError: a file named on the command line
        print(f"gemmlab {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
