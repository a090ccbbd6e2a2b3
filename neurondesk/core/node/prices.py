"""The dated on-demand price table and per-chip peak FLOPS, and how a run gets its $/hour.

The bundled table (``prices.json``, from shared/PRICING.md, no live AWS call) ships with the
package. A locally refreshed table, when one is given and readable, overrides it row by row, so a
refresh that fetched only a few instance types still leaves the rest answerable. Every quote says
where its price came from; a missing price is ``None`` with the reason, never a guess.

A type with no price in the table's region takes the newest price listed for it elsewhere (a row's
``elsewhere``: region, source and date; ``resolve_price`` says which, and that none is listed in the
region); with none anywhere the quote says in one short line how to give one. Every quote's source
is one short line (``SOURCE_WIDTH``): the compare columns and the status line show it whole.

``parse_price_table`` is pure; ``bundled_price_table`` reads the package's own JSON once; the
user's refreshed table is read by ``neurondesk.store.price_files``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

KINDS = ("neuron", "cuda")
BUNDLED = "bundled table"
PRICE_FLAG = "--price-per-hour"
REFRESH = "`neurondesk prices refresh --region R`"  # it needs the region; saying so saves a try
SOURCE_WIDTH = 160  # a quote's source (a local table's path aside) fits one line of a report


@dataclass(frozen=True)
class Listing:
    """A price listed for a type in another region than the table's (its fallback there)."""

    price_per_hour: float
    region: str
    source: str
    as_of: str


class PriceTableError(ValueError):
    """A price table file that cannot be used (unreadable, not JSON, bad rows)."""


@dataclass(frozen=True)
class InstancePrice:
    instance_type: str
    price_per_hour: float | None  # None: no on-demand price known (see note)
    source: str  # source key, e.g. "VAN-2601"
    as_of: str  # date the source reflects
    accelerators: int
    chip: str  # key into PriceTable.chips
    kind: str  # "neuron" | "cuda"
    region: str
    table: str  # "bundled table" or "local table <path>"
    note: str | None = None
    elsewhere: tuple[Listing, ...] = ()  # prices listed in other regions, for a type with none here


@dataclass(frozen=True)
class ChipPeak:
    chip: str
    bf16_dense_tflops: float | None
    fp8_dense_tflops: float | None
    source: str
    note: str | None = None


@dataclass(frozen=True)
class PriceTable:
    instances: dict[str, InstancePrice]
    chips: dict[str, ChipPeak]
    sources: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # e.g. a local table that was unusable and ignored


@dataclass(frozen=True)
class PriceQuote:
    instance_type: str | None
    price_per_hour: float | None
    source: str  # "--price-per-hour" | "bundled table: VAN-2601 (2026-01-21), us-east-1" | why none


def _num(v: Any, what: str, allow_none: bool) -> float | None:
    if v is None and allow_none:
        return None
    try:
        ok = not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v) and v > 0
    except OverflowError:  # an integer too large for a float
        ok = False
    if not ok:
        raise PriceTableError(f"{what}: expected a positive number, got {v!r}")
    return float(v)


