"""Details a user reads in summary.md (issue 13 item 10): the command as a shell line, and the
compile table's shapes (before → after) and reason."""

from __future__ import annotations

from neurondesk.core.events import run_events as ev
from neurondesk.core.reduce.state import RunState
from neurondesk.core.summary.build import run_summary
from neurondesk.core.summary.types import Summary
from neurondesk.reports.summary_writer import to_markdown, to_text_table


def _summary(command: list[str]) -> Summary:
    state = RunState()
    state.apply(ev.RunStarted(t=0.0, run_id="r", command=command, warmup_steps=1))
    for step, seq in enumerate((128, 128, 256)):
        shapes = [[8, seq]]
        state.apply(ev.CompileStarted(t=step + 0.1, pid=1, source="xla"))
        state.apply(ev.CompileFinished(t=step + 0.5, pid=1, source="xla", duration_s=0.4, graph_hash=f"h{seq}",
                                       location="train.py:42", input_shapes=shapes,
                                       reason="input shapes changed | seq len" if seq == 256 else None))
        state.apply(ev.StepEnded(t=step + 1.0, pid=1, step=step, duration_s=0.9, input_shapes=shapes))
    return run_summary(state, now=5.0)


def test_the_command_is_a_line_a_shell_runs_as_it_ran():
    s = _summary(["python", "-c", "import sys, torch; print(sys.argv)", "a b"])
    line = "python -c 'import sys, torch; print(sys.argv)' 'a b'"
    assert f"| command | {line} |" in to_markdown(s)
    assert line in to_text_table(s)


def test_compile_table_has_shapes_before_and_after_and_the_reason():
    md = to_markdown(_summary(["python", "train.py"]))
    header = next(x for x in md.splitlines() if x.startswith("| # | step | cause"))
    assert "shapes (before → after)" in header and "| reason |" in header
    rows = [x for x in md.splitlines() if x.startswith("| ") and "train.py:42" in x]  # the table's rows
    assert "| 8×128 |" in rows[0]
    assert "| 8×128 → 8×256 | input shapes changed \\| seq len |" in rows[-1]
