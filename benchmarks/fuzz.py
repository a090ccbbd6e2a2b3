"""Fuzz every reader of outside input: 0 uncaught exceptions, memory bounded (issue 9).

Rerun (about 100,000 inputs per reader; each reader runs in its own child process, so its peak
RSS is its own)::

    .venv/bin/python benchmarks/fuzz.py --inputs 100000 --seed 9 --out benchmarks/results/fuzz.json
    .venv/bin/python benchmarks/fuzz.py --inputs 2000 --reader codec --reader journal   # a quick look

Inputs are seeded mutations of the real fixtures (tests/data/neuron, tests/data/journals, the
bundled prices.json, a Price List entry shaped as in shared/PRICING.md §3.3): byte flips,
truncation, splicing, inserted control characters, invalid UTF-8 and odd unicode, very long
lines, and inside the JSON: type swaps (string for number, list for object ...), huge numbers,
NaN/Infinity, deleted and renamed keys, deep nesting.

Each reader has a documented refusal (a ValueError subclass, a ParseProblem, a problems list, a
warning, a "no price" answer); a refusal is fine, any other exception is an *escape*, recorded with
its exception, where it was raised and the shortest input that raised it. For the log parsers a
sub-parser crash that OutputParser's safety net turned into a ParseProblem is not an escape but is
counted as *contained* (it costs that line its meaning). Memory: the child's peak RSS, the RSS
growth between 10% and 100% of the inputs, and the growth of live interpreter memory blocks over
the same span (after gc; RSS alone also grows with the largest input seen). A reader whose memory
grows with input count is a finding.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

NEURON = REPO / "tests" / "data" / "neuron"
JOURNALS = REPO / "tests" / "data" / "journals"
PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / 2**20

Units = list[bytes]  # one input: one or more units (lines, files, Price List entries)
Verdict = str  # "ok", "refused", or "contained: <sub-parser>: <error>" (a refusal too)


# ---------------------------------------------------------------- the mutator

JUNK: tuple[bytes, ...] = (
    b"\x00", b"\x1b[31m", b"\x1b]0;title\x07", b"\r", b"\t", b"\x7f", b"\x0c", b"\n", b"\r\n",
    "\u2028".encode(), "\u0085".encode(), "\ufeff".encode(), "é".encode(), "漢字".encode(), "🔥".encode(),
    "\u202e".encode(), b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",  # invalid UTF-8
    b"1e999", b"-1e999", b"NaN", b"Infinity", b"-0", b"99999999999999999999999999999", b"0x1f",
    b"[[[[[[", b"]]]", b"{{{", b'"', b"\\", b"\\u", b'\\ud800', b"null", b"true", b",", b":", b"|", b"+--",
)


def _huge_int() -> int:
    return 10**400


VALUES: tuple[Callable[[random.Random], Any], ...] = (
    lambda r: None, lambda r: True, lambda r: False, lambda r: 0, lambda r: -1, lambda r: r.randint(-2**70, 2**70),
    lambda r: _huge_int(), lambda r: 1.5, lambda r: math.nan, lambda r: math.inf, lambda r: -math.inf,
    lambda r: 1e308, lambda r: "", lambda r: "12", lambda r: "abc", lambda r: "\ud800x", lambda r: "\x00\x1b[2J",
    lambda r: "漢" * r.randint(1, 50), lambda r: "x" * r.randint(1000, 100_000), lambda r: [], lambda r: {},
    lambda r: [1, "a", None], lambda r: {"": None, "0": [1]}, lambda r: "__DEEP__",
)


def _walk(obj: Any, path: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) in a decoded JSON document (the document itself has none)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            path.append((obj, k))
            _walk(v, path)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            path.append((obj, i))
            _walk(v, path)
    return path


class Mutator:
    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def bytes_(self, data: bytes, others: Units) -> bytes:
        r = self.r
        op = r.randrange(8)
        n = len(data)
        if op == 0 and n:  # flip bits
            b = bytearray(data)
            for _ in range(r.randint(1, 8)):
                b[r.randrange(n)] ^= 1 << r.randrange(8)
            return bytes(b)
        if op == 1:  # truncate
            return data[: r.randint(0, n)] if r.random() < 0.7 else data[r.randint(0, n):]
        if op == 2 and others:  # splice with another unit
            other = r.choice(others)
            return data[: r.randint(0, n)] + other[r.randint(0, len(other)):]
        if op == 3:  # insert junk
            at = r.randint(0, n)
            return data[:at] + r.choice(JUNK) * r.randint(1, 4) + data[at:]
        if op == 4 and n:  # delete a slice
            a = r.randrange(n)
            return data[:a] + data[a + r.randint(1, 64):]
        if op == 5 and n:  # repeat a slice: a long line (rarely a very long one)
            a = r.randrange(n)
            piece = data[a: a + r.randint(1, 32)]
            times = r.randint(1000, 20_000) if r.random() < 0.9 else r.randint(50_000, 200_000)
            return data[:a] + piece * times + data[a:]
        if op == 6:  # replace a byte with one of the interesting ones
            at = r.randint(0, n)
            return data[:at] + r.choice(JUNK) + data[at + 1:]
        return bytes(r.randrange(256) for _ in range(r.randint(0, 200)))  # noise

    def json_(self, doc: Any) -> bytes:
        """The document re-encoded with one to three nodes swapped, deleted or renamed."""
        r = self.r
        doc = json.loads(json.dumps(doc))  # a private copy
        for _ in range(r.randint(1, 3)):
            nodes = _walk(doc, [])
            if not nodes:
                doc = r.choice(VALUES)(r)
                break
            parent, key = r.choice(nodes)
            roll = r.random()
            if roll < 0.15 and isinstance(parent, dict):
                del parent[key]
            elif roll < 0.25 and isinstance(parent, dict):
                parent[r.choice(["", "kind", "t", "0", key + "x", key.upper()])] = parent.pop(key)
            elif roll < 0.35:  # wrap: a list or an object where the value was
                parent[key] = [parent[key]] if r.random() < 0.5 else {"v": parent[key]}
            else:
                parent[key] = r.choice(VALUES)(r)
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=r.random() < 0.5)
        depth = r.choice((10, 1000, 100_000))
        text = text.replace('"__DEEP__"', "[" * depth + "]" * depth if r.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth)
        return text.encode("utf-8", "surrogatepass")

    def unit(self, seed: bytes, doc: Any, others: Units) -> bytes:
        if doc is not None and self.r.random() < 0.5:
            out = self.json_(doc)
            return self.bytes_(out, others) if self.r.random() < 0.2 else out
        out = self.bytes_(seed, others)
        return self.bytes_(out, others) if self.r.random() < 0.3 else out


def _json_or_none(b: bytes) -> Any:
    try:
        return json.loads(b)
    except ValueError:
        return None


@dataclass
class Corpus:
    """The units a reader's inputs are made from, and how many go into one input."""

    units: Units
    per_input: tuple[int, int] = (1, 1)
    docs: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.docs = [_json_or_none(u) for u in self.units]

    def draw(self, m: Mutator) -> Units:
        r = m.r
        k = r.randint(*self.per_input)
        start = r.randrange(len(self.units))
        picked = [self.units[(start + i) % len(self.units)] for i in range(k)]  # consecutive: a real sequence
        out = []
        hit = r.randrange(k)
        for i, u in enumerate(picked):
            if i == hit or r.random() < 0.2:
                out.append(m.unit(u, self.docs[(start + i) % len(self.units)], self.units))
            else:
                out.append(u)
        return out


