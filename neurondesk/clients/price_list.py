"""Refresh the price table from the AWS Price List Query API (shared/PRICING.md §3).

``boto3.client("pricing", region_name="us-east-1")`` (the endpoint serves every region),
``get_products`` for ServiceCode ``AmazonEC2`` with the §3.2 filters, one instance type at a time.
Each ``PriceList`` entry is a JSON string; ``parse_price_list`` walks
``terms.OnDemand → (each term) → priceDimensions → (each dimension) → pricePerUnit.USD`` without
hard-coding the opaque term and rate codes, drops Capacity Block rows and prices ≤ 0, and keeps
hourly rates only. ``build_local_table`` writes the result in prices.json's own format, dated,
for ``load_price_table``'s local override. boto3 is imported only when a refresh runs
(``pip install 'neurondesk[aws]'``); any failure leaves the existing local table untouched.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neurondesk.core.node.prices import PriceTable, PriceTableError, parse_price_table
from neurondesk.sinks.redact import redact, secret_values

PRICING_ENDPOINT_REGION = "us-east-1"
SOURCE_KEY = "AWS-PRICELIST"
ON_DEMAND_FILTERS = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
}


class PriceRefreshError(Exception):
    """A refresh that could not finish; the message is one line saying what to do."""


@dataclass(frozen=True)
class OnDemandPrice:
    instance_type: str
    price_per_hour: float | None  # None: no On-Demand hourly price in the answer
    note: str | None = None  # why None, or what was ambiguous
    effective: str | None = None  # the term's effectiveDate
    sku: str | None = None


def filters(instance_type: str, region: str) -> list[dict[str, str]]:
    terms = {"instanceType": instance_type, "regionCode": region, **ON_DEMAND_FILTERS}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def _obj(d: Any, key: str) -> dict[str, Any]:
    """``d[key]`` when both are JSON objects, else an empty one: a malformed answer prices nothing."""
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, dict) else {}


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _on_demand_rates(product: dict[str, Any]) -> list[tuple[float, str | None]]:
    """(USD per hour, effectiveDate) of every On-Demand hourly dimension with a price > 0."""
    out = []
    for term in _obj(_obj(product, "terms"), "OnDemand").values():
        for dim in _obj(term, "priceDimensions").values():
            if not isinstance(dim, dict) or str(dim.get("unit", "")).lower() not in ("hrs", "hours", "hour"):
                continue
            try:
                usd = float(_obj(dim, "pricePerUnit").get("USD"))
            except (TypeError, ValueError, OverflowError):
                continue
            if math.isfinite(usd) and usd > 0:  # "inf" or "nan" is no price
                out.append((usd, _text(term.get("effectiveDate"))))
    return out


def parse_price_list(price_list: Iterable[str | dict], instance_type: str, region: str) -> OnDemandPrice:
    """The On-Demand $/hour for ``instance_type`` in ``region`` from a get_products PriceList."""
    candidates: list[tuple[float, str | None, str | None, str | None]] = []
    skipped_cb = malformed = 0
    for item in price_list:
        try:
            product = json.loads(item) if isinstance(item, str | bytes) else item
        except (ValueError, RecursionError):
            product = None
        if not isinstance(product, dict):
            malformed += 1
            continue
        attrs = _obj(_obj(product, "product"), "attributes")
        if attrs.get("instanceType") != instance_type:
            continue
        if attrs.get("regionCode", region) != region:
            continue
        if any(attrs.get(k, v) != v for k, v in ON_DEMAND_FILTERS.items()):
            continue
        if str(attrs.get("marketoption", "")).lower() == "capacityblock":
            skipped_cb += 1
            continue
        for usd, effective in _on_demand_rates(product):
            candidates.append((usd, effective, attrs.get("operation"), _text(_obj(product, "product").get("sku"))))
    if not candidates:
        why = f"no On-Demand hourly price for {instance_type} in {region} in the Price List API"
        why += f" ({skipped_cb} Capacity Block rows skipped)" if skipped_cb else ""
        why += f" ({malformed} entries not JSON objects, skipped)" if malformed else ""
        return OnDemandPrice(instance_type, None, why)
    plain = [c for c in candidates if c[2] in (None, "RunInstances")] or candidates
    prices = sorted({c[0] for c in plain})
    usd, effective, _, sku = min(plain, key=lambda c: (c[0], c[1] or "", c[3] or ""))
    note = None if len(prices) == 1 else f"{len(prices)} On-Demand prices matched ({', '.join(map(str, prices))}); the lowest kept"
    return OnDemandPrice(instance_type, usd, note, effective, sku)


def fetch_prices(client: Any, instance_types: Iterable[str], region: str) -> list[OnDemandPrice]:
    """One get_products query per instance type through the client's paginator."""
    out = []
    for it in instance_types:
        items: list[str] = []
        pages = client.get_paginator("get_products").paginate(ServiceCode="AmazonEC2", Filters=filters(it, region))
        for page in pages:
            items.extend(page.get("PriceList") or [])
        out.append(parse_price_list(items, it, region))
    return out


