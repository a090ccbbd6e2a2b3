"""Prometheus's HTTP API (instant queries only) and the fleet read from it.

``fleet`` never scrapes a node: it asks Prometheus, which already holds every node's series
(the run's figures named in core/figures/metric_names.py, the labelled families by the exporter's
modules, neurondesk/exporter/). Each figure is one instant query grouped by
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from neurondesk.core.figures.metric_names import series
from neurondesk.core.job.fleet import FleetRead, FleetRow, ForeignNode, NodeFailure, RankRow, keep_last
from neurondesk.core.node.flight_recorder import BlockedCollective
from neurondesk.core.node.node_health import SERIES, words_from_series
from neurondesk.sinks.redact import basic_auth, redact, secret_values, shown_url

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
    """``url``'s user info is sent as Basic auth (urllib reads none); ``shown`` is all that is ever said of it."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.shown = shown_url(url).rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise PrometheusError(f"--prometheus {self.shown}: give an http(s) URL, e.g. http://127.0.0.1:9090")
        bare, self._headers = basic_auth(url)
        self.url = bare.rstrip("/")
        self._secrets = secret_values(urls=[url])
        self.timeout_s = timeout_s

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """An instant vector (a scalar comes back as one sample without labels)."""
        params = {"query": expr} | ({} if at is None else {"time": f"{at:.3f}"})
        req = urllib.request.Request(f"{self.url}/api/v1/query", data=urllib.parse.urlencode(params).encode(),
                                     headers={"Content-Type": "application/x-www-form-urlencoded", **self._headers})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:
            body = _error_body(exc)
        except (OSError, ValueError) as exc:
            raise PrometheusError(f"cannot query Prometheus at {self.shown}: {redact(str(exc), self._secrets)}") from exc
        if body.get("status") != "success":
            raise PrometheusError(f"Prometheus at {self.shown} refused {expr!r}: "
                                  f"{redact(str(body.get('error', body)), self._secrets)}")
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
    by = "max by (job_id, node, run_id)"

    def last(name: str, extra: str = "") -> str:
        return f"max by (job_id, node, run_id{extra}) (last_over_time({name}{sel}[{lookback}]))"

    return {
        "fresh": f"{by} ({series('taken_t')}{sel})",
        "scraped_t": f"{by} (timestamp({series('taken_t')}{sel}))",
        "last_update_t": last(series("taken_t")),
        "step": last(series("steps")),
        "phase": f"last_over_time(neurondesk_phase{sel}[{lookback}]) == 1",
        "steps_per_s": f"{by} (rate({series('steps')}{sel}[{rate_window}]))",
        "samples_per_s": last(series("samples_per_s")),
        "tokens_per_s": last(series("tokens_per_s")),
        "step_time_s": last(series("step_time_s")),
        "compiling": last(series("compile_in_progress")),
        "compile_since": last(series("compile_started_t")),
        "compile_graph": f"{by} (neurondesk_compile_graph{sel})",  # absent once the compile ends: not last_over_time
        "compile_s": last(series("compile_total_s")),
        "compiles": f"sum by (job_id, node, run_id) (last_over_time(neurondesk_compiles_total{sel}[{lookback}]))",
        "cache": last("neurondesk_compile_cache_total", ", result"),
        "recompiles_after_warmup": last(series("recompiles_after_warmup")),
        "stragglers": last(series("stragglers")),
        "data_wait_fraction": f"{by} (rate({series('data_wait_s')}{sel}[{rate_window}]))",
        "price_per_hour": last(series("price_per_hour")),
        "cost_usd": last(series("total_usd")),
        "started_t": last(series("started_t")),
        "model_flops_per_s": last(series("model_flops_per_s")),
        "peak_flops_per_s": last(series("peak_flops_per_s")),
        "finished": last("neurondesk_run_finished"),
        "exit_code": last("neurondesk_exit_code"),
        "failure_t": last("neurondesk_failure_timestamp_seconds"),
        "failure": f"max by (job_id, node, run_id, rank, what, last_line, step) (neurondesk_failure_info{sel})",
        "failure_last": last("neurondesk_failure_info", ", rank, what, last_line, step"),
        # an info series changes its labels as the workers say who they are: the fresh one, else the last
        "job_info": f"max by (job_id, node, run_id, instance, job, node_rank, nodes, world_size, launcher) "
                    f"(neurondesk_job_info{sel})",
        # present while the node's ranks are blocked in a collective (Flight Recorder): the fresh one only
        "blocked": f"max by (job_id, node, run_id, op, seq, group, state, ranks, never_entered, last) "
                   f"(neurondesk_blocked_collective_info{sel})",
        "job_info_last": last("neurondesk_job_info", ", instance, job, node_rank, nodes, world_size, launcher"),
        "step_verdict": last("neurondesk_step_verdict_info", ", verdict"),  # what bounds the node's steady step
    }


