"""The result of one doctor check."""

from __future__ import annotations

from dataclasses import asdict, dataclass

STATUSES = ("ok", "warn", "fail", "skip")  # skip: not applicable here, or nothing to compare against
AREAS = ("devices", "packages", "compatibility", "instance", "disk", "environment", "script")


@dataclass(frozen=True)
class Check:
    area: str
    name: str
    status: str
    found: str
    todo: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")
        if self.area not in AREAS:
            raise ValueError(f"area {self.area!r} is not one of {AREAS}")

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def exit_code(checks: list[Check]) -> int:
    """0 when every check is ok (or skipped), 1 when some warn, 2 when some fail."""
    statuses = {c.status for c in checks}
    return 2 if "fail" in statuses else 1 if "warn" in statuses else 0


def counts(checks: list[Check]) -> dict[str, int]:
    return {s: sum(c.status == s for c in checks) for s in STATUSES}
