"""Cost figures from a price and run measurements. Pure: no I/O, no clock.

Every function returns ``None`` when an input it needs is unknown (``None``) or cannot give a
meaningful figure (zero steps, zero throughput); it never substitutes a default. ``p`` below is
the price in USD per instance-hour, so ``p / 3600`` is USD per wall second.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CostFigures:
    price_per_hour: float | None
    total_usd: float | None  # cost so far
    per_1k_steps_steady_usd: float | None
    per_1k_steps_all_in_usd: float | None
    per_million_tokens_usd: float | None
    compile_share: float | None  # 0..1 of wall time
    compile_share_of_cost: float | None  # the same share of the bill: None without a price
    projected_usd: float | None  # for the requested number of steps


def cost_so_far(price_per_hour: float | None, elapsed_s: float | None) -> float | None:
    """total = p / 3600 x elapsed wall seconds (the whole run: startup, compiles, steps)."""
    if price_per_hour is None or elapsed_s is None or elapsed_s < 0:
        return None
    return price_per_hour / 3600.0 * elapsed_s


def per_1k_steps_steady(price_per_hour: float | None, steady_step_time_s: float | None) -> float | None:
    """$/1k steps steady = p / 3600 x steady step time (median or mean, caller's choice) x 1000.

    What 1k more steps cost once compiles are over.
    """
    if price_per_hour is None or steady_step_time_s is None or steady_step_time_s <= 0:
        return None
    return price_per_hour / 3600.0 * steady_step_time_s * 1000.0


def per_1k_steps_all_in(total_usd: float | None, steps: int | None) -> float | None:
    """$/1k steps all-in = total cost so far / steps done x 1000 (compile and startup counted)."""
    if total_usd is None or not steps or steps <= 0:
        return None
    return total_usd / steps * 1000.0


def per_million_tokens(price_per_hour: float | None, steady_tokens_per_s: float | None) -> float | None:
    """$/1M tokens = p / 3600 / steady tokens per second x 1e6."""
    if price_per_hour is None or steady_tokens_per_s is None or steady_tokens_per_s <= 0:
        return None
    return price_per_hour / 3600.0 / steady_tokens_per_s * 1e6


def compile_share(compile_total_s: float | None, elapsed_s: float | None) -> float | None:
    """compile share = compile seconds / elapsed wall seconds, capped at 1.

    The cap matters when several processes compile at once: their compile seconds add up past
    the wall time, and the wall time is all that is paid for.
    """
    if compile_total_s is None or elapsed_s is None or elapsed_s <= 0 or compile_total_s < 0:
        return None
    return min(compile_total_s / elapsed_s, 1.0)


def compile_share_of_cost(price_per_hour: float | None, compile_total_s: float | None,
                          elapsed_s: float | None) -> float | None:
    """The compile share of the bill: the compile share of the wall time (the whole wall is paid at
    one price), but only for a run that has a price: an unpriced run has no bill to share."""
    return None if price_per_hour is None else compile_share(compile_total_s, elapsed_s)


def projected_cost(
    price_per_hour: float | None,
    elapsed_s: float | None,
    steps_done: int | None,
    steps_requested: int | None,
    steady_step_time_s: float | None,
) -> float | None:
    """projected = cost so far + max(N - steps done, 0) x steady step time x p / 3600.

    N is the requested step count. Compiles still to come are not foreseen (a recompile later
    makes the real figure higher); once N steps are done it is just the cost so far.
    """
    so_far = cost_so_far(price_per_hour, elapsed_s)
    if so_far is None or steps_requested is None or steps_done is None:
        return None
    remaining = max(steps_requested - steps_done, 0)
    if remaining == 0:
        return so_far
    per_1k = per_1k_steps_steady(price_per_hour, steady_step_time_s)
    return None if per_1k is None else so_far + remaining * per_1k / 1000.0


def cost_figures(
    price_per_hour: float | None,
    elapsed_s: float | None,
    steps: int | None,
    steady_step_time_s: float | None,
    steady_tokens_per_s: float | None = None,
    compile_total_s: float | None = None,
    steps_requested: int | None = None,
) -> CostFigures:
    """All figures at once; see the functions above for each formula."""
    total = cost_so_far(price_per_hour, elapsed_s)
    return CostFigures(
        price_per_hour=price_per_hour,
        total_usd=total,
        per_1k_steps_steady_usd=per_1k_steps_steady(price_per_hour, steady_step_time_s),
        per_1k_steps_all_in_usd=per_1k_steps_all_in(total, steps),
        per_million_tokens_usd=per_million_tokens(price_per_hour, steady_tokens_per_s),
        compile_share=compile_share(compile_total_s, elapsed_s),
        compile_share_of_cost=compile_share_of_cost(price_per_hour, compile_total_s, elapsed_s),
        projected_usd=projected_cost(price_per_hour, elapsed_s, steps, steps_requested, steady_step_time_s),
    )
