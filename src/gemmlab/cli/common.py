"""Arguments several commands share, defined once: dtype, configuration, array library, shapes.

Every command that takes ``--dtype`` offers the dtypes of ``core.dtypes``; every command that
takes ``--config`` accepts the one grammar of ``core.config`` (a preset name, ``KEY=VALUE,...``,
JSON; repeatable, merged left to right).
"""

from __future__ import annotations

import argparse

from ..core.dtypes import ALL_DTYPES
from ..core.precision import PRECISIONS
from ..measure.arrays import LIBS


class UsageError(ValueError):
    """The command line is malformed (a missing argument, a value not of its form): exit 2, as
    argparse's own errors. A well-formed request that gemmlab refuses raises ValueError: exit 1
    (``app.EXIT_STATUS`` says which is which)."""


def checked(parse):
    """An argparse type: the text itself, once ``parse(text)`` accepts it; its ValueError becomes an
    argparse error (exit 2) naming the option, before the command does anything."""
    def check(text: str) -> str:
        try:
            parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text
    check.__name__ = parse.__name__   # argparse names the type in some of its messages
    return check


def sizes(text: str) -> list[int]:
    """``--sweep-sizes``: comma-separated square sizes, each at least 1."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if part:
            if not (part.isascii() and part.isdigit() and int(part) > 0):
                raise ValueError(f"sizes {text!r}: give whole numbers >= 1, comma-separated (e.g. 256,1024)")
            out.append(int(part))
    if not out:
        raise ValueError("no sizes given")
    return out


def suite_name(text: str) -> str:
    """argparse type of ``--suite``: the name, once ``core.shapes.suite`` accepts it (an argparse
    error, exit 2, naming the suites otherwise)."""
    from ..core.shapes import suite
    try:
        suite(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_dtype(p, default: str | None, help_default: str | None = None, repeatable: bool = False) -> None:
    text = help_default or (f"default {default}" if default else "default: every dtype a rung supports")
    p.add_argument("--dtype", default=default, choices=list(ALL_DTYPES), action="append" if repeatable else "store",
                   help=f"element type{'; repeatable' if repeatable else ''} ({text})")


def add_precision(p) -> None:
    p.add_argument("--precision", default=None, choices=list(PRECISIONS),
                   help="what float32 operands are multiplied in: fp32 (exact, CUDA cores; the default), tf32 "
                        "(TF32 tensor cores) or 3xtf32 (three TF32 products: FP32-accurate); fp16/bf16 take only "
                        "their own")


def add_config(p, what: str = "the rung named") -> None:
    p.add_argument("--config", action="append", default=None, metavar="CONFIG",
                   help=f"tile configuration of {what}: a preset name, KEY=VALUE[,KEY=VALUE...] or a JSON "
                        "object; repeatable (merged left to right)")


def add_lib(p) -> None:
    p.add_argument("--lib", choices=list(LIBS), default=None,
                   help="array library for the operands and cuBLAS (default: torch if it has CUDA, else cupy)")


def add_timing(p) -> None:
    """The timing engine's options (``gemmlab.measure.timing.Settings``), shared by every command
    that times."""
    from ..measure.timing import L2_MODES, ORDERS, SPINS, Settings

    d = Settings()
    g = p.add_argument_group("timing (one engine for bench, report and tune; see gemmlab.measure.timing)")
    g.add_argument("--l2", choices=L2_MODES, default=d.l2,
                   help=f"cold: flush L2 before every timed launch; hot: leave the operands in L2 (default {d.l2})")
    g.add_argument("--no-flush", dest="l2", action="store_const", const="hot", help="the same as --l2 hot")
    g.add_argument("--min-samples", type=int, default=d.min_samples, help=f"default {d.min_samples}")
    g.add_argument("--max-samples", type=int, default=d.max_samples, help=f"default {d.max_samples}")
    g.add_argument("--noise", type=float, default=d.target_error, metavar="REL",
                   help=f"stop sampling once the median's relative standard error is at most REL (default {d.target_error})")
    g.add_argument("--time-cap", type=float, default=d.time_cap_s, metavar="S",
                   help=f"timed seconds per entry at most, once it has 3 samples (default {d.time_cap_s})")
    g.add_argument("--warmup", type=int, default=d.warmup, help=f"untimed runs per entry first (default {d.warmup})")
    g.add_argument("--spin-us", type=float, default=d.spin_us,
                   help=f"GPU busy time before every timed launch, in microseconds (default {d.spin_us:.0f})")
    g.add_argument("--spin", choices=SPINS, default=d.spin,
                   help=f"busy: the spin kernel keeps every SM and the memory reading; idle: one thread (default {d.spin})")
    g.add_argument("--order", choices=ORDERS, default=d.order, help=f"order within a round (default {d.order})")
    g.add_argument("--seed", type=int, default=None, help="seed of the shuffled order (recorded in the JSON)")


def timing_settings(args):
    from ..measure.timing import Settings

    return Settings(l2=args.l2, spin_us=args.spin_us, spin=args.spin, warmup=args.warmup, min_samples=args.min_samples,
                    max_samples=args.max_samples, target_error=args.noise, time_cap_s=args.time_cap,
                    order=args.order, seed=args.seed)