# ---------------------------------------------------------------- the readers and their refusals


def _lines(path: Path) -> Units:
    return [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]


def _journal_lines() -> Units:
    return [ln for p in sorted(JOURNALS.glob("*/events.jsonl")) for ln in _lines(p)]


PROBE_KINDS = ("process_attached", "device_seen", "step", "graph_executed", "compile_started", "compile")
DEBUG_TEXT = "\n".join(
    ln for ln in (NEURON / "torch-neuronx-train.log").read_text().splitlines()[18:34]
)


def _probe_lines() -> Units:
    out: Units = []
    for raw in _journal_lines():
        d = json.loads(raw)
        if d.get("kind") in PROBE_KINDS:
            d = {"kind": d.pop("kind"), **d}  # the probe writes "kind" first (the fast path)
            out.append(json.dumps(d, separators=(",", ":")).encode())
            if d["kind"] == "compile":
                out.append(json.dumps({**d, "debug_text": DEBUG_TEXT}, separators=(",", ":")).encode())
    return out


def price_list_entry(usd: str = "21.5000000000", unit: str = "Hrs", market: str = "OnDemand") -> bytes:
    """One PriceList entry as get_products returns it (PRICING.md §3.3; the codes are opaque)."""
    sku, term, rate = "ABCDEFGHJKLMNPQR", "JRTCKXETXF", "6YS6EN2CT7"
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "sku": sku, "attributes": {
            "instanceType": "trn1.32xlarge", "regionCode": "us-east-1", "operatingSystem": "Linux",
            "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
            "licenseModel": "No License required", "marketoption": market, "operation": "RunInstances"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.{term}": {
            "offerTermCode": term, "effectiveDate": "2026-11-01T00:00:00Z",
            "priceDimensions": {f"{sku}.{term}.{rate}": {"unit": unit, "pricePerUnit": {"USD": usd}}}}}},
    }).encode()


