"""One price for a run: the recorder resolves it and journals it (a ``price_resolved`` event), and every
reader of the journal shows that price, whatever price table the reader has (issue 43, item 3a).
A journal written before the event still reads, priced by the rule of its day (RunStarted's price,
neuron-monitor's instance type from the bundled table): tests/system/test_neuron_real_outputs.py's
``test_instance_info_*``."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import FIXTURES, REPO, base_env

from neurondesk.collectors.devices.neuron_monitor import parse_report
from neurondesk.core.events.device_events import NeuronSample
from neurondesk.core.events.price_events import PriceResolved
from neurondesk.core.events.run_events import RunStarted
from neurondesk.core.node.prices import bundled_price_table
from neurondesk.core.reduce.state import RunState
from neurondesk.sources.rebuild import state_from_run_dir

# neuron-monitor's report from a trn1n.32xlarge: its instance_info names the instance
TRN1N = FIXTURES / "neuron-monitor-trn1n.32xlarge-memory-in-use.jsonl"
LOCAL_PRICE = 77.5  # the user's refreshed table, at the live run; the bundled table says 24.78


def local_table(price: float) -> dict:
    row = {"price_per_hour": price, "source": "AWS-PRICELIST", "as_of": "2026-12-01", "accelerators": 16,
           "chip": "trainium", "kind": "neuron"}
    return {"schema": 1, "region": "us-east-1", "instances": {"trn1n.32xlarge": row}}


def instance_sample(t: float = 1.0) -> NeuronSample:
    e = parse_report(TRN1N.read_text().splitlines()[0], t)
    assert isinstance(e, NeuronSample) and e.instance_type == "trn1n.32xlarge"
    return e


def reduce(*events) -> RunState:
    state = RunState()
    for e in events:
        state.apply(e)
    return state


def test_a_replay_shows_the_price_the_recorder_journalled_not_the_readers_table(tmp_path):
    """A real run (no --instance-type, no metadata service) that neuron-monitor names a trn1n.32xlarge,
    priced live from the user's refreshed table; its journal replayed where that table says another
    price, and where only the bundled table is: the recorded price, each time."""
    env = base_env(tmp_path)
    table = tmp_path / "user" / "config" / "neurondesk" / "prices.json"
    table.parent.mkdir(parents=True)
    table.write_text(json.dumps(local_table(LOCAL_PRICE)))
    run_dir = tmp_path / "run"
    # the workload lives until the recorder has journalled the price neuron-monitor's sample settles (the
    # event's kind field, not the name: this very script, in run_started's command, holds the name too)
    wait = ("import pathlib, time\n"
            f"p = pathlib.Path({str(run_dir / 'events.jsonl')!r})\n"
            "for _ in range(1200):\n"
            "    if p.exists() and p.read_text().count('\"kind\":\"price_resolved\"') >= 2: break\n"
            "    time.sleep(0.05)\n")
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir),
                        "--neuron-monitor-replay", str(TRN1N), "--", sys.executable, "-c", wait],
                       capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    prices = [e for e in events if e["kind"] == "price_resolved"]
    assert [e["price_per_hour"] for e in prices] == [None, LOCAL_PRICE]  # unpriced at the start, then named
    assert prices[1]["source"].startswith(f"local table {table}") and "instance_info" in prices[1]["source"]
    assert json.loads((run_dir / "summary.json").read_text())["cost"]["price_per_hour"] == LOCAL_PRICE

    table.write_text(json.dumps(local_table(1.0)))  # the table refreshed since: the reader's says $1/h
    again = subprocess.run([sys.executable, "-m", "neurondesk.cli", "summary", str(run_dir), "--format", "json"],
                           capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert again.returncode == 0, again.stderr[-2000:]
    cost = json.loads(again.stdout)["cost"]
    assert (cost["instance_type"], cost["price_per_hour"]) == ("trn1n.32xlarge", LOCAL_PRICE)
    state, _ = state_from_run_dir(run_dir)  # this process: the bundled table only
    assert bundled_price_table().instances["trn1n.32xlarge"].price_per_hour != LOCAL_PRICE
    assert state.price_per_hour == LOCAL_PRICE and state.price_source == prices[1]["source"]


def test_a_journalled_price_is_never_priced_again_from_neuron_monitors_instance():
    """Unpriced by the recorder (it found no price for the instance): stays unpriced in the replay,
    though the reader's bundled table has a row for the instance neuron-monitor names."""
    started = RunStarted(t=0.0, run_id="r", command=["python"])
    unpriced = PriceResolved(t=0.0, source="instance type unknown (not on EC2?): pass --price-per-hour")
    state = reduce(started, unpriced, instance_sample())
    assert (state.instance_type, state.price_per_hour) == (None, None)
    assert state.price_source == unpriced.source


def test_the_latest_journalled_price_holds_over_run_starteds():
    """A journal holding both (a recorder of this version writes none in RunStarted): the event's."""
    started = RunStarted(t=0.0, run_id="r", command=["python"], instance_type="trn1.2xlarge", price_per_hour=1.34375,
                         price_source="bundled table")
    state = reduce(started, PriceResolved(t=0.0, instance_type="trn1.2xlarge", price_per_hour=2.0, source="flag"))
    assert (state.price_per_hour, state.price_source) == (2.0, "flag")

