"""--config FILE: a run's settings from its config.json, or a YAML or TOML file of the same
keys, turned back into the flags that make them, so argparse checks them as it checks flags.

Keys are Config's fields, as config.json writes them; null means the flag's default. A key
that is no field, a file that does not parse and a value of the wrong kind each end the run
with one line naming the file.
"""
from __future__ import annotations

import argparse
import json
import os

from dptrain.errors import JobError

FORMATS = (".json", ".yaml", ".yml", ".toml")
ALIASES = {"elastic"}  # an older config.json's "elastic": true is --elastic, i.e. --mode elastic
# config.json also records where the run ran; the launcher decides that, so these are skipped.
PLACEMENT = {"ranks", "hosts"}


def read(path: str, keys: set[str]) -> dict:
    """The file's settings; JobError for a missing or malformed file or an unknown key."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise JobError(f"--config {path}: unknown extension '{ext}' (use {', '.join(FORMATS)})")
    try:
        with open(path, "rb") as f:
            values = _parse(f.read(), ext)
    except FileNotFoundError:
        raise JobError(f"--config {path}: no such file") from None
    except (OSError, ValueError) as e:  # json, tomllib and yaml errors are ValueErrors or say why
        raise JobError(f"--config {path}: not a readable {ext[1:]} file "
                       f"({type(e).__name__})") from None
    if not isinstance(values, dict):
        raise JobError(f"--config {path}: expected a mapping of settings, got "
                       f"{type(values).__name__}")
    for key in values:
        if key not in keys | ALIASES | PLACEMENT:
            raise JobError(f"--config {path}: unknown key '{key}' (keys are those of a run's "
                           "config.json)")
    return {k: v for k, v in values.items() if k not in PLACEMENT}


def _parse(data: bytes, ext: str) -> object:
    """The file's content as Python values."""
    if ext == ".json":
        return json.loads(data)
    if ext == ".toml":
        import tomllib
        return tomllib.loads(data.decode())
    import yaml
    try:
        return yaml.safe_load(data)
    except yaml.YAMLError as e:
        raise ValueError(str(e)) from None


def as_flags(values: dict, parser: argparse.ArgumentParser, path: str) -> list[str]:
    """The command-line tokens that set these values (flags of the parser's actions)."""
    actions = {a.dest: a for a in parser._actions if a.option_strings}
    tokens: list[str] = []
    for key, value in values.items():
        action, flag = actions[key], actions[key].option_strings[-1]
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            if not isinstance(value, bool):
                raise JobError(f"--config {path}: {key} must be true or false, got {value!r}")
            tokens += [flag] if value == isinstance(action, argparse._StoreTrueAction) else []
        elif value is None:
            continue
        elif isinstance(value, (bool, dict)):
            raise JobError(f"--config {path}: {key} cannot be {json.dumps(value)}")
        elif isinstance(value, list):
            tokens += [flag, ",".join(str(v) for v in value)]
        else:
            tokens += [flag, str(value)]  # a float's str is its repr: every bit kept
    return tokens