def _text(units: Units) -> str:
    return b"\n".join(units).decode("utf-8", "replace")  # as parse_file decodes a saved output


def read_neuron_ls_json(units: Units, ctx: dict[str, Any]) -> Verdict:
    from neurondesk.collectors.devices.neuron_ls import NeuronLsError, parse_json
    try:
        parse_json(_text(units))
    except NeuronLsError:
        return "refused"
    return "ok"


def read_neuron_ls_text(units: Units, ctx: dict[str, Any]) -> Verdict:
    from neurondesk.collectors.devices.neuron_ls import NeuronLsError, parse_text
    try:
        parse_text(_text(units))
    except NeuronLsError:
        return "refused"
    return "ok"


def read_neuron_monitor(units: Units, ctx: dict[str, Any]) -> Verdict:
    from neurondesk.collectors.devices.neuron_monitor import parse_report
    from neurondesk.core.events.run_events import ParseProblem
    line = units[0] if ctx["rng"].random() < 0.7 else units[0].decode("utf-8", "surrogateescape")
    result = parse_report(line, 1.0)
    return "refused" if result is None or isinstance(result, ParseProblem) else "ok"


SUB_PARSERS = ("PtXlaDebugParser", "NeuronCCParser", "TorchLogsParser", "TracebackParser", "ProgressParser")


def read_logparse(units: Units, ctx: dict[str, Any]) -> Verdict:
    """One long-lived OutputParser (as in a run): chunks of lines, str or bytes, flushed now and then."""
    from neurondesk.collectors.logparse import OutputParser
    from neurondesk.core.events.run_events import ParseProblem
    parser = ctx.setdefault("parser", OutputParser())
    rng = ctx["rng"]
    chunk = b"\n".join(units) + b"\n"
    text: str | bytes = chunk if rng.random() < 0.3 else chunk.decode("utf-8", "surrogateescape")
    events = parser.feed(rng.choice(("stdout", "stderr")), text, 2.0)
    if rng.random() < 0.01:
        events += parser.flush(3.0)
    problems = [e for e in events if isinstance(e, ParseProblem)]
    for p in problems:
        if p.source in SUB_PARSERS or p.error.startswith("flush failed"):
            return f"contained: {p.source}: {re.sub(r'[0-9]+', 'N', p.error)[:160]}"
    return "refused" if problems else "ok"


def read_probe(units: Units, ctx: dict[str, Any]) -> Verdict:
    from neurondesk.collectors.probe_messages import decode_probe_line
    from neurondesk.core.events.run_events import ParseProblem
    event = decode_probe_line(units[0] + b"\n", 4.0)
    return "refused" if isinstance(event, ParseProblem) else "ok"


def read_probe_ranges(units: Units, ctx: dict[str, Any]) -> Verdict:
    """The recorder's decoder, with the run's start: what it accepts is within range (issue 24)."""
    from neurondesk.collectors.probe_messages import ProbeDecoder, out_of_range
    from neurondesk.core.events.run_events import ParseProblem
    started, now = 1.7e9, 1.7e9 + 60.0
    events = ProbeDecoder(started_t=started).decode(units[0] + b"\n", now)
    accepted = [e for e in events if not isinstance(e, ParseProblem)]
    for e in accepted:
        why = out_of_range(e, now, started)
        if why is not None:
            raise AssertionError(f"accepted out of range: {why}")
    return "ok" if accepted else "refused"


