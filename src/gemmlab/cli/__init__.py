"""Layer 6, the top: the ``gemmlab`` command, one module per subcommand (``app`` wires them)."""

from .app import main

__all__ = ["main"]
