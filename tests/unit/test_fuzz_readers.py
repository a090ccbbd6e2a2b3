"""Every reader of outside input refuses garbage its documented way and never raises (issue 9).

A short hypothesis version of ``benchmarks/fuzz.py`` (which drives 100,000 inputs per reader):
mutations of the real fixtures (bit flips, cuts, inserted control characters and invalid UTF-8,
long runs) and JSON documents with one node swapped for another type, a huge or non-finite
number, or deep nesting. A refusal (the reader's ValueError subclass, a ParseProblem, a problems
list, a warning, "no price") passes; any other exception fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA, REPO
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from neurondesk.clients.price_list import parse_price_list
from neurondesk.collectors.devices.neuron_ls import NeuronLsError, parse_json, parse_text
from neurondesk.collectors.devices.neuron_monitor import parse_report
from neurondesk.collectors.logparse import OutputParser
from neurondesk.collectors.probe_messages import decode_probe_line
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.codec import EventDecodeError, decode_event_line
from neurondesk.store.journal import JournalProblem, iter_journal
from neurondesk.store.price_files import load_price_table

NEURON = DATA / "neuron"
PRICES_JSON = REPO / "neurondesk" / "core" / "node" / "prices.json"

# hypothesis over hundreds of inputs a test: `make test` runs them, `make test-fast` does not
pytestmark = pytest.mark.slow
FUZZ = settings(max_examples=400, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _lines(path: Path) -> list[bytes]:
    return [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]


JOURNAL_LINES = [ln for p in sorted((DATA / "journals").glob("*/events.jsonl")) for ln in _lines(p)[:60]]
LS_JSON = [p.read_bytes() for p in sorted(NEURON.glob("neuron-ls-*.json"))]
LS_TEXT = [p.read_bytes() for p in sorted(NEURON.glob("neuron-ls-*.txt"))]
MONITOR_LINES = _lines(NEURON / "neuron-monitor-trn1.jsonl")
LOG_LINES = _lines(NEURON / "torch-neuronx-train.log") + _lines(NEURON / "torch-xla-metrics-report.txt")
PRICE_ENTRY = json.dumps({
    "product": {"sku": "S", "attributes": {
        "instanceType": "trn1.32xlarge", "regionCode": "us-east-1", "operatingSystem": "Linux", "tenancy": "Shared",
        "preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required",
        "marketoption": "OnDemand", "operation": "RunInstances"}},
    "terms": {"OnDemand": {"S.T": {"effectiveDate": "2026-11-01T00:00:00Z", "priceDimensions": {
        "S.T.R": {"unit": "Hrs", "pricePerUnit": {"USD": "21.5000000000"}}}}}},
}).encode()

# ---------------------------------------------------------------- strategies

ODD = st.sampled_from([
    b"\x00", b"\x1b[31m", b"\r", b"\n", b"\t", "\u2028".encode(), "\ufeff".encode(), "漢".encode(), b"\xff",
    b"\xc3", b"\xed\xa0\x80", b"1e999", b"NaN", b"-Infinity", b"9" * 40, b"[[[[", b"}", b'"', b"\\u", b"|", b"+--",
])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    | st.sampled_from([10**400, "\udcff", "x" * 5000, "12", "-1", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def mutated(draw: st.DrawFn, units: list[bytes]) -> bytes:
    """A fixture unit with up to four byte-level edits."""
    data = draw(st.sampled_from(units))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["flip", "cut", "insert", "delete", "repeat"]))
        if op == "flip" and at < len(data):
            data = data[:at] + bytes([data[at] ^ (1 << draw(st.integers(0, 7)))]) + data[at + 1:]
        elif op == "cut":
            data = data[:at]
        elif op == "insert":
            data = data[:at] + draw(ODD | st.binary(max_size=16)) + data[at:]
        elif op == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 40)):]
        else:
            data = data[:at] + data[at:at + 8] * draw(st.integers(2, 5000)) + data[at:]
    return data


def _nodes(obj: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        out.append((obj, key))
        _nodes(value, out)
    return out


@st.composite
def swapped(draw: st.DrawFn, units: list[bytes]) -> bytes:
    """A JSON fixture with one or two nodes replaced (another type, a huge number, NaN, deep nesting)."""
    doc = json.loads(draw(st.sampled_from(units)))
    for _ in range(draw(st.integers(1, 2))):
        nodes = _nodes(doc, [])
        if not nodes:
            break
        parent, key = draw(st.sampled_from(nodes))
        parent[key] = draw(JSON_VALUES | st.just("__DEEP__"))
    depth = draw(st.sampled_from([10, 5000, 100_000]))
    text = json.dumps(doc).replace('"__DEEP__"', "[" * depth + "]" * depth)
    return text.encode("utf-8", "surrogatepass")


def fuzzed(units: list[bytes], *, as_json: bool = True) -> st.SearchStrategy[bytes]:
    out = mutated(units) | st.binary(max_size=300)
    return out | swapped(units) if as_json else out


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


# ---------------------------------------------------------------- one test per reader


@FUZZ
@given(fuzzed(LS_JSON))
def test_fuzz_neuron_ls_json_parser_refuses_with_neuron_ls_error(data: bytes) -> None:
    try:
        parse_json(_text(data))
    except NeuronLsError:
        pass


@FUZZ
@given(fuzzed(LS_TEXT, as_json=False))
def test_fuzz_neuron_ls_text_table_parser_refuses_with_neuron_ls_error(data: bytes) -> None:
    try:
        parse_text(_text(data))
    except NeuronLsError:
        pass


@FUZZ
@given(fuzzed(MONITOR_LINES), st.booleans())
def test_fuzz_neuron_monitor_report_parser_never_raises(line: bytes, as_str: bool) -> None:
    result = parse_report(line.decode("utf-8", "surrogateescape") if as_str else line, 1.0)
    assert result is None or isinstance(result, ev.ParseProblem | ev.Event)


@FUZZ
@given(st.lists(fuzzed(LOG_LINES, as_json=False) | st.sampled_from(LOG_LINES), min_size=1, max_size=8), st.booleans())
def test_fuzz_log_parsers_through_output_parser_never_raise(lines: list[bytes], as_bytes: bool) -> None:
    parser = OutputParser()
    chunk = b"\n".join(lines)
    events = parser.feed("stderr", chunk if as_bytes else chunk.decode("utf-8", "surrogateescape"), 1.0)
    events += parser.flush(2.0)
    assert sum(isinstance(e, ev.OutputLine) for e in events) >= 1


@FUZZ
@given(fuzzed([ln for ln in JOURNAL_LINES if b'"kind":"step"' in ln or b'"kind":"compile"' in ln]))
@example(b'{"kind":"compile","t":1,"pid":1,"step":0,"duration_s":1.0,"trigger":"sync","debug_text":1.5}')
def test_fuzz_probe_message_decoder_gives_an_event_or_a_parse_problem(line: bytes) -> None:
    assert isinstance(decode_probe_line(line + b"\n", 1.0), ev.Event)


@FUZZ
@given(fuzzed(JOURNAL_LINES), st.booleans())
@example(b"[" * 100_000 + b"]" * 100_000, False)
def test_fuzz_event_codec_refuses_with_event_decode_error(line: bytes, as_str: bool) -> None:
    try:
        decode_event_line(line.decode("utf-8", "surrogateescape") if as_str else line)
    except EventDecodeError:
        pass


@FUZZ
@given(st.lists(fuzzed(JOURNAL_LINES) | st.sampled_from(JOURNAL_LINES), min_size=1, max_size=10), st.booleans())
def test_fuzz_journal_reader_reports_bad_lines_as_problems(tmp_path_factory: pytest.TempPathFactory,
                                                           lines: list[bytes], torn: bool) -> None:
    path = tmp_path_factory.mktemp("journal") / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"" if torn else b"\n"))
    problems: list[JournalProblem] = []
    events = list(iter_journal(path, problems))
    assert all(isinstance(e, ev.Event) for e in events)


@FUZZ
@given(fuzzed([PRICES_JSON.read_bytes()]))
def test_fuzz_user_price_file_is_used_or_ignored_with_a_warning(tmp_path_factory: pytest.TempPathFactory,
                                                                data: bytes) -> None:
    path = tmp_path_factory.mktemp("prices") / "prices.json"
    path.write_bytes(data)
    table = load_price_table(path)
    assert table.instances  # the bundled rows are always there


@FUZZ
@given(st.lists(fuzzed([PRICE_ENTRY]) | st.just(PRICE_ENTRY), min_size=1, max_size=3))
def test_fuzz_price_list_answer_gives_a_price_or_says_why_not(entries: list[bytes]) -> None:
    price = parse_price_list([_text(e) for e in entries], "trn1.32xlarge", "us-east-1")
    assert price.price_per_hour is not None or price.note
