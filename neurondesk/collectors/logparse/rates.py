"""The workload's own throughput figure, as training scripts print it.

Accepted (one figure per line, the first shape that matches):
``rate: 18.4`` / ``Rate=18.40`` (torch-xla's RateTracker: samples/s; ``GlobalRate`` is the
whole-run average and is not read), ``'train_samples_per_second': 52.1`` and
``'train_steps_per_second': 3.2`` (HF Trainer; 5.x quotes them: ``'20.83'``), ``Train throughput (iter/sec): 41.2``,
``9.5it/s`` and ``2.31s/it`` (tqdm), ``ms/batch 25.33`` (PyTorch's word language model),
``time 35.68ms`` (nanoGPT), ``step_time=0.089s``. An iteration and a batch are one step.
A figure after an evaluation word (``val``, ``eval``, ``test``) is not read, nor ``rate``/``time`` on a line that is not a progress line.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from ._common import NUMBER

# a number with its unit glued on (``35.68ms``, ``9.5it/s``): NUMBER refuses a letter after it
_NUM_UNIT = r"((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
STEPS_PER_S, SAMPLES_PER_S, MS_PER_STEP, S_PER_STEP = "steps/s", "samples/s", "ms/step", "s/step"

_EVAL = re.compile(r"\b(?:eval\w*|val|valid|validation|test|testing|predict\w*)\b|\b(?:eval|val|test|predict)_",
                   re.IGNORECASE)
# a progress line: has a loss, a step/iter/epoch counter or a batch count
_PROGRESS = re.compile(r"\b(?:loss|step|iter|iteration|epoch|batch(?:es)?)\b", re.IGNORECASE)

_ANYWHERE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"['\"]?train_samples_per_second['\"]?\s*[:=]\s*['\"]?(" + NUMBER + ")"), SAMPLES_PER_S),
    (re.compile(r"['\"]?train_steps_per_second['\"]?\s*[:=]\s*['\"]?(" + NUMBER + ")"), STEPS_PER_S),
    (re.compile(r"\bthroughput\s*\((?:iter|it|iterations|steps?)/s(?:ec)?\)\s*[:=]?\s*(" + NUMBER + ")",
                re.IGNORECASE), STEPS_PER_S),
    (re.compile(r"\bthroughput\s*\((?:samples?|seq|sequences|sentences|images|img)/s(?:ec)?\)\s*[:=]?\s*("
                + NUMBER + ")", re.IGNORECASE), SAMPLES_PER_S),
    (re.compile(r"(?<![\w.])" + _NUM_UNIT + r"\s?it/s\b"), STEPS_PER_S),
    (re.compile(r"(?<![\w.])" + _NUM_UNIT + r"\s?s/it\b"), S_PER_STEP),
]
_ON_PROGRESS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?<![\w])(?<!learning )(?<!dropout )rate\s*[:=]\s*(" + NUMBER + ")", re.IGNORECASE),
     SAMPLES_PER_S),
    (re.compile(r"\bms/batch\s*[:=]?\s*(" + NUMBER + ")", re.IGNORECASE), MS_PER_STEP),
    (re.compile(r"\b(?:(?:step|iter|batch)[_ ])?time\s*[:=]?\s*" + _NUM_UNIT + r"\s?ms\b", re.IGNORECASE),
     MS_PER_STEP),
    (re.compile(r"\b(?:step|iter|batch)[_ ]time\s*[:=]?\s*" + _NUM_UNIT + r"\s?s\b", re.IGNORECASE), S_PER_STEP),
]


class Rate(NamedTuple):
    value: float
    unit: str


def parse_rate(line: str) -> Rate | None:
    """The script's own throughput figure on one output line, or None."""
    if "\r" in line:  # tqdm redraws: the last segment is what the terminal shows
        line = next((seg for seg in reversed(line.split("\r")) if seg.strip()), "")
    found = _first(_ANYWHERE, line)
    if found is None and _PROGRESS.search(line):
        found = _first(_ON_PROGRESS, line)
    return found


def _first(patterns: list[tuple[re.Pattern[str], str]], line: str) -> Rate | None:
    for pattern, unit in patterns:
        m = pattern.search(line)
        if m is None or _EVAL.search(line, 0, m.start()):  # an evaluation bar's figure, or none
            continue
        value = float(m.group(1))
        if math.isfinite(value) and value > 0:
            return Rate(value, unit)
    return None
