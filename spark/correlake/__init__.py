"""correlake: deterministic message correlation over a Delta Lake."""

__version__ = "0.1.0"
