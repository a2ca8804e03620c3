"""The one progress bar of long runs (precompile, bench, report, and the tuner): rich, on
stderr, a no-op when disabled (``--no-progress``). In the lowest layer so that every layer can use it."""

from __future__ import annotations


class Progress:
    """A rich progress bar over ``total`` units of work.

    ``update(description, advance, total_delta)`` moves it; ``step(description)`` closes the
    previous step and names the next (for runs made of named steps); usable as a context manager.
    """

    def __init__(self, total: int, enabled: bool = True, label: str | None = None, transient: bool = True):
        self.total = total
        self._p = None
        self._task = None
        self._stepping = False
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

            cols = ([TextColumn(f"[bold]{label}[/bold]")] if label else []) + [
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
            self._p = RichProgress(*cols, console=Console(stderr=True), transient=transient)
            self._p.start()
            self._task = self._p.add_task("starting", total=total)

    def update(self, description: str | None = None, advance: int = 0, total_delta: int = 0) -> None:
        if self._p is None:
            return
        kw = {}
        if description is not None:
            kw["description"] = description
        if total_delta:
            self.total += total_delta
            kw["total"] = self.total
        self._p.update(self._task, advance=advance, **kw)

    def step(self, description: str) -> None:
        """Count the step in progress as done and start the next one."""
        self.update(description, advance=1 if self._stepping else 0)
        self._stepping = True

    def stop(self) -> None:
        if self._p is not None:
            self._p.update(self._task, completed=self.total)
            self._p.stop()
            self._p = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
