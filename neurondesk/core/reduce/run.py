"""The run itself: what was launched with which options and price, its config, when it started
and ended and how.

The price is the recorder's (a ``PriceResolved`` event, core/events/price_events.py): never resolved
again here, so a replay shows the live price whatever table the reader has. A journal written before
that event carries it in ``RunStarted``, and neuron-monitor's instance type prices such a run from the
bundled table (``price_from_instance_info``: that rule, kept for those journals, in this one place)."""

from __future__ import annotations

from collections.abc import Callable

from neurondesk.core.events import run_events as ev
from neurondesk.core.events.price_events import PriceResolved
from neurondesk.core.node.prices import bundled_price_table, instance_info_price


class RunReducer:
    def __init__(self) -> None:
        self.run_id: str | None = None
        self.command: list[str] = []
        self.started_t: float | None = None
        self.last_t: float | None = None
        self.event_count = 0
        self.warmup_steps = 5
        self.target_loss: float | None = None
        self.samples_override: int | None = None
        self.tokens_override: int | None = None
        self.steps_requested: int | None = None
        self.instance_type: str | None = None
        self.price_per_hour: float | None = None
        self.price_source: str | None = None
        self.price_journalled = False  # a PriceResolved was read: the price is the recorder's
        self.budget_usd: float | None = None
        self.hang_after_s: float | None = None
        self.config: dict = {}
        self.exit_code: int | None = None
        self.exit_signal: str | None = None
        self.finished = False
        self.finished_t: float | None = None
        self.stderr_tail: list[str] = []
        self.left_running: list[ev.LeftProcess] = []

    def handlers(self) -> dict[str, Callable[[ev.Event], None]]:
        return {"run_started": self.on_run_started, "price_resolved": self.on_price_resolved,
                "workload_config": self.on_workload_config, "run_finished": self.on_run_finished}

    def touch(self, t: float) -> None:
        """Every event: the run's first and latest time."""
        self.event_count += 1
        if self.started_t is None:
            self.started_t = t
        last = self.last_t
        if last is None or t > last:
            self.last_t = t

    def on_run_started(self, e: ev.RunStarted) -> None:
        self.run_id, self.command, self.started_t = e.run_id, list(e.command), e.t
        self.warmup_steps, self.target_loss = e.warmup_steps, e.target_loss
        self.samples_override, self.tokens_override = e.samples_per_step, e.tokens_per_step
        self.steps_requested = e.steps_requested
        self.instance_type, self.price_per_hour, self.price_source = (
            e.instance_type, e.price_per_hour, e.price_source)
        self.budget_usd, self.hang_after_s = e.budget_usd, e.hang_after_s

    def on_price_resolved(self, e: PriceResolved) -> None:
        self.price_journalled = True
        self.instance_type, self.price_per_hour, self.price_source = e.instance_type, e.price_per_hour, e.source

    def price_from_instance_info(self, instance_type: str | None) -> None:
        """A journal without PriceResolved (written before it) whose run nothing named the instance of
        and nobody priced: neuron-monitor's instance_info does, priced from the bundled table."""
        if (self.price_journalled or not instance_type or self.instance_type is not None
                or self.price_per_hour is not None):
            return
        quote = instance_info_price(instance_type, bundled_price_table())
        self.instance_type, self.price_per_hour, self.price_source = (
            quote.instance_type, quote.price_per_hour, quote.source)

    def on_workload_config(self, e: ev.WorkloadConfig) -> None:
        self.config.update(e.values)
        if self.steps_requested is None and isinstance(e.values.get("steps"), int):
            self.steps_requested = e.values["steps"]

    def on_run_finished(self, e: ev.RunFinished) -> None:
        self.finished, self.exit_code, self.exit_signal = True, e.exit_code, e.signal
        self.finished_t = e.t
        self.stderr_tail = list(e.stderr_tail)
        self.left_running = list(e.left_running)

    def elapsed_s(self, now: float | None = None) -> float:
        if self.started_t is None:
            return 0.0
        if self.finished_t is not None:  # the run ends when the workload exits, whatever comes after
            return max(0.0, self.finished_t - self.started_t)
        end = self.last_t if (self.finished or now is None) else max(now, self.last_t or now)
        return max(0.0, (end or self.started_t) - self.started_t)