def build_local_table(prices: list[OnDemandPrice], bundled: PriceTable, region: str, today: str) -> dict[str, Any]:
    """A prices.json document: the fetched rows, with accelerators, chip and kind from the bundled table."""
    instances = {}
    for p in prices:
        base = bundled.instances[p.instance_type]
        row: dict[str, Any] = {"price_per_hour": p.price_per_hour, "source": SOURCE_KEY, "as_of": today,
                               "accelerators": base.accelerators, "chip": base.chip, "kind": base.kind,
                               "region": region}
        if p.note:
            row["note"] = p.note
        instances[p.instance_type] = row
    doc = {
        "schema": 1,
        "region": region,
        "terms": "On-Demand, Linux, shared tenancy, USD per instance-hour, list price",
        "compiled": today,
        "compiled_from": f"AWS Price List Query API (get_products, AmazonEC2, {region}), fetched {today}",
        "sources": {SOURCE_KEY: f"AWS Price List Query API, ServiceCode AmazonEC2, regionCode {region}, "
                                f"filters {ON_DEMAND_FILTERS}, Capacity Block rows skipped; fetched {today}"},
        "instances": instances,
    }
    parse_price_table(doc, "refreshed table")  # what is written must load
    return doc


def explain(exc: BaseException) -> str:
    """One line for a botocore/boto3 error, by class name (botocore is not imported here); without the
    credentials it may quote (an endpoint URL's user info, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN ...)."""
    name = type(exc).__name__
    # botocore raises a service's modelled errors as ClientError subclasses (AccessDeniedException)
    kinds = {c.__name__ for c in type(exc).__mro__}
    endpoints = [v for k, v in os.environ.items() if k.startswith("AWS_ENDPOINT_URL")]
    text = redact(" ".join(str(exc).split()), secret_values(os.environ, endpoints))
    if name in ("NoCredentialsError", "PartialCredentialsError", "NoRegionError", "ProfileNotFound"):
        hint = "configure AWS credentials (aws configure, AWS_PROFILE, or an instance role)"
    elif name in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"):
        hint = f"no network route to the Price List API (api.pricing.{PRICING_ENDPOINT_REGION}.amazonaws.com)"
    elif "ClientError" in kinds and ("AccessDenied" in text or "UnauthorizedOperation" in text):
        hint = "the credentials need the IAM action pricing:GetProducts"
    else:
        hint = "check credentials and network"
    return f"{name}: {text} — {hint}"


def default_client() -> Any:
    try:
        import boto3  # the optional extra, imported only when a refresh runs
    except ImportError:
        raise PriceRefreshError("boto3 is not installed: pip install 'neurondesk[aws]'; nothing changed") from None
    return boto3.client("pricing", region_name=PRICING_ENDPOINT_REGION)


def refresh(path: Path, region: str, today: str, bundled: PriceTable, client: Any = None) -> dict[str, Any]:
    """Fetch every instance type of the bundled table and write ``path`` atomically.

    Raises PriceRefreshError (one line; ``path`` unchanged) on any failure, including an answer
    that priced none of them.
    """
    try:
        client = client if client is not None else default_client()
        prices = fetch_prices(client, sorted(bundled.instances), region)
    except PriceRefreshError:
        raise
    except Exception as exc:  # noqa: BLE001 - botocore's errors, without importing botocore
        raise PriceRefreshError(f"Price List API query failed ({explain(exc)}); nothing changed") from exc
    if not any(p.price_per_hour is not None for p in prices):
        raise PriceRefreshError(f"the Price List API priced none of {len(prices)} instance types in {region!r} "
                                "(is the region code right, e.g. us-west-2?); nothing changed")
    try:
        doc = build_local_table(prices, bundled, region, today)
    except PriceTableError as exc:
        raise PriceRefreshError(f"the Price List API answer does not make a usable table ({exc}); "
                                "nothing changed") from exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise PriceRefreshError(f"cannot write {path}: {exc}; nothing changed") from exc
    return doc
