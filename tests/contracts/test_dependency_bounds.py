"""The libraries neurondesk runs on carry the bounds that are tested (issue 50 item 1): each runtime
dependency has a lower and an upper bound; the pinned test environment (constraints/test.txt, what
`make test` installs) sits inside them and agrees with every pin of the extras; and the newest-release lane
(`make test-latest`, .venv-latest) takes every runtime and framework dependency at its newest release."""

from __future__ import annotations

import re
import tomllib

from conftest import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
RUNTIME = [Requirement(r) for r in PROJECT["dependencies"]]
FRAMEWORKS = ["transformers", "accelerate", "lightning", "trl", "peft"]  # the workloads' frameworks (issue 50)


def pins(path: str) -> dict[str, Version]:
    """``name==version`` lines of a constraints file, by canonical name (a local label dropped)."""
    out = {}
    for line in (REPO / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path}: {line!r} is not a pin"
            out[canonicalize_name(name)] = Version(version.split("+")[0])
    return out


def makefile_variable(name: str) -> str:
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    return re.search(rf"^{name} :=(.*)$", text, re.M).group(1)


def test_every_runtime_dependency_has_a_lower_and_an_upper_bound() -> None:
    unbounded = [str(r) for r in RUNTIME
                 if not any(s.operator in (">=", ">") for s in r.specifier)
                 or not any(s.operator in ("<", "<=") for s in r.specifier)]
    assert not unbounded, f"runtime dependencies without a tested range: {unbounded}"


def test_the_pinned_test_environment_sits_inside_the_bounds() -> None:
    pinned = pins("constraints/test.txt")
    outside = [f"{r} (pinned {pinned.get(canonicalize_name(r.name))})" for r in RUNTIME
               if canonicalize_name(r.name) not in pinned or pinned[canonicalize_name(r.name)] not in r.specifier]
    assert not outside, f"constraints/test.txt is outside pyproject.toml's bounds: {outside}"
    # the lower bound is what the pinned lane tests: no release below it is claimed
    for r in RUNTIME:
        lower = next(Version(s.version) for s in r.specifier if s.operator == ">=")
        assert pinned[canonicalize_name(r.name)].release[:len(lower.release)] == lower.release, (
            f"{r}: the pinned lane tests {pinned[canonicalize_name(r.name)]}, so the lower bound is {lower}'s line")


def test_every_pin_of_the_extras_agrees_with_the_constraints() -> None:
    """`pip install -c constraints/test.txt -e '.[test,workload]'` fails on a pin that differs."""
    pinned = pins("constraints/test.txt")
    extras = [Requirement(r) for name in ("test", "workload") for r in PROJECT["optional-dependencies"][name]]
    differing = [f"{r} (constraints: {pinned.get(canonicalize_name(r.name))})" for r in extras
                 if canonicalize_name(r.name) not in pinned or pinned[canonicalize_name(r.name)] not in r.specifier]
    assert not differing, differing
    install = [line for line in (REPO / "Makefile").read_text().splitlines() if "'.[test,workload]'" in line]
    assert install and all("-c constraints/test.txt" in line for line in install)
    assert "torch==2.13.0" in (REPO / "constraints" / "torch213.txt").read_text().splitlines()


def test_the_newest_release_lane_takes_every_runtime_and_framework_dependency() -> None:
    latest = {canonicalize_name(Requirement(w.strip("'")).name) for w in makefile_variable("LATEST_PACKAGES").split()}
    missing = [name for name in [r.name for r in RUNTIME] + FRAMEWORKS if canonicalize_name(name) not in latest]
    assert not missing, f"not in the Makefile's LATEST_PACKAGES: {missing}"
    # newest whatever the bounds say: named alone (transformers held to its 5.x line), neurondesk without deps
    bounded = [w for w in makefile_variable("LATEST_PACKAGES").split() if re.search(r"[<>=]", w)]
    assert bounded == ["'transformers>=5,<6'"], bounded
    assert "$(LATEST)/bin/pip install -q --no-deps -e ." in (REPO / "Makefile").read_text()
    assert "torch-xla" not in makefile_variable("LATEST_PACKAGES")
