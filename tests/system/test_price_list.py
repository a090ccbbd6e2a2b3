"""`neurondesk prices`: PriceList parsing on answers built from the documented structure
(shared/PRICING.md §3.3), the refresh through a stand-in pricing client, its one-line failures, the
real CLI refresh through a real boto3 pricing client answered by botocore's Stubber, and the CLI
without boto3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, base_env

from neurondesk.clients.price_list import (
    PriceRefreshError,
    build_local_table,
    fetch_prices,
    parse_price_list,
    refresh,
)
from neurondesk.core.node.prices import resolve_price
from neurondesk.store.price_files import load_price_table

BUNDLED = load_price_table(None)


def product(instance="trn1.32xlarge", usd="21.5000000000", region="us-east-1", market="OnDemand",
            unit="Hrs", sku="ABCDEFGHJKLMNPQR", term="JRTCKXETXF", rate="6YS6EN2CT7", **attrs) -> str:
    """One PriceList entry, a JSON string, shaped as in PRICING.md §3.3 (codes are opaque)."""
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "sku": sku, "attributes": {
            "instanceType": instance, "location": "US East (N. Virginia)", "regionCode": region,
            "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
            "licenseModel": "No License required", "marketoption": market, "operation": "RunInstances",
            "vcpu": "128", **attrs}},
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {f"{sku}.{term}": {
                "offerTermCode": term, "effectiveDate": "2026-11-01T00:00:00Z", "termAttributes": {},
                "priceDimensions": {f"{sku}.{term}.{rate}": {
                    "unit": unit, "beginRange": "0", "endRange": "Inf",
                    "description": f"${usd} per On Demand Linux {instance} Instance Hour",
                    "pricePerUnit": {"USD": usd}}}}},
            "Reserved": {f"{sku}.4NA7Y494T4": {
                "offerTermCode": "4NA7Y494T4", "effectiveDate": "2026-11-01T00:00:00Z",
                "termAttributes": {"LeaseContractLength": "1yr", "OfferingClass": "standard",
                                   "PurchaseOption": "No Upfront"},
                "priceDimensions": {f"{sku}.4NA7Y494T4.6YS6EN2CT7": {
                    "unit": "Hrs", "pricePerUnit": {"USD": "13.2289500000"}}}}},
        },
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
    })


def test_on_demand_hourly_price_is_found_without_hard_coded_codes():
    items = [
        product(sku="CB000000000000CB", usd="15.49", market="CapacityBlock"),  # Capacity Block: skipped
        product(sku="ZERO00000000ZERO", usd="0.0000000000", term="ZZZZ", rate="YYYY"),  # RI-applied row
        product(sku="OTHER0000000REGN", usd="23.0", region="us-west-2"),  # another region
        product(instance="trn1.2xlarge", usd="1.34375"),  # another instance type
        product(sku="QWERTYUIOPASDFGH", term="ABCDE12345", rate="FGHIJ67890"),
    ]
    p = parse_price_list(items, "trn1.32xlarge", "us-east-1")
    assert (p.price_per_hour, p.note, p.sku, p.effective) == (21.5, None, "QWERTYUIOPASDFGH", "2026-11-01T00:00:00Z")
    # decoded dicts work too, and a non-hourly unit is not an hourly price
    assert parse_price_list([json.loads(items[-1])], "trn1.32xlarge", "us-east-1").price_per_hour == 21.5
    assert parse_price_list([product(unit="Quantity")], "trn1.32xlarge", "us-east-1").price_per_hour is None


def test_only_capacity_blocks_means_no_on_demand_price_and_says_so():
    p = parse_price_list([product("p5e.48xlarge", "43.26", market="CapacityBlock")], "p5e.48xlarge", "us-east-1")
    assert p.price_per_hour is None
    assert p.note == ("no On-Demand hourly price for p5e.48xlarge in us-east-1 in the Price List API "
                      "(1 Capacity Block rows skipped)")


def test_ambiguous_prices_keep_the_lowest_and_note_it():
    p = parse_price_list([product(sku="A" * 16, usd="22.0"), product(sku="B" * 16, usd="21.5")],
                         "trn1.32xlarge", "us-east-1")
    assert p.price_per_hour == 21.5 and p.note.startswith("2 On-Demand prices matched (21.5, 22.0)")


class FakePaginator:
    def __init__(self, client):
        self.client = client

    def paginate(self, **kwargs):
        self.client.calls.append(kwargs)
        instance = next(f["Value"] for f in kwargs["Filters"] if f["Field"] == "instanceType")
        items = self.client.answers.get(instance, [])
        # two pages, as the real paginator may return (NextToken handled by boto3)
        return iter([{"PriceList": items[:1], "NextToken": "t"}, {"PriceList": items[1:]}])


class FakePricingClient:
    """Stands in for boto3.client("pricing"): answers get_products pages from a dict."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def get_paginator(self, name):
        assert name == "get_products"
        return FakePaginator(self)