def _health(job: str | None) -> dict[str, str]:
    """Each node-health counter (core/node/node_health.py): its increase over the last minute and its total."""
    sel = "" if job is None else f'{{job_id="{job}"}}'
    out = {}
    for counter, name in SERIES.items():
        out[f"health_inc_{counter}"] = f"sum by (job_id, node, run_id) (increase({name}{sel}[1m]))"
        out[f"health_tot_{counter}"] = f"sum by (job_id, node, run_id) ({name}{sel})"
    return out


def _foreign_query(job: str) -> str:
    """Recorders of other job ids, fresh, with their scrape job and address (bad input: a stale --job)."""
    return f'max by (job_id, node, run_id, instance, job) (neurondesk_job_info{{job_id!="{job}"}})'


INTS = ("step", "compiles", "recompiles_after_warmup", "stragglers", "exit_code")
FLOATS = ("steps_per_s", "samples_per_s", "tokens_per_s", "step_time_s", "data_wait_fraction", "price_per_hour",
          "cost_usd", "last_update_t", "started_t", "compile_s", "model_flops_per_s", "peak_flops_per_s")
# per rank: the latest scrape only, in a request of its own, one selector for the seven series (4 series
# a rank are most of a job's series: through the tagged `or` chain they cost 1.1 s a refresh at 64 x 32,
# and last_over_time reads every sample of the lookback); a silent node's ranks are not compared
RANK_FIGURES = {"neurondesk_rank_presync_seconds": "presync_s", "neurondesk_rank_step_duration_seconds": "step_time_s",
                "neurondesk_rank_steps_total": "steps", "neurondesk_rank_last_step_timestamp_seconds": "last_step_t",
                "neurondesk_rank_own_seconds": "own_s", "neurondesk_rank_collective_seconds": "collective_s",
                "neurondesk_rank_data_wait_seconds": "data_wait_s"}


def _rank_query(job: str | None) -> str:
    job_sel = "" if job is None else f', job_id="{job}"'
    return f'{{__name__=~"{"|".join(RANK_FIGURES)}"{job_sel}}}'

Key = tuple[str, str, str]


def _finite(s: Sample | None) -> float | None:
    return s.value if s is not None and math.isfinite(s.value) else None


def _int_label(labels: dict[str, str], name: str) -> int | None:
    text = labels.get(name, "")
    return int(text) if text.isdigit() and len(text) <= 9 else None


