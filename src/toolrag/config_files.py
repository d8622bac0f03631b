"""Reading the TOML configuration files of the gateway and the API: one way to fail, one way to resolve paths."""

from __future__ import annotations

import tomllib
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
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid {what} {source}: {problems}") from None


def beside(config_file: str | Path, location: str) -> str:
    """A file named in a configuration, taken from the configuration's folder unless absolute (or a URL)."""
    if "://" in location or Path(location).is_absolute():
        return location
    return str(Path(config_file).parent / location)
