"""The version, in one place: the package metadata (pyproject.toml) and `toolrag --version` read it here."""

__version__ = "0.3.0"
