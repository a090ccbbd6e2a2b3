"""core.compare and core.checks on summaries built by hand: the three rules, payback, ranking,
and every check's failure line."""

from __future__ import annotations

import copy
import math

import pytest

from neurondesk.core.rules.checks import Thresholds, describe, evaluate
from neurondesk.core.rules.compare import choose_target, compare
from neurondesk.core.summary.types import Summary, load_summary
from neurondesk.reports.compare_writer import to_csv, to_markdown

CONFIG = {"batch_size": 8, "seq_len": 512, "lr": 1e-4, "seed": 0, "precision": "bf16",
          "data_order": "batch i seeded by seed*1000003+i", "model": {"d_model": 512}, "param_count": 1000}


def summary_json(run_id="a", kind="neuron", instance="trn1.2xlarge", price=1.34375, step_s=0.25, compile_s=100.0,
                 steps=400, reached=120, ttt=150.0, target=2.5, precision="bf16", last=2.1, **config) -> dict:
    """A summary as summary.json holds one (the fields compare and the checks read)."""
    return {
        "summary_version": 2, "run_id": run_id, "command": ["python", "train.py"], "device": {"kind": kind, "name": kind},
        "precision": precision, "config": {**CONFIG, **config}, "steps": steps, "steps_requested": steps,
        "warmup_steps": 5, "first_compile_s": compile_s or None, "compile_total_s": compile_s,
        "compile_count": 2 if compile_s else 0, "recompiles_after_warmup": 0, "compiles": [],
        "steady": {"step_time_s": step_s, "samples_per_s": 8 / step_s, "tokens_per_s": 4096 / step_s},
        "loss": {"first": 9.0, "last": last, "target": target, "steps_to_target": reached,
                 "time_to_target_s": ttt if reached else None, "nonfinite": 0},
        "cost": {"instance_type": instance, "price_per_hour": price, "price_source": "bundled table",
                 "per_1k_steps_steady_usd": None if price is None else price / 3600 * step_s * 1000,
                 "per_1k_steps_all_in_usd": None, "per_million_tokens_usd": None},
        "mfu": 0.31, "hfu": None, "mfu_note": "6 × N × tokens/s ÷ peak",
    }


def summary(*args, **kwargs) -> Summary:
    return load_summary(summary_json(*args, **kwargs))


def messages(c, level="warn"):
    return [w["message"] for w in c["warnings"] if w["level"] == level]


def test_each_config_difference_is_one_warning():
    a = summary("a")
    for key, value, words in (("batch_size", 16, "batch size"), ("seq_len", 1024, "sequence length"),
                              ("lr", 3e-4, "learning rate"), ("seed", 1, "seed"),
                              ("data_order", "shuffled", "data order")):
        b = summary("b", **{key: value})
        got = messages(compare([a, b]))
        assert got == [f"{words} differs: A {CONFIG[key]}; B {value}"], key
    assert messages(compare([a, summary("b")])) == [] and messages(compare([a, a]), "loud") == []


def test_a_run_without_configuration_cannot_be_checked_and_says_so():
    b = summary("b")
    b.config = None
    assert messages(compare([summary("a"), b])) == [
        "B declared no configuration (no neurondesk-config line): batch size, sequence length, lr, seed "
        "and data order cannot be checked"]


def test_precision_mismatch_is_loud_in_warnings_markdown_and_verdict():
    c = compare([summary("a", precision="fp32"), summary("b", precision="bf16-autocast")])
    assert messages(c, "loud") == ["PRECISION DIFFERS (A fp32, B bf16-autocast): speed, cost and convergence are "
                                   "not comparable; rerun with the same --precision"]
    assert c["verdict"].startswith("NOT LIKE FOR LIKE (precision differs): ")
    assert "> **WARNING: PRECISION DIFFERS" in to_markdown(c)
    assert 'warning:loud,"PRECISION DIFFERS (A fp32, B bf16-autocast)' in to_csv(c)
    assert c["verdict"].endswith("A and B tie on cost to loss 2.5 ($0.0560)")


def test_runs_that_miss_the_target_are_not_ranked_on_cost_to_target():
    # B is far cheaper per step but never reached the loss: it must not win on cost-to-target
    a = summary("a", price=21.5, ttt=600.0)
    b = summary("b", kind="cuda", instance="g5.xlarge", price=1.006, reached=None, last=2.7)
    c = compare([a, b], target_loss=2.5)
    cost = next(r for r in c["rows"] if r["key"] == "cost_to_target_usd")
    assert cost["values"] == [pytest.approx(21.5 / 3600 * 600), None] and cost["best"] is None
    assert c["ranking"] == {"basis": "cost_to_target_usd", "better": "lower", "order": ["A"],
                            "unranked": [{"run": "B", "why": "did not reach loss 2.5 (last 2.7)"}]}
    assert c["verdict"].startswith("A is the only run ranked on cost to loss 2.5 ($3.58); not ranked: B (did not")


def test_ranking_on_cost_to_target_with_ratio():
    a = summary("a", price=21.5, ttt=600.0)  # $3.583
    b = summary("b", kind="cuda", instance="p4d.24xlarge", price=21.957642, ttt=900.0)  # $5.489
    c = compare([b, a], target_loss=2.5)
    assert c["ranking"]["order"] == ["B", "A"]
    ratio = (21.957642 * 900) / (21.5 * 600)
    assert c["verdict"].startswith(f"B ranks first on cost to loss 2.5: $3.58 against $5.49 for A ({ratio:.2f}×)")


