"""Reading the TOML configuration files of the gateway and the API: one way to fail, one way to resolve paths."""

from __future__ import annotations

import difflib
import tomllib
import typing
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from toolrag.errors import ConfigError

Settings = TypeVar("Settings", bound=BaseModel)


def read_toml(path: str | Path, model: type[Settings], what: str) -> Settings:
    """Parse and validate `path` as `model`; errors name the file and, for invalid values, every key at fault."""
    source = Path(path)
    try:
        data: dict[str, Any] = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{what} {source} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} {source}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source} is not valid TOML: {exc}") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        known = _setting_names(model)
        problems = "; ".join(_problem(error, known) for error in exc.errors())
        raise ConfigError(f"invalid {what} {source}: {problems}") from None


def _problem(error: Any, known: set[str]) -> str:
    """One key at fault, and for an unknown key the setting it most likely misspells (`servers.a.argz`: `args`)."""
    where = ".".join(map(str, error["loc"])) or "(top)"
    if error["type"] == "extra_forbidden" and error["loc"]:
        close = difflib.get_close_matches(str(error["loc"][-1]), sorted(known), n=1, cutoff=0.6)
        if close:
            return f"{where}: unknown setting (did you mean `{close[0]}`?)"
        return f"{where}: unknown setting"
    return f"{where}: {error['msg']}"


def _setting_names(model: Any, seen: set[Any] | None = None) -> set[str]:
    """Every setting name of `model` and of the models its fields hold (in lists and tables too)."""
    seen = set() if seen is None else seen
    if model in seen:
        return set()
    seen.add(model)
    names: set[str] = set()
    for name, field in model.model_fields.items():
        names.add(field.alias or name)
        for inner in _models_in(field.annotation):
            names |= _setting_names(inner, seen)
    return names


def _models_in(annotation: Any) -> list[Any]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def beside(config_file: str | Path, location: str) -> str:
    """A file named in a configuration, taken from the configuration's folder unless absolute (or a URL)."""
    if "://" in location or Path(location).is_absolute():
        return location
    return str(Path(config_file).parent / location)
