"""Prometheus's HTTP API (instant queries only) and the fleet read from it.

``fleet`` never scrapes a node: it asks Prometheus, which already holds every node's series
(named by recorder/metrics_http.py). Each figure is one instant query grouped by
(job_id, node, run_id); ``last_over_time`` over ``lookback`` keeps a node that stopped reporting
(its series went stale), and the series present in the plain latest query are the fresh ones.
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from neurondesk.core.fleet import FleetRow, keep_last

KEY = ("job_id", "node", "run_id")
_LABEL_VALUE = re.compile(r'^[^"\\\n]*$')


class PrometheusError(Exception):
    """Prometheus could not be asked, or refused the query: one line, naming the URL."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float
    t: float


class PrometheusAPI:
    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise PrometheusError(f"--prometheus {url!r}: give an http(s) URL, e.g. http://127.0.0.1:9090")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """An instant vector (a scalar comes back as one sample without labels)."""
        params = {"query": expr} | ({} if at is None else {"time": f"{at:.3f}"})
        req = urllib.request.Request(f"{self.url}/api/v1/query", data=urllib.parse.urlencode(params).encode(),
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:
            body = _error_body(exc)
        except (OSError, ValueError) as exc:
            raise PrometheusError(f"cannot query Prometheus at {self.url}: {exc}") from exc
        if body.get("status") != "success":
            raise PrometheusError(f"Prometheus at {self.url} refused {expr!r}: {body.get('error', body)}")
        data = body["data"]
        if data["resultType"] == "scalar":
            t, v = data["result"]
            return [Sample({}, float(v), float(t))]
        if data["resultType"] != "vector":
            raise PrometheusError(f"{expr!r}: expected an instant vector, got a {data['resultType']}")
        return [Sample(r["metric"], float(r["value"][1]), float(r["value"][0])) for r in data["result"]]


def _error_body(exc: urllib.error.HTTPError) -> dict:
    try:
        return json.loads(exc.read())
    except ValueError:
        return {"status": "error", "error": f"HTTP {exc.code}"}


def _figures(job: str | None, lookback: str, rate_window: str) -> dict[str, str]:
    sel = "" if job is None else f'{{job_id="{job}"}}'

    def last(name: str) -> str:
        return f"max by (job_id, node, run_id) (last_over_time({name}{sel}[{lookback}]))"

    return {
        "fresh": f"max by (job_id, node, run_id) (neurondesk_last_update_timestamp_seconds{sel})",
        "last_update_t": last("neurondesk_last_update_timestamp_seconds"),
        "step": last("neurondesk_steps_total"),
        "phase": f"last_over_time(neurondesk_phase{sel}[{lookback}]) == 1",
        "steps_per_s": f"max by (job_id, node, run_id) (rate(neurondesk_steps_total{sel}[{rate_window}]))",
        "samples_per_s": last("neurondesk_steady_samples_per_second"),
        "compiling": last("neurondesk_compile_in_progress"),
        "compile_since": last("neurondesk_compile_started_timestamp_seconds"),
        "compiles": f"sum by (job_id, node, run_id) (last_over_time(neurondesk_compiles_total{sel}[{lookback}]))",
        "recompiles_after_warmup": last("neurondesk_recompiles_after_warmup_total"),
        "stragglers": last("neurondesk_stragglers"),
        "data_wait_fraction": f"max by (job_id, node, run_id) (rate(neurondesk_data_wait_seconds_total{sel}[{rate_window}]))",
        "price_per_hour": last("neurondesk_price_usd_per_hour"),
        "cost_usd": last("neurondesk_cost_usd_total"),
    }


INTS = ("step", "compiles", "recompiles_after_warmup", "stragglers")


class FleetReader:
    """One ``read()`` per refresh: the rows, with the last values of stale nodes kept."""

    def __init__(self, api: PrometheusAPI, job: str | None = None, lookback: str = "15m",
                 rate_window: str = "1m") -> None:
        if job is not None and not _LABEL_VALUE.match(job):
            raise PrometheusError(f"--job {job!r}: quotes, backslashes and newlines cannot be in a job id")
        self.api = api
        self.queries = _figures(job, lookback, rate_window)
        tagged = [f'label_replace({expr}, "nd_figure", "{name}", "", "")' for name, expr in self.queries.items()]
        self.combined = " or ".join([*tagged, 'label_replace(vector(time()), "nd_figure", "now", "", "")'])
        self.previous: dict[tuple[str, str, str], FleetRow] = {}

    def read(self) -> tuple[list[FleetRow], float]:
        """(rows, Prometheus's evaluation time). One request: every figure in one query, each
        tagged with an ``nd_figure`` label (``or`` keeps them all: their label sets differ)."""
        samples = self.api.query(self.combined)
        now = next((s.value for s in samples if s.labels.get("nd_figure") == "now"), None)
        if now is None:
            raise PrometheusError(f"Prometheus at {self.api.url} answered without its time")
        got: dict[str, dict[tuple[str, str, str], Sample]] = {name: {} for name in self.queries}
        for s in samples:
            name = s.labels.get("nd_figure")
            if name in got:
                got[name][tuple(s.labels.get(k, "") for k in KEY)] = s
        rows = [self._row(key, got, now) for key in sorted(set(got["step"]) | set(got["fresh"]))]
        rows = keep_last(self.previous, rows)
        self.previous = {r.key: r for r in rows}
        return rows, now

    @staticmethod
    def _row(key: tuple[str, str, str], got: dict[str, dict], now: float) -> FleetRow:
        def value(name: str) -> float | None:
            s = got[name].get(key)
            return s.value if s is not None and math.isfinite(s.value) else None

        figures = {name: value(name) for name in ("steps_per_s", "samples_per_s", "data_wait_fraction",
                                                   "price_per_hour", "cost_usd", "last_update_t")}
        ints = {name: (None if (v := value(name)) is None else int(v)) for name in INTS}
        since = value("compile_since")
        compiling = value("compiling") == 1 and since is not None
        phase = got["phase"].get(key)
        return FleetRow(*key, phase=None if phase is None else phase.labels.get("phase"),
                        compiling_for_s=max(0.0, now - since) if compiling else None,
                        stale=key not in got["fresh"], **figures, **ints)
