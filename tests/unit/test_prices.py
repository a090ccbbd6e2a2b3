import json
import math

import pytest

from neurondesk.core.node.prices import (
    PRICE_FLAG,
    peak_dense_flops,
    resolve_price,
)
from neurondesk.store.price_files import load_price_table

BRIEF_ROWS = {
    "trn1.2xlarge": ("neuron", 1),
    "trn1.32xlarge": ("neuron", 16),
    "trn1n.32xlarge": ("neuron", 16),
    "trn2.48xlarge": ("neuron", 16),
    "inf2.xlarge": ("neuron", 1),
    "inf2.8xlarge": ("neuron", 1),
    "inf2.24xlarge": ("neuron", 6),
    "inf2.48xlarge": ("neuron", 12),
    "g5.xlarge": ("cuda", 1),
    "g5.12xlarge": ("cuda", 4),
    "g6.xlarge": ("cuda", 1),
    "g6e.xlarge": ("cuda", 1),
    "p4d.24xlarge": ("cuda", 8),
    "p4de.24xlarge": ("cuda", 8),
    "p5.48xlarge": ("cuda", 8),
    "p5en.48xlarge": ("cuda", 8),
}


@pytest.fixture(scope="module")
def table():
    return load_price_table()


def test_bundled_table_has_every_row_with_kind_count_source_and_date(table):
    for name, (kind, count) in BRIEF_ROWS.items():
        row = table.instances[name]
        assert (row.kind, row.accelerators) == (kind, count), name
        assert row.source in table.sources, name
        assert len(row.as_of) == 10 and row.as_of[4] == "-", name
        assert row.region == "us-east-1"
        assert row.chip in table.chips, name
    assert table.warnings == ()


def test_trn1_2xlarge_is_the_pricing_md_figure_with_its_source(table):
    q = resolve_price("trn1.2xlarge", None, table)
    assert q.price_per_hour == 1.34375
    assert q.source == "bundled table: VAN-2601 (2026-01-21), us-east-1"


@pytest.mark.parametrize(
    ("name", "post_cut", "pre_cut"),
    [
        ("p5.48xlarge", 55.04, 98.32),
        ("p4d.24xlarge", 21.957642, 32.7726),
        ("p4de.24xlarge", 27.44705, 40.96575),
        ("p5en.48xlarge", 63.296, 84.80),
    ],
)
def test_p4_p5_use_post_june_2025_prices(table, name, post_cut, pre_cut):
    price = resolve_price(name, None, table).price_per_hour
    assert price == post_cut
    assert price != pre_cut


def test_per_accelerator_prices_match_pricing_md_derived_column(table):
    derived = {
        "trn1.32xlarge": 1.344,
        "trn1n.32xlarge": 1.549,
        "inf2.24xlarge": 1.082,
        "g5.12xlarge": 1.418,
        "p4d.24xlarge": 2.745,
        "p5.48xlarge": 6.88,
        "p5en.48xlarge": 7.912,
    }
    for name, per_chip in derived.items():
        row = table.instances[name]
        assert row.price_per_hour / row.accelerators == pytest.approx(per_chip, abs=0.001), name


def test_trn2_without_a_us_east_1_price_takes_the_newest_listed_elsewhere(table):
    # none listed in us-east-1; us-east-2 listed 85.964 (SKY-25H1, by 2025-05) and 35.76 (VAN-2511, 2025-11-30)
    q = resolve_price("trn2.48xlarge", None, table)
    assert q.price_per_hour == 35.76
    assert q.source == "us-east-2 list price of 2025-11-30 (VAN-2511), none listed in us-east-1"


def test_a_type_priced_nowhere_says_how_to_give_a_price_in_one_short_line(table):
    q = resolve_price("p5e.48xlarge", None, table)
    assert q.price_per_hour is None
    assert q.source == (f"no price for p5e.48xlarge in us-east-1: pass {PRICE_FLAG} or "
                        "`neurondesk prices refresh --region R`")


def test_override_wins_and_is_validated(table):
    q = resolve_price("trn1.2xlarge", 0.5, table)
    assert (q.price_per_hour, q.source) == (0.5, "--price-per-hour")
    assert resolve_price("trn2.48xlarge", 40.0, table).price_per_hour == 40.0
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="--price-per-hour"):
            resolve_price("trn1.2xlarge", bad, table)


def test_unknown_and_missing_instance_types(table):
    q = resolve_price("x9.huge", None, table)
    assert q.price_per_hour is None
    assert q.source == "unknown instance type 'x9.huge': pass --price-per-hour"
    q = resolve_price(None, None, table)
    assert q.price_per_hour is None and "--price-per-hour" in q.source
    assert resolve_price("  TRN1.2XLARGE\n", None, table).price_per_hour == 1.34375


def _write(path, instances):
    path.write_text(json.dumps({"region": "us-west-2", "instances": instances}))
    return path