def _probe_range_lines() -> Units:
    """The probe's own lines with their times moved into a run 60 s old, plus absurd ones."""
    out: Units = []
    for raw in _probe_lines():
        d = json.loads(raw)
        d["t"] = 1.7e9 + 30.0
        out.append(json.dumps(d, separators=(",", ":")).encode())
    step = {"kind": "step", "t": 1.7e9 + 30.0, "pid": 7, "step": 10**30, "duration_s": 0.02, "samples": 8}
    out += [json.dumps(step).encode(), json.dumps({**step, "step": 3, "data_wait_s": -1.0}).encode()]
    return out


def read_terminal_text(units: Units, ctx: dict[str, Any]) -> Verdict:
    """What neurondesk prints of stored text (safe_text.clean_lines) keeps no control sequence but
    SGR; a workload line that would pass for neurondesk's own is marked (headless.mark_impersonation)."""
    from neurondesk.reports.safe_text import clean_lines, has_no_controls_but_sgr
    from neurondesk.views.headless import mark_impersonation
    data = b"\n".join(units)
    text = data.decode("utf-8", "replace")
    out = clean_lines(text)
    for line in re.split(r"\r\n|\n", out):
        if not has_no_controls_but_sgr(line):
            raise AssertionError(f"a control sequence survived: {line[:200]!r}")
    marked = mark_impersonation(data)
    for line in re.split(rb"[\r\n]", marked):
        if line.lower().startswith(b"neurondesk"):
            raise AssertionError(f"an unmarked neurondesk line: {line[:200]!r}")
    return "refused" if marked != data or out != text else "ok"


def _terminal_units() -> Units:
    return [b"neurondesk: finished | step 9/9 | 9,999.0 samples/s steady", b"\x1b]52;c;cm0gLXJmIH4K\x07boom",
            b"\x1b]0;title\x07\x1b[2J\x1b[31mred\x1b[0m", b"\rNeurondesk: x", b"epoch 1 loss 0.25",
            b"\x9b2J\x9d0;t\x07!", b"\x1bP$qm\x1b\\", b"100%|####| 10/10\r"]


def read_cli_numbers(units: Units, ctx: dict[str, Any]) -> Verdict:
    """The CLI's number options: a value in its bounds, or argparse's refusal (issue 24)."""
    import argparse
    import math

    from neurondesk.cli import args as cli_args
    text = units[0].decode("utf-8", "replace")
    for parse, lo, hi in ((cli_args.whole(1, cli_args.MAX_STEPS), 1, cli_args.MAX_STEPS),
                          (cli_args.number(0, cli_args.MAX_PRICE_PER_HOUR), 0, cli_args.MAX_PRICE_PER_HOUR)):
        try:
            v = parse(text)
        except argparse.ArgumentTypeError:
            continue
        if not (math.isfinite(v) and lo <= v <= hi):
            raise AssertionError(f"{text[:80]!r} gave {v!r}, outside {lo}..{hi}")
        return "ok"
    return "refused"


def read_codec(units: Units, ctx: dict[str, Any]) -> Verdict:
    from neurondesk.core.events.codec import EventDecodeError, decode_event_line
    line: bytes | str = units[0] if ctx["rng"].random() < 0.8 else units[0].decode("utf-8", "surrogateescape")
    try:
        decode_event_line(line)
    except EventDecodeError:
        return "refused"
    return "ok"


def _scratch_dir(ctx: dict[str, Any]) -> Path:
    """One scratch folder per reader run (not setdefault: its default would be made at every call,
    which left one folder per input in /tmp), removed by run_reader at the end."""
    if "scratch" not in ctx:
        ctx["scratch"] = Path(tempfile.mkdtemp(prefix="neurondesk-fuzz-"))
    return ctx["scratch"]


def _scratch(ctx: dict[str, Any], data: bytes) -> Path:
    path = _scratch_dir(ctx) / "input"
    path.write_bytes(data)
    return path


def read_journal(units: Units, ctx: dict[str, Any]) -> Verdict:
    from neurondesk.store.journal import JournalProblem, iter_journal
    torn = ctx["rng"].random() < 0.3  # a killed writer leaves the last line without its newline
    path = _scratch(ctx, b"\n".join(units) + (b"" if torn else b"\n"))
    problems: list[JournalProblem] = []
    for _event in iter_journal(path, problems):
        pass
    return "refused" if problems else "ok"


