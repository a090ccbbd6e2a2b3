"""The published JSON Schemas, generated from the structs every reader takes (msgspec.json.schema):

    docs/summary.schema.json      the run summary, summary.json (core/summary/types.py's Summary)
    docs/job-summary.schema.json  the job summary, `neurondesk job summary --format json` (core/job/job_summary.py)

    .venv/bin/python scripts/make_schemas.py          # rewrite both
    .venv/bin/python scripts/make_schemas.py --check  # exit 1, naming the stale file, when one is not the structs'

tests/runs/test_summary_contract.py and tests/runs/test_job_summary.py run the check, so a field added to a struct without
regenerating its schema fails there.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this tree's neurondesk, not an installed one

from neurondesk.core.job.job_summary import job_summary_schema  # noqa: E402
from neurondesk.core.summary.types import summary_schema  # noqa: E402

SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "docs/summary.schema.json": summary_schema,
    "docs/job-summary.schema.json": job_summary_schema,
}


def schema_text(make: Callable[[], dict[str, Any]]) -> str:
    return json.dumps(make(), indent=2, sort_keys=True) + "\n"


def stale() -> list[str]:
    """The schema files whose text is not what their structs give now."""
    out = []
    for name, make in SCHEMAS.items():
        path = REPO / name
        if not path.exists() or path.read_text() != schema_text(make):
            out.append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 when a checked-in schema is stale; write nothing")
    args = p.parse_args(argv)
    if args.check:
        names = stale()
        for name in names:
            sys.stderr.write(f"{name} is stale: regenerate it with `python scripts/make_schemas.py`\n")
        return 1 if names else 0
    for name, make in SCHEMAS.items():
        (REPO / name).write_text(schema_text(make))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
