"""The ``gemmlab`` command. Each subcommand lives in its own module, which provides
``register(subparsers)`` (adds its parser and sets ``func``); this file only wires them up."""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand modules, in the order `gemmlab --help` lists them
COMMANDS = ("list", "bench", "verify", "inspect", "profile", "report")
_MODULES = {"list": "gemmlab.cmd_list", "bench": "gemmlab.bench", "verify": "gemmlab.cmd_verify",
            "inspect": "gemmlab.inspect", "profile": "gemmlab.profile", "report": "gemmlab.report"}


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(
        prog="gemmlab",
        description="The GEMM optimization ladder on your GPU: run, verify, time, inspect and profile every rung against cuBLAS.",
    )
    p.add_argument("--version", action="version", version=f"gemmlab {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(_MODULES[name]).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except (ValueError, TypeError, RuntimeError) as exc:
        from .launch import NoGPUError

        if isinstance(exc, NoGPUError):
            hint = "" if "gemmlab list" in str(exc) else (
                "\nWithout a GPU you can still run `gemmlab list` and `gemmlab inspect RUNG --arch sm_90a`.")
            print(f"gemmlab {args.command}: no GPU available: {exc}{hint}", file=sys.stderr)
            return 3
        print(f"gemmlab {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
