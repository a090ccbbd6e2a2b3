"""The price table in use: the bundled one, overridden row by row by a refreshed local file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import platformdirs

from neurondesk.core.node.prices import (
    PriceTable,
    PriceTableError,
    bundled_price_table,
    merge_tables,
    parse_price_table,
)
from neurondesk.store.input_files import InputRefused, read_regular

MAX_TABLE_BYTES = 16 << 20  # the refreshed table of every region is well under 1 MB


def local_price_table_path() -> Path:
    """The user's refreshed table (`neurondesk prices refresh` writes it), read over the bundled one."""
    return Path(platformdirs.user_config_dir("neurondesk")) / "prices.json"


def load_price_table(local_override: Path | None = None) -> PriceTable:
    """The bundled table, overridden row by row by ``local_override`` when that file exists.

    An unusable local file is ignored with a line in ``warnings`` (the caller shows it): a stale
    cache must not stop a run.
    """
    table = bundled_price_table()
    if local_override is None or not os.path.lexists(local_override):
        return table
    try:  # a regular file, bounded: a link to /dev/zero or a FIFO is one warning, not a hang
        data = json.loads(read_regular(local_override, "a price table", MAX_TABLE_BYTES).decode("utf-8"))
        local = parse_price_table(data, f"local table {local_override}")
    except InputRefused as e:
        msg = f"ignored local price table: {e}; delete it, or write it again with `neurondesk prices refresh`"
        return merge_tables(table, PriceTable({}, {}, warnings=(msg,)))
    except (OSError, ValueError, TypeError, AttributeError, RecursionError, PriceTableError) as e:
        # ValueError covers bad JSON and bad UTF-8; the others: a shape the parser did not foresee
        msg = f"ignored local price table {local_override}: {e}; delete it or refresh it"
        return merge_tables(table, PriceTable({}, {}, warnings=(msg,)))
    return merge_tables(table, local)
