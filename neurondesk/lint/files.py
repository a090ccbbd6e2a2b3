"""Which files lint reads, and the one-line answer for each it cannot."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from neurondesk.lint.rules import Finding, lint_source

MAX_BYTES = 2 << 20  # a training script is tens of KB; a 2 MiB one is generated or not a script
SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "dist-packages", "build", "dist"}


@dataclass(frozen=True)
class Problem:
    path: str
    message: str  # one line: the input and what to do


@dataclass
class Report:
    files: int = 0
    findings: list[Finding] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _py_files(d: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(d):
        dirnames[:] = sorted(n for n in dirnames if not n.startswith(".") and n not in SKIP_DIRS)
        out += [Path(dirpath) / n for n in sorted(filenames) if n.endswith(".py")]
    return out


def _lint_file(p: Path, report: Report, explicit: bool) -> None:
    shown = str(p)
    try:  # without blocking (a FIFO named x.py would hang the open), and only a regular file
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                report.problems.append(Problem(shown, f"{shown}: not a regular file (a FIFO, a device ...), "
                                               "not read; give the script itself"))
                return
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        report.problems.append(Problem(shown, f"{shown}: cannot read ({e.strerror or e})"))
        return
    if len(data) > MAX_BYTES:
        report.problems.append(Problem(shown, f"{shown}: larger than {MAX_BYTES >> 20} MiB, not read; a training "
                                       "script is far smaller: lint the files that hold the training loop"))
        return
    if b"\x00" in data:
        report.problems.append(Problem(shown, f"{shown}: a binary file, not Python source; give a .py script"))
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    try:
        findings = lint_source(text, shown)
    except SyntaxError as e:
        where = f"{shown}:{e.lineno}" if e.lineno else shown
        if explicit and p.suffix != ".py":
            msg = f"{where}: not Python source ({e.msg}); lint reads Python training scripts (.py)"
        else:
            msg = (f"{where}: syntax error ({e.msg}); lint parses the script without running it: fix the line "
                   "(or check it runs with your interpreter) and lint again")
        report.problems.append(Problem(shown, msg))
        return
    except (RecursionError, MemoryError, ValueError) as e:
        report.problems.append(Problem(shown, f"{shown}: too deeply nested or malformed to read ({type(e).__name__}); "
                                       "lint the files that hold the training loop"))
        return
    report.files += 1
    report.findings += findings


def lint_paths(paths: list[str]) -> Report:
    """Every given script, and every *.py under a given folder (hidden folders and caches skipped)."""
    report = Report()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = _py_files(p)
            if not files:
                report.problems.append(Problem(raw, f"{raw}: a folder with no *.py file in it; give a script or a "
                                               "folder of scripts"))
            for f in files:
                _lint_file(f, report, explicit=False)
        elif p.exists():
            if not p.is_file():
                report.problems.append(Problem(raw, f"{raw}: not a regular file (a device or a pipe); give a .py script"))
                continue
            _lint_file(p, report, explicit=True)
        else:
            report.problems.append(Problem(raw, f"{raw}: no such file or folder"))
    return report
