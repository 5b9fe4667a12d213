"""Nested dataclasses <-> YAML dictionaries, with type checks and `section.key=value` overrides.

Kept apart from the config itself so that the config file reads as a list of settings.

Override syntax (command line, after the YAML file):

    key=value               a top-level key
    section.key=value       a key inside a section (any depth: algorithm.resrl.rank=32)
    section.key=null        None (for optional keys)
    train.report_to=[tensorboard,wandb]   lists in YAML flow syntax

Values are parsed as YAML scalars (`true`, `3`, `0.5`, `[a, b]`), then checked against the
field's type; `1e-6` is accepted for a float field although YAML reads it as a string.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from resrl.errors import InputError


class ConfigError(InputError):
    """A bad configuration value; the message names the key (e.g. `train.group_size`)."""


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check (and lightly convert) `value` against type annotation `tp`; raise ConfigError naming `key`."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise ConfigError(f"config key '{key}' must not be null")
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(f"config key '{key}': {value!r} does not match {_type_name(tp)}")
    if origin is Literal:
        if value not in get_args(tp):
            raise ConfigError(f"config key '{key}' must be one of {list(get_args(tp))}, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key '{key}' must be a list, got {value!r}")
        (item_tp,) = get_args(tp)[:1] or (Any,)
        return [_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"config key '{key}' must be a mapping, got {value!r}")
        return dict(value)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"config key '{key}' is a section and needs a mapping, got {value!r}")
        return from_dict(tp, value, prefix=f"{key}.")
    if value is None:
        raise ConfigError(f"config key '{key}' must not be null (expected {_type_name(tp)})")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"config key '{key}' must be true or false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"config key '{key}' must be an integer, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "1e-6" as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"config key '{key}' must be a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"config key '{key}' must be a string, got {value!r}")
    return value


def from_dict(cls: type, data: dict, prefix: str = "") -> Any:
    """Build dataclass `cls` from a (nested) dict; unknown keys and wrong types raise ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(f"config section '{prefix.rstrip('.') or '<top>'}' must be a mapping")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    kwargs = {}
    renamed = getattr(cls, "RENAMED_KEYS", {})  # a section's keys that were renamed: say what to write instead
    for key, value in data.items():
        if key in renamed and key not in names:
            raise ConfigError(f"config key '{prefix}{key}' was renamed: {renamed[key]}")
        if key not in names:
            raise ConfigError(
                f"unknown config key '{prefix}{key}' (valid keys here: {', '.join(sorted(names))})"
            )
        kwargs[key] = _coerce(value, hints[key], f"{prefix}{key}")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:  # a section's own __post_init__ check
        import re

        match = re.search(r"\b[A-Za-z]+Config\.(\w+)", str(exc))
        where = f"config key '{prefix}{match.group(1)}'" if match else f"config section '{prefix.rstrip('.') or '<top>'}'"
        raise ConfigError(f"{where}: {exc}") from exc


def to_dict(obj: Any) -> Any:
    """Dataclass -> plain nested dict (YAML/JSON friendly)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `a.b.c=value` strings to a nested dict (in place) and return it."""
    import yaml

    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key=value or section.key=value")
        dotted, raw = item.split("=", 1)
        parts = [p for p in dotted.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"override {item!r} has an empty key")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: '{part}' is not a section")
            node = child
        node[parts[-1]] = value
    return data


def explicit_keys(data: dict, prefix: str = "") -> set[str]:
    """Dotted names of every leaf key present in a nested dict (which settings the user gave)."""
    keys = set()
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            keys |= explicit_keys(value, f"{name}.")
        keys.add(name)
    return keys
