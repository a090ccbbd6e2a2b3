"""Loss from progress lines and the neurondesk-config line."""

from __future__ import annotations

import json
import math

import pytest

from neurondesk.collectors.logparse import OutputParser, parse_loss
from neurondesk.collectors.logparse.rates import parse_rate
from neurondesk.core.events.run_events import LossReported, ParseProblem, ThroughputReported, WorkloadConfig


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
    # issue 13 item 7: lines as scripts really print them
    ("Final loss is 0.3263", 0.3263, None),
    ("iter 10: loss 3.7366, time 35.68ms", 3.7366, 10),
    ("| epoch   1 |    50/  310 batches | lr 5.00 | ms/batch 25.33 | loss  7.81 | ppl  2459.84", 7.81, None),
    ("epoch: 1, step: 10, loss: 5.76, rate: 18.4", 5.76, 10),
    ("[xla:0](10) Loss=1.27597 Rate=412.35 GlobalRate=300.12 Time=Mon Nov 30 10:00:00 2026", 1.27597, None),
    ("step 20 loss 6.3279", 6.3279, 20),
    ("Epoch 1 Train Loss: 0.5 Val Loss: 0.6", 0.5, None),
    # issue 50: transformers 5 quotes its numbers; a summary's last value is the loss
    ("{'loss': '4.905', 'grad_norm': '1.2', 'learning_rate': '5e-05', 'epoch': '0.1'}", 4.905, None),
    ('{"loss": "0.5", "step": 12}', 0.5, 12),
    ("done: 40 steps, loss 6.2695 -> 0.1384", 0.1384, None),
    ("loss: 6.27 \u2192 0.138 after step 40", 0.138, 40),
    ("100%|##########| 40/40 [00:03<00:00, 12.1it/s, loss=0.123]", 0.123, None),
    ("Epoch 0: 100%|##| 10/10 [00:00<00:00, 50.00it/s, v_num=0, train_loss_step=0.123, train_loss_epoch=0.2]",
     0.123, None),
    ("(0, 10) step_loss : 8.6563 learning_rate : 1.50e-06", 8.6563, None),
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
    "step 20: val loss 6.2741",  # workloads/train.py --eval-every
    "| end of epoch   1 | time: 12.30s | valid loss  5.61 | valid ppl   273.40",
    "test loss 3.2",
    "Eval loss is 0.41",
    "loss exploded",
    "lossless compression 2.0",
    "loss_scale: 65536",
    "using CrossEntropyLoss",
    "loss information follows",
    "step 10 of training done",
    "",
    "{'eval_loss': '4.306', 'eval_runtime': '0.2009', 'eval_samples_per_second': '59.73', 'epoch': '0.5'}",
    "{'train_runtime': '4.28', 'train_samples_per_second': '18.69', 'train_loss': '4.326', 'epoch': '1'}",
    "Epoch 1: 100%|##| 6/6 [00:00<00:00, 133.63it/s, v_num=0, train_loss_epoch=6.730]",  # an epoch's average
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


def test_step_of_a_thousand_digits_is_no_step():
    assert parse_loss("step " + "9" * 5000 + " loss 2.5") == (2.5, None)


@pytest.mark.parametrize("line,value,unit", [
    ("epoch: 1, step: 10, loss: 5.76, rate: 18.4", 18.4, "samples/s"),
    ("[xla:0](10) Loss=1.27597 Rate=412.35 GlobalRate=300.12 Time=Mon Nov 30 10:00:00 2026", 412.35, "samples/s"),
    ("Train throughput (iter/sec): 41.27", 41.27, "steps/s"),
    ("Epoch 0:  10%|#  | 10/100 [00:01<00:10, 9.5it/s, v_num=0, train_loss=2.310, val_loss=2.1]", 9.5, "steps/s"),
    (" 3/100 [00:07<03:44,  2.31s/it]", 2.31, "s/step"),
    ("| epoch   1 |    50/  310 batches | lr 5.00 | ms/batch 25.33 | loss  7.81 | ppl  2459.84", 25.33, "ms/step"),
    ("iter 10: loss 3.7366, time 35.68ms, mfu 12.05%", 35.68, "ms/step"),
    ("[rank 0] step 4/6 loss=9.3368 step_time=89.734s  (logged)", 89.734, "s/step"),
    ("{'train_runtime': 12.3, 'train_samples_per_second': 52.1, 'train_steps_per_second': 3.25}", 52.1,
     "samples/s"),
    ("{'train_runtime': 12.3, 'train_steps_per_second': 3.25}", 3.25, "steps/s"),
    # transformers 5 quotes them (issue 50)
    ("{'train_runtime': '23.05', 'train_samples_per_second': '20.83', 'train_steps_per_second': '1.735'}", 20.83,
     "samples/s"),
    ("{'train_runtime': '23.05', 'train_steps_per_second': '1.735'}", 1.735, "steps/s"),
])
def test_script_throughput_forms(line, value, unit):
    assert parse_rate(line) == (pytest.approx(value), unit)


@pytest.mark.parametrize("line", [
    "Validation DataLoader 0: 100%|##| 50/50 [00:02<00:00, 20.1it/s]",
    "learning rate: 0.001 step 3",
    "dropout rate: 0.1 (epoch 1)",
    "GlobalRate=300.1 step 3",
    "rate: 18.4",  # not a progress line
    "epoch 1 time: 120.5s loss 0.3",  # an epoch's time, not a step's
    "step 20: val loss 6.2741, time 90.1ms",
    "Downloading: 100%|##| 9.91M/9.91M [00:01<00:00, 5.2MB/s]",
    "step 3 rate: nan",
    "",
])
def test_not_the_scripts_training_throughput(line):
    assert parse_rate(line) is None


def test_a_progress_line_gives_loss_and_throughput():
    events = OutputParser().feed("stdout", "iter 10: loss 3.7366, time 35.68ms", 1.0)
    (loss,) = [e for e in events if isinstance(e, LossReported)]
    (rate,) = [e for e in events if isinstance(e, ThroughputReported)]
    assert (loss.value, loss.step) == (3.7366, 10)
    assert (rate.value, rate.unit, rate.line) == (35.68, "ms/step", "iter 10: loss 3.7366, time 35.68ms")
