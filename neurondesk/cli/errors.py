"""How the command line says what went wrong: `die` (one line on stderr and an exit status, 2 unless
told) and `say` (notes, one line each)."""

from __future__ import annotations

import sys
from typing import NoReturn


def die(msg: str, code: int = 2) -> NoReturn:
    from neurondesk.reports.safe_text import clean  # a message may quote a path, a line, a command

    sys.stderr.write(f"neurondesk: {clean(msg, sgr=True)}\n")
    raise SystemExit(code)


def say(notes: list[str]) -> None:
    from neurondesk.reports.safe_text import clean  # paths and ids are outside text

    for note in notes:
        sys.stderr.write(f"neurondesk: {clean(note)}\n")
