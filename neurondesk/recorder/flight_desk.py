"""The hang notice names the blocked collective (issue 33 item 8): when the run is declared hung and
its ranks run with PyTorch's Flight Recorder on, their dumps are asked for and read off the recorder's
loop (a request takes up to collectors/flight_recorder.REQUEST_TIMEOUT_S), then the hang notice is
journaled with the collective's words, and a CollectiveBlocked event that the node's Prometheus
series (exporter/job.py) shows until a step ends again. Where the recorder is off, the notice
goes at once, as it always did."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from neurondesk.collectors.flight_recorder import answers, node_dumps
from neurondesk.core.events import run_events as ev
from neurondesk.core.node.flight_recorder import (
    blocked_collectives,
    blocked_event,
    enabled,
    flight_env,
    hang_words,
)
from neurondesk.core.view.read_views import job_identity, rank_of_pid

Reading = Callable[[], tuple[str | None, ev.CollectiveBlocked | None]]


def flight_reading(state, private_dir: str | None, env: dict[str, str]) -> Reading | None:
    """Read in the state's thread: what to ask for and where. None where no rank has the recorder on
    (not in the workload's environment, not in any hello, no probe serving its dump)."""
    env = dict(env) | flight_env(state.flight())
    if not (enabled(env) or (private_dir and answers(private_dir))):
        return None
    targets = rank_of_pid(state)
    node, since = job_identity(state).node or "this node", state.started_t

    def read() -> tuple[str | None, ev.CollectiveBlocked | None]:
        records = node_dumps(targets, private_dir, env, since=since).records
        found, words = blocked_collectives(records), hang_words(node, records)
        return words, blocked_event(time.time(), found, words or "") if found else None

    return read


def say_hang_with_flight(message: str, read: Reading, say: Callable[[str, ev.CollectiveBlocked | None], None]) -> None:
    """On a thread of its own: ``say(message with the collective's words, the event)`` once the dumps
    are read (or could not be: then the message alone)."""
    def work() -> None:
        try:
            words, blocked = read()
        except Exception:  # noqa: BLE001 - the notice goes out whatever the dumps hold
            words, blocked = None, None
        say(f"{message}. Flight Recorder: {words}" if words else message, blocked)

    threading.Thread(target=work, name="neurondesk-flight-recorder", daemon=True).start()
