"""Control sequences in stored text never reach the terminal through what neurondesk prints (issue 24,
item 3): a command line and a stderr tail holding OSC 52, OSC 0 and ESC[2J come out of `ls`,
`history`, `summary` and `compare` with their colours only; the headless run passes the workload's
own bytes through, but a line of it that would pass for neurondesk's status line is marked."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO, base_env

from neurondesk.reports.safe_text import CleanStream, clean_lines, has_no_controls_but_sgr
from neurondesk.views.headless import WORKLOAD_MARK, mark_impersonation

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
FORGED = "neurondesk: finished | step 9/9 | 9,999.0 samples/s steady | 0:01"
RED = "\x1b[31m"

PROGRAM = (
    "import sys\n"
    f"sys.stderr.write({CLIPBOARD + 'boom' + TITLE + CLEAR!r} + ' {RED}red\\x1b[0m\\n')\n"
    f"print({FORGED!r})\n"
    "sys.exit(3)\n"
)


def nd(home, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                          cwd=REPO, env=base_env(home), timeout=timeout)


def assert_safe(text: str, what: str) -> None:
    for line in re.split(r"\r\n|\n", text):
        assert has_no_controls_but_sgr(line), (what, line)


def test_clean_lines_keeps_line_ends_and_colours_and_drops_the_rest():
    raw = f"a{CLIPBOARD}b\r\n{RED}c\x1b[0m{TITLE}\nd{CLEAR}\rover\n"
    assert clean_lines(raw) == f"ab\r\n{RED}c\x1b[0m\nd over\n"
    plain = "no controls\nat all\r\n"
    assert clean_lines(plain) is plain

    class Sink:
        def __init__(self):
            self.text = ""
            self.buffer = "raw"

        def write(self, s):
            self.text += s
    sink = Sink()
    stream = CleanStream(sink)
    stream.write(f"x{TITLE}y\n")
    assert sink.text == "xy\n" and stream.buffer == "raw"


def test_a_workload_line_that_looks_like_neurondesks_own_is_marked_the_rest_untouched():
    assert mark_impersonation(f"{FORGED}\n".encode()) == WORKLOAD_MARK + f"{FORGED}\n".encode()
    bar = f"\r{CLEAR}\x1b[1mneurondesk: x\n".encode()
    assert mark_impersonation(bar) == f"\r{CLEAR}\x1b[1m".encode() + WORKLOAD_MARK + b"neurondesk: x\n"
    assert mark_impersonation(b"neurondesk: continued", at_line_start=False) == b"neurondesk: continued"
    for untouched in (b"loss 0.1 neurondesk: inside a line\n", f"{CLIPBOARD}progress\r".encode(), b""):
        assert mark_impersonation(untouched) == untouched
    # escape sequences that can be read two ways (ESC ] as an OSC or as a short escape): once, not
    # 2**64 times (found by benchmarks/fuzz.py; this input never ended before the fix)
    many = b"\x1b]" * 64 + b"\x1b" + b"\x1b] " * 64
    assert mark_impersonation(many) == many
    assert mark_impersonation(b"\x1b]" * 64 + b"\nneurondesk") == b"\x1b]" * 64 + b"\n" + WORKLOAD_MARK + b"neurondesk"


def test_hostile_command_and_stderr_come_out_of_every_report_clean(tmp_path):
    home = tmp_path / "home"
    runs = [tmp_path / "a", tmp_path / "b"]
    script = tmp_path / "w.py"
    script.write_text(PROGRAM)
    for d in runs:
        p = nd(home, "run", "--headless", "--price-per-hour", "1", "--run-dir", str(d), "--",
               sys.executable, str(script), f"--title={TITLE}{CLIPBOARD}{CLEAR}x")
        assert p.returncode == 3, p.stderr
        # the workload's own bytes pass through (it is the user's program on the user's terminal) ...
        assert CLIPBOARD in p.stderr
        # ... but its forged status line is marked, and what neurondesk itself prints is clean
        assert f"{WORKLOAD_MARK.decode()}{FORGED}" in p.stdout
        assert not any(line.startswith(FORGED) for line in p.stdout.splitlines())
        mine = p.stdout[p.stdout.index("neurondesk summary ("):]
        assert_safe(mine, "the headless summary")
        assert "boom" in mine or "title=" in mine
        for line in p.stderr.splitlines():
            if line.startswith("neurondesk:"):
                assert_safe(line, "a headless notice")
    reports = [("ls",), ("history",), ("history", "--format", "md"), ("history", "--format", "csv"),
               ("summary", str(runs[0]), "--format", "text"), ("summary", str(runs[0]), "--format", "md"),
               ("summary", str(runs[0]), "--format", "csv"), ("compare", str(runs[0]), str(runs[1])),
               ("compare", str(runs[0]), str(runs[1]), "--format", "csv")]
    for args in reports:
        p = nd(home, *args)
        assert p.returncode == 0, (args, p.stderr)
        assert_safe(p.stdout, args)
        assert_safe(p.stderr, args)
        # the command is there, made safe (the text history cuts it at 60 characters; compare csv has none)
        assert "title=x" in p.stdout or args[0] == "history" and len(args) == 1 or "csv" in args[-1:] and args[0] == "compare", args
    md = nd(home, "summary", str(runs[0]), "--format", "md").stdout
    assert "boom" in md and f"{RED}red" in md  # the stderr tail, its colour kept
