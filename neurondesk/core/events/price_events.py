"""The price a run is costed at, as its recorder resolved it (recorder/price_desk.py).

Journalled, so a replay costs the run as it was costed live, whatever price table the reader has
(another version's bundled table, a refreshed local one). Journals written before this event carry the
price in ``RunStarted``; the reducer falls back to that (core/reduce/run.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from neurondesk.core.events.run_events import Event


@dataclass(frozen=True)
class PriceResolved(Event):
    """The run's instance type and $/hour, and where the price came from. A later one replaces an
    earlier one (the instance type named by neuron-monitor after the start)."""

    kind: ClassVar[str] = "price_resolved"
    instance_type: str | None = None
    price_per_hour: float | None = None  # None: unpriced; ``source`` says why
    source: str = ""  # "--price-per-hour" | "bundled table: VAN-2601 (2026-01-21), us-east-1" | why none
