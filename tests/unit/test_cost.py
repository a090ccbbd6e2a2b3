import pytest

from neurondesk.core.figures.cost import (
    compile_share,
    cost_figures,
    cost_so_far,
    per_1k_steps_all_in,
    per_1k_steps_steady,
    per_million_tokens,
    projected_cost,
)

# Hand computation, $21.50/h (trn1.32xlarge), 30 min wall, 4000 steps, 0.25 s steady steps,
# 50k tokens/s, 450 s compiling, 10000 steps asked for:
#   total      = 21.5 / 3600 * 1800              = 10.75
#   steady/1k  = 21.5 / 3600 * 0.25 * 1000       = 1.4930555...
#   all-in/1k  = 10.75 / 4000 * 1000             = 2.6875
#   per 1M tok = 21.5 / 3600 / 50000 * 1e6       = 0.1194444...
#   compile    = 450 / 1800                      = 0.25
#   projected  = 10.75 + 6000 * 0.25 * 21.5/3600 = 10.75 + 8.9583333 = 19.7083333...


def test_all_figures_against_a_hand_computation():
    f = cost_figures(
        21.5, 1800.0, 4000, 0.25, steady_tokens_per_s=50_000.0, compile_total_s=450.0, steps_requested=10_000
    )
    assert f.price_per_hour == 21.5
    assert f.total_usd == pytest.approx(10.75)
    assert f.per_1k_steps_steady_usd == pytest.approx(1.4930555556)
    assert f.per_1k_steps_all_in_usd == pytest.approx(2.6875)
    assert f.per_million_tokens_usd == pytest.approx(0.1194444444)
    assert f.compile_share == pytest.approx(0.25)
    assert f.projected_usd == pytest.approx(19.7083333333)


def test_all_in_exceeds_steady_when_compile_time_is_paid():
    # 1.34375 $/h, 600 s wall of which 500 s compile, 400 steps of 0.25 s
    total = cost_so_far(1.34375, 600.0)
    assert total == pytest.approx(0.2239583333)
    assert per_1k_steps_all_in(total, 400) == pytest.approx(0.5598958333)
    assert per_1k_steps_steady(1.34375, 0.25) == pytest.approx(0.0933159722)


def test_unknown_price_gives_none_not_a_number():
    f = cost_figures(None, 1800.0, 4000, 0.25, 50_000.0, 450.0, 10_000)
    assert (
        f.total_usd,
        f.per_1k_steps_steady_usd,
        f.per_1k_steps_all_in_usd,
        f.per_million_tokens_usd,
        f.projected_usd,
    ) == (None, None, None, None, None)
    assert f.compile_share == pytest.approx(0.25)  # needs no price


def test_missing_or_degenerate_inputs_give_none():
    assert per_1k_steps_all_in(1.0, 0) is None
    assert per_1k_steps_all_in(1.0, None) is None
    assert per_1k_steps_steady(2.0, None) is None
    assert per_million_tokens(2.0, None) is None
    assert per_million_tokens(2.0, 0.0) is None  # no token count: no $/1M tokens
    assert compile_share(10.0, 0.0) is None
    assert compile_share(None, 100.0) is None
    assert cost_so_far(2.0, None) is None
    f = cost_figures(2.0, 100.0, 10, None)
    assert f.total_usd == pytest.approx(2.0 / 36)
    assert f.per_1k_steps_steady_usd is None and f.projected_usd is None and f.per_million_tokens_usd is None


def test_compile_share_is_capped_when_parallel_compiles_sum_past_wall_time():
    assert compile_share(250.0, 100.0) == 1.0


def test_projection():
    # no steady step time yet and steps remain: unknown
    assert projected_cost(3.6, 100.0, 10, 1000, None) is None
    # all requested steps done: the projection is what was spent
    assert projected_cost(3.6, 100.0, 1000, 1000, None) == pytest.approx(0.1)
    assert projected_cost(3.6, 100.0, 1200, 1000, 0.5) == pytest.approx(0.1)
    # 3.6 $/h = 0.001 $/s: 0.1 so far + 990 * 0.5 s * 0.001
    assert projected_cost(3.6, 100.0, 10, 1000, 0.5) == pytest.approx(0.1 + 0.495)
    assert projected_cost(3.6, 100.0, 10, None, 0.5) is None


def test_the_compile_share_of_the_cost_needs_a_price_the_share_of_the_wall_does_not():
    from neurondesk.core.figures.cost import compile_share_of_cost

    assert compile_share_of_cost(21.5, 450.0, 1800.0) == pytest.approx(0.25)
    assert compile_share_of_cost(None, 450.0, 1800.0) is None  # no bill to share (it read 19.0% on an unpriced trn2)
    unpriced, priced = cost_figures(None, 1800.0, 4000, 0.25, compile_total_s=450.0), cost_figures(
        21.5, 1800.0, 4000, 0.25, compile_total_s=450.0)
    assert (unpriced.compile_share, unpriced.compile_share_of_cost) == (pytest.approx(0.25), None)
    assert priced.compile_share_of_cost == pytest.approx(priced.compile_share)
