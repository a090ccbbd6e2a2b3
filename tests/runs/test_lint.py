"""`neurondesk lint`: each pattern on a small script, the labelled corpus's precision and recall, bad input.

The corpus (tests/data/lint/): scripts written anew after the patterns of public training scripts
(corpus/, each known finding marked `# expect: RULE` on its line) and the bundled workloads and
patterns themselves (the files and their known findings listed in workloads.json). Every finding lint makes
that is not labelled is a false positive; every label it does not make is a miss.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import DATA, REPO

from neurondesk.lint import SEVERITIES, lint_paths, lint_source
from neurondesk.lint.files import MAX_BYTES

LINT = DATA / "lint"
WORKLOADS = REPO / "workloads"
LABELLED = json.loads((LINT / "workloads.json").read_text())  # which workload files, and their findings
MIN_PRECISION, MIN_RECALL = 0.95, 0.80


def found(src: str) -> list[tuple[int, str, str]]:
    return [(f.line, f.rule, f.severity) for f in lint_source(textwrap.dedent(src))]


XLA_LOOP = """\
import torch
import torch_xla
model = M()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(loader):
    loss = model(x).mean()
    loss.backward()
    opt.step()
    torch_xla.sync()
    {line}
"""


@pytest.mark.parametrize("line, rule", [
    ("v = loss.item()", "item"),
    ("print(loss)", "print-tensor"),
    ("s = f'{loss}'", "fstring-tensor"),
    ("v = float(loss)", "tensor-cast"),
    ("if loss > 3: pass", "tensor-branch"),
    ("a = x.cpu()", "host-copy"),
    ("i = torch.nonzero(x)", "data-dependent"),
    ("z = x[:, :y.max()]", "per-batch-slice"),
])
def test_each_value_read_in_the_step_is_found_at_its_line(line: str, rule: str) -> None:
    assert found(XLA_LOOP.format(line=line)) == [(10, rule, "warning")]


@pytest.mark.parametrize("line", [
    "print(step)", "print(f'step {step} lr {lr}')", "if step > 10: pass", "if loss is None: pass",
    "n = len(x)", "z = x[:, :128]", "v = float(args.lr)", "print(loss.shape)", "k = x.size(0)",
    "xm.add_step_closure(lambda: print(loss.item()))",
])
def test_host_values_and_closures_are_not_findings(line: str) -> None:
    assert found(XLA_LOOP.format(line=line)) == []


EAGER_LOOP = """\
import torch
import torch.nn.functional as F
for x, y in loader:
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    {line}
"""


@pytest.mark.parametrize("line, want", [
    ("losses.append(loss)", [(8, "append-tensor", "warning")]),  # the classic: each step's graph kept
    ("outs.append(model(x))", [(8, "append-tensor", "warning")]),
    ("held.append(F.mse_loss(model(x), y))", [(8, "append-tensor", "warning")]),
    ("losses.append(loss.detach())", []),
    ("losses.append(loss.data)", []),
    ("losses.append(float(loss))", [(8, "tensor-cast", "warning")]),
    ("losses.append(step)", []),
    ("with torch.no_grad():\n        outs.append(model(x))", []),
])
def test_a_tensor_appended_to_a_list_every_step_keeps_its_graph(line: str, want: list) -> None:
    assert found(EAGER_LOOP.format(line=line)) == want


def test_a_step_frequency_guard_lowers_the_severity_and_names_the_period() -> None:
    src = XLA_LOOP.format(line="if step % 100 == 0:\n        v = loss.item()\n    else:\n        w = loss.item()")
    fs = lint_source(src)
    assert [(f.line, f.severity) for f in fs] == [(11, "info"), (13, "warning")]
    assert fs[0].message.endswith("every 100 steps") and fs[1].message.endswith("every step")


def test_outside_the_training_step_nothing_is_read() -> None:
    src = """\
    import torch
    for epoch in range(3):
        for x, y in loader:
            loss = model(x).mean()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss}")
    for x, y in val_loader:
        print(model(x).mean().item())
    """
    assert found(src) == []


def test_a_helper_called_from_the_step_is_part_of_it_and_a_step_closure_is_not() -> None:
    src = """\
    import torch_xla.core.xla_model as xm
    def report(loss):
        print(loss)
    def later(loss):
        print(loss.item())
    def step_fn(model, x):
        loss = model(x).mean()
        report(loss)
        return loss
    fn = step_fn
    for x in batches():
        loss = fn(model, x)
        loss.backward()
        optimizer.step()
        xm.mark_step()
        xm.add_step_closure(later, args=(loss,))
    """
    assert found(src) == [(3, "print-tensor", "warning")]


def test_the_recompile_storm_needs_xla_and_no_cut_anywhere() -> None:
    loop = "for x in data:\n    loss = model(x).mean()\n    loss.backward()\n    opt.step()\n"
    assert found("import torch_xla\n" + loop) == [(2, "no-sync", "error")]
    assert found("import torch\n" + loop) == []  # not XLA
    assert found("import torch_xla\n" + loop + "    torch_xla.sync()\n") == []
    assert found("import torch_xla.core.xla_model as xm\n" + loop.replace("opt.step()", "xm.optimizer_step(opt)")) \
        == [(2, "no-sync", "error")]  # torch-xla 2.9: optimizer_step syncs only with barrier=True
    assert found("import torch_xla.core.xla_model as xm\n"
                 + loop.replace("opt.step()", "xm.optimizer_step(opt, barrier=True)")) == []


def test_file_wide_rules() -> None:
    assert found("torch.compile(m, backend='neuron', dynamic=True)") == [(1, "dynamic-neuron", "error")]
    assert found("torch.compile(m, backend='neuron')") == []
    assert found("torch.compile(m, backend='inductor', dynamic=True)") == []
    assert found("DataLoader(ds, batch_size=8)") == [(1, "drop-last", "warning")]
    assert found("DataLoader(ds, batch_size=8, drop_last=True)") == []
    assert found("DataLoader(ds, batch_size=None)") == []  # the dataset yields whole batches
    assert found("DataLoader(ds, **kw)") == []  # cannot tell
    assert found("tok(x, padding='max_length', max_length=128)") == []
    assert found("tok(x, padding='longest')") == [(1, "padding-longest", "warning")]


# ------------------------------------------------------------------ the labelled corpus


def labels() -> set[tuple[str, int, str]]:
    out = set()
    for p in sorted((LINT / "corpus").glob("*.py")):
        for i, line in enumerate(p.read_text().splitlines(), start=1):
            m = re.search(r"# expect: ([\w, -]+)$", line)
            if m:
                out |= {(str(p), i, r.strip()) for r in m.group(1).split(",")}
    out |= {(str(WORKLOADS / f), line, rule) for f, line, rule in LABELLED["findings"]}
    return out


def score() -> dict:
    report = lint_paths([str(LINT / "corpus"), *(str(WORKLOADS / f) for f in LABELLED["files"])])
    assert report.problems == []
    got = {(f.path, f.line, f.rule) for f in report.findings}
    want = labels()
    tp = got & want
    return {"files": report.files, "tp": len(tp), "fp": sorted(got - want), "fn": sorted(want - got),
            "precision": len(tp) / len(got), "recall": len(tp) / len(want)}


def test_the_corpus_precision_and_recall_and_the_docs_say_them() -> None:
    s = score()
    assert s["precision"] >= MIN_PRECISION, f"false positives: {s['fp']}"
    assert s["recall"] >= MIN_RECALL, f"missed: {s['fn']}"
    figures = (f"precision {s['precision']:.2f} ({s['tp']} of {s['tp'] + len(s['fp'])} findings right), "
               f"recall {s['recall']:.2f} ({s['tp']} of {s['tp'] + len(s['fn'])} known findings) on "
               f"{s['files']} files")
    page = REPO / "docs" / "doctor-and-lint.md"
    assert figures in page.read_text(), f"{page.name} should say: {figures}"


def test_the_corpus_misses_are_the_ones_the_docs_own() -> None:
    """Each miss is one lint cannot see from one file: a framework-run step, a length from a list."""
    assert [(Path(f).name, line, rule) for f, line, rule in score()["fn"]] == [
        ("lightning_like_module.py", 14, "item"), ("train.py", 154, "per-batch-slice")]


# ------------------------------------------------------------------ bad input and the command


def nd(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neurondesk.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_bad_input_is_one_line_each_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("for x in y\n    pass\n")
    (tmp_path / "notes.txt").write_text("this is: not (python\n")
    (tmp_path / "blob.py").write_bytes(b"\x00\x01binary")
    (tmp_path / "huge.py").write_text("x = 1\n" * (MAX_BYTES // 6 + 10))
    (tmp_path / "empty").mkdir()
    p = nd("lint", *(str(tmp_path / n) for n in ("broken.py", "notes.txt", "blob.py", "huge.py", "empty", "nope.py")))
    assert p.returncode == 2
    lines = p.stderr.splitlines()
    assert len(lines) == 6, p.stderr
    assert f"{tmp_path / 'broken.py'}:1: syntax error" in lines[0]
    assert f"{tmp_path / 'notes.txt'}:1: not Python source" in lines[1]
    assert "a binary file, not Python source" in lines[2]
    assert f"larger than {MAX_BYTES >> 20} MiB, not read" in lines[3]
    assert "a folder with no *.py file" in lines[4]
    assert "nope.py: no such file or folder" in lines[5]
    assert "0 file(s) read" in p.stdout


def test_a_folder_is_every_py_in_it_and_fail_on_sets_the_exit(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_text("DataLoader(ds, batch_size=4)\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "b.py").write_text("DataLoader(ds, batch_size=4)\n")  # hidden: skipped
    (tmp_path / "readme.txt").write_text("not read")
    p = nd("lint", str(tmp_path))
    assert (p.returncode, p.stderr) == (1, "")
    assert "1 file(s) read, 1 finding(s), 1 at or above warning" in p.stdout
    assert f"{tmp_path / 'sub' / 'a.py'}:1:1: warning [drop-last]" in p.stdout
    assert nd("lint", str(tmp_path), "--fail-on", "error").returncode == 0
    j = json.loads(nd("lint", str(tmp_path), "--format", "json").stdout)
    assert j["files"] == 1 and j["failing"] == 1
    assert [(f["line"], f["rule"], f["severity"]) for f in j["findings"]] == [(1, "drop-last", "warning")]
    assert set(SEVERITIES) == {"info", "warning", "error"}


def test_lint_never_runs_the_script(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "s.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\nimport os\nos._exit(7)\n")
    p = nd("lint", str(script))
    assert p.returncode == 0 and not marker.exists()


# ------------------------------------------------------------------ after a run: summary and advise


def test_advise_says_whether_lint_finds_the_recorded_value_read_at_its_line(tmp_path: Path) -> None:
    """A recorded XLA CPU run with a `.item()` per step (tests/data/journals/item), its locations
    pointed at a script of ours: line 70 holds the read, so lint finds it there; then at a line that
    holds none, lint says where in the file it finds value reads."""
    script = tmp_path / "train.py"
    lines = ["import torch_xla"] + ["x = 1"] * 66 + [
        "for x, y in loader:", "    loss = model(x).mean()", "    v = loss.item()", "    loss.backward()",
        "    opt.step()", "    torch_xla.sync()"]
    assert lines[69] == "    v = loss.item()"
    script.write_text("\n".join(lines) + "\n")
    run = tmp_path / "run"
    run.mkdir()
    events = (DATA / "journals" / "item" / "events.jsonl").read_text()
    (run / "events.jsonl").write_text(events.replace("/work/main/workloads/train.py", str(script)))
    p = nd("advise", str(run), "--format", "json")
    reads = [a for a in json.loads(p.stdout) if a["kind"] == "value-access"]
    assert reads[0]["location"] == f"{script}:70"
    assert reads[0]["lint"] == "lint finds it at this line ([item], warning)"
    assert reads[0]["message"].endswith("(lint: finds it at this line ([item], warning))")
    md = nd("summary", str(run), "--format", "md").stdout
    assert "(lint: finds it at this line ([item], warning))" in md
    lines[69] = "    v = 0"
    lines.insert(72, "    print(loss.item())")
    script.write_text("\n".join(lines) + "\n")
    reads = [a for a in json.loads(nd("advise", str(run), "--format", "json").stdout) if a["kind"] == "value-access"]
    assert reads[0]["lint"] == "lint finds nothing at this line; in this file it finds value reads at line 73"
    script.unlink()
    reads = [a for a in json.loads(nd("advise", str(run), "--format", "json").stdout) if a["kind"] == "value-access"]
    assert reads[0]["lint"] == f"lint could not check it: {script}: no such file or folder"


# ------------------------------------------------------------------ TorchNeuron (issue 44 item 7)

TORCHNEURON = """\
import torch
import torch_neuronx
import torch_xla.core.xla_model as xm
model = M().to("neuron")
fast = torch.compile(model, backend="neuron", mode="reduce-overhead")
slow = torch.compile(model, backend="neuron", dynamic=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, n) in enumerate(loader):
    x = x[:, :n.max()]
    loss = model(x).mean()
    loss.backward()
    opt.step()
    xm.mark_step()
"""


def test_each_torchneuron_pattern_is_found_with_its_fix() -> None:
    got = {(f.line, f.rule): f for f in lint_source(TORCHNEURON)}
    assert set(got) == {(5, "mode-neuron"), (6, "dynamic-neuron"), (9, "per-batch-slice"), (13, "mark-step-neuron")}
    assert "only 'default' applies" in got[(5, "mode-neuron")].fix
    assert "a new NEFF for every op" in got[(9, "per-batch-slice")].message


def test_the_same_calls_on_the_xla_path_are_not_torchneuron_findings() -> None:
    """torch-neuronx 2.9's XLA path imports torch_neuronx too: an XLA device there keeps mark_step."""
    xla = TORCHNEURON.replace('M().to("neuron")', "M().to(xm.xla_device())")
    rules = {f.rule for f in lint_source(xla)}
    assert "mark-step-neuron" not in rules and "per-batch-slice" in rules
    assert all("NEFF" not in f.message for f in lint_source(xla))


def test_a_clean_torchneuron_script_gives_no_finding() -> None:
    assert lint_paths([str(LINT / "corpus" / "torchneuron_clean.py")]).findings == []
