"""The frameworks' own records (issue 50 item 3): the probe reads transformers' Trainer.log and
Lightning's logger path as numbers, whatever they print, and core counts the record, not its
printed copy. Here on doubles of the two classes (the names and signatures the frameworks have),
driven on a real Probe over a real socket; the real runs are in tests/runs/test_frameworks.py and
tests/test_frameworks_latest.py."""

from __future__ import annotations

import json
import types

import pytest
from probe_socket import SocketReader, load_probe_module

from neurondesk.collectors.logparse import OutputParser
from neurondesk.collectors.probe_messages import decode_probe_line
from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary


# ------------------------------------------------------------------ doubles of the frameworks' classes
def transformers_double():
    """transformers.trainer's Trainer.log as 5.x has it: values logged as floats, printed quoted."""

    class Trainer:
        def __init__(self) -> None:
            self.state = types.SimpleNamespace(global_step=0, log_history=[], is_world_process_zero=True)

        def log(self, logs, start_time=None):
            self.state.log_history.append({**logs, "step": self.state.global_step})
            print({k: f"{v:.4g}" if isinstance(v, float) else v for k, v in logs.items()})

    return types.SimpleNamespace(Trainer=Trainer)


def lightning_double(stage: str = "train"):
    class _LoggerConnector:
        def __init__(self) -> None:
            self.trainer = types.SimpleNamespace(loggers=[object()], global_step=0,
                                                 state=types.SimpleNamespace(stage=stage))
            self._progress_bar_metrics = {}

        def on_batch_end(self):
            pass

        def log_metrics(self, metrics, step=None):
            pass

    return types.SimpleNamespace(_LoggerConnector=_LoggerConnector)


@pytest.fixture
def probe_and_reader():
    mod = load_probe_module()
    reader = SocketReader()
    return mod.Probe(reader.path), reader


def sent(probe, reader) -> list[dict]:
    return [json.loads(x) for x in reader.close(probe)]


def test_trainer_log_is_read_as_numbers_and_nothing_is_printed_or_left_on_the_trainer(probe_and_reader, capsys):
    probe, reader = probe_and_reader
    module = transformers_double()
    probe.records.patch_transformers(module)
    probe.records.patch_transformers(module)  # a reload patches once, never twice
    trainer = module.Trainer()
    before = dict(vars(trainer))
    for step, loss in ((5, 4.3166259765625), (10, 4.328653717041016)):
        trainer.state.global_step = step
        trainer.log({"loss": loss, "grad_norm": 1.2, "learning_rate": 5e-05, "epoch": 0.5})
    trainer.log({"eval_loss": 4.3, "eval_samples_per_second": 140.8, "epoch": 1.0})
    logs = {"train_runtime": 4.28, "train_samples_per_second": 18.69, "train_steps_per_second": 4.672,
            "train_loss": 4.3257, "epoch": 1.0}
    trainer.log(logs)
    other_rank = module.Trainer()
    other_rank.state.is_world_process_zero = False
    other_rank.log({"loss": 9.0, "train_samples_per_second": 9.0})  # the same values again, from rank 1: not sent
    printed = capsys.readouterr()
    assert printed.out.splitlines()[0] == "{'loss': '4.317', 'grad_norm': '1.2', 'learning_rate': '5e-05', 'epoch': '0.5'}"
    assert printed.err == "" and "neurondesk" not in printed.out
    assert set(vars(trainer)) == set(before) and logs["train_samples_per_second"] == 18.69
    msgs = [m for m in sent(probe, reader) if m["kind"] in ("loss", "throughput", "notice")]
    assert [(m["value"], m["step"], m["source"]) for m in msgs if m["kind"] == "loss"] == [
        (4.3166259765625, 5, "transformers"), (4.328653717041016, 10, "transformers")]  # not the eval or the average
    (rate,) = [m for m in msgs if m["kind"] == "throughput"]
    assert (rate["value"], rate["unit"], rate["source"]) == (18.69, "samples/s", "transformers")
    assert "train_samples_per_second" in rate["line"]
    assert not [m for m in msgs if m["kind"] == "notice"]
    for m in msgs:  # the recorder takes them as the events the printed lines give
        assert decode_probe_line(json.dumps(m).encode(), m["t"]).kind == m["kind"]


def test_a_trainer_log_that_raises_raises_as_it_would_and_sends_nothing(probe_and_reader):
    probe, reader = probe_and_reader
    module = transformers_double()

    def broken(self, logs, start_time=None):
        if "boom" in logs:
            raise KeyError("the user's own")

    module.Trainer.log = broken
    probe.records.patch_transformers(module)
    with pytest.raises(KeyError, match="the user's own"):
        module.Trainer().log({"loss": 1.0, "boom": 1})
    module.Trainer().log({"loss": 2.0})
    assert [m["value"] for m in sent(probe, reader) if m["kind"] in ("loss", "notice")] == [2.0]


def test_odd_logged_values_never_reach_the_user_and_a_failing_read_turns_only_its_hook_off(probe_and_reader):
    probe, reader = probe_and_reader
    module = transformers_double()
    probe.records.patch_transformers(module)
    trainer = module.Trainer()
    trainer.log({"loss": "4.905"})  # a string that is a number: a number
    trainer.log({"loss": "n/a"})
    trainer.log({"loss": True})
    trainer.state = types.SimpleNamespace(global_step="five", log_history=[])  # an odd step: the loss, no step
    trainer.log({"loss": 2.0})

    class Hostile(dict):
        def get(self, *a):
            raise RuntimeError("hostile mapping")

    trainer.log(Hostile(loss=1.0))  # the hook fails: off, said once; the call returned as it would
    trainer.log({"loss": 3.0})
    msgs = sent(probe, reader)
    assert [(m["value"], m.get("step")) for m in msgs if m["kind"] == "loss"] == [(4.905, 0), (2.0, None)]
    (notice,) = [m for m in msgs if m["kind"] == "notice"]
    assert "framework-records" in notice["message"] and "hostile mapping" in notice["message"]


