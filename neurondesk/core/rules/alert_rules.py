"""When to tell the user (``--notify``, ``--notify-url``): the alert rules. Pure: fed the state and
the clock by the recorder, which journals each alert as a notice and sends it on.

Each alert is said once per episode:
- ``compile_wall``: a compile longer than ``compile_wall_s`` (``--notify-compile-s``, default 60) ended;
- ``recompile_storm``: the graph grows every step, or recompiles after warm-up reach STORM_RECOMPILES;
- ``input_bound``: the phase has been input-bound for ``input_bound_s`` (5 min) without a break;
- ``hung`` / ``resumed``: core/node/hang.py's rule;
- ``budget_warn`` at 80% of ``--budget-usd``, ``budget_reached`` at 100% (core/figures/budget.py);
- ``memory_creep``: a memory series that creeps is named (core/findings/memory_creep.py), once per series;
- ``finished`` / ``failed`` (exit code, the rank that failed first) and ``check_failed``: at the end.
"""

from __future__ import annotations

import msgspec

from neurondesk.core.figures.run_figures import budget_for_state
from neurondesk.core.findings.diagnostics import graph_grows
from neurondesk.core.findings.memory_creep import memory_creep
from neurondesk.core.node.hang import HangWatch, seconds_words

COMPILE_WALL_S = 60.0
INPUT_BOUND_S = 300.0
STORM_RECOMPILES = 5

Figure = float | int | str | None
_LEVELS = {"ok": 0, "warn": 1, "reached": 2}


class Alert(msgspec.Struct, frozen=True, kw_only=True):
    event: str
    level: str  # "info" | "warn" | "error"
    message: str
    t: float
    figures: dict[str, Figure] = {}


class AlertSettings(msgspec.Struct, frozen=True, kw_only=True):
    compile_wall_s: float = COMPILE_WALL_S
    input_bound_s: float = INPUT_BOUND_S


