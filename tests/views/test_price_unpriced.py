"""A price, or one clear line asking for it (issue 50, item 5): a type with no price in a refreshed
table's region keeps the price listed elsewhere, every price source is one short line, and nothing
derived from a missing price is shown as a number (the compile share of the cost was 19.0% on an
unpriced trn2 run)."""

from __future__ import annotations

import json

import pytest

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.price_events import PriceResolved
from neurondesk.core.figures.run_figures import run_figures
from neurondesk.core.node.prices import SOURCE_WIDTH, bundled_price_table, instance_info_price, resolve_price
from neurondesk.core.reduce.state import RunState
from neurondesk.core.rules.compare import compare
from neurondesk.core.summary.build import run_summary
from neurondesk.reports import compare_writer
from neurondesk.reports.summary_writer import to_markdown
from neurondesk.store.price_files import load_price_table

PID = 777


def test_every_price_source_of_the_bundled_table_is_one_short_line():
    table = bundled_price_table()
    assert SOURCE_WIDTH <= 160
    for it in [*table.instances, "x9.huge", None]:
        for quote in (resolve_price(it, None, table), instance_info_price(it or "x9.huge", table)):
            assert "\n" not in quote.source and len(quote.source) <= SOURCE_WIDTH, quote.source


def test_a_refreshed_region_that_lists_no_price_keeps_the_price_listed_elsewhere(tmp_path):
    # `prices refresh --region eu-west-1` found no trn1.32xlarge: the bundled us-east-1 price still answers,
    # and says where it is from
    local = tmp_path / "prices.json"
    local.write_text(json.dumps({"region": "eu-west-1", "instances": {"trn1.32xlarge": {
        "price_per_hour": None, "source": "AWS-PRICELIST", "as_of": "2026-12-01", "accelerators": 16,
        "chip": "trainium", "kind": "neuron", "note": "no On-Demand hourly price in eu-west-1"}}}))
    q = resolve_price("trn1.32xlarge", None, load_price_table(local))
    assert q.price_per_hour == 21.5
    assert q.source == "us-east-1 list price of 2026-01-21 (VAN-2601), none listed in eu-west-1"
    # trn2 keeps the bundled us-east-2 listing through a refresh of another region that lists none
    local.write_text(json.dumps({"region": "us-west-2", "instances": {"trn2.48xlarge": {
        "price_per_hour": None, "source": "AWS-PRICELIST", "as_of": "2026-12-01", "accelerators": 16,
        "chip": "trainium2", "kind": "neuron", "note": "none"}}}))
    q = resolve_price("trn2.48xlarge", None, load_price_table(local))
    assert (q.price_per_hour, q.source) == (35.76, "us-east-2 list price of 2025-11-30 (VAN-2511), none listed in us-west-2")


def priced_run(instance: str, compile_s: float = 19.0, steps: int = 40) -> RunState:
    """A run whose price the recorder resolved from the bundled table, as it journals it."""
    quote = resolve_price(instance, None, bundled_price_table())
    s = RunState()
    s.apply(ev.RunStarted(t=0.0, run_id=instance, command=["python", "train.py"], warmup_steps=2))
    s.apply(PriceResolved(t=0.0, instance_type=quote.instance_type, price_per_hour=quote.price_per_hour,
                          source=quote.source))
    s.apply(ev.ProcessAttached(t=0.1, pid=PID))
    s.apply(ev.CompileFinished(t=compile_s, source="probe", duration_s=compile_s, pid=PID, step=0))
    t = compile_s
    s.apply(ev.StepEnded(t=t, pid=PID, step=0, duration_s=compile_s, samples=8, tokens=512, compiles=1))
    for i in range(1, steps):
        t += 2.0
        s.apply(ev.StepEnded(t=t, pid=PID, step=i, duration_s=2.0, samples=8, tokens=512))
    return s


