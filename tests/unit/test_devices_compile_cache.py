"""The Neuron compile cache: location rules, a real directory tree, and the growth warnings."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from neurondesk.collectors.devices.compile_cache import (
    DEFAULT_CACHE_DIR,
    CacheLocation,
    compare_scans,
    locate_cache,
    rescan,
    scan_cache,
)
from neurondesk.core.events.codec import event_from_dict, event_to_dict
from neurondesk.core.events.device_events import CacheScan


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, CacheLocation(DEFAULT_CACHE_DIR, "default")),
        ({"NEURON_COMPILE_CACHE_URL": "/data/cache"}, CacheLocation("/data/cache", "NEURON_COMPILE_CACHE_URL")),
        (
            {"NEURON_COMPILE_CACHE_URL": "/data/cache", "NEURON_CC_FLAGS": "--model-type=transformer --cache_dir=/fast/c -O1"},
            CacheLocation("/fast/c", "NEURON_CC_FLAGS"),
        ),
        ({"NEURON_CC_FLAGS": "--cache_dir '/my cache' --retry_failed_compilation"}, CacheLocation("/my cache", "NEURON_CC_FLAGS")),
        ({"NEURON_CC_FLAGS": "--cache_dir=/a --cache_dir=/b"}, CacheLocation("/b", "NEURON_CC_FLAGS")),
        ({"NEURON_CC_FLAGS": "-O2"}, CacheLocation(DEFAULT_CACHE_DIR, "default")),
        ({"NEURON_COMPILE_CACHE_URL": "s3://bucket/prefix"}, CacheLocation("s3://bucket/prefix", "NEURON_COMPILE_CACHE_URL", True)),
        ({"NEURON_CC_FLAGS": "--cache_dir=file:///x/y"}, CacheLocation("/x/y", "NEURON_CC_FLAGS")),
        ({"NEURON_CC_FLAGS": "--cache_dir=/q 'unbalanced"}, CacheLocation("/q", "NEURON_CC_FLAGS")),
    ],
    ids=["default", "url", "flags-beat-url", "spaced-quoted", "last-wins", "no-cache-flag", "s3", "file-url", "bad-quote"],
)  # fmt: skip
def test_locate_cache_precedence(env: dict[str, str], expected: CacheLocation) -> None:
    assert locate_cache(env) == expected


def _entry(root: Path, version: str, module: str, files: dict[str, bytes]) -> int:
    d = root / f"neuronxcc-{version}" / module
    d.mkdir(parents=True)
    for name, data in files.items():
        (d / name).write_bytes(data)
    return sum(len(v) for v in files.values())


def build_cache(root: Path) -> int:
    v1, v2 = "2.21.33363.0+82129205", "2.8.0.25+a3ad0f342"
    hlo = {"model.hlo_module.pb": b"h" * 100, "compile_flags.json": b"[]"}
    return sum(
        [
            _entry(root, v1, "MODULE_16389337710168549518+e30acd3a", {**hlo, "model.neff": b"n" * 1000, "model.done": b""}),
            _entry(root, v1, "MODULE_198775565831884870+d41d8cd9", {**hlo, "model.log": b"error NCC_EOOM002"}),
            _entry(root, v1, "MODULE_2+d41d8cd9", {**hlo, "model.log": b"x", "model.hlo_module.pb.lock": b""}),  # failed, stale lock
            _entry(root, v1, "MODULE_3+d41d8cd9", {**hlo, "model.hlo_module.pb.lock": b""}),  # compiling now
            _entry(root, v1, "MODULE_4+d41d8cd9", hlo),  # nothing yet
            _entry(root, v2, "MODULE_56f0d314fda2b6e1e336+617f6939", {"model.neff": b"n" * 10}),  # neff, no marker
        ]
    )  # fmt: skip


def test_scan_a_real_cache_tree(tmp_path: Path) -> None:
    root = tmp_path / "neuron-compile-cache"
    size = build_cache(root)
    (root / "README").write_text("stray file counts in size, not as an entry")
    s = scan_cache(CacheLocation(str(root), "NEURON_CC_FLAGS"), t=10.0)
    assert (s.t, s.path, s.source, s.exists, s.remote) == (10.0, str(root), "NEURON_CC_FLAGS", True, False)
    assert s.entries == {"done": 2, "failed": 2, "locked": 1, "empty": 1}
    assert s.size_bytes == size + len("stray file counts in size, not as an entry")
    assert s.compiler_versions == ["2.21.33363.0+82129205", "2.8.0.25+a3ad0f342"]
    assert s.free_bytes is not None and 0 < s.free_bytes <= s.disk_total_bytes
    assert s.error is None
    assert event_from_dict(event_to_dict(s)) == s


def test_old_nested_layout_is_classified_by_its_whole_subtree(tmp_path: Path) -> None:
    deep = (
        tmp_path
        / "USER_neuroncc-2.2.0.73+0af5a171c"
        / "MODULE_7"
        / "MODULE_0_SyncTensorsGraph.1_2_h"
        / "uuid"
    )
    deep.mkdir(parents=True)
    (deep / "graph.neff").write_bytes(b"n")
    s = scan_cache(tmp_path)
    assert s.source == "given" and s.entries["done"] == 1 and s.compiler_versions == ["2.2.0.73+0af5a171c"]


def test_missing_cache_dir_reports_free_space_of_the_parent(tmp_path: Path) -> None:
    s = scan_cache(tmp_path / "not" / "yet")
    assert not s.exists and s.size_bytes is None and s.free_bytes is not None
    assert s.entries == {"done": 0, "failed": 0, "locked": 0, "empty": 0}


def test_remote_cache_is_reported_not_scanned() -> None:
    s = scan_cache(locate_cache({"NEURON_COMPILE_CACHE_URL": "s3://bucket/cache"}), t=1.0)
    assert s.remote and not s.exists and s.size_bytes is None and s.free_bytes is None


def test_low_free_space_warns(tmp_path: Path) -> None:
    build_cache(tmp_path)
    assert scan_cache(tmp_path, min_free_ratio=0.0).warnings == []
    (w,) = scan_cache(tmp_path, min_free_ratio=1.01).warnings  # any real disk is below 101 %
    assert w.startswith("only ") and str(tmp_path) in w


def _scan(t: float, entries: int, size: int, free: int = 100 * 2**30, path: str = "/c") -> CacheScan:
    return CacheScan(t=t, path=path, exists=True, size_bytes=size, entries={"done": entries}, free_bytes=free)


def test_compare_scans_flags_many_new_entries_as_recompiling() -> None:
    (w,) = compare_scans(_scan(0, 3, 0), _scan(60, 13, 10 * 2**20))
    assert "gained 10 entries in 60 s (10.0/min)" in w and "recompiling" in w
    assert compare_scans(_scan(0, 3, 0), _scan(60, 5, 10 * 2**20)) == []  # 2 new: a normal compile
    assert compare_scans(_scan(0, 3, 0), _scan(3600, 13, 10 * 2**20)) == []  # 10 in an hour: slow


def test_compare_scans_projects_when_the_disk_fills() -> None:
    (w,) = compare_scans(_scan(0, 1, 0), _scan(60, 1, 2 * 2**30, free=10 * 2**30))
    assert "grew 2.0 GiB in 60 s" in w and "full in about 5 min" in w
    assert compare_scans(_scan(0, 1, 0), _scan(60, 1, 2**20, free=10 * 2**30)) == []  # days away


def test_compare_scans_needs_time_to_pass_on_the_same_cache() -> None:
    assert compare_scans(_scan(60, 1, 0), _scan(60, 50, 2**40, free=1)) == []
    assert compare_scans(_scan(0, 1, 0), _scan(60, 50, 2**40, free=1, path="/other")) == []
    assert compare_scans(_scan(0, 1, 0), dataclasses.replace(_scan(60, 50, 0), exists=False)) == []


def test_rescan_adds_growth_warnings_to_the_new_scan(tmp_path: Path) -> None:
    first = scan_cache(tmp_path, t=0.0)
    build_cache(tmp_path)
    second = rescan(first, tmp_path, t=30.0)
    assert sum(second.entries.values()) == 6
    assert any("gained 6 entries in 30 s" in w for w in second.warnings)
    assert not any("gained" in w for w in rescan(None, tmp_path, t=31.0).warnings)