class AlertRules:
    def __init__(self, settings: AlertSettings | None = None) -> None:
        self.settings = settings or AlertSettings()
        self._compiles_seen = 0
        self._storm_said = False
        self._input_since: float | None = None
        self._input_said = False
        self._budget_said = "ok"
        self._hang = HangWatch()
        self._creeps_said: set[tuple] = set()  # (memory, pid, device) of each creep said

    def check(self, state, now: float) -> list[Alert]:
        """The alerts due at ``now`` (each said once)."""
        out = self._compile_walls(state, now)
        out += self._storm(state, now)
        out += self._input_bound(state, now)
        out += self._hung(state, now)
        out += self._budget(state, now)
        out += self._memory_creep(state, now)
        return out

    # ---------------------------------------------------------------- during the run
    def _compile_walls(self, state, now: float) -> list[Alert]:
        compiles = state.parts.compiles.compiles
        new, self._compiles_seen = compiles[self._compiles_seen:], len(compiles)
        out = []
        for c in new:
            if c.duration_s is None or c.duration_s < self.settings.compile_wall_s or not c.counted:
                continue
            where = f" at {c.location}" if c.location else ""
            out.append(Alert(event="compile_wall", level="info", t=now, message=(
                f"compile #{c.index} ({c.cause}{where}) ended after {seconds_words(c.duration_s)}"
                + (f", at step {c.step}" if c.step is not None else "")),
                figures={"compile_s": round(c.duration_s, 3), "step": c.step, "cause": c.cause,
                         "location": c.location, "graph_hash": c.graph_hash, "cache": c.cache}))
        return out

    def _storm(self, state, now: float) -> list[Alert]:
        if self._storm_said:
            return []
        grows = graph_grows(state)
        late = state.recompiles_after_warmup
        if grows is None and late < STORM_RECOMPILES:
            return []
        self._storm_said = True
        message = (f"recompile storm: {grows.message}" if grows is not None else
                   f"recompile storm: {late} recompiles after warm-up (each one is a compile wall on Neuron)")
        return [Alert(event="recompile_storm", level="warn", t=now, message=message,
                      figures={"recompiles_after_warmup": late, "step": state.steps_done,
                               "location": grows.location if grows is not None else None})]

    def _input_bound(self, state, now: float) -> list[Alert]:
        if state.phase(now)[0] != "input-bound":
            self._input_since, self._input_said = None, False
            return []
        if self._input_since is None:
            self._input_since = now
        if self._input_said or now - self._input_since < self.settings.input_bound_s:
            return []
        self._input_said = True
        wait = state.recent_data_wait_fraction()
        return [Alert(event="input_bound", level="warn", t=now, message=(
            f"input-bound for {seconds_words(now - self._input_since)}: the loop waits "
            f"{(wait or 0) * 100:.0f}% of each step for data"),
            figures={"data_wait_fraction": wait, "step": state.steps_done})]

    def _hung(self, state, now: float) -> list[Alert]:
        said = self._hang.check(state.progress(), now)
        if said is None:
            return []
        what, value = said
        if what == "hung":
            return [Alert(event="hung", level="error", t=now, message=(
                f"{value.words()}: no progress for {seconds_words(value.idle_s)} while nothing compiles (threshold "
                f"{seconds_words(value.threshold_s)}); `neurondesk stacks RUN` shows where each rank stands"),
                figures={"step": value.step, "idle_s": round(value.idle_s, 1),
                         "threshold_s": value.threshold_s})]
        return [Alert(event="resumed", level="info", t=now, message=f"stepping again after {seconds_words(value)}",
                      figures={"step": state.steps_done, "idle_s": round(value, 1)})]

    def _budget(self, state, now: float) -> list[Alert]:
        b = budget_for_state(state, now)
        if b is None or b.level == "unpriced" or _LEVELS[b.level] <= _LEVELS[self._budget_said]:
            return []
        self._budget_said = b.level
        figures: dict[str, Figure] = {"budget_usd": b.budget_usd, "spent_usd": round(b.spent_usd or 0, 4),
                                      "step": state.steps_done}
        if b.level == "warn":
            return [Alert(event="budget_warn", level="warn", t=now, message=f"80% of the budget spent: {b.words()}",
                          figures=figures)]
        return [Alert(event="budget_reached", level="error", t=now, message=f"budget reached: {b.words()}",
                      figures=figures)]

    def _memory_creep(self, state, now: float) -> list[Alert]:
        creep = memory_creep(state)
        out = []
        for x in creep.leaks if creep is not None else []:
            key = (x.memory, x.pid, x.device)
            if key in self._creeps_said:
                continue
            self._creeps_said.add(key)
            out.append(Alert(event="memory_creep", level="warn", t=now, message=f"memory creeps: {x.words}", figures={
                "rank": x.rank, "memory": x.memory, "device": x.device, "bytes_per_hour": x.bytes_per_hour,
                "since_step": x.since_step, "hours_to_limit": x.hours_to_limit, "limit": x.limit}))
        return out

    # ---------------------------------------------------------------- at the end
    def at_end(self, state, now: float, failed_checks: list[str]) -> list[Alert]:
        """Finished or failed (nothing when the workload runs on: the recorder alone stopped), and the checks."""
        out: list[Alert] = []
        if not state.finished:
            return out
        code, sig = state.exit_code, state.exit_signal
        failed = state.parts.ranks.failed_first
        figures: dict[str, Figure] = {"exit_code": code, "steps": state.steps_done,
                                      "elapsed_s": round(state.elapsed_s(now), 1)}
        if code == 0:
            out.append(Alert(event="finished", level="info", t=now, figures=figures, message=(
                f"finished: {state.steps_done:,} steps in {seconds_words(state.elapsed_s(now))}")))
        else:
            how = f"exit {code}" + (f" after {sig}" if sig else "")
            who = ""
            if failed is not None:
                figures["failed_rank"] = failed.rank
                rank = f"rank {failed.rank}" if failed.rank is not None else f"pid {failed.pid}"
                who = f"; {rank} failed first" + (f" at step {failed.step}" if failed.step is not None else "") + (
                    f": {failed.error}")
            out.append(Alert(event="failed", level="error", t=now, figures=figures,
                             message=f"failed ({how}) at step {state.steps_done:,}{who}"))
        if failed_checks:
            out.append(Alert(event="check_failed", level="error", t=now, figures={"failed": len(failed_checks)},
                             message="check failed: " + "; ".join(failed_checks)))
        return out
