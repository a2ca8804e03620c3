"""The one grammar for a rung's tile configuration, shared by the API and every command.

A configuration is given as

* nothing (``None``): the rung's defaults;
* a mapping ``{"BM": 64, "BN": 64}``;
* a string: a preset name (``"64x64"``), ``KEY=VALUE`` pairs separated by commas
  (``"BM=64,BN=64"``), a JSON object (``'{"BM": 64}'``), or a preset followed by overrides
  (``"64x64,BK=8"``);
* a sequence of such strings (the CLI's repeatable ``--config``), merged left to right.

``parse_config`` turns any of these into a ``ConfigSpec`` (an optional preset plus explicit
values); ``Rung.config`` resolves it against the rung's parameters and constraints. Values are
integers (``0x40`` is accepted); keys are the rung's parameter names, matched case-insensitively.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Sequence, Union


@dataclass(frozen=True)
class ConfigSpec:
    preset: str | None = None
    values: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.preset is not None or bool(self.values)

    def as_dict(self) -> dict:
        """The JSON form: ``{"preset": name or None, "values": {KEY: value}}``."""
        return {"preset": self.preset, "values": dict(self.values)}


ConfigLike = Union[None, str, Mapping[str, int], Sequence[str], ConfigSpec]


def _int(key: str, v) -> int:
    if isinstance(v, bool):
        raise ValueError(f"config {key}={v!r}: the value must be an integer")
    if isinstance(v, int):
        return v
    try:
        return int(str(v).strip(), 0)
    except ValueError:
        raise ValueError(f"config {key}={v!r}: the value must be an integer") from None


def _parse_text(text: str, preset: str | None, values: dict[str, int]) -> str | None:
    t = text.strip()
    if not t:
        return preset
    if t.startswith("{"):
        try:
            obj = json.loads(t)
        except json.JSONDecodeError as exc:
            raise ValueError(f"config {t!r} is not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"config {t!r}: JSON must be an object of KEY: VALUE")
        for k, v in obj.items():
            values[str(k)] = _int(k, v)
        return preset
    for part in t.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep:
            if preset is not None and preset != key.strip():
                raise ValueError(f"config names two presets ({preset!r} and {key.strip()!r}); give one")
            preset = key.strip()
            continue
        if not key.strip():
            raise ValueError(f"config entry {part!r}: expected KEY=VALUE (e.g. BM=64)")
        values[key.strip()] = _int(key.strip(), val)
    return preset


def parse_config(spec: ConfigLike) -> ConfigSpec | None:
    """Any accepted form of a configuration -> ``ConfigSpec`` (None when nothing was given)."""
    if spec is None or isinstance(spec, ConfigSpec):
        return spec or None
    if isinstance(spec, Mapping):
        return ConfigSpec(None, {str(k): v for k, v in spec.items()}) if spec else None
    if isinstance(spec, (bytes, bytearray)):
        raise TypeError("config must be a str, a mapping or a list of str, not bytes")
    items = [spec] if isinstance(spec, str) else list(spec)
    preset: str | None = None
    values: dict[str, int] = {}
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"config entries must be strings, got {type(item).__name__}")
        preset = _parse_text(item, preset, values)
    out = ConfigSpec(preset, values)
    return out or None


def format_config(cfg: Mapping[str, int]) -> str:
    """The ``KEY=VALUE,...`` text of a resolved configuration (parses back to the same values)."""
    return ",".join(f"{k}={v}" for k, v in cfg.items())
