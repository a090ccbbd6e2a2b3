"""Does lint find, at the same line, what a run's advice located (a value read, a shape change)?"""

from __future__ import annotations

import msgspec

from neurondesk.lint.files import lint_paths

VALUE_RULES = frozenset({"item", "host-copy", "tensor-cast", "print-tensor", "fstring-tensor", "tensor-branch"})
SHAPE_RULES = frozenset({"per-batch-slice", "pad-sequence", "padding-longest", "drop-last", "data-dependent"})
KINDS = {"value-access": VALUE_RULES, "shape-buckets": SHAPE_RULES}


def note_for(location: str | None, kind: str, _cache: dict | None = None) -> str | None:
    """One sentence for an advice's `path:line`, or None when the kind or the location is not lint's."""
    rules = KINDS.get(kind)
    if rules is None or not location:
        return None
    path, _, line = location.rpartition(":")
    if not line.isdigit() or not path.endswith(".py"):
        return None
    cache = {} if _cache is None else _cache
    if path not in cache:
        cache[path] = lint_paths([path])
    report = cache[path]
    if report.problems:
        return f"lint could not check it: {report.problems[0].message}"
    same = [f for f in report.findings if f.line == int(line) and f.rule in rules]
    if same:
        return f"lint finds it at this line ([{same[0].rule}], {same[0].severity})"
    others = sorted({f.line for f in report.findings if f.rule in rules})
    if not others:
        return "lint finds nothing at this line"
    what = "value reads" if kind == "value-access" else "shape changes"
    return (f"lint finds nothing at this line; in this file it finds {what} at line"
            f"{'s' if len(others) > 1 else ''} {', '.join(map(str, others[:5]))}")

def annotate(advice: list[dict]) -> list[dict]:
    """Each value-access and shape-buckets advice with a `lint` sentence (and the sentence at the end of
    its message, so every writer shows it)."""
    cache: dict = {}
    for a in advice:
        note = note_for(a.get("location"), a.get("kind", ""), cache)
        if note:
            a["lint"] = note
            a["message"] = f"{a['message']} (lint: {note.removeprefix('lint ')})"
    return advice


def append_location(kind: str | None, script: str | None, location: str | None,
                    cache: dict) -> tuple[str, str] | None:
    """For a leak of a summary's ``memory_creep`` whose kind is a tensor kept per step: the line where lint
    finds a list append of a tensor in the rank's ``script``, as ("path:line", the words to add at the end
    of the leak's words); None for another kind, no script, a leak located already, or nothing found.
    ``cache``: the lint reports by script, shared by the leaks of one summary."""
    if kind != "kept-per-step" or not script or location:
        return None
    if script not in cache:
        cache[script] = lint_paths([script])
    lines = sorted({f.line for f in cache[script].findings if f.rule == "append-tensor"})
    if not lines:
        return None
    where = f"{script}:{lines[0]}"
    more = f" (and line{'s' if len(lines) > 2 else ''} {', '.join(map(str, lines[1:5]))})" if len(lines) > 1 else ""
    return where, f"(lint: a tensor appended to a list every step at {where}{more})"


def annotate_memory(creep: dict | None) -> dict | None:
    """Each leak of a summary's ``memory_creep`` (as a dict) whose kind is a tensor kept per step, with the
    line where lint finds a list append of a tensor in the rank's script: ``location`` ("path:line"), and
    said at the end of its words (so every writer shows it)."""
    if not creep:
        return creep
    cache: dict = {}
    for leak in creep.get("leaks") or []:
        found = append_location(leak.get("kind"), leak.get("script"), leak.get("location"), cache)
        if found:
            leak["location"] = found[0]
            leak["words"] = f"{leak['words']} {found[1]}"
    first = (creep.get("leaks") or [{}])[0]
    if first.get("location"):
        for key in ("short", "words"):
            if key in creep:
                creep[key] = f"{creep[key]} (lint: {first['location']})"
    return creep


def located_memory(creep):
    """``annotate_memory`` of a summary's MemoryCreep struct (core/findings/memory_creep.py; lint imports no
    other part, so it is read by its fields): a new MemoryCreep, its leaks located the same way, in the
    same words (the struct is frozen: a finding core made)."""
    cache: dict = {}
    leaks = []
    for leak in creep.leaks:
        found = append_location(leak.kind, leak.script, leak.location, cache)
        leaks.append(leak if found is None else
                     msgspec.structs.replace(leak, location=found[0], words=f"{leak.words} {found[1]}"))
    where = leaks[0].location if leaks else None
    if not where:
        return msgspec.structs.replace(creep, leaks=leaks)
    return msgspec.structs.replace(creep, leaks=leaks, short=f"{creep.short} (lint: {where})",
                                   words=f"{creep.words} (lint: {where})")