def test_lightning_sends_the_bar_value_once_a_step_and_nothing_of_validation(probe_and_reader):
    probe, reader = probe_and_reader
    module = lightning_double()
    probe.records.patch_lightning(module)
    c = module._LoggerConnector()
    for step, loss in ((1, 18.0), (2, 7.96)):
        c.trainer.global_step = step
        c._progress_bar_metrics = {"train_loss": loss, "v_num": 0}
        c.on_batch_end()
        c.log_metrics({"train_loss": loss, "epoch": 0})  # the same step's logged value: not twice
    c.trainer.global_step = 3
    c.log_metrics({"train_loss_step": 4.95, "train_loss_epoch": 9.0})  # a loss only the loggers got
    c.trainer.loggers = []
    c.trainer.global_step = 4
    c.log_metrics({"train_loss": 12.9})  # no logger: Lightning read nothing, neither do we
    c.trainer.is_global_zero = False
    c.trainer.global_step = 5
    c._progress_bar_metrics = {"train_loss": 16.2}
    c.on_batch_end()  # another rank's: its bar is not shown, its loss not sent
    val = lightning_double("validate")._LoggerConnector
    probe.records.patch_lightning(types.SimpleNamespace(_LoggerConnector=val))
    v = val()
    v._progress_bar_metrics = {"loss": 0.5}
    v.on_batch_end()
    msgs = [m for m in sent(probe, reader) if m["kind"] == "loss"]
    assert [(m["value"], m["step"], m["source"]) for m in msgs] == [
        (18.0, 1, "lightning"), (7.96, 2, "lightning"), (4.95, 3, "lightning")]


# ------------------------------------------------------------------ core: the record wins, nothing twice
def _state() -> tuple[RunState, OutputParser]:
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=["python", "train.py"], warmup_steps=2))
    for step in range(10):
        state.apply(ev.StepEnded(t=1.0 + step, pid=1, step=step, duration_s=0.1, samples=4))
    return state, OutputParser()


def _printed(state: RunState, parser: OutputParser, line: str, t: float) -> None:
    for e in parser.feed("stdout", line, t):
        state.apply(e)


@pytest.mark.parametrize("record_first", [True, False])
def test_the_trainers_record_wins_over_its_printed_copy_in_either_order(record_first):
    state, parser = _state()
    records = [(4.3166259765625, 5), (4.328653717041016, 10)]
    for i, (value, step) in enumerate(records):
        record = ev.LossReported(t=20.0 + i, value=value, step=step, source="transformers")
        if record_first:
            state.apply(record)
        _printed(state, parser, f"{{'loss': '{value:.4g}', 'grad_norm': '1.2', 'epoch': '0.5'}}", 20.0 + i)
        if not record_first:
            state.apply(record)
    assert (state.loss_first, state.loss_last) == (4.3166259765625, 4.328653717041016)
    assert list(state.loss_history) == [(5, 4.3166259765625), (10, 4.328653717041016)]  # nothing twice


@pytest.mark.parametrize("record_first", [True, False])
def test_the_trainers_recorded_rate_is_the_scripts_figure_counted_once(record_first):
    state, parser = _state()
    line = "{'train_runtime': '4.28', 'train_samples_per_second': '18.69', 'train_steps_per_second': '4.672'}"
    record = ev.ThroughputReported(t=30.0, value=18.6919, unit="samples/s",
                                   line="Trainer.log: train_samples_per_second 18.6919", source="transformers")
    if record_first:
        state.apply(record)
    _printed(state, parser, line, 30.0)
    _printed(state, parser, "  train_steps_per_second   =      4.672", 30.0)  # log_metrics' table
    if not record_first:
        state.apply(record)
    r = run_summary(state, now=40.0).as_dict()["script_throughput"]
    assert (r["value"], r["unit"], r["printed"]) == (18.6919, "samples/s", 1)
    assert r["line"] == "Trainer.log: train_samples_per_second 18.6919"


def test_printed_losses_alone_are_counted_as_before():
    state, parser = _state()
    for t, line in enumerate(["step 5 | loss 6.8123", "step 10 | loss 5.9041", "done: 40 steps, loss 6.2695 -> 0.1384"]):
        _printed(state, parser, line, 20.0 + t)
    assert (state.loss_first, state.loss_last) == (6.8123, 0.1384)
    assert [v for _s, v in state.loss_history] == [6.8123, 5.9041, 0.1384]  # the curve does not jump back


def test_a_nan_loss_the_trainer_logged_reaches_core_as_nan(probe_and_reader):
    """Trainer logs nan as a float; the probe's line says NaN and the recorder reads it as the value it is."""
    probe, reader = probe_and_reader
    module = transformers_double()
    probe.records.patch_transformers(module)
    trainer = module.Trainer()
    trainer.state.global_step = 3
    trainer.log({"loss": float("nan")})
    (msg,) = [m for m in sent(probe, reader) if m["kind"] == "loss"]
    state, _parser = _state()
    state.apply(decode_probe_line(json.dumps(msg).encode(), msg["t"]))
    assert state.loss_nonfinite == 1 and state.loss_last != state.loss_last  # nan
    assert list(state.loss_history)[0][0] == 3