def _instance(name: str, row: Any, region: str, label: str) -> InstancePrice:
    if not isinstance(row, dict):
        raise PriceTableError(f"instance {name!r}: expected an object")
    try:
        price = _num(row.get("price_per_hour"), f"{name}.price_per_hour", allow_none=True)
        if price is None and not row.get("note"):
            raise PriceTableError(f"{name}: a null price needs a note saying why")
        if row["kind"] not in KINDS:
            raise PriceTableError(f"{name}.kind: expected one of {KINDS}, got {row['kind']!r}")
        n = row["accelerators"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise PriceTableError(f"{name}.accelerators: expected a positive integer, got {n!r}")
        return InstancePrice(
            instance_type=name,
            price_per_hour=price,
            source=str(row["source"]),
            as_of=str(row["as_of"]),
            accelerators=n,
            chip=str(row["chip"]),
            kind=row["kind"],
            region=str(row.get("region", region)),
            table=label,
            note=_note(name, row.get("note")),
            elsewhere=_listings(name, row.get("elsewhere")),
        )
    except KeyError as e:
        raise PriceTableError(f"instance {name!r}: missing key {e}") from None


def _listings(name: str, rows: Any) -> tuple[Listing, ...]:
    if rows is None:
        return ()
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise PriceTableError(f"{name}.elsewhere: expected a list of objects")
    try:
        return tuple(Listing(price_per_hour=_num(r["price_per_hour"], f"{name}.elsewhere.price_per_hour", False)
                             or 0.0, region=str(r["region"]), source=str(r["source"]), as_of=str(r["as_of"]))
                     for r in rows)
    except KeyError as e:
        raise PriceTableError(f"{name}.elsewhere: missing key {e}") from None


def _chip(name: str, row: Any) -> ChipPeak:
    if not isinstance(row, dict) or "source" not in row:
        raise PriceTableError(f"chip {name!r}: expected an object with a source")
    return ChipPeak(
        chip=name,
        bf16_dense_tflops=_num(row.get("bf16_dense_tflops"), f"{name}.bf16_dense_tflops", True),
        fp8_dense_tflops=_num(row.get("fp8_dense_tflops"), f"{name}.fp8_dense_tflops", True),
        source=str(row["source"]),
        note=_note(name, row.get("note")),
    )


def _note(name: str, note: Any) -> str | None:
    if note is not None and not isinstance(note, str):
        raise PriceTableError(f"{name}.note: expected text, got {note!r}")
    return note


def parse_price_table(data: Any, label: str = BUNDLED) -> PriceTable:
    """Validate a decoded prices.json document. Raises PriceTableError on any bad row."""
    if not isinstance(data, dict) or not isinstance(data.get("instances"), dict):
        raise PriceTableError("expected an object with an 'instances' object")
    region = str(data.get("region", "us-east-1"))
    instances = {
        name.strip().lower(): _instance(name.strip().lower(), row, region, label)
        for name, row in data["instances"].items()
    }
    chips = {name: _chip(name, row) for name, row in _object(data, "chips").items()}
    sources = {name: str(text) for name, text in _object(data, "sources").items()}
    return PriceTable(instances=instances, chips=chips, sources=sources)


def _object(data: dict, key: str) -> dict:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PriceTableError(f"{key!r}: expected an object, got {type(value).__name__}")
    return value


def merge_tables(base: PriceTable, over: PriceTable) -> PriceTable:
    """Rows of ``over`` replace rows of ``base`` with the same key; everything else is kept. An
    ``over`` row with no price keeps what ``base`` knows of other regions (a refresh of a region
    that does not list the type must not lose its price elsewhere)."""
    instances = dict(base.instances)
    for name, row in over.instances.items():
        old = base.instances.get(name)
        if row.price_per_hour is None and old is not None:
            known = old.elsewhere
            if old.price_per_hour is not None and old.region != row.region:
                known = (Listing(old.price_per_hour, old.region, old.source, old.as_of), *known)
            row = replace(row, elsewhere=row.elsewhere + known)
        instances[name] = row
    return PriceTable(
        instances=instances,
        chips={**base.chips, **over.chips},
        sources={**base.sources, **over.sources},
        warnings=base.warnings + over.warnings,
    )


@cache
def bundled_price_table() -> PriceTable:
    """The table that ships with the package: constant data, read once (a broken one is a
    packaging bug and raises). Files on the user's machine are read by the store."""
    text = resources.files("neurondesk.core.node").joinpath("prices.json").read_text(encoding="utf-8")
    return parse_price_table(json.loads(text), BUNDLED)


def resolve_price(
    instance_type: str | None, price_per_hour_override: float | None, table: PriceTable
) -> PriceQuote:
    """The $/hour a run is costed at: the flag first, then the table; otherwise None and why.

    Raises ValueError for an override that is not a positive finite number.
    """
    it = instance_type.strip().lower() if instance_type else None
    if price_per_hour_override is not None:
        if not math.isfinite(price_per_hour_override) or price_per_hour_override <= 0:
            raise ValueError(
                f"{PRICE_FLAG} must be a positive number of USD per hour, got {price_per_hour_override!r}"
            )
        return PriceQuote(it, float(price_per_hour_override), PRICE_FLAG)
    if not it:
        return PriceQuote(None, None, f"instance type unknown (not on EC2?): pass {PRICE_FLAG}")
    row = table.instances.get(it)
    if row is None:
        return PriceQuote(it, None, f"unknown instance type {it!r}: pass {PRICE_FLAG}")
    if row.price_per_hour is not None:
        return PriceQuote(it, row.price_per_hour, f"{row.table}: {row.source} ({row.as_of}), {row.region}")
    if row.elsewhere:  # the newest listing; the dates are ISO (a month alone sorts before its days)
        best = max(row.elsewhere, key=lambda x: x.as_of)
        return PriceQuote(it, best.price_per_hour, f"{best.region} list price of {best.as_of} ({best.source}), "
                                                   f"none listed in {row.region}")
    return PriceQuote(it, None, f"no price for {it} in {row.region}: pass {PRICE_FLAG} or {REFRESH}")


INSTANCE_INFO = "instance type from neuron-monitor instance_info"


def instance_info_price(instance_type: str, table: PriceTable) -> PriceQuote:
    """The price of the instance neuron-monitor's instance_info names, when nothing else named it
    (no --instance-type, no metadata service, no --price-per-hour); its source says so."""
    quote = resolve_price(instance_type, None, table)
    return PriceQuote(quote.instance_type, quote.price_per_hour, f"{quote.source} ({INSTANCE_INFO})")


def peak_dense_flops(instance_type: str, table: PriceTable, precision: str = "bf16") -> float | None:
    """Whole-instance dense peak FLOP/s (accelerators x per-chip peak), for MFU; None if unknown.

    ``precision`` is "bf16" (also used for fp16) or "fp8".
    """
    row = table.instances.get(instance_type.strip().lower())
    chip = table.chips.get(row.chip) if row else None
    if row is None or chip is None:
        return None
    tflops = chip.fp8_dense_tflops if precision == "fp8" else chip.bf16_dense_tflops
    return None if tflops is None else row.accelerators * tflops * 1e12
