"""The progress lines real scripts print (tests/data/progress_corpus/: the transformers 4.57 and 5.x
Trainer, TRL's SFTTrainer, Lightning's bar, a tqdm postfix, hand-written loops in the shape of the
Neuron tutorials'), read through neurondesk's output parser as the recorder reads a workload's
stream: each gives the losses and the script's own throughput figures read off it by hand."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events.run_events import LossReported, ParseProblem, ThroughputReported

CORPUS = REPO / "tests" / "data" / "progress_corpus"
EXPECTED = {k: v for k, v in json.loads((CORPUS / "expected.json").read_text()).items() if not k.startswith("_")}


def read(name: str) -> tuple[list[float], list[tuple[float, str]]]:
    """Each physical line (tqdm's \\r redraws kept in it) through the output parser."""
    parser, events = OutputParser(), []
    with open(CORPUS / name, encoding="utf-8", newline="") as f:
        for i, line in enumerate(f.read().split("\n")):
            events += parser.feed("stdout", line, float(i))
    assert not [e for e in events if isinstance(e, ParseProblem)]
    return ([e.value for e in events if isinstance(e, LossReported)],
            [(e.value, e.unit) for e in events if isinstance(e, ThroughputReported)])


def test_every_corpus_file_has_its_expected_values():
    assert sorted(EXPECTED) == sorted(p.name for p in CORPUS.glob("*.txt"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_output_shape_gives_the_values_printed_in_it(name):
    losses, rates = read(name)
    assert losses == EXPECTED[name]["losses"]
    assert rates == [tuple(r) for r in EXPECTED[name]["rates"]]


def test_transformers_5_quoted_numbers_give_what_4_57_gave_unquoted():
    """The same run printed by both: the losses agree to the 4 significant digits 5.x prints."""
    old, old_rates = read("transformers_4.57_trainer.txt")
    new, new_rates = read("transformers_5.25_trainer.txt")
    assert [float(f"{v:.4g}") for v in old] == new
    assert [u for _v, u in new_rates] == [u for _v, u in old_rates]  # the end-of-training dict and table


def test_a_loss_summary_line_gives_its_last_value_not_its_first():
    losses, _ = read("hand_written_loops.txt")
    assert 0.1384 in losses and 6.2695 not in losses
