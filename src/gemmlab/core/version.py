"""The package's version, here so that every layer reads it without importing the package's top
(which imports the layers above core)."""

__version__ = "0.1.0"
