"""The `neurondesk` command line: one module per command family, `main.py` on top.

`main.py` builds the parser from the families and runs a command; the families (run, watch, reports,
history, prices, checks, share, sinks, job) import only each other and the base below them (`args.py`:
the parser class, number options and their bounds; `errors.py`: `die` and `say`), never `main.py`
(the `cli` contracts in pyproject.toml). This file imports nothing, so `python -m neurondesk.cli` and
a family's import stay cheap.
"""
