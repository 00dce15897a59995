"""The package version (its own module, so that the index format can record it without importing
the package's public names)."""

__version__ = "0.1.0"
