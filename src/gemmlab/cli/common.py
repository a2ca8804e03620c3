"""Arguments several commands share, defined once: dtype, configuration, array library, shapes.

Every command that takes ``--dtype`` offers the dtypes of ``core.dtypes``; every command that
takes ``--config`` accepts the one grammar of ``core.config`` (a preset name, ``KEY=VALUE,...``,
JSON; repeatable, merged left to right).
"""

from __future__ import annotations

from ..core.dtypes import DTYPES
from ..measure.arrays import LIBS


def add_dtype(p, default: str | None, help_default: str | None = None) -> None:
    text = help_default or (f"default {default}" if default else "default: every dtype a rung supports")
    p.add_argument("--dtype", default=default, choices=list(DTYPES), help=f"element type ({text})")


def add_config(p, what: str = "the rung named") -> None:
    p.add_argument("--config", action="append", default=None, metavar="CONFIG",
                   help=f"tile configuration of {what}: a preset name, KEY=VALUE[,KEY=VALUE...] or a JSON "
                        "object; repeatable (merged left to right)")


def add_lib(p) -> None:
    p.add_argument("--lib", choices=list(LIBS), default=None,
                   help="array library for the operands and cuBLAS (default: torch if it has CUDA, else cupy)")
