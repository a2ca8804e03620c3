"""On-line tuning of ``kernel="auto"``, off by default: the first call of a shape that no tuned
entry matches measures a few candidate configurations on the caller's operands and keeps the
fastest, as Triton's autotuner does.

Switch it on with ``GEMMLAB_AUTOTUNE=1`` (read at import) or ``gemmlab.autotune(True)``. Each new
signature (dtype, precision, the kernel view's shape and layout, GPU) is tuned once per process:
``dispatch.candidates`` offers auto's own choice, the nearest entries of the tuned and shipped
tables and the rule's choice; the tuner (``tune.online``, installed by the package root: it
measures with the one timing engine, which lives above core) times them and stores the winner
where ``kernel="auto"`` reads tuned configurations (``dispatch.tuned_path()``), so later calls and
later processes take it without measuring. A signature the tuned table already holds exactly is
not measured again.

Bounds: at most ``budget_s`` seconds of wall time per signature (``GEMMLAB_AUTOTUNE_BUDGET``,
default 3; NVRTC compiles count: a candidate is only started while time is left, auto's own always)
and at most ``candidates`` candidates (default 4). Never while the call's stream is capturing a
CUDA graph: measuring would launch outside the graph's order and synchronize inside it, so the
call takes the ordinary choice and is tuned at its first call outside a capture. ``plan()`` says
which: source "online" with the timings, or why not.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, replace
from typing import Callable

ENV = "GEMMLAB_AUTOTUNE"
ENV_BUDGET = "GEMMLAB_AUTOTUNE_BUDGET"
DEFAULT_BUDGET_S = 3.0
DEFAULT_CANDIDATES = 4


@dataclass(frozen=True)
class Settings:
    enabled: bool = False
    budget_s: float = DEFAULT_BUDGET_S
    candidates: int = DEFAULT_CANDIDATES


def _check(budget_s, candidates) -> None:
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not budget_s > 0:
        raise ValueError(f"the on-line tuning budget must be a positive number of seconds, got {budget_s!r}")
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise ValueError(f"on-line tuning needs at least one candidate, got {candidates!r}")


def from_environment(env=os.environ) -> Settings:
    """The settings ``GEMMLAB_AUTOTUNE`` ("1", "true", "on": on) and ``GEMMLAB_AUTOTUNE_BUDGET``
    (seconds) ask for; ValueError naming the variable when one is malformed."""
    flag = env.get(ENV, "").strip().lower()
    if flag not in ("", "0", "1", "true", "false", "on", "off"):
        raise ValueError(f"{ENV}={env[ENV]!r}: use 1 (on) or 0 (off)")
    budget = env.get(ENV_BUDGET, "").strip()
    try:
        seconds = float(budget) if budget else DEFAULT_BUDGET_S
        _check(seconds, DEFAULT_CANDIDATES)
    except ValueError:
        raise ValueError(f"{ENV_BUDGET}={env[ENV_BUDGET]!r}: a positive number of seconds") from None
    return Settings(enabled=flag in ("1", "true", "on"), budget_s=seconds)


_lock = threading.Lock()
_settings = from_environment()
_tuner: Callable | None = None       # (problem, device, precision, operands, settings) -> Choice | None
_seen: set[tuple] = set()            # signatures measured (or being measured) in this process


def settings() -> Settings:
    return _settings


def configure(enabled: bool = True, *, budget_s: float | None = None, candidates: int | None = None) -> Settings:
    """Switch on-line tuning on or off and set its bounds (None: keep the current one); returns
    the settings now in force."""
    global _settings
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, got {enabled!r}")
    new = replace(_settings, enabled=enabled, budget_s=_settings.budget_s if budget_s is None else budget_s,
                  candidates=_settings.candidates if candidates is None else candidates)
    _check(new.budget_s, new.candidates)
    with _lock:
        _settings = new
    return new


def install(tuner: Callable | None) -> None:
    """The function that measures the candidates (the package root installs ``tune.online``'s)."""
    global _tuner
    _tuner = tuner


def forget() -> None:
    """Forget which signatures were tuned in this process (a test, a new tuned table)."""
    with _lock:
        _seen.clear()


def claim(key: tuple) -> bool:
    """True for the first caller of ``key`` in this process (it tunes it), False afterwards."""
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
        return True


def release(key: tuple) -> None:
    """Give ``key`` back unmeasured (its call was captured: tune it at the next one)."""
    with _lock:
        _seen.discard(key)


def tuner() -> Callable | None:
    return _tuner
