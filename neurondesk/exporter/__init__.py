"""The OpenMetrics exporter: a run's figures as Prometheus series, served over HTTP.

It runs where a RunState is reduced: in the recorder (``--metrics-addr`` of ``run``) and in viewers
(``attach`` and ``replay`` with ``--metrics-addr``). The thread that owns the state takes an immutable
``Snapshot`` (``snapshot.py``), the HTTP server's threads serve only that (``endpoint.py``); the
series of a job of many nodes (``job.py``), node health (``health.py``), step phases (``phases.py``)
and memory creep (``memory.py``) are families of their own; a viewer's source publishes after each
poll through its ``after_poll`` hook (``viewer.py``). Names come from core's one table
(core/figures/metric_names.py). It imports core and prometheus_client only: never the recorder, a
view, a source, a collector, the store or Textual (the import contract ``exporter``).
"""
