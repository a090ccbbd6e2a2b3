"""The script's own throughput figure beside neurondesk's steady one (issue 13 item 7)."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import DATA

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import encode_event
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.reports.summary_writer import to_markdown, to_text_table
from neurondesk.sources.replay import ReplaySource
from neurondesk.views.console.app import ConsoleApp
from neurondesk.views.console.panel import Line


def _run(lines: list[str], step_s: float = 0.1, samples: int | None = 8, world: int = 1) -> RunState:
    """A run of 20 steps of ``step_s`` (steady from step 5); ``lines`` printed after step 10."""
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "train.py"], warmup_steps=5))
    parser = OutputParser()
    t = 1.0
    for step in range(20):
        for pid in range(100, 100 + world):
            t += step_s
            state.apply(ev.StepEnded(t=t, pid=pid, step=step, duration_s=step_s, samples=samples))
        if step == 10:
            for line in lines:
                for e in parser.feed("stdout", line, t):
                    state.apply(e)
    return state


def test_iterations_per_second_agree_with_steady_steps_per_second():
    state = _run(["Train throughput (iter/sec): 9.8"])
    r = run_summary(state, now=10.0).as_dict()["script_throughput"]
    assert r["unit"] == "steps/s" and r["value"] == 9.8 and r["steady_value"] == pytest.approx(10.0)
    assert r["vs_steady"] == pytest.approx(-0.02) and r["off"] is False
    assert "1 / mean step time" in r["compared_with"]


def test_ms_per_step_compared_with_the_mean_step_time_and_warned_when_off():
    state = _run(["iter 10: loss 3.7366, time 135.00ms"])
    s = run_summary(state, now=10.0)
    r = s.as_dict()["script_throughput"]
    assert (r["unit"], r["steady_value"], r["off"]) == ("ms/step", pytest.approx(100.0), True)
    assert r["vs_steady"] == pytest.approx(0.35)
    (warn,) = [n for n in s.notices if "script's own throughput" in n]
    assert "+35%" in warn and "time 135.00ms" in warn
    md = to_markdown(s)
    assert ("| script's own throughput | 135 ms/step vs 100 ms/step (steady mean step time): +35.0% "
            "— off by more than 10% |") in md
    assert "script's own throughput" in to_text_table(s)


def test_samples_per_second_needs_a_batch_size():
    r = run_summary(_run(["epoch: 1, step: 10, loss: 5.76, rate: 80.0"], samples=None), now=10.0).as_dict()["script_throughput"]
    assert r["steady_value"] is None and r["vs_steady"] is None and r["off"] is False
    assert "samples-per-step" in r["compared_with"]


def test_a_per_process_rate_is_compared_with_one_process():
    """torch-xla prints each process's Rate=; with 2 processes neurondesk's samples/s is the job's."""
    state = _run(["[xla:0](10) Loss=1.27597 Rate=79.0 GlobalRate=50.0 Time=Mon"], world=2)
    r = run_summary(state, now=10.0).as_dict()["script_throughput"]
    assert r["steady_value"] == pytest.approx(80.0) and "one process" in r["compared_with"] and not r["off"]


def test_figures_printed_before_steady_state_are_only_a_fallback():
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=["x"], warmup_steps=2))
    state.apply(ev.ThroughputReported(t=0.5, value=500.0, unit="ms/step", line="compiling"))
    assert state.script_throughput().value == 500.0  # the only figure there is
    for step in range(4):
        state.apply(ev.StepEnded(t=1.0 + step, pid=1, step=step, duration_s=0.1))
    for v in (100.0, 90.0, 110.0):
        state.apply(ev.ThroughputReported(t=9.0, value=v, unit="ms/step", line=f"time {v}ms"))
    r = state.script_throughput()
    assert (r.value, r.printed, r.off) == (100.0, 4, False)


def test_no_figure_no_row_value():
    s = run_summary(_run(["step 3 loss 2.0"]), now=10.0)
    assert s.script_throughput is None
    assert "| script's own throughput | — |" in to_markdown(s)