class NoCredentialsError(Exception):
    """Named like botocore.exceptions.NoCredentialsError (botocore is not installed here)."""


class EndpointConnectionError(Exception):
    """Named like botocore.exceptions.EndpointConnectionError."""


class RaisingPricingClient:
    def __init__(self, exc):
        self.exc = exc

    def get_paginator(self, name):
        raise self.exc


def test_fetch_sends_the_documented_filters_per_instance_type():
    client = FakePricingClient({"trn1.32xlarge": [product(sku="X" * 16, usd="0.0"), product()]})
    (p,) = fetch_prices(client, ["trn1.32xlarge"], "us-east-1")
    assert p.price_per_hour == 21.5  # found on the second page
    (call,) = client.calls
    assert call["ServiceCode"] == "AmazonEC2"
    assert {f["Field"]: f["Value"] for f in call["Filters"]} == {
        "instanceType": "trn1.32xlarge", "regionCode": "us-east-1", "operatingSystem": "Linux",
        "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
        "licenseModel": "No License required"}
    assert all(f["Type"] == "TERM_MATCH" for f in call["Filters"])


def test_refresh_writes_a_dated_local_table_that_overrides_the_bundled_rows(tmp_path):
    path = tmp_path / "cfg" / "prices.json"
    client = FakePricingClient({"trn1.2xlarge": [product("trn1.2xlarge", "1.2", region="us-west-2")],
                                "g5.xlarge": [product("g5.xlarge", "1.1", region="us-west-2")]})
    doc = refresh(path, "us-west-2", "2026-11-30", BUNDLED, client=client)
    assert len(client.calls) == len(BUNDLED.instances)  # every instance type of the bundled table
    assert json.loads(path.read_text()) == doc and doc["compiled"] == "2026-11-30"
    row = doc["instances"]["trn1.2xlarge"]
    assert row == {"price_per_hour": 1.2, "source": "AWS-PRICELIST", "as_of": "2026-11-30", "accelerators": 1,
                   "chip": "trainium", "kind": "neuron", "region": "us-west-2"}
    assert doc["instances"]["p5.48xlarge"]["price_per_hour"] is None  # not in the answer: null, with why
    assert "no On-Demand hourly price for p5.48xlarge in us-west-2" in doc["instances"]["p5.48xlarge"]["note"]
    table = load_price_table(path)
    quote = resolve_price("trn1.2xlarge", None, table)
    assert quote.price_per_hour == 1.2
    assert quote.source == f"local table {path}: AWS-PRICELIST (2026-11-30), us-west-2"
    assert table.chips["trainium"].bf16_dense_tflops == 190  # peaks still from the bundled table


@pytest.mark.parametrize(("exc", "hint"), [
    (NoCredentialsError("Unable to locate credentials"), "configure AWS credentials"),
    (EndpointConnectionError('Could not connect to the endpoint URL: "https://api.pricing.us-east-1'
                             '.amazonaws.com/"'), "no network route to the Price List API"),
])
def test_refresh_failure_is_one_line_and_changes_nothing(tmp_path, exc, hint):
    path = tmp_path / "prices.json"
    path.write_text('{"instances": {}}\n')
    before = path.read_bytes()
    with pytest.raises(PriceRefreshError) as info:
        refresh(path, "us-east-1", "2026-11-30", BUNDLED, client=RaisingPricingClient(exc))
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"Price List API query failed ({type(exc).__name__}: ")
    assert hint in msg and msg.endswith("nothing changed")
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["prices.json"]


def test_an_answer_that_prices_nothing_changes_nothing(tmp_path):
    path = tmp_path / "prices.json"
    with pytest.raises(PriceRefreshError, match="priced none of .* in 'mars-north-1'"):
        refresh(path, "mars-north-1", "2026-11-30", BUNDLED, client=FakePricingClient({}))
    assert not path.exists()


def test_local_table_keeps_the_bundled_hardware_columns():
    from neurondesk.clients.price_list import OnDemandPrice

    doc = build_local_table([OnDemandPrice("p5.48xlarge", 55.04)], BUNDLED, "us-east-1", "2026-11-30")
    assert doc["instances"]["p5.48xlarge"]["accelerators"] == 8 and doc["instances"]["p5.48xlarge"]["chip"] == "h100"


def cli(*args, tmp_path):
    env = base_env(tmp_path)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", "prices", *args], capture_output=True,
                          text=True, timeout=60, env=env, cwd=REPO)


