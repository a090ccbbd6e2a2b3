"""The step-time and loss charts' step axis (issue 22 item 12)."""

from __future__ import annotations

from neurondesk.views.console.throughput import x_limits


def test_the_step_axis_of_a_one_step_run_starts_at_its_step_and_is_one_step_wide():
    assert x_limits([0]) == (0.0, 1.0)  # plotext alone drew -1..1
    assert x_limits([3, 3]) == (3.0, 4.0)
    assert x_limits([2, 9, 5]) == (2.0, 9.0)
    assert x_limits([]) == (0.0, 1.0)
