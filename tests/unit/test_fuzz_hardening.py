"""Short hypothesis fuzz of the readers issue 24 hardened (the long version: benchmarks/fuzz.py
readers probe_ranges, terminal_text, cli_numbers): what the probe decoder accepts is in range,
what neurondesk prints of stored text has no control sequence but SGR and no unmarked
neurondesk line, and a CLI number is within its bounds or refused."""

from __future__ import annotations

import argparse
import json
import math
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from neurondesk.cli import args as cli_args
from neurondesk.collectors.probe_messages import ProbeDecoder, out_of_range
from neurondesk.core.events import run_events as ev
from neurondesk.reports.safe_text import clean_lines, has_no_controls_but_sgr
from neurondesk.views.headless import mark_impersonation

# hypothesis over hundreds of inputs a test: `make test` runs them, `make test-fast` does not
pytestmark = pytest.mark.slow
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STARTED, NOW = 1000.0, 1060.0

numbers = st.one_of(st.integers(min_value=-(10**40), max_value=10**40), st.floats(allow_nan=True),
                    st.none(), st.text(max_size=5))
probe_messages = st.fixed_dictionaries(
    {"kind": st.sampled_from(["step", "compile", "eval_phase", "graph_executed", "probe_dropped",
                              "process_attached", "compile_started"]),
     "t": st.one_of(st.floats(min_value=0, max_value=1e10), st.just(1030.0))},
    optional={k: numbers for k in ("pid", "step", "duration_s", "samples", "tokens", "data_wait_s", "executions",
                                   "compiles", "batches", "dropped", "dropped_steps", "steps", "rank",
                                   "world_size", "graph_inputs")} | {"source": st.just("probe"),
                                                                    "trigger": st.just("sync")})


@FAST
@given(probe_messages)
@example({"kind": "step", "t": 1030.0, "pid": 7, "step": 10**30, "duration_s": 0.1})
@example({"kind": "compile", "t": 1030.0, "pid": 7, "source": "probe", "duration_s": 3600.0})
def test_what_the_probe_decoder_accepts_is_in_range(msg: dict) -> None:
    line = json.dumps(msg, allow_nan=True).encode() + b"\n"
    for e in ProbeDecoder(started_t=STARTED).decode(line, NOW):
        if not isinstance(e, ev.ParseProblem):
            assert out_of_range(e, NOW, STARTED) is None, e


text_parts = st.lists(st.one_of(
    st.text(max_size=30), st.sampled_from(["\x1b]52;c;cm0=\x07", "\x1b]0;t", "\x1b[2J", "\x1b[31m", "\r", "\n",
                                           "\r\n", "\x9b", "\x9d", "\x1bP", "\x1b\\", "neurondesk: ", "NeuronDesk",
                                           " \t"])), max_size=20)


@FAST
@given(text_parts)
@example(["\x1b]0;", "neurondesk: finished"])
def test_printed_text_keeps_no_control_but_sgr_and_no_unmarked_neurondesk_line(parts: list[str]) -> None:
    text = "".join(parts)
    for line in re.split(r"\r\n|\n", clean_lines(text)):
        assert has_no_controls_but_sgr(line), line
    data = text.encode("utf-8", "surrogatepass")
    for line in re.split(rb"[\r\n]", mark_impersonation(data)):
        assert not line.lower().startswith(b"neurondesk"), line


@FAST
@given(st.one_of(st.text(max_size=60), st.integers(min_value=-(10**40), max_value=10**40).map(str),
                 st.floats(allow_nan=True, allow_infinity=True).map(repr)))
@example("1e26")
@example("9" * 5000)
def test_a_cli_number_is_within_its_bounds_or_refused(text: str) -> None:
    for parse, lo, hi in ((cli_args.whole(1, cli_args.MAX_STEPS), 1, cli_args.MAX_STEPS),
                          (cli_args.number(0, cli_args.MAX_PRICE_PER_HOUR), 0, cli_args.MAX_PRICE_PER_HOUR)):
        try:
            v = parse(text)
        except argparse.ArgumentTypeError:
            continue
        assert math.isfinite(v) and lo <= v <= hi, (text, v)
