"""Python tracebacks -> LogError."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from neurondesk.collectors.logparse import OutputParser
from neurondesk.core.events.run_events import LogError, OutputLine


def parse(lines, stream="stderr", flush_at=None):
    p = OutputParser()
    events = []
    for i, line in enumerate(lines):
        events += p.feed(stream, line, float(i))
    if flush_at is not None:
        events += p.flush(flush_at)
    return events


def errors(events):
    return [e for e in events if isinstance(e, LogError)]


def test_real_traceback_from_a_subprocess(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""\
        import json

        def load(text):
            return json.loads(text)

        def main():
            load("{not json")

        main()
    """))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 1
    events = parse(p.stderr.splitlines())
    (err,) = errors(events)
    assert err.source == "python"
    assert err.message.startswith("json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes")
    # the innermost frames are in the standard library's json package; the user's own is load()
    assert err.message.endswith(f"(at {script}:4 in load)")
    assert all(e.tag == "error" for e in events if isinstance(e, OutputLine))


def test_last_user_frame_skips_library_frames():
    lines = [
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 79, in train_loop',
        "    loss.item()",
        '  File "/opt/venv/lib/python3.10/site-packages/torch_xla/core/xla_model.py", line 1035, in mark_step',
        "    torch_xla._XLAC._xla_step_marker(",
        "    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~^",
        ("RuntimeError: Bad StatusOr access: INVALID_ARGUMENT: RunNeuronCCImpl: error condition error != 0: "
        "<class 'subprocess.CalledProcessError'>: Command '...' returned non-zero exit status 70. [NCC_EOOM002]"),
    ]
    (err,) = errors(parse(lines))
    assert err.message.startswith("RuntimeError: Bad StatusOr access")
    assert err.message.endswith("(at /home/u/train.py:79 in train_loop)")
    assert err.code == "NCC_EOOM002"


def test_chained_exceptions_each_reported_and_the_last_is_last():
    lines = [
        "Traceback (most recent call last):",
        '  File "/w/a.py", line 2, in <module>',
        "KeyError: 'x'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/w/a.py", line 4, in <module>',
        "ValueError: bad config",
    ]
    errs = errors(parse(lines))
    assert [e.message for e in errs] == ["KeyError: 'x' (at /w/a.py:2 in <module>)",
                                         "ValueError: bad config (at /w/a.py:4 in <module>)"]


def test_bare_exception_names_and_non_exceptions():
    lines = ["Traceback (most recent call last):", '  File "/w/a.py", line 9, in loop', "    time.sleep(1)",
             "KeyboardInterrupt"]
    assert errors(parse(lines))[0].message == "KeyboardInterrupt (at /w/a.py:9 in loop)"
    # an unindented plain word inside a traceback (interleaved output) does not end it
    lines = ["Traceback (most recent call last):", '  File "/w/a.py", line 9, in loop', "done",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    (err,) = errors(parse(lines))
    assert err.message.startswith("torch.OutOfMemoryError: CUDA out of memory") and err.code == "device-oom"


def test_ranks_interleaving_their_tracebacks():
    lines = [
        "[rank0]:Traceback (most recent call last):",
        "[rank1]:Traceback (most recent call last):",
        '[rank0]:  File "/w/t.py", line 10, in main',
        '[rank1]:  File "/w/t.py", line 20, in main',
        "[rank1]:RuntimeError: rank one failed",
        "[rank0]:RuntimeError: rank zero failed",
    ]
    assert [e.message for e in errors(parse(lines))] == [
        "RuntimeError: rank one failed (at /w/t.py:20 in main)",
        "RuntimeError: rank zero failed (at /w/t.py:10 in main)",
    ]


def test_traceback_quoted_inside_a_line_does_not_open_one():
    events = parse(['{"event": "retry", "detail": "Traceback (most recent call last): ..."}',
                    "INFO: carrying on"], flush_at=5.0)
    assert errors(events) == []


def test_traceback_cut_off_is_reported_at_flush():
    events = parse(["Traceback (most recent call last):", '  File "/w/t.py", line 5, in f'], flush_at=9.0)
    (err,) = errors(events)
    assert "cut off" in err.message and "/w/t.py:5" in err.message and err.t == 9.0


def test_stdout_lines_do_not_disturb_a_stderr_traceback():
    p = OutputParser()
    events = p.feed("stderr", "Traceback (most recent call last):", 1.0)
    events += p.feed("stdout", "ValueError: this is just printed text on stdout", 1.5)
    events += p.feed("stderr", '  File "/w/t.py", line 5, in f', 2.0)
    events += p.feed("stderr", "ValueError: real", 3.0)
    assert [e.message for e in errors(events)] == ["ValueError: real (at /w/t.py:5 in f)"]