def _row(md: str, label: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {label} |")).split("|")[2].strip()


def test_an_unpriced_run_shows_no_figure_derived_from_a_price():
    state = priced_run("p5e.48xlarge")
    f = run_figures(state)
    assert f.price_per_hour is None
    assert f.compile_share == pytest.approx(19.0 / f.elapsed_s)  # of the wall time: needs no price
    assert f.compile_share_of_cost is None
    s = run_summary(state)
    assert (s.cost.compile_share, s.cost.total_usd, s.cost.per_1k_steps_steady_usd,
            s.cost.per_million_tokens_usd) == (None, None, None, None)
    md = to_markdown(s)
    for label in ("compile share of cost", "cost so far", "$ / 1k steps steady", "$ / 1M tokens"):
        assert _row(md, label) == "—", label
    assert _row(md, "price source").startswith("no price for p5e.48xlarge in us-east-1: pass --price-per-hour")


def test_trn2_is_priced_from_its_listing_elsewhere_in_every_cost_figure():
    state = priced_run("trn2.48xlarge")
    f = run_figures(state)
    assert f.price_per_hour == 35.76
    assert f.compile_share_of_cost == pytest.approx(f.compile_share)
    assert f.per_1k_steps_steady_usd == pytest.approx(35.76 / 3600 * 2.0 * 1000)
    md = to_markdown(run_summary(state))
    assert _row(md, "price source") == "us-east-2 list price of 2025-11-30 (VAN-2511), none listed in us-east-1"
    assert _row(md, "compile share of cost") != "—"


def test_compare_columns_show_each_price_source_on_one_line():
    c = compare([run_summary(priced_run("trn2.48xlarge")), run_summary(priced_run("p5e.48xlarge"))])
    row = next(line for line in compare_writer.to_markdown(c).splitlines() if line.startswith("| price source |"))
    cells = [x.strip() for x in row.split("|")[2:-1]]
    assert len(cells) == 2 and all(0 < len(x) <= SOURCE_WIDTH for x in cells), cells


class _Frozen:
    """A run caught at its last event (the console's source)."""

    live = False
    done = False

    def __init__(self, state: RunState) -> None:
        self.state, self.label = state, "unpriced"

    def poll(self) -> int:
        return 0

    def now(self) -> float:
        return self.state.last_t

    def stop(self) -> str:
        return "nothing to stop"


def test_the_cost_panel_of_an_unpriced_run_asks_for_a_price_in_its_one_line():
    import asyncio

    from neurondesk.views.console.app import ConsoleApp
    from neurondesk.views.console.panel import Line

    app = ConsoleApp(_Frozen(priced_run("p5e.48xlarge")), frozen=True)

    async def go() -> str:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("dollar_sign")
            await pilot.pause()
            return app.query_one("#cost-text", Line).text.plain
    text = asyncio.run(go())
    first, *rows = text.splitlines()
    assert first == ("no price for p5e.48xlarge in us-east-1: pass --price-per-hour or "
                     "`neurondesk prices refresh --region R`")
    shown = {r[:20].strip(): r[20:].strip() for r in rows}
    assert shown["compile share"] == "—" and shown["$/1k steps steady"] == "—", text
    assert text.count("no price for") == 1  # not repeated as the source line


def test_a_run_of_a_type_priced_nowhere_says_how_to_give_a_price_once_at_the_start(capsys):
    from argparse import Namespace

    from neurondesk.cli.prices import run_price

    assert run_price(Namespace(instance_type="p5e.48xlarge", price_per_hour=None)) == (
        "p5e.48xlarge", None, "no price for p5e.48xlarge in us-east-1: pass --price-per-hour or "
                              "`neurondesk prices refresh --region R`")
    assert capsys.readouterr().err == ("neurondesk: no price for p5e.48xlarge in us-east-1: pass --price-per-hour or "
                                       "`neurondesk prices refresh --region R`\n")
    assert run_price(Namespace(instance_type="trn2.48xlarge", price_per_hour=None))[1] == 35.76
    assert run_price(Namespace(instance_type="p5e.48xlarge", price_per_hour=50.0))[1] == 50.0
    assert capsys.readouterr().err == ""  # priced: nothing to ask


def test_the_price_list_says_what_a_run_of_each_type_is_priced_at(capsys):
    from argparse import Namespace

    from neurondesk.cli.prices import cmd_prices

    assert cmd_prices(Namespace(action="list", format="json", region=None)) == 0
    rows = {r["instance_type"]: r for r in json.loads(capsys.readouterr().out)}
    trn2, p5e, trn1 = rows["trn2.48xlarge"], rows["p5e.48xlarge"], rows["trn1.32xlarge"]
    assert (trn2["price_per_hour"], trn2["run_price"]) == (None, 35.76)
    assert trn2["run_price_source"] == "us-east-2 list price of 2025-11-30 (VAN-2511), none listed in us-east-1"
    assert p5e["run_price"] is None and p5e["run_price_source"].startswith("no price for p5e.48xlarge")
    assert trn1["run_price"] == trn1["price_per_hour"] == 21.5