def test_cli_refresh_without_boto3_fails_in_one_line(tmp_path):
    # boto3 made unimportable for this one process, whether or not it is installed
    blocker = tmp_path / "no-boto3" / "boto3"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named boto3')\n")
    env = base_env(tmp_path)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["PYTHONPATH"] = os.pathsep.join([str(blocker.parent), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-m", "neurondesk.cli", "prices", "refresh", "--region", "us-east-1"],
                       capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.splitlines() == ["neurondesk: prices refresh failed: boto3 is not installed: "
                                     "pip install 'neurondesk[aws]'; nothing changed"]
    assert not (tmp_path / "config").exists()


# ---------------------------------------------------------------- the CLI with a real boto3 client (Stubber)
def documented_filters(instance: str, region: str) -> list[dict]:
    """The get_products filters of PRICING.md §3.2, written out by hand."""
    return [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (
        ("instanceType", instance), ("regionCode", region), ("operatingSystem", "Linux"), ("tenancy", "Shared"),
        ("preInstalledSw", "NA"), ("capacitystatus", "Used"), ("licenseModel", "No License required"))]


@pytest.fixture
def stubbed_pricing(monkeypatch):
    """boto3.client("pricing") gives a real botocore client whose answers come from a Stubber."""
    boto3 = pytest.importorskip("boto3")  # a test dependency; skipped only outside `make test`
    from botocore.stub import Stubber

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    real_client = boto3.client
    made = []

    def client(service, region_name=None, **kwargs):
        c = real_client(service, region_name=region_name, **kwargs)
        stub = Stubber(c)
        made.append((service, region_name, stub))
        for add in plan:
            add(stub)
        stub.activate()
        return c

    plan: list = []
    monkeypatch.setattr(boto3, "client", client)
    return plan, made


def test_cli_refresh_through_a_real_pricing_client_writes_the_local_table(stubbed_pricing, capsys):
    from neurondesk.cli.main import main

    plan, made = stubbed_pricing
    region = "us-west-2"
    names = sorted(BUNDLED.instances)
    for name in names:
        params = {"ServiceCode": "AmazonEC2", "Filters": documented_filters(name, region)}
        if name == "trn1.2xlarge":  # two pages: the paginator follows NextToken
            page1 = {"FormatVersion": "aws_v1", "PriceList": [product(name, "0.0", region=region, sku="Z" * 16)],
                     "NextToken": "page-2"}
            page2 = {"FormatVersion": "aws_v1", "PriceList": [product(name, "1.34375", region=region)]}
            plan.append(lambda s, p=params, a=page1: s.add_response("get_products", a, p))
            plan.append(lambda s, p=params, b=page2: s.add_response("get_products", b, {**p, "NextToken": "page-2"}))
        elif name == "g5.xlarge":
            answer = {"FormatVersion": "aws_v1", "PriceList": [product(name, "1.006", region=region)]}
            plan.append(lambda s, p=params, a=answer: s.add_response("get_products", a, p))
        else:  # nothing listed for it there
            plan.append(lambda s, p=params: s.add_response("get_products", {"FormatVersion": "aws_v1",
                                                                            "PriceList": []}, p))
    assert main(["prices", "refresh", "--region", region]) == 0
    ((service, endpoint_region, stub),) = made
    assert (service, endpoint_region) == ("pricing", "us-east-1")  # the endpoint that serves every region
    stub.assert_no_pending_responses()  # one query per bundled instance type, in order, pages followed
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "neurondesk" / "prices.json"  # conftest's temporary folder
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {path}: 2 of {len(names)} instance types priced ({region}, Price List API, ")
    doc = json.loads(path.read_text())
    assert doc["instances"]["trn1.2xlarge"] == {
        "price_per_hour": 1.34375, "source": "AWS-PRICELIST", "as_of": doc["compiled"], "accelerators": 1,
        "chip": "trainium", "kind": "neuron", "region": region}
    assert doc["instances"]["g5.xlarge"]["price_per_hour"] == 1.006
    assert doc["instances"]["p5.48xlarge"]["price_per_hour"] is None
    # and `run` now prices from it: the CLI's list says so
    main(["prices", "list", "--format", "json"])
    rows = {r["instance_type"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["trn1.2xlarge"]["price_per_hour"] == 1.34375 and rows["trn1.2xlarge"]["source"] == "AWS-PRICELIST"


def test_cli_refresh_access_denied_is_one_line_and_writes_nothing(stubbed_pricing, capsys):
    from neurondesk.cli.main import main

    plan, _ = stubbed_pricing
    plan.append(lambda s: s.add_client_error("get_products", service_error_code="AccessDeniedException",
                                             service_message="User is not authorized to perform: "
                                                             "pricing:GetProducts", http_status_code=400))
    with pytest.raises(SystemExit) as e:
        main(["prices", "refresh", "--region", "us-east-1"])
    assert e.value.code == 1
    (line,) = capsys.readouterr().err.splitlines()
    # botocore's modelled error class, a ClientError subclass, still gets the IAM hint
    assert line.startswith("neurondesk: prices refresh failed: Price List API query failed "
                           "(AccessDeniedException: An error occurred (AccessDeniedException) when calling the "
                           "GetProducts operation: User is not authorized")
    assert "AccessDeniedException" in line and "the credentials need the IAM action pricing:GetProducts" in line
    assert line.endswith("nothing changed")
    assert not (Path(os.environ["XDG_CONFIG_HOME"]) / "neurondesk").exists()


def test_cli_list_shows_source_and_date_per_row_and_the_local_table(tmp_path):
    refresh(tmp_path / "config" / "neurondesk" / "prices.json", "us-east-1", "2026-11-30", BUNDLED,
            client=FakePricingClient({"trn1.2xlarge": [product("trn1.2xlarge", "1.5")]}))
    rows = json.loads(cli("list", "--format", "json", tmp_path=tmp_path).stdout)
    by = {r["instance_type"]: r for r in rows}
    assert (by["trn1.2xlarge"]["price_per_hour"], by["trn1.2xlarge"]["source"], by["trn1.2xlarge"]["as_of"]) == (
        1.5, "AWS-PRICELIST", "2026-11-30")
    assert by["trn1.2xlarge"]["table"].startswith("local table ")
    # not in the answer: the refreshed table says there is no On-Demand price there, and why
    assert (by["trn1.32xlarge"]["price_per_hour"], by["trn1.32xlarge"]["source"]) == (None, "AWS-PRICELIST")
    assert by["trn1.32xlarge"]["note"].startswith("no On-Demand hourly price for trn1.32xlarge in us-east-1")
    text = cli(tmp_path=tmp_path).stdout
    assert "trn1.2xlarge" in text and "$1.5000/h" in text and "2026-11-30" in text
    assert f"local table: {tmp_path / 'config' / 'neurondesk' / 'prices.json'} (in use)" in text
    bundled = cli(tmp_path=tmp_path / "elsewhere").stdout
    assert "VAN-2601" in bundled and "2026-01-21" in bundled and "none; `neurondesk prices refresh" in bundled


def test_an_infinite_or_nan_price_is_no_price_and_never_escapes_refresh(tmp_path):
    path = tmp_path / "prices.json"
    with pytest.raises(PriceRefreshError, match="priced none"):
        refresh(path, "us-east-1", "2026-11-30", BUNDLED,
                client=FakePricingClient({"trn1.2xlarge": [product("trn1.2xlarge", "inf")],
                                          "g5.xlarge": [product("g5.xlarge", "nan")]}))
    assert not path.exists()
    doc = refresh(path, "us-east-1", "2026-11-30", BUNDLED,
                  client=FakePricingClient({"trn1.2xlarge": [product("trn1.2xlarge", "inf"),
                                                             product("trn1.2xlarge", "1.5")]}))
    assert doc["instances"]["trn1.2xlarge"]["price_per_hour"] == 1.5


@pytest.mark.parametrize(
    "bad",
    ["", "not json", "[1, 2]", "1e999", "[" * 100_000 + "]" * 100_000,
     json.dumps({"product": "x", "terms": {"OnDemand": {"T": 1.5}}}),
     json.dumps({"product": {"attributes": 7}, "terms": []}),
     product().replace('"pricePerUnit": {"USD": "21.5000000000"}', '"pricePerUnit": {"USD": 1' + "0" * 400 + "}"),
     json.dumps({"product": {"attributes": {"instanceType": "trn1.32xlarge"}},
                 "terms": {"OnDemand": {"T": {"priceDimensions": {"D": 3}}}}})],
    ids=["empty", "not-json", "a-list", "a-number", "nested-too-deeply", "strings-where-objects-go",
         "numbers-where-objects-go", "price-too-large-for-a-float", "a-dimension-not-an-object"],
)
def test_malformed_price_list_entries_are_skipped_not_raised(bad):
    # found by benchmarks/fuzz.py: JSONDecodeError, AttributeError, OverflowError came out of the parser
    assert parse_price_list([bad], "trn1.32xlarge", "us-east-1").price_per_hour is None
    p = parse_price_list([bad, product()], "trn1.32xlarge", "us-east-1")
    assert p.price_per_hour == 21.5


def test_equal_prices_with_dates_of_different_types_keep_one():
    # found by benchmarks/fuzz.py: min() compared a date string with None and raised TypeError
    a = product(sku="A")
    b = json.loads(product(sku="B"))
    for term in b["terms"]["OnDemand"].values():
        term["effectiveDate"] = 20261101
    p = parse_price_list([a, json.dumps(b)], "trn1.32xlarge", "us-east-1")
    assert p.price_per_hour == 21.5 and p.note is None