def test_without_prices_ranking_falls_back_to_throughput():
    no_target = {"price": None, "target": None, "reached": None}
    c = compare([summary("a", step_s=0.5, **no_target), summary("b", step_s=0.25, **no_target)])
    assert c["ranking"]["basis"] == "samples_per_s" and c["ranking"]["order"] == ["B", "A"]
    assert c["verdict"] == "B ranks first on samples/s (steady): 32.0 against 16.0 for A (2.00×)"
    # a common recorded target is used without --target-loss: ranked on time to it when unpriced
    c = compare([summary("a", price=None, ttt=90.0), summary("b", price=None, ttt=60.0)])
    assert c["target_loss"] == 2.5 and c["ranking"]["basis"] == "time_to_target_s"
    assert c["ranking"]["order"] == ["B", "A"]


def test_payback_steps_and_repeated_runs_with_a_warm_cache():
    # A compiles 90 s more and saves 0.3 s per step: 300 steps; its runs are 120 steps -> 3 runs
    a = summary("a", compile_s=100.0, step_s=0.5, steps=120)
    b = summary("b", kind="cuda", instance="g5.xlarge", price=1.006, compile_s=10.0, step_s=0.8)
    c = compare([a, b])
    (e,) = c["payback"]
    assert (e["run"], e["against"], e["steps"], e["runs"], e["run_steps"]) == ("A", "B", 300, 3, 120)
    assert e["extra_compile_s"] == pytest.approx(90.0) and e["saved_per_step_s"] == pytest.approx(0.3)
    # in dollars: A pays 1.34375 $/h, B 1.006 $/h
    extra = (1.34375 * 100 - 1.006 * 10) / 3600
    saved = (1.006 * 0.8 - 1.34375 * 0.5) / 3600
    assert e["steps_in_usd"] == math.ceil(extra / saved)
    assert c["payback_text"] == [f"A's extra 90.0 s of compile (against B) is paid back after 300 steps "
                                 f"(300.0 ms saved per step), i.e. 3 runs of 120 steps when later runs hit a "
                                 f"warm compile cache; in dollars after {e['steps_in_usd']:,} steps"]
    slower = compare([summary("a", compile_s=100.0, step_s=0.9), summary("b", compile_s=0.0, step_s=0.8)])
    (e,) = slower["payback"]
    assert e["steps"] is None and "never paid back" in slower["payback_text"][0]


def test_ties_have_no_best_and_target_choice():
    c = compare([summary("a"), summary("b")])
    assert all(r["best"] is None for r in c["rows"])
    assert choose_target([summary("a", target=2.5), summary("b", target=2.5)], None) == (2.5, [])
    assert choose_target([summary("a", target=2.5), summary("b", target=3.0)], 2.0) == (2.0, [])
    target, warn = choose_target([summary("a", target=2.5), summary("b", target=None)], None)
    assert target is None and "pass --target-loss" in warn[0]
    c = compare([summary("a", target=2.5), summary("b", target=None)])
    assert next(r for r in c["rows"] if r["key"] == "steps_to_target")["values"] == [None, None]
    with pytest.raises(ValueError, match="at least two"):
        compare([summary("a")])


# ---------------------------------------------------------------------- checks
def run(**over) -> Summary:
    s = summary_json(steps=20)
    s.update(steps_requested=20, first_compile_s=40.0, recompiles_after_warmup=0,
             loss={"first": 9.0, "last": 3.0, "nonfinite": 0})
    for k, v in over.items():
        s[k] = v
    return load_summary(s)


ALL = Thresholds(max_recompiles_after_warmup=0, loss_finite=True, max_first_compile_s=60, min_samples_per_s=10)


def test_a_clean_summary_passes_every_check():
    assert evaluate(run(), ALL) == []
    assert describe(ALL) == ("steps ran, recompiles after warm-up <= 0, loss finite, first compile <= 60 s, "
                             "samples/s >= 10")


def test_each_check_fails_with_its_own_line():
    compiles = [{"step": 7, "cause": "shape-change", "location": "train.py:88"},
                {"step": 1, "cause": "new-graph", "location": "train.py:90"}]
    assert evaluate(run(recompiles_after_warmup=1, compiles=compiles), ALL) == [
        "1 recompile(s) after warm-up (training step >= 5, or an evaluation after the first), max 0: "
        "step 7 shape-change at train.py:88"]
    assert evaluate(run(loss={"first": 9.0, "last": float("nan"), "nonfinite": 1}), ALL) == [
        "loss not finite: 1 nan/inf loss value(s), last nan"]
    assert evaluate(run(loss={"first": None, "last": None}), ALL)[0].startswith("loss not finite: no loss value")
    assert evaluate(run(first_compile_s=75.5), ALL) == ["first compile took 75.5 s, max 60 s"]
    s = run(steady={"samples_per_s": 4.25})
    assert evaluate(s, ALL) == ["steady samples/s 4.2 below min 10"]
    s = run(steady={"samples_per_s": None})
    assert evaluate(s, ALL)[0].startswith("steady samples/s unknown (no steady step")
    assert evaluate(run(steps=12), Thresholds()) == ["ran 12 of 20 requested steps"]
    assert evaluate(run(steps=0), Thresholds())[0].startswith("no training step was seen")


def test_a_loss_that_recovered_from_nan_still_fails_and_thresholds_are_inclusive():
    assert evaluate(run(loss={"first": 9.0, "last": 3.0, "nonfinite": 2}), ALL) == [
        "loss not finite: 2 nan/inf loss value(s), last 3.0"]
    edge = run(first_compile_s=60.0, steady={"samples_per_s": 10.0})
    assert evaluate(edge, ALL) == []
    eager = run(first_compile_s=None)
    assert evaluate(eager, ALL) == []  # nothing compiled: the first-compile check holds
    assert evaluate(copy.deepcopy(eager), Thresholds(max_recompiles_after_warmup=None)) == []