def read_price_file(units: Units, ctx: dict[str, Any]) -> Verdict:
    from neurondesk.store.price_files import load_price_table
    table = load_price_table(_scratch(ctx, units[0]))
    return "refused" if table.warnings else "ok"


def read_price_list(units: Units, ctx: dict[str, Any]) -> Verdict:
    from neurondesk.clients.price_list import PriceRefreshError, parse_price_list
    items = [u.decode("utf-8", "replace") for u in units]
    try:
        price = parse_price_list(items, "trn1.32xlarge", "us-east-1")
    except PriceRefreshError:
        return "refused"
    return "refused" if price.price_per_hour is None else "ok"


# ---------------------------------------------------------------- issue 24 round 3: files of every kind, long lines


def read_input_file(units: Units, ctx: dict[str, Any]) -> Verdict:
    """load_price_table (the local price table: prices list, run) on a path that is, at random, a
    regular file of mutated JSON, one over a small bound, a FIFO, a link to /dev/zero or a folder:
    a table with a warning, never a hang (a FIFO would block the open) nor unbounded memory."""
    from neurondesk.store.input_files import InputRefused, read_regular
    from neurondesk.store.price_files import load_price_table
    folder = _scratch_dir(ctx)
    path = folder / "prices.json"
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif os.path.lexists(path):
        path.unlink()
    kind = ctx["rng"].choice(("file", "file", "file", "fifo", "dev-zero", "folder"))
    if kind == "file":
        path.write_bytes(units[0])
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    table = load_price_table(path)
    if kind != "file" and not table.warnings:
        raise AssertionError(f"a {kind} was taken for a price table")
    if kind == "file":  # and the bound itself, on the same bytes
        try:
            read_regular(path, "a fuzz input", 4096)
        except InputRefused:
            if len(units[0]) <= 4096:
                raise AssertionError("a file under the bound was refused") from None
    return "refused" if table.warnings else "ok"


def read_output_tail(units: Units, ctx: dict[str, Any]) -> Verdict:
    """The recorder's reader of the workload's output (collectors/output_tail.py): the units written
    as they come (no newline, \r redraws, very long lines), in random pieces, read between pieces;
    every line it gives is within the bound (64 KiB kept + the mark + the last redraw)."""
    from neurondesk.collectors.output_tail import MAX_LINE, REDRAW_MAX, OutputTail, cut_mark
    rng = ctx["rng"]
    path = _scratch(ctx, b"")
    tail = OutputTail(path, "stdout")
    data = b"".join(u + rng.choice((b"\n", b"\r", b"", b"\r\n")) for u in units)
    if rng.random() < 0.05:
        data += b"z" * rng.randint(MAX_LINE, 3 * MAX_LINE)  # a line past the bound, never ended
    bound = MAX_LINE + len(cut_mark(10**12)) + 1 + REDRAW_MAX
    lines: list[str] = []
    with open(path, "ab") as f:
        at = 0
        while at < len(data):
            step = rng.randint(1, 1 << rng.randint(4, 18))
            f.write(data[at:at + step])
            f.flush()
            at += step
            lines += tail.read_lines()
    lines += tail.read_lines(final=True)
    tail.close()
    longest = max((len(x) for x in lines), default=0)
    if longest > bound:
        raise AssertionError(f"an output line of {longest:,} characters, over the bound {bound:,}")
    return "refused" if any(" more bytes of this line cut by neurondesk]" in x for x in lines) else "ok"


def read_bounded_lines(units: Units, ctx: dict[str, Any]) -> Verdict:
    """store/input_files.bounded_lines (journals, the probe socket) with a 4 KiB bound: each line
    within it or said as over it, and every byte accounted for."""
    import io

    from neurondesk.store.input_files import bounded_lines
    data = b"\n".join(units) + (b"" if ctx["rng"].random() < 0.3 else b"\n")
    total, over_seen = 0, False
    for line, over in bounded_lines(io.BufferedReader(io.BytesIO(data)), 4096):
        if over:
            over_seen = True
            total += over
        else:
            if len(line) > 4096 + 1:
                raise AssertionError(f"a line of {len(line):,} bytes given whole")
            total += len(line)
    if total != len(data):
        raise AssertionError(f"{total:,} bytes accounted for of {len(data):,}")
    return "refused" if over_seen else "ok"


