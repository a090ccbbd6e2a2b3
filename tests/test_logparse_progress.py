"""Loss from progress lines and the neurondesk-config line."""

from __future__ import annotations

import json
import math

import pytest

from neurondesk.collectors.logparse import OutputParser, parse_loss
from neurondesk.core.events import LossReported, ParseProblem, WorkloadConfig


@pytest.mark.parametrize("line,loss,step", [
    ("step 10 loss 2.31", 2.31, 10),
    ("Step 10/100 | loss: 2.31", 2.31, 10),
    ("epoch 1 step 10 loss=2.31e+00", 2.31, 10),
    ("loss 2.31", 2.31, None),
    ("{'loss': 2.31, 'grad_norm': 1.52, 'learning_rate': 4.9e-05, 'epoch': 0.04}", 2.31, None),
    ('{"loss": 0.5, "step": 12}', 0.5, 12),
    ("iter 40: loss 3.1275, time 112.43ms, mfu 12.05%", 3.1275, 40),
    ("[rank 0] step 4/6 loss=9.3368 step_time=89.734s  (logged)", 9.3368, 4),
    ("Epoch 0:  10%|#  | 10/100 [00:01<00:10, 9.5it/s, v_num=0, train_loss=2.310]", 2.31, None),
    ("loss: tensor(2.3100, device='xla:0', grad_fn=<NllLossBackward0>) at step 7", 2.31, 7),
    ("global_step=300 Loss: .75", 0.75, 300),
    ("step 3 loss 1.5.", 1.5, 3),
    ("Step [5/50] loss -0.25", -0.25, 5),
])
def test_loss_forms(line, loss, step):
    assert parse_loss(line) == (pytest.approx(loss), step)


@pytest.mark.parametrize("line,check", [
    ("step 12 loss nan", math.isnan),
    ("{'loss': nan, 'epoch': 1.0}", math.isnan),
    ("step 12 loss=NaN", math.isnan),
    ("step 12 loss: inf", lambda v: v == math.inf),
    ("step 12 loss -inf", lambda v: v == -math.inf),
    ("loss Infinity", lambda v: v == math.inf),
])
def test_exploded_loss_is_a_value(line, check):
    value, _ = parse_loss(line)
    assert check(value)


@pytest.mark.parametrize("line", [
    "[rank 0] eval loss=8.7402 ppl=6255.31",
    "val_loss=2.1",
    "{'eval_loss': 2.1, 'eval_runtime': 3.0}",
    "validation loss: 1.2",
    "loss exploded",
    "lossless compression 2.0",
    "loss_scale: 65536",
    "using CrossEntropyLoss",
    "loss information follows",
    "step 10 of training done",
    "",
])
def test_not_a_training_loss(line):
    assert parse_loss(line) is None


def test_tqdm_carriage_returns_use_the_last_redraw():
    assert parse_loss("\r 10%| loss=2.5\r 20%| loss=2.4\r") == (2.4, None)


def test_stream_events_and_config():
    p = OutputParser()
    config = {"batch_size": 8, "seq_len": 512, "lr": 3e-4, "precision": "bf16"}
    events = p.feed("stdout", "neurondesk-config: " + json.dumps(config), 1.0)
    events += p.feed("stdout", "step 3 loss nan", 2.0)
    (cfg,) = [e for e in events if isinstance(e, WorkloadConfig)]
    assert cfg.values == config and cfg.t == 1.0
    (loss,) = [e for e in events if isinstance(e, LossReported)]
    assert math.isnan(loss.value) and loss.step == 3 and loss.source == "stdout"
    assert p.problems == 0


@pytest.mark.parametrize("raw,why", [
    ('neurondesk-config: {"batch_size": 8', "not JSON"),
    ("neurondesk-config: [1, 2]", "expected a JSON object"),
])
def test_bad_config_is_a_counted_problem(raw, why):
    p = OutputParser()
    events = p.feed("stdout", raw, 1.0)
    (prob,) = [e for e in events if isinstance(e, ParseProblem)]
    assert why in prob.error and prob.raw == raw and p.problems == 1
    assert not [e for e in events if isinstance(e, WorkloadConfig)]


def test_loss_inside_a_traceback_or_compile_block_is_not_reported():
    p = OutputParser()
    events = []
    for line in ["Traceback (most recent call last):", '  File "/w/t.py", line 3, in <module>',
                 "    print(f'step {i} loss 2.5')", "ValueError: step 2 loss 9.9 was bad"]:
        events += p.feed("stderr", line, 1.0)
    assert not [e for e in events if isinstance(e, LossReported)]
