"""The search strategies: Optuna's samplers, driven through ask/tell by ``tune.search``.

* ``exhaustive``: every candidate of the pruned space, in order (no sampler decides: the search
  enqueues each configuration, Optuna only stores it);
* ``grid``: Optuna's GridSampler over the registry's value lists, in its random order (the
  constraint-refused points cost nothing: no compile);
* ``random``: RandomSampler;
* ``tpe``: TPESampler, multivariate (the parameters of a tile depend on each other), with the
  constant liar so that a batch asked before its results are told is spread out;
* ``cmaes``: CmaEsSampler on the value indices (CMA-ES needs ordered numbers: ``tune.space``);
* ``auto``: exhaustive when the pruned space fits the budget (or has at most ``AUTO_EXHAUSTIVE``
  candidates without one), else TPE.

Every sampler takes a seed, so a replay (``benchmarks/tune_strategies.py``) is repeatable.
"""

from __future__ import annotations

from .store import optuna

STRATEGIES = ("auto", "exhaustive", "grid", "random", "tpe", "cmaes")
AUTO_EXHAUSTIVE = 256


def resolve(strategy: str, candidates: int, budget: int | None) -> str:
    """The concrete strategy of ``strategy`` for a pruned space of ``candidates``."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    if strategy != "auto":
        return strategy
    fits = candidates <= budget if budget is not None else candidates <= AUTO_EXHAUSTIVE
    return "exhaustive" if fits else "tpe"


def sampler(strategy: str, params: dict[str, tuple[int, ...]], seed: int | None = None):
    """The Optuna sampler of a concrete strategy over ``params`` (value lists; the trials hold
    indices into them)."""
    opt = optuna()
    S = opt.samplers
    if strategy in ("exhaustive", "random"):
        # exhaustive: the search enqueues every trial; the sampler only answers if a worker asks
        # after another took the last queued configuration (the answer is then a repeat or a new point)
        return S.RandomSampler(seed=seed)
    if strategy == "grid":
        return _Grid({k: list(range(len(v))) for k, v in params.items()}, seed=seed)
    if strategy == "tpe":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", opt.exceptions.ExperimentalWarning)  # multivariate
            return S.TPESampler(seed=seed, multivariate=True, constant_liar=True,
                                n_startup_trials=min(10, max(4, 2 * len(params))))
    if strategy == "cmaes":
        require_cmaes()
        return S.CmaEsSampler(seed=seed, n_startup_trials=1, warn_independent_sampling=False)
    raise ValueError(f"no sampler for strategy {strategy!r}")


def require_cmaes() -> None:
    from ..core.deps import MissingDependencyError

    try:
        import cmaes  # noqa: F401 - Optuna's CmaEsSampler imports it on first use
    except ImportError:
        raise MissingDependencyError('cmaes (the cmaes strategy) is not installed: pip install "gemmlab[tune]"') from None


def _grid_class():
    opt = optuna()

    class Grid(opt.samplers.GridSampler):
        """GridSampler without its stop: once the grid is visited it calls ``study.stop()``,
        which raises outside ``study.optimize``; the search knows itself when the space is
        exhausted (every candidate recorded)."""

        def after_trial(self, study, trial, state, values) -> None:
            return None

    return Grid


def _Grid(search_space, seed=None):
    return _grid_class()(search_space, seed=seed)