def read_run_records(units: Units, ctx: dict[str, Any]) -> Verdict:
    """The small records a command reads of a run folder: recorder.json (None when unusable),
    fallback.json (FallbackError), and a summary.json as an index row and a lost recorder's words
    (sources/ended.py: ls and history after a recorder's death or a locked index)."""
    from neurondesk.core.summary.types import SummaryError, load_summary
    from neurondesk.sources.ended import lost_recorder
    from neurondesk.store.fallback import FallbackError, read_fallback_info
    from neurondesk.store.index import row_of
    from neurondesk.store.liveness import read_recorder_info
    folder = _scratch_dir(ctx)
    for name in ("recorder.json", "fallback.json"):
        (folder / name).write_bytes(units[0])
    refused = read_recorder_info(folder) is None
    try:
        read_fallback_info(folder)
    except FallbackError:
        refused = True
    try:
        doc = _json_or_none(units[0])
    except RecursionError:  # json.loads's own refusal of deep nesting (the readers above catch it)
        doc = None
    summary = None
    if isinstance(doc, dict):
        try:
            summary = load_summary(doc)  # the store boundary: a summary is read by its contract, or refused
        except SummaryError:
            refused = True
    if summary is not None:
        refused |= row_of(summary, folder) is None
        lost = lost_recorder(folder, summary)
        if lost is not None:
            lost.words()
    return "refused" if refused else "ok"


def _run_record_units() -> Units:
    summaries = [p.read_bytes() for p in sorted((REPO / "tests" / "data").rglob("summary.json"))][:8]
    return summaries + [b'{"pid": 4242, "control_socket": "/tmp/nd-x/control.sock", "workload_pid": 4243}',
                        b'{"run_id": "r", "run_dir": "/tmp/r", "journal_bytes_in_run_dir": 24576}']


@dataclass(frozen=True)
class Reader:
    name: str
    what: str
    read: Callable[[Units, dict[str, Any]], Verdict]
    corpus: Callable[[], Corpus]


READERS: tuple[Reader, ...] = (
    Reader("neuron_ls_json", "neuron_ls.parse_json; refusal NeuronLsError", read_neuron_ls_json,
           lambda: Corpus([p.read_bytes() for p in sorted(NEURON.glob("neuron-ls-*.json"))])),
    Reader("neuron_ls_text", "neuron_ls.parse_text; refusal NeuronLsError", read_neuron_ls_text,
           lambda: Corpus([p.read_bytes() for p in sorted(NEURON.glob("neuron-ls-*.txt"))])),
    Reader("neuron_monitor", "neuron_monitor.parse_report; refusal ParseProblem or None", read_neuron_monitor,
           lambda: Corpus(_lines(NEURON / "neuron-monitor-trn1.jsonl") + [(NEURON / "neuron-monitor-config.json").read_bytes()])),
    Reader("logparse", "logparse.OutputParser feed/flush; refusal ParseProblem", read_logparse,
           lambda: Corpus(_lines(NEURON / "torch-neuronx-train.log") + _lines(NEURON / "torch-xla-metrics-report.txt")
                          + [b"Step 10/100 | loss: 2.31", b"[rank 0]: Traceback (most recent call last):"], (1, 8))),
    Reader("probe_messages", "probe_messages.decode_probe_line; refusal ParseProblem", read_probe,
           lambda: Corpus(_probe_lines())),
    Reader("probe_ranges", "probe_messages.ProbeDecoder with the run's start; refusal ParseProblem (out of range)",
           read_probe_ranges, lambda: Corpus(_probe_range_lines())),
    Reader("terminal_text", "safe_text.clean_lines and headless.mark_impersonation; 'refused': text changed",
           read_terminal_text, lambda: Corpus(_terminal_units(), (1, 6))),
    Reader("cli_numbers", "cli/args.py whole / number with their bounds; refusal ArgumentTypeError", read_cli_numbers,
           lambda: Corpus([b"300", b"5", b"1e26", b"100000000000000000000000000", b"1.34375", b"1e308",
                           b"nan", b"-1", b"0", b"1000000000000"])),
    Reader("codec", "codec.decode_event_line; refusal EventDecodeError", read_codec,
           lambda: Corpus(_journal_lines())),
    Reader("journal", "journal.iter_journal on a file; refusal JournalProblem", read_journal,
           lambda: Corpus(_journal_lines(), (1, 20))),
    Reader("price_file", "price_files.load_price_table; refusal a warning (the bundled table kept)", read_price_file,
           lambda: Corpus([(REPO / "neurondesk" / "core" / "prices.json").read_bytes()])),
    Reader("price_list", "price_list.parse_price_list; refusal no price or PriceRefreshError", read_price_list,
           lambda: Corpus([price_list_entry(), price_list_entry("0.0000000000"), price_list_entry(unit="Quantity"),
                           price_list_entry(market="CapacityBlock"), price_list_entry("1.2")], (1, 4))),
    Reader("input_file", "price_files.load_price_table on a file, FIFO, /dev/zero link or folder; "
           "refusal a warning (issue 24 item 5)", read_input_file,
           lambda: Corpus([(REPO / "neurondesk" / "core" / "prices.json").read_bytes()])),
    Reader("output_tail", "output_tail.OutputTail on output written piecewise; 'refused': a line cut "
           "(issue 24 item 6)", read_output_tail,
           lambda: Corpus(_lines(NEURON / "torch-neuronx-train.log") + [b"  3%|#    | 30/1000 [00:01<00:32, 29.9it/s]"],
                          (1, 12))),
    Reader("bounded_lines", "input_files.bounded_lines, 4 KiB bound; 'refused': a line over it (issue 24 items 5, 6)",
           read_bounded_lines, lambda: Corpus(_journal_lines(), (1, 20))),
    Reader("run_records", "liveness.read_recorder_info, fallback.read_fallback_info, index.row_of, "
           "ended.lost_recorder; refusal None or FallbackError (issue 24 items 9, 10)", read_run_records,
           lambda: Corpus(_run_record_units())),
)