class FleetReader:
    """One ``read()`` per refresh: the rows and ranks, with the last values of stale nodes kept."""

    def __init__(self, api: PrometheusAPI, job: str | None = None, lookback: str = "15m",
                 rate_window: str = "1m") -> None:
        if job is not None and not _LABEL_VALUE.match(job):
            raise PrometheusError(f"--job {job!r}: quotes, backslashes and newlines cannot be in a job id")
        self.api = api
        self.queries = _figures(job, lookback, rate_window) | _health(job)
        if job is not None:
            self.queries["foreign"] = _foreign_query(job)
        tagged = [f'label_replace({expr}, "nd_figure", "{name}", "", "")' for name, expr in self.queries.items()]
        self.combined = " or ".join([*tagged, 'label_replace(vector(time()), "nd_figure", "now", "", "")'])
        self.rank_query = _rank_query(job)
        self.previous: dict[Key, FleetRow] = {}

    def read(self) -> FleetRead:
        """One request: every figure in one query, each tagged with an ``nd_figure`` label (``or``
        keeps them all: their label sets differ); Prometheus's evaluation time as ``now``."""
        with ThreadPoolExecutor(max_workers=1) as pool:  # the ranks' request beside the nodes' one
            ranks = pool.submit(self.api.query, self.rank_query)
            samples = self.api.query(self.combined)
            rank_samples = ranks.result()
        now = next((s.value for s in samples if s.labels.get("nd_figure") == "now"), None)
        if now is None:
            raise PrometheusError(f"Prometheus at {self.api.url} answered without its time")
        got: dict[str, dict[Key, list[Sample]]] = {name: {} for name in self.queries}
        for s in samples:
            name = s.labels.get("nd_figure")
            if name in got:
                got[name].setdefault(tuple(s.labels.get(k, "") for k in KEY), []).append(s)
        rows = [self._row(key, got, now) for key in sorted(set(got["step"]) | set(got["fresh"]))]
        rows = keep_last(self.previous, rows)
        self.previous = {r.key: r for r in rows}
        return FleetRead(rows=rows, ranks=self._ranks(rank_samples), now=now,
                         foreign=self._foreign(got))

    @staticmethod
    def _row(key: Key, got: dict[str, dict[Key, list[Sample]]], now: float) -> FleetRow:
        def one(name: str) -> Sample | None:
            found = got[name].get(key)
            return found[0] if found else None

        def value(name: str) -> float | None:
            return _finite(one(name))

        figures = {name: value(name) for name in FLOATS}
        ints = {name: (None if (v := value(name)) is None else int(v)) for name in INTS}
        since = value("compile_since")
        compiling = value("compiling") == 1 and since is not None
        phase, info = one("phase"), one("job_info") or one("job_info_last")
        cache = {s.labels.get("result"): int(s.value) for s in got["cache"].get(key, []) if math.isfinite(s.value)}
        last, scraped = value("last_update_t"), value("scraped_t")
        skew = last - scraped if last is not None and scraped is not None and key in got["fresh"] else None
        labels = info.labels if info is not None else {}
        graph, verdict = value("compile_graph"), one("step_verdict")
        health = words_from_series(key[1], {SERIES[c]: v for c in SERIES if (v := value(f"health_inc_{c}")) is not None},
                                   {SERIES[c]: v for c in SERIES if (v := value(f"health_tot_{c}")) is not None})
        return FleetRow(*key, phase=None if phase is None else phase.labels.get("phase"),
                        compiling_for_s=max(0.0, now - since) if compiling else None,
                        stale=key not in got["fresh"], instance=labels.get("instance", ""),
                        node_rank=_int_label(labels, "node_rank"), nodes=_int_label(labels, "nodes"),
                        world_size=_int_label(labels, "world_size"), launcher=labels.get("launcher") or None,
                        compile_graph=None if graph is None or not compiling else int(graph),
                        cache_hits=cache.get("hit"), cache_misses=cache.get("miss"),
                        finished=value("finished") == 1, failure=_failure(one("failure") or one("failure_last"), value("failure_t")),
                        clock_skew_s=skew, health=health, blocked_collective=_blocked(one("blocked")),
                        step_verdict=None if verdict is None else verdict.labels.get("verdict") or None,
                        **figures, **ints)

    @staticmethod
    def _ranks(samples: list[Sample]) -> list[RankRow]:
        ranks: dict[tuple[Key, int], dict] = {}
        for s in samples:
            field = RANK_FIGURES.get(s.labels.get("__name__", ""))
            rank = _int_label(s.labels, "rank")
            if field is not None and rank is not None and math.isfinite(s.value):
                key = tuple(s.labels.get(k, "") for k in KEY)
                ranks.setdefault((key, rank), {})[field] = int(s.value) if field == "steps" else s.value
        return [RankRow(*key, rank=rank, **figures) for (key, rank), figures in sorted(ranks.items())]

    @staticmethod
    def _foreign(got: dict[str, dict[Key, list[Sample]]]) -> list[ForeignNode]:
        """Other jobs' recorders scraped in a Prometheus job that this job's nodes are scraped in."""
        mine = {s.labels.get("job", "") for found in got["job_info"].values() for s in found}
        return [ForeignNode(s.labels.get("instance", ""), s.labels.get("node", ""), s.labels.get("job_id", ""),
                            s.labels.get("job", ""))
                for found in got.get("foreign", {}).values() for s in found if s.labels.get("job", "") in mine]


def _failure(info: Sample | None, t: float | None) -> NodeFailure | None:
    if info is None:
        return None
    labels = info.labels
    return NodeFailure(t=t, rank=_int_label(labels, "rank"), what=labels.get("what", ""),
                       last_line=labels.get("last_line", ""), step=_int_label(labels, "step"))


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(",") if n.isdigit() and len(n) <= 9)


def _blocked(info: Sample | None) -> BlockedCollective | None:
    if info is None or not info.labels.get("seq", "").isdigit():
        return None
    labels = info.labels
    return BlockedCollective(op=labels.get("op", "?"), seq=int(labels["seq"][:12]), group=labels.get("group", ""),
                             state=labels.get("state", ""), shapes="", ranks=_ints(labels.get("ranks", "")),
                             never_entered=_ints(labels.get("never_entered", "")), last=_ints(labels.get("last", "")))
