"""The run's price, resolved by the recorder and journalled (core/events/price_events.py), so that a
replay shows the price the live run showed, whatever price table its reader has.

At the start: the price the command line resolved (``--price-per-hour``, else the instance type of
``--instance-type`` or the metadata service, from the price table in use). Later, at most once: when
nothing named the instance and no price was given, the instance neuron-monitor's instance_info names,
priced from the same table (the bundled one, overridden by the user's refreshed one).
"""

from __future__ import annotations

from pathlib import Path

from neurondesk.core.events import device_events as dev
from neurondesk.core.events import run_events as ev
from neurondesk.core.events.price_events import PriceResolved
from neurondesk.core.node.prices import instance_info_price
from neurondesk.recorder.options import RunOptions
from neurondesk.store.price_files import load_price_table, local_price_table_path


class PriceDesk:
    def __init__(self, options: RunOptions) -> None:
        self._options = options
        self._settled = options.instance_type is not None or options.price_per_hour is not None

    def at_start(self, t: float) -> PriceResolved:
        o = self._options
        return PriceResolved(t=t, instance_type=o.instance_type, price_per_hour=o.price_per_hour,
                             source=o.price_source or "")

    def after(self, e: ev.Event) -> list[ev.Event]:
        """What a telemetry event settles: the price of the instance it names (with the warnings of a
        local table that could not be used), once; nothing otherwise."""
        if self._settled or not isinstance(e, dev.NeuronSample) or not e.instance_type:
            return []
        self._settled = True
        path = Path(self._options.price_table) if self._options.price_table else local_price_table_path()
        table = load_price_table(path)
        quote = instance_info_price(e.instance_type, table)
        said: list[ev.Event] = [ev.Notice(t=e.t, level="warn", source="price", message=w) for w in table.warnings]
        return [*said, PriceResolved(t=e.t, instance_type=quote.instance_type, price_per_hour=quote.price_per_hour,
                                     source=quote.source)]
