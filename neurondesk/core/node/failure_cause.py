"""Which failure of a job is its cause: when one rank dies, the others die of it a moment later
("Connection closed by peer", a collective's timeout), and their word can reach a recorder before
torchrun's report of the dead rank (dated to the second). So the first failure is the first one
that is not such a consequence, and only when every failure is one, the first of all. One rule for
a node's ranks (reduce/ranks.py), the live job (job_view.py) and the job summary (job_summary.py).
Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

# What gloo, NCCL and c10d say on a rank whose peer went away, or whose collective gave up waiting,
# and torchrun's own ChildFailedError (its agent process, no rank: its children failed).
CONSEQUENCES = ("closed by peer", "reset by peer", "connection closed", "socket closed", "broken pipe",
                "connection refused", "remote process exited", "communicator was aborted", "timed out",
                "timeout", "childfailederror")


def is_consequence(what: str) -> bool:
    """The failure says a peer went away (or a wait for one ran out, or a child failed): another
    failure caused it."""
    low = what.lower()
    return any(words in low for words in CONSEQUENCES)


def first_cause(failures: Iterable[T], when: Callable[[T], float | None], what: Callable[[T], str]) -> T | None:
    """The earliest failure that is no consequence of another; else the earliest (an unknown time last)."""
    every = list(failures)
    causes = [f for f in every if not is_consequence(what(f))] or every
    if not causes:
        return None
    return min(causes, key=lambda f: t if (t := when(f)) is not None else float("inf"))
