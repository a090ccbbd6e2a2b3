"""Prices: `neurondesk prices` (the table in use, or refreshed from the AWS Price List API), and the
price a run is recorded with (--instance-type, --price-per-hour, else the EC2 metadata service)."""

from __future__ import annotations

import sys
from datetime import date

from neurondesk.cli.errors import die
from neurondesk.reports.tables import FORMATS
from neurondesk.store.price_files import local_price_table_path


def run_price(args) -> tuple[str | None, float | None, str]:
    """(instance type, USD per hour, where the price comes from) of a run about to start."""
    from neurondesk.clients.imds import detect_instance
    from neurondesk.core.node.prices import resolve_price
    from neurondesk.store.price_files import load_price_table

    instance = args.instance_type
    imds_note = ""
    if instance is None and args.price_per_hour is None:
        found = detect_instance()
        instance = found.instance_type
        if instance is None:
            imds_note = f" ({found.detail})"
    table = load_price_table(local_price_table_path())
    for warning in table.warnings:
        sys.stderr.write(f"neurondesk: {warning}\n")
    if args.instance_type is not None:
        _warn_unknown_instance(args.instance_type, args.price_per_hour is not None, table)
    try:
        quote = resolve_price(instance, args.price_per_hour, table)
    except ValueError as exc:
        die(str(exc))
    if quote.price_per_hour is None and instance and instance.strip().lower() in table.instances:
        sys.stderr.write(f"neurondesk: {quote.source}\n")  # a known type priced nowhere: how to give a price, once
    source = getattr(args, "price_note", None) or quote.source  # the demo says where its price is from
    return quote.instance_type, quote.price_per_hour, source + imds_note


def _warn_unknown_instance(text: str, priced: bool, table) -> None:
    """One warning at the start for an --instance-type the price table does not know, naming the
    nearest known ones: the run would go unpriced (or without MFU) without a word."""
    import difflib

    from neurondesk.reports.safe_text import clean

    it = text.strip().lower()
    if it in table.instances:
        return
    known = sorted(table.instances)
    near = difflib.get_close_matches(it, known, n=3, cutoff=0.6)
    if not near:
        family = it.split(".", 1)[0]
        near = [k for k in known if k.split(".", 1)[0] == family][:3]
    what = ("it is used for MFU only, which stays unknown" if priced
            else "the run goes unpriced unless you pass --price-per-hour")
    hint = f"nearest known: {', '.join(near)}" if near else "`neurondesk prices` lists the known types"
    sys.stderr.write(f"neurondesk: warning: unknown --instance-type {clean(text)[:60]!r} (not in the price "
                     f"table): {what}; {hint}\n")


PRICE_COLUMNS = [("instance_type", "instance", "text"), ("price_per_hour", "$/hour", "usd_h"),
                 ("accelerators", "accel.", "int"), ("chip", "chip", "text"),
                 ("bf16_dense_tflops", "dense bf16 TF/chip", "num"), ("region", "region", "text"),
                 ("source", "source", "text"), ("as_of", "as of", "text"), ("table", "table", "text"),
                 ("note", "note", "text"), ("run_price", "a run's $/hour", "usd_h"),
                 ("run_price_source", "from", "text")]


def cmd_prices(args) -> int:
    from neurondesk.clients.price_list import PriceRefreshError, refresh
    from neurondesk.reports.tables import render
    from neurondesk.store.price_files import load_price_table

    path = local_price_table_path()
    if args.action == "refresh":
        if not args.region:
            die("prices refresh needs --region, e.g. neurondesk prices refresh --region us-east-1")
        today = date.today().isoformat()
        try:
            doc = refresh(path, args.region, today, load_price_table(None))
        except PriceRefreshError as exc:
            die(f"prices refresh failed: {exc}", 1)
        rows = doc["instances"].values()
        priced = sum(r["price_per_hour"] is not None for r in rows)
        sys.stdout.write(f"wrote {path}: {priced} of {len(rows)} instance types priced "
                         f"({args.region}, Price List API, {today}); it is used before the bundled table\n")
        return 0
    from neurondesk.core.node.prices import resolve_price

    table = load_price_table(path)
    for warning in table.warnings:
        sys.stderr.write(f"neurondesk: {warning}\n")
    rows = []
    for name in sorted(table.instances):
        r = table.instances[name]
        chip = table.chips.get(r.chip)
        quote = resolve_price(name, None, table)  # what a run is priced at: the row's price, or one listed elsewhere
        rows.append({"instance_type": name, "price_per_hour": r.price_per_hour, "accelerators": r.accelerators,
                     "chip": r.chip, "bf16_dense_tflops": chip.bf16_dense_tflops if chip else None,
                     "region": r.region, "source": r.source, "as_of": r.as_of, "table": r.table, "note": r.note,
                     "run_price": quote.price_per_hour, "run_price_source": quote.source})
    sys.stdout.write(render(PRICE_COLUMNS, rows, args.format))
    if args.format == "text":
        state = ("ignored: see above" if any(str(path) in w for w in table.warnings) else "in use"
                 if path.exists() else "none; `neurondesk prices refresh --region R` writes it")
        sys.stdout.write(f"\nlocal table: {path} ({state})\n")
    return 0


def add_parsers(sub) -> None:
    pr = sub.add_parser("prices", help="the price table in use (list), or refresh it from the AWS Price List API")
    pr.add_argument("action", nargs="?", choices=("list", "refresh"), default="list")
    pr.add_argument("--region", help="for refresh: the AWS region code whose prices to fetch (e.g. us-east-1)")
    pr.add_argument("--format", choices=FORMATS, default="text")
    pr.set_defaults(fn=cmd_prices)
