"""environment.yml (conda) pins exactly what requirements.txt (pip) pins."""
from __future__ import annotations

import pytest

import re

import yaml

from conftest import ROOT

pytestmark = pytest.mark.fast  # no launcher: in-process checks


def pip_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def conda_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pins = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep.get("pip", []):
                name, _, version = line.partition("==")
                pins[name.strip().lower()] = version.strip()
        elif "=" in dep:
            name, _, version = dep.partition("=")
            pins[name.strip().lower()] = version.strip()
    pins["horovod"] = str(env["variables"]["HOROVOD_VERSION"])
    return pins


def test_every_pip_pin_is_in_environment_yml_at_the_same_version() -> None:
    pip, conda = pip_pins(), conda_pins()
    assert pip, "requirements.txt pins nothing"
    assert {k: conda.get(k) for k in pip} == pip


def test_horovod_build_flags_agree_with_setup_script() -> None:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    flags = {k for k, v in env["variables"].items() if k.startswith("HOROVOD_WITH") and v == "1"}
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert flags == set(re.findall(r"(HOROVOD_WITH\w+)=1", setup))