# ---------------------------------------------------------------- running one reader


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_MIB


def _live_blocks() -> int:
    """Memory blocks the interpreter holds after a collection: grows with a leak, not with the
    allocator's high-water mark (which RSS keeps after one very long input)."""
    gc.collect()
    return sys.getallocatedblocks()


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    here = next((f for f in reversed(frames) if "/neurondesk/" in f.filename), last)
    return f"{Path(here.filename).name}:{here.lineno} in {here.name}" if here else "?"


def run_reader(reader: Reader, inputs: int, seed: int) -> dict[str, Any]:
    rng = random.Random(f"{seed}:{reader.name}")
    mutator = Mutator(rng)
    corpus = reader.corpus()
    ctx: dict[str, Any] = {"rng": rng}
    counts = {"ok": 0, "refused": 0, "escapes": 0, "contained": 0}
    escapes: dict[str, dict[str, Any]] = {}
    contained: dict[str, int] = {}
    slowest = (0.0, b"")
    rss_at_10 = 0.0
    blocks_at_10 = 0
    start = time.perf_counter()
    for i in range(inputs):
        units = corpus.draw(mutator)
        t0 = time.perf_counter()
        try:
            verdict = reader.read(units, ctx)
        except Exception as exc:  # noqa: BLE001 - that is what we count
            verdict = "escape"
            key = f"{type(exc).__name__} at {_where(exc)}"
            raw = b"\n".join(units)
            seen = escapes.setdefault(key, {"count": 0, "message": str(exc)[:300], "input": raw})
            seen["count"] += 1
            if len(raw) < len(seen["input"]):
                seen.update(message=str(exc)[:300], input=raw)
        took = time.perf_counter() - t0
        if took > slowest[0]:
            slowest = (took, b"\n".join(units))
        if verdict == "escape":
            counts["escapes"] += 1
        elif verdict.startswith("contained"):
            counts["refused"] += 1
            counts["contained"] += 1
            contained[verdict] = contained.get(verdict, 0) + 1
        else:
            counts[verdict] += 1
        if i + 1 == max(1, inputs // 10):
            rss_at_10 = _rss_mib()
            blocks_at_10 = _live_blocks()
    seconds = time.perf_counter() - start
    if "scratch" in ctx:
        shutil.rmtree(ctx["scratch"], ignore_errors=True)
    return {
        "reader": reader.name,
        "what": reader.what,
        "inputs": inputs,
        "accepted": counts["ok"],
        "refused": counts["refused"],
        "escapes": counts["escapes"],
        "contained": counts["contained"],
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_growth_10_to_100pct_mib": round(_rss_mib() - rss_at_10, 1),
        "live_blocks_growth_10_to_100pct": _live_blocks() - blocks_at_10,
        "seconds": round(seconds, 1),
        "slowest_input_ms": round(slowest[0] * 1000, 1),
        "slowest_input_bytes": len(slowest[1]),
        "escape_kinds": [
            {"where": k, "count": v["count"], "message": v["message"], "shortest_input": _shown(v["input"])}
            for k, v in sorted(escapes.items(), key=lambda kv: -kv[1]["count"])
        ],
        "contained_kinds": dict(sorted(contained.items(), key=lambda kv: -kv[1])[:20]),
    }


def _shown(raw: bytes, limit: int = 2000) -> str:
    text = repr(raw)
    return text if len(text) <= limit else text[:limit] + f"... [{len(raw)} bytes]"


# ---------------------------------------------------------------- the command


def _child(name: str, inputs: int, seed: int) -> dict[str, Any]:
    """One reader in a fresh interpreter, so its peak RSS is its own."""
    cmd = [sys.executable, __file__, "--child", name, "--inputs", str(inputs), "--seed", str(seed)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"reader": name, "inputs": inputs, "crashed": done.stderr[-2000:]}
    return json.loads(done.stdout)


def print_table(rows: list[dict[str, Any]]) -> None:
    head = f"{'reader':16} {'inputs':>8} {'refused':>8} {'escapes':>8} {'contained':>9} {'peak MiB':>9} {'growth MiB':>10} {'blocks+':>8} {'seconds':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        if "crashed" in r:
            print(f"{r['reader']:16} child process crashed: {r['crashed'][-300:]}")
            continue
        print(f"{r['reader']:16} {r['inputs']:>8} {r['refused']:>8} {r['escapes']:>8} {r['contained']:>9} "
              f"{r['peak_rss_mib']:>9} {r['rss_growth_10_to_100pct_mib']:>10} "
              f"{r['live_blocks_growth_10_to_100pct']:>8} {r['seconds']:>8}")
    for r in rows:
        for e in r.get("escape_kinds", []):
            print(f"\n{r['reader']}: {e['count']} x {e['where']}: {e['message'][:200]}\n  shortest: {e['shortest_input'][:300]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inputs", type=int, default=100_000, help="generated inputs per reader")
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "fuzz.json")
    ap.add_argument("--reader", action="append", choices=[r.name for r in READERS],
                    help="only this reader (repeatable); results are merged into --out")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        reader = next(r for r in READERS if r.name == args.child)
        print(json.dumps(run_reader(reader, args.inputs, args.seed)))
        return
    names = args.reader or [r.name for r in READERS]
    tree = revision()
    rows = []
    for name in names:
        rows.append(_child(name, args.inputs, args.seed))
        print(f"{name}: done", file=sys.stderr, flush=True)
    print_table(rows)
    _save(args.out, rows, args.seed, tree)


def revision() -> str:
    """The commit the readers were run at, and the reader-side files then changed but not committed."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
        return done.stdout
    readers = ("neurondesk/collectors", "neurondesk/core/events/codec.py", "neurondesk/core/node/prices.py", "neurondesk/store")
    dirty = git("status", "--porcelain", "--", *readers).splitlines()
    files = ", ".join(line[3:] for line in dirty)
    return git("rev-parse", "--short", "HEAD").strip() + (f" with uncommitted changes in {files}" if files else "")


def _save(out: Path, rows: list[dict[str, Any]], seed: int, tree: str) -> None:
    old = json.loads(out.read_text()) if out.exists() else {}
    by_name = {r["reader"]: r for r in old.get("readers", [])}
    by_name.update({r["reader"]: {**r, "seed": seed, "revision": tree} for r in rows})
    order = [r.name for r in READERS]
    doc = {
        "command": "python benchmarks/fuzz.py --inputs N --seed S (see its docstring)",
        "python": sys.version.split()[0],
        "machine": f"{os.cpu_count()} CPUs, shared dev container",
        "date": time.strftime("%Y-%m-%d"),
        "readers": sorted(by_name.values(), key=lambda r: order.index(r["reader"])),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
