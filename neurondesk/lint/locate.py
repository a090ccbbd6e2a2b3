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


def annotate_memory(creep):
    """Each leak of a summary's ``memory_creep`` whose kind is a tensor kept per step, with the line where
    lint finds a list append of a tensor in the rank's script: ``location`` ("path:line"), and said at
    the end of its words (so every writer shows it). ``creep``: the summary's MemoryCreep struct
    (core/findings/memory_creep.py; lint imports no other part, so it is read by its fields) or its
    JSON-shaped dict; annotated in place and returned (cli.py's `neurondesk summary` reads the summary it
    annotated)."""
    if not creep:
        return creep
    if isinstance(creep, dict):
        _annotate_creep_dict(creep)
        return creep
    said = msgspec.to_builtins(creep)
    _annotate_creep_dict(said)
    leaks = [msgspec.structs.replace(leak, location=new.get("location"), words=new["words"])
             for leak, new in zip(creep.leaks, said["leaks"], strict=True)]
    # the struct is frozen (a finding core made); the summary holding it is this command's own copy
    for name, value in (("leaks", leaks), ("short", said["short"]), ("words", said["words"])):
        msgspec.structs.force_setattr(creep, name, value)
    return creep


def _annotate_creep_dict(creep: dict) -> None:
    cache: dict = {}
    for leak in creep.get("leaks") or []:
        script = leak.get("script")
        if leak.get("kind") != "kept-per-step" or not script or leak.get("location"):
            continue
        if script not in cache:
            cache[script] = lint_paths([script])
        lines = sorted({f.line for f in cache[script].findings if f.rule == "append-tensor"})
        if lines:
            leak["location"] = f"{script}:{lines[0]}"
            more = f" (and line{'s' if len(lines) > 2 else ''} {', '.join(map(str, lines[1:5]))})" if len(lines) > 1 else ""
            leak["words"] = f"{leak['words']} (lint: a tensor appended to a list every step at {leak['location']}{more})"
    first = (creep.get("leaks") or [{}])[0]
    if first.get("location"):
        for key in ("short", "words"):
            if key in creep:
                creep[key] = f"{creep[key]} (lint: {first['location']})"