def test_console_throughput_panel_shows_the_scripts_figure_in_yellow_when_off(tmp_path):
    """A recorded XLA CPU run (tests/data/journals/plain) with two script figures added before
    its end: the Throughput panel shows the script's own figure beside the steady one."""
    journal = DATA / "journals" / "plain" / "events.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    t = json.loads(lines[-1])["t"] - 0.001
    added = [encode_event(ev.ThroughputReported(t=t, value=v, unit="steps/s", line=f"{v} it/s")).decode()
             for v in (1000.0, 1000.0)]
    (tmp_path / "events.jsonl").write_text("".join(lines[:-1] + added + lines[-1:]))

    async def go():
        app = ConsoleApp(ReplaySource(tmp_path, speed=0), frozen=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            await pilot.press("escape", "t")
            await pilot.pause()
            return app.query_one("#throughput-text", Line).text

    shown = asyncio.run(go())
    (row,) = [x for x in shown.plain.splitlines() if x.startswith("script's own: ")]
    assert row.startswith("script's own: 1,000 steps/s vs ") and "off by more than 10%" in row
    assert any(span.style == "yellow" for span in shown.spans)


def _feed(state: RunState, parser: OutputParser, line: str, t: float) -> None:
    for e in parser.feed("stdout", line, t):
        state.apply(e)


def _trainer_like_run(eval_phase_first: bool) -> RunState:
    """20 steady-ish steps of 0.1 s; a training bar at 10 it/s, then an evaluation whose bar (no word
    says it is one, as Trainer's) reads 250 it/s, then the training bar again."""
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "run_clm.py"], warmup_steps=5))
    parser = OutputParser()
    t = 1.0
    for step in range(20):
        t += 0.1
        state.apply(ev.StepEnded(t=t, pid=100, step=step, duration_s=0.1, samples=8))
        if step in (2, 19):  # well before and after the evaluation
            _feed(state, parser, f" {step * 5}%|####   | {step}/20 [00:01<00:01, 10.00it/s]", t)
        if step == 12:
            phase = ev.EvalPhase(t=t + 2.0, pid=100, step=step, duration_s=2.0, batches=25)
            if eval_phase_first:  # the phase's message came before the bar's last lines
                state.apply(phase)
            for i in range(3):
                _feed(state, parser, f" {i * 40}%|##    | {i * 10}/25 [00:00<00:00, 250.06it/s]", t + 0.5 + i * 0.5)
            if not eval_phase_first:
                state.apply(phase)
            t += 2.0
    return state


@pytest.mark.parametrize("eval_phase_first", [True, False])
def test_an_evaluation_bar_is_not_the_scripts_training_rate(eval_phase_first):
    r = run_summary(_trainer_like_run(eval_phase_first), now=10.0).as_dict()["script_throughput"]
    assert r["unit"] == "steps/s" and r["value"] == 10.0 and r["printed"] == 2
    assert r["off"] is False


def test_the_frameworks_end_of_training_figure_wins_and_units_stay_apart():
    state = _trainer_like_run(True)
    parser = OutputParser()
    _feed(state, parser, "{'train_runtime': 3.1, 'train_samples_per_second': 79.5, 'train_steps_per_second': 9.9, "
                         "'train_loss': 7.3751, 'epoch': 1.0}", 9.0)
    r = run_summary(state, now=10.0).as_dict()["script_throughput"]
    assert (r["unit"], r["value"]) == ("samples/s", 79.5)  # not the bars' steps/s, not replaced by them
    assert "train_samples_per_second" in r["line"]


def test_the_quoted_line_is_what_the_terminal_shows_never_a_raw_carriage_return():
    state = _run([" 10%|#  | 2/20 [00:01<00:09, 1.00it/s]\r 15%|## | 3/20 [00:02<00:08, 2.00it/s]\x1b[0m"])
    r = run_summary(state, now=10.0).as_dict()["script_throughput"]
    assert r["value"] == 2.0 and "\r" not in r["line"] and "\x1b" not in r["line"]
    assert r["line"].startswith("15%|## | 3/20")