def test_local_table_overrides_row_by_row(tmp_path):
    local = _write(
        tmp_path / "prices.json",
        {
            "trn1.2xlarge": {
                "price_per_hour": 1.5,
                "source": "API",
                "as_of": "2026-11-01",
                "accelerators": 1,
                "chip": "trainium",
                "kind": "neuron",
            },
        },
    )
    table = load_price_table(local)
    q = resolve_price("trn1.2xlarge", None, table)
    assert q.price_per_hour == 1.5
    assert q.source == f"local table {local}: API (2026-11-01), us-west-2"
    # rows the local table lacks still come from the bundled one
    assert resolve_price("g5.xlarge", None, table).source.startswith("bundled table: ")
    assert table.warnings == ()


def test_missing_local_table_means_bundled(tmp_path):
    table = load_price_table(tmp_path / "absent.json")
    assert resolve_price("trn1.2xlarge", None, table).price_per_hour == 1.34375
    assert table.warnings == ()


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps(
            {
                "instances": {
                    "trn1.2xlarge": {
                        "price_per_hour": -3,
                        "source": "X",
                        "as_of": "d",
                        "accelerators": 1,
                        "chip": "trainium",
                        "kind": "neuron",
                    }
                }
            }
        ),
        json.dumps(
            {
                "instances": {
                    "trn1.2xlarge": {
                        "price_per_hour": None,
                        "source": "X",
                        "as_of": "d",
                        "accelerators": 1,
                        "chip": "trainium",
                        "kind": "neuron",
                    }
                }
            }
        ),
        json.dumps(
            {
                "instances": {
                    "trn1.2xlarge": {
                        "price_per_hour": 2.0,
                        "source": "X",
                        "as_of": "d",
                        "accelerators": 1,
                        "chip": "trainium",
                        "kind": "tpu",
                    }
                }
            }
        ),
        json.dumps({"instances": {"trn1.2xlarge": {"price_per_hour": 2.0}}}),
        json.dumps([1, 2]),
    ],
)
def test_unusable_local_table_is_ignored_with_a_warning(tmp_path, content):
    local = tmp_path / "prices.json"
    local.write_text(content)
    table = load_price_table(local)
    assert resolve_price("trn1.2xlarge", None, table).price_per_hour == 1.34375
    assert len(table.warnings) == 1 and str(local) in table.warnings[0]


def test_peak_dense_flops(table):
    assert peak_dense_flops("trn1.32xlarge", table) == 16 * 190e12
    assert peak_dense_flops("p5.48xlarge", table) == pytest.approx(8 * 989.4e12)  # dense, not 1979
    assert peak_dense_flops("trn2.48xlarge", table, "fp8") == 16 * 1299e12
    assert peak_dense_flops("g5.xlarge", table, "fp8") is None  # A10G has no FP8
    assert peak_dense_flops("x9.huge", table) is None


@pytest.mark.parametrize("extra", [{"chips": [1]}, {"sources": [1]}, {"chips": "x"}, {"sources": 3},
                                   {"chips": {"trainium": {"source": "S", "note": [1]}}}])
def test_local_table_with_chips_or_sources_of_the_wrong_shape_is_ignored_with_a_warning(tmp_path, extra):
    row = {"price_per_hour": 2.0, "source": "X", "as_of": "d", "accelerators": 1, "chip": "trainium",
           "kind": "neuron"}
    local = tmp_path / "prices.json"
    local.write_text(json.dumps({"instances": {"trn1.2xlarge": row}, **extra}))
    table = load_price_table(local)
    assert resolve_price("trn1.2xlarge", None, table).price_per_hour == 1.34375
    assert len(table.warnings) == 1 and str(local) in table.warnings[0]
    assert ("chips" in table.warnings[0]) or ("sources" in table.warnings[0]) or ("note" in table.warnings[0])


def test_cli_prices_and_run_survive_a_local_table_with_chips_a_list(tmp_path):
    import subprocess
    import sys

    from conftest import REPO, base_env

    cfg = tmp_path / "cfg"
    (cfg / "neurondesk").mkdir(parents=True)
    (cfg / "neurondesk" / "prices.json").write_text(json.dumps({"instances": {}, "chips": [1]}))
    env = {**base_env(tmp_path), "XDG_CONFIG_HOME": str(cfg)}
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "prices"], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "ignored local price table" in p.stderr and "'chips': expected an object" in p.stderr


def test_a_price_too_large_for_a_float_is_a_bad_row_not_a_crash(tmp_path):
    # found by benchmarks/fuzz.py: math.isfinite(10**400) raised OverflowError out of load_price_table
    local = tmp_path / "prices.json"
    local.write_text('{"instances": {"trn1.2xlarge": {"price_per_hour": 1' + "0" * 400 + ', "source": "X", '
                     '"as_of": "d", "accelerators": 1, "chip": "trainium", "kind": "neuron"}}}')
    table = load_price_table(local)
    assert resolve_price("trn1.2xlarge", None, table).price_per_hour == 1.34375
    assert len(table.warnings) == 1 and "positive number" in table.warnings[0]
