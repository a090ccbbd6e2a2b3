"""What every command's options share: the parser (a mistake is one line), whole numbers and finite
numbers within bounds, and the bounds themselves."""

from __future__ import annotations

import argparse
import math
import re

# Upper bounds of the numeric options: far past any real run, low enough that no figure made from
# them overflows or prints as 300 digits (a trillion steps, $100,000 an hour, a year of seconds).
MAX_STEPS = 10**12
MAX_PER_STEP = 10**12  # samples or tokens in one step
MAX_PRICE_PER_HOUR = 100_000.0
MAX_SECONDS = 366 * 86400.0
MAX_RATE = 1e15  # samples/s
MAX_LOSS = 1e12
MAX_ROWS = 10**6  # rows a listing prints
LABEL_SAFE = re.compile(r'^[^"\\\n]{1,128}$')  # a Prometheus label value fleet can select on


class Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line and a pointer to --help, not the whole usage block."""

    def error(self, message: str):
        from neurondesk.reports.safe_text import clean

        self.exit(2, f"neurondesk: {clean(message)} (see `{self.prog} --help`)\n")


def whole(minimum: int, maximum: int | None = None):
    def parse(text: str) -> int:
        try:
            value = int(text) if len(text) <= 40 else None  # int() of a 10,000-digit string is slow
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            bounds = f"of at least {minimum}" if maximum is None else f"from {minimum} to {maximum:,}"
            raise argparse.ArgumentTypeError(f"expected a whole number {bounds}, got {text[:40]!r}")
        return value
    parse.__name__ = "whole number"
    return parse


def number(minimum: float | None = None, maximum: float | None = None):
    def parse(text: str) -> float:
        try:
            value = float(text) if len(text) <= 40 else math.nan
        except ValueError:
            value = math.nan
        if (not math.isfinite(value) or (minimum is not None and value < minimum)
                or (maximum is not None and value > maximum)):
            if maximum is not None:
                bounds = f" from {minimum:g} to {maximum:,g}" if minimum is not None else f" of at most {maximum:,g}"
            else:
                bounds = "" if minimum is None else f" of at least {minimum:g}"
            raise argparse.ArgumentTypeError(f"expected a finite number{bounds}, got {text[:40]!r}")
        return value
    parse.__name__ = "number"
    return parse
