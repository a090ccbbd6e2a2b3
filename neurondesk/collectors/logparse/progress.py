"""Loss values from the usual progress lines, and the ``neurondesk-config: {json}`` line.

Accepted: ``step 10 loss 2.31``, ``Step 10/100 | loss: 2.31``, ``epoch 1 step 10 loss=2.31e+00``,
``iter 10: loss 2.3100``, ``loss 2.31``, ``Loss=1.27597``, ``Final loss is 0.3263``, ``train_loss=2.31`` and
``train_loss_step=2.31`` (Lightning's bar; ``train_loss_epoch`` is an average: not read), ``step_loss : 8.65`` (NxD), ``{'loss': 2.31, ...}``
(HF Trainer 4.x) and ``{'loss': '2.31', ...}`` (5.x quotes), ``loss: tensor(2.31, device='xla:0')``, a tqdm
postfix (``40/40 [00:03<00:00, loss=0.123]``), a summary ``loss 6.27 -> 0.138`` (its last value is the loss).
nan and inf are values, not parse errors. Where the probe reads a framework's own record of the loss
(Trainer.log, Lightning's loggers) core counts that, not these lines (core/reduce/loss.py).
The corpus of real output shapes: tests/data/progress_corpus/.
Evaluation losses (``eval loss``, ``val_loss``, ``step 20: val loss 6.27``, ``test loss``) are not
training losses: skipped. The script's own throughput on the same lines: ``rates.parse_rate``.
"""

from __future__ import annotations

import json
import re

from neurondesk.core.events.run_events import LossReported, ParseProblem, ThroughputReported, WorkloadConfig

from ._common import NUMBER, Out, clip
from .rates import parse_rate

CONFIG_MARK = "neurondesk-config:"

_LOSS = re.compile(
    r"(?:(?<![\w/])(?:train(?:ing)?[_/ ]|step_)?loss(?:_step)?\b\s*(?:[:=]|is\b|was\b)?\s*"  # loss=, loss is, loss_step=
    r"|['\"]loss['\"]\s*:\s*)"  # {'loss': ...}
    r"['\"]?(?:tensor\(\s*)?(" + NUMBER + ")",  # transformers 5 quotes its numbers: {'loss': '4.905'}
    re.IGNORECASE,
)
# a summary of the run's losses, first to last (``loss 6.2695 -> 0.1384``): the last is the loss
_TO = re.compile(r"['\"]?\s*(?:->|=>|\u2192|to)\s*['\"]?(" + NUMBER + ")", re.IGNORECASE)
_STEP = re.compile(r"\b(?:global[_ ]step|step|iter|iteration)\b['\"]?\s*[:=#\[(]?\s*(\d{1,18})(?!\d)", re.IGNORECASE)
_EVAL = re.compile(r"\b(?:eval|evaluation|val|valid|validation|test)\b", re.IGNORECASE)


# A run's summary statistic, not a logged step: Trainer's end-of-training dict (it holds
# train_runtime / train_*_per_second beside train_loss, the run's average loss) and its
# log_metrics table line (`  train_loss               =     7.3751`).
_SUMMARY_DICT = re.compile(r"['\"]train_(?:runtime|samples_per_second|steps_per_second)['\"]\s*:")
_METRICS_TABLE = re.compile(r"^\s+\w+\s{2,}=\s+\S+\s*$")
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def shown_text(line: str) -> str:
    """What a terminal shows of an output line, safe to quote: the last segment a tqdm redraw
    (\\r) left, without escape sequences or control characters."""
    if "\r" in line:
        line = next((seg for seg in reversed(line.split("\r")) if seg.strip()), "")
    return _CONTROL.sub("", _ESCAPE.sub("", line)).strip()


def parse_loss(line: str) -> tuple[float, int | None] | None:
    """(loss, printed step or None) from one progress line, or None."""
    if "oss" not in line and "OSS" not in line:
        return None
    if "\r" in line:  # tqdm redraws: the last segment is what the terminal shows
        line = next((seg for seg in reversed(line.split("\r")) if seg.strip()), "")
    if _SUMMARY_DICT.search(line) or _METRICS_TABLE.match(line):
        return None
    m = _LOSS.search(line)
    if m is None or _EVAL.search(line, 0, m.start()):
        return None
    last = _TO.match(line, m.end())
    step = _STEP.search(line)
    return float((last or m).group(1)), int(step.group(1)) if step else None


class ProgressParser:
    def flush(self, t: float) -> Out:  # LineParser's: nothing is left open across lines
        return []

    def feed(self, s: str, t: float, out: Out, key: str = "") -> None:
        if CONFIG_MARK in s:
            self._config(s, t, out)
            return
        found = parse_loss(s)
        if found is not None:
            out.append(LossReported(t=t, value=found[0], step=found[1]))
        rate = parse_rate(s)
        if rate is not None:
            out.append(ThroughputReported(t=t, value=rate.value, unit=rate.unit, line=clip(shown_text(s), 300)))

    @staticmethod
    def _config(s: str, t: float, out: Out) -> None:
        raw = s.split(CONFIG_MARK, 1)[1].strip()
        try:
            values = json.loads(raw)
        except ValueError as exc:
            out.append(ParseProblem(t=t, source="neurondesk-config", raw=clip(s, 500),
                                    error=f"neurondesk-config line is not JSON ({exc}); "
                                          "print json.dumps(<dict>) after the marker"))
            return
        if not isinstance(values, dict):
            out.append(ParseProblem(t=t, source="neurondesk-config", raw=clip(s, 500),
                                    error=f"neurondesk-config: expected a JSON object, got "
                                          f"{type(values).__name__}; print json.dumps(<dict>)"))
            return
        out.append(WorkloadConfig(t=t, values=values))
