"""The price table in use: the bundled one, overridden row by row by a refreshed local file."""

from __future__ import annotations

import json
from pathlib import Path

from neurondesk.core.prices import (
    PriceTable,
    PriceTableError,
    bundled_price_table,
    merge_tables,
    parse_price_table,
)


def load_price_table(local_override: Path | None = None) -> PriceTable:
    """The bundled table, overridden row by row by ``local_override`` when that file exists.

    An unusable local file is ignored with a line in ``warnings`` (the caller shows it): a stale
    cache must not stop a run.
    """
    table = bundled_price_table()
    if local_override is None or not local_override.exists():
        return table
    try:
        data = json.loads(local_override.read_text(encoding="utf-8"))
        local = parse_price_table(data, f"local table {local_override}")
    except (OSError, ValueError, TypeError, AttributeError, RecursionError, PriceTableError) as e:
        # ValueError covers bad JSON and bad UTF-8; the others: a shape the parser did not foresee
        msg = f"ignored local price table {local_override}: {e}; delete it or refresh it"
        return merge_tables(table, PriceTable({}, {}, warnings=(msg,)))
    return merge_tables(table, local)