def test_trainers_run_average_loss_is_a_summary_statistic_not_a_logged_step():
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "run_clm.py"], warmup_steps=5))
    parser = OutputParser()
    for i, loss in enumerate((9.1, 8.2, 7.0)):
        _feed(state, parser, f"{{'loss': {loss}, 'grad_norm': 1.5, 'learning_rate': 4e-05, 'epoch': {i / 3:.2f}}}", 1.0 + i)
    _feed(state, parser, "{'train_runtime': 3.1, 'train_samples_per_second': 79.5, 'train_steps_per_second': 9.9, "
                         "'train_loss': 8.1, 'epoch': 1.0}", 5.0)
    _feed(state, parser, "***** train metrics *****", 5.1)
    _feed(state, parser, "  train_loss               =     8.1", 5.2)
    _feed(state, parser, "Epoch 0: 100%|##| 10/10 [00:01<00:00, 9.1it/s, v_num=0, train_loss=6.9]", 6.0)  # Lightning's bar
    assert [v for _s, v in state.parts.loss.loss_history] == [9.1, 8.2, 7.0, 6.9]
    assert run_summary(state, now=10.0).as_dict()["loss"]["last"] == 6.9


def _run_with_compile_and_evaluations(said: float) -> dict:  # summary.json's content
    """20 steps of 0.1 s, 8 samples each, from t=1: the first compiles for 4 s; an evaluation of 1 s at
    step 10 and one right after the last step (inside train()); then Trainer's end-of-training line,
    then a final evaluate() of 1 s whose phase reaches the recorder before the line does."""
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "run_clm.py"], warmup_steps=5))
    t = 1.0
    for step in range(20):
        d = 4.1 if step == 0 else 0.1
        t += d
        state.apply(ev.StepEnded(t=t, pid=100, step=step, duration_s=d, samples=8))
        if step in (9, 19):
            t += 1.0
            state.apply(ev.EvalPhase(t=t, pid=100, step=step + 1, duration_s=1.0, batches=3))
    state.apply(ev.EvalPhase(t=t + 1.0, pid=100, step=20, duration_s=1.0, batches=3))
    _feed(state, OutputParser(), f"{{'train_runtime': 8.0, 'train_samples_per_second': {said}, "
                                 "'train_steps_per_second': 2.5, 'train_loss': 8.1, 'epoch': 1.0}", t + 1.2)
    return run_summary(state, now=t + 2.0).as_dict()


def test_a_frameworks_run_average_is_compared_with_neurondesks_all_in_rate_over_training():
    # 160 samples from the first step's start (t=1) to the end of the evaluation after the last step
    # (t=1+4.1+1.9+2 = 9.0): 20 samples/s all-in; the steady rate is 80 samples/s
    s = _run_with_compile_and_evaluations(said=20.2)
    r = s["script_throughput"]
    assert r["figure"] == "run average" and r["compared_with"].startswith("all-in samples/s")
    assert r["steady_value"] == pytest.approx(20.0) and r["off"] is False
    assert s["steady"]["samples_per_s"] == pytest.approx(80.0)  # set against this, it was "off by -75%"
    assert not [n for n in s["notices"] if "script's own throughput" in n]


def test_a_run_average_that_disagrees_with_neurondesks_is_warned_and_says_which_figure_is_which():
    s = _run_with_compile_and_evaluations(said=40.0)  # twice what ran: another batch size, say
    r = s["script_throughput"]
    assert r["off"] is True and r["vs_steady"] == pytest.approx(1.0)
    (warn,) = [n for n in s["notices"] if "script's own throughput" in n]
    assert "(run average: 40 samples/s" in warn and "all-in samples/s over training" in warn
