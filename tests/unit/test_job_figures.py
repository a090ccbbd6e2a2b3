"""Job figures (core/job/job_figures.py) follow one node's rules: the slowest node's pace, summed prices and
costs, the compile wall of the slowest node counted for everyone who waited."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neurondesk.core.figures.cost import cost_figures
from neurondesk.core.job.job_figures import NodeFigures, job_figures


def node(name: str, **kw) -> NodeFigures:
    base = dict(node=name, elapsed_s=3600.0, steps=1000, price_per_hour=21.50, step_time_s=0.5,
                samples_per_s=64.0, tokens_per_s=64_000.0, compile_total_s=60.0)
    return NodeFigures(**(base | kw))


def test_the_job_goes_at_its_slowest_nodes_pace_and_pays_every_nodes_price():
    j = job_figures([node("a"), node("b", step_time_s=1.5, steps=990, samples_per_s=21.0, price_per_hour=24.78)])
    assert j.step_time_s == 1.5 and j.steps == 990 and j.samples_per_s == pytest.approx(85.0)
    assert j.price_per_hour == pytest.approx(46.28)
    assert j.total_usd == pytest.approx(46.28)  # an hour of each
    assert j.per_1k_steps_steady_usd == pytest.approx(46.28 * 1.5 * 1000 / 3600)


def test_a_cold_cache_node_sets_the_compile_wall_and_the_others_wait_for_it():
    j = job_figures([node("warm-1", compile_total_s=5.0), node("warm-2", compile_total_s=5.0),
                     node("cold", compile_total_s=252.0)])
    assert j.compile_wall_s == 252.0 and j.compile_wait_s == pytest.approx(2 * 247.0)
    assert j.compile_share == pytest.approx(252.0 / 3600)
    assert j.compile_usd == pytest.approx(3 * 21.50 * 252.0 / 3600)


def test_an_unknown_rate_on_one_node_makes_the_jobs_unknown():
    j = job_figures([node("a"), node("b", samples_per_s=None, tokens_per_s=None, price_per_hour=None)])
    assert j.samples_per_s is None and j.tokens_per_s is None
    assert j.price_per_hour == 21.50 and j.priced_nodes == 1


@given(st.lists(st.tuples(st.floats(0.01, 100), st.floats(1, 10_000), st.integers(1, 10**6),
                          st.floats(0.001, 10), st.floats(1, 10**6)), min_size=1, max_size=8))
def test_one_node_or_many_identical_ones_give_that_nodes_own_figures(rows):
    price, elapsed, steps, step_time, tokens = rows[0]
    one = cost_figures(price, elapsed, steps, step_time, tokens, 30.0)
    j = job_figures([node("only", price_per_hour=price, elapsed_s=elapsed, steps=steps, step_time_s=step_time,
                          tokens_per_s=tokens, compile_total_s=30.0)])
    assert (j.total_usd, j.per_1k_steps_steady_usd, j.per_1k_steps_all_in_usd, j.per_million_tokens_usd,
            j.compile_share) == (one.total_usd, one.per_1k_steps_steady_usd, one.per_1k_steps_all_in_usd,
                                 one.per_million_tokens_usd, one.compile_share)
    n = len(rows)
    many = job_figures([node(f"n{i}", price_per_hour=price, elapsed_s=elapsed, steps=steps, step_time_s=step_time,
                             tokens_per_s=tokens, compile_total_s=30.0) for i in range(n)])
    assert many.per_1k_steps_steady_usd == pytest.approx(n * one.per_1k_steps_steady_usd)
    assert many.per_million_tokens_usd == pytest.approx(one.per_million_tokens_usd)  # n x price, n x tokens
