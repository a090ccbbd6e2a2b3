"""The patterns, found in one file's AST.

Where the training step is: a loop whose body calls ``.backward()`` or an optimizer's ``step`` (or
a function that does, directly) and holds no such inner loop (an epoch loop is not a step); the
functions it calls by name (``f(...)``, ``self.f(...)``, an alias ``step_fn = torch.compile(f)``)
run every step too. A function given to ``xm.add_step_closure`` runs after the step's graph and is
left alone. Under ``if step % N ...`` a finding is "every N steps", one severity lower.

Which names hold tensors: what ``torch.*`` / ``F.*`` calls, a model or criterion call, tensor
methods, arithmetic on tensors and the batches of a loader give, and names that say so by
convention (``loss``, ``*_loss``, ``logits``, ``outputs``, ``preds``) when a call gives them. A name
also given ``.item()``, ``float()`` ... is a host value. Precision is worth more than recall here:
an unknown value is not a tensor.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass

from neurondesk.lint import backends as B
from neurondesk.lint.structure import (
    _DATA_DEPENDENT,
    FileStructure,
    Guard,
    _chain,
    _const,
    _func_name,
    _kw,
    _Scope,
)

SEVERITIES = ("info", "warning", "error")

# rule -> (severity when it runs every step, what to do)
RULES: dict[str, tuple[str, str]] = {
    "item": ("warning", "keep the loss on the device and read it after the step's sync, every N steps, or in "
                        "xm.add_step_closure(lambda: ...)"),
    "host-copy": ("warning", "copy to the host after the step's sync (in xm.add_step_closure or every N steps)"),
    "tensor-cast": ("warning", "float()/int()/bool() of a tensor waits for the device: read it every N steps, "
                               "after the sync"),
    "print-tensor": ("warning", "print a value read after the sync (every N steps or in xm.add_step_closure)"),
    "fstring-tensor": ("warning", "formatting a tensor reads it: format loss.item() every N steps, after the sync"),
    "tensor-branch": ("warning", "an `if`/`while` on a tensor reads it on the host mid-step: use torch.where, or "
                                 "check it every N steps after the sync"),
    "per-batch-slice": ("warning", "slice to a fixed length (pad every batch to max_length, or to a few bucket "
                                   "sizes): each new length compiles a new graph"),
    "pad-sequence": ("warning", "pad_sequence pads to the longest in each batch: pad to a fixed max_length "
                                "(or a few bucket lengths) so every batch has one shape"),
    "padding-longest": ("warning", "padding to the longest in the batch gives a new shape per batch: "
                                   "padding='max_length' with max_length=N"),
    "drop-last": ("warning", "DataLoader(..., drop_last=True): the last, shorter batch compiles a graph of its own"),
    "no-sync": ("error", "cut the graph once per step: torch_xla.sync() (xm.mark_step()) after optimizer.step(), "
                         "or iterate an MpDeviceLoader"),
    "dynamic-neuron": ("error", "the neuron backend refuses dynamic=True: pad to fixed shapes and drop dynamic=True"),
    # TorchNeuron (torch-neuronx 2.13+, the native neuron device; issue 44 item 7): "torch.compile backend
    # reference" (torch/compile/reference-torch-compile, 2026-10-14: Neuron 2.33): only mode 'default' applies
    "mode-neuron": ("warning", "drop mode=: on backend='neuron' only 'default' applies (the others log a warning and "
                               "fall back to default, no effect)"),
    "mark-step-neuron": ("warning", "remove xm.mark_step() / torch_xla.sync() (and the torch_xla import): the native "
                                    "neuron device runs each op as it comes, there is no lazy graph to cut"),
    "append-tensor": ("warning", "append loss.item() (a float), or loss.detach() to keep it on the device: a list of "
                                 "tensors that require grad keeps every step's autograd graph, and memory creeps"),
    "data-dependent": ("warning", "its output shape depends on the data (a recompile per new shape): use a fixed-"
                                  "shape form (torch.where(mask, x, 0), masked sums, a mask multiplied in)"),
}

_LOWER = {"error": "warning", "warning": "info", "info": "info"}
# rules about a shape that varies from step to step: on TorchNeuron's eager mode every op of the step
# compiles a new NEFF for a new shape (each NEFF cached by op and shapes)
_SHAPE_RULES = ("per-batch-slice", "pad-sequence", "padding-longest", "drop-last", "data-dependent")
_EAGER_NEFFS = " (TorchNeuron eager: each new shape compiles a new NEFF for every op of the step)"


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    col: int
    rule: str
    severity: str
    message: str
    fix: str

    def as_dict(self) -> dict:
        return asdict(self)


class _Linter(FileStructure):
    """The rules, over the file's structure (structure.py)."""

    def __init__(self, tree: ast.Module, path: str, text: str = "") -> None:
        super().__init__(tree, path, text)
        self.found: dict[tuple[int, str], Finding] = {}

    def run(self) -> list[Finding]:
        self.backend = B.file_backend(self.tree)
        self.torchneuron = self.backend == B.NEURON
        self.compiled = B.compiled_functions(self.tree, self.funcs, self.callees)
        step_loops, freq = self.step_regions()
        for lp in step_loops:
            if isinstance(lp, ast.While):  # its test runs every step too
                self._test(lp.test, self.scope_of(lp.test), None, lp)
                self._visit(lp.test, None)
            for stmt in lp.body:
                self._visit(stmt, None)
        for name, f in freq.items():
            for d in self.funcs[name]:
                for stmt in d.body:
                    self._visit(stmt, f)
        self._file_rules(step_loops)
        return sorted(self.found.values(), key=lambda x: (x.line, x.col, x.rule))

    def backend_at(self, node: ast.AST) -> str:
        """The backend a value read at ``node`` pays on: torch.compile inside a compiled function, else the
        file's (backends.py)."""
        return B.COMPILED if self.function_of(node) in self.compiled else self.backend

    def cost(self, node: ast.AST) -> str:
        return B.COST[self.backend_at(node)]

    def add(self, node: ast.AST, rule: str, guard: Guard | None, message: str) -> None:
        severity, fix = RULES[rule]
        fix = B.fix_for(rule, self.backend_at(node), fix, once=guard is not None and guard.once)
        if rule in _SHAPE_RULES and self.torchneuron:
            message += _EAGER_NEFFS
        if rule == "no-sync":
            pass
        elif guard is not None and guard.once:  # `if it == 0:` runs on one step: not a cost every step
            severity = "info"
            message = f"{message}, only when `{guard.text}` (not every step)"
        elif guard is not None:
            severity = _LOWER[severity]
            message = f"{message}, every {guard.text if guard.text.isdigit() else '`' + guard.text + '`'} steps"
        else:
            message = f"{message}, every step"
        key = (node.lineno, rule)
        if key not in self.found:
            self.found[key] = Finding(self.path, node.lineno, node.col_offset + 1, rule, severity, message, fix)

    def _visit(self, node: ast.AST, guard: Guard | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return
        sc = self.scope_of(node)
        if isinstance(node, ast.If):
            self._test(node.test, sc, guard, node)
            self._visit(node.test, guard)
            g = self.guard_of(node.test, guard)
            for s in node.body:
                self._visit(s, g)
            for s in node.orelse:
                self._visit(s, guard)
            return
        if isinstance(node, (ast.While, ast.IfExp, ast.Assert)):
            self._test(node.test, sc, guard, node)
        if isinstance(node, ast.Call):
            if _func_name(node) == "add_step_closure":
                return
            self._call(node, sc, guard)
        elif isinstance(node, ast.FormattedValue):
            v = node.value
            if sc.is_tensor(v) and not (isinstance(v, ast.Call) and _func_name(v) in ("item", "tolist")):
                self.add(node.value, "fstring-tensor", guard, f"`{self.src(v)}` formatted as text reads the "
                         "tensor on the host")
        elif isinstance(node, ast.Subscript):
            self._subscript(node, sc, guard)
        for c in ast.iter_child_nodes(node):
            self._visit(c, guard)

    def _test(self, test: ast.expr, sc: _Scope, guard: Guard | None, node: ast.AST) -> None:
        if sc.is_tensor(test):
            self.add(test, "tensor-branch", guard, f"`{type(node).__name__.lower()} {self.src(test)}` decides on "
                     f"the host from a tensor ({self.cost(test)})")

    def _call(self, call: ast.Call, sc: _Scope, guard: Guard | None) -> None:
        f = call.func
        name = _func_name(call)
        if isinstance(f, ast.Attribute):
            if f.attr == "item" and not call.args:
                self.add(call, "item", guard, f"`{self.src(call)}` copies a device value to the host "
                         f"mid-step ({self.cost(call)})")
            elif not call.args and (f.attr == "numpy" or (f.attr == "cpu" and sc.is_tensor(f.value))):
                self.add(call, "host-copy", guard, f"`{self.src(call)}` copies a tensor to the host mid-step")
            elif f.attr == "to" and call.args and _const(call.args[0], "cpu") and sc.is_tensor(f.value):
                self.add(call, "host-copy", guard, f"`{self.src(call)}` copies a tensor to the host mid-step")
            elif f.attr == "tolist" and sc.is_tensor(f.value):
                self.add(call, "host-copy", guard, f"`{self.src(call)}` copies a tensor to the host mid-step")
        if (isinstance(f, ast.Attribute) and f.attr == "append" and len(call.args) == 1 and not call.keywords
                and self._keeps_graph(call.args[0], sc, call)):
            self.add(call, "append-tensor", guard, f"`{self.src(call)}` keeps a tensor, and the autograd graph "
                     "behind it")
        if isinstance(f, ast.Name) and f.id in ("float", "int", "bool") and len(call.args) == 1 and sc.is_tensor(
                call.args[0]):
            self.add(call, "tensor-cast", guard, f"`{self.src(call)}` reads the tensor on the host")
        if isinstance(f, ast.Name) and f.id == "print":
            for a in call.args:
                if sc.is_tensor(a):
                    self.add(call, "print-tensor", guard, f"`print({self.src(a)})` reads the tensor on the host")
                    break
        if isinstance(f, ast.Name) and f.id in ("str", "repr") and len(call.args) == 1 and sc.is_tensor(call.args[0]):
            self.add(call, "fstring-tensor", guard, f"`{self.src(call)}` formats the tensor, reading it")
        if name in _DATA_DEPENDENT or (name == "where" and _chain(f)[:1] == ["torch"] and len(call.args) == 1
                                       and not call.keywords):
            if name not in ("unique", "unique_consecutive") or _chain(f)[:1] == ["torch"] or sc.is_tensor(
                    f.value if isinstance(f, ast.Attribute) else None):
                self.add(call, "data-dependent", guard, f"`{self.src(call.func)}()` has a data-dependent "
                         "output shape")

    def _keeps_graph(self, arg: ast.expr, sc: _Scope, at: ast.AST) -> bool:
        """A tensor that may require grad: not detached (``.detach()``, ``.data``), not read to the host,
        not made under ``torch.no_grad()`` / ``inference_mode()`` around ``at``."""
        if not sc.is_tensor(arg):
            return False
        for n in ast.walk(arg):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("detach", "detach_"):
                return False
            if isinstance(n, ast.Attribute) and n.attr == "data":
                return False
        node = self.parent.get(id(at))
        while node is not None:
            if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                    _func_name(i.context_expr) in ("no_grad", "inference_mode") for i in node.items
                    if isinstance(i.context_expr, ast.Call)):
                return False
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    (_func_name(d) if isinstance(d, ast.Call) else _chain(d)[-1:] and _chain(d)[-1])
                    in ("no_grad", "inference_mode") for d in node.decorator_list):
                return False
            node = self.parent.get(id(node))
        return True

    def _subscript(self, node: ast.Subscript, sc: _Scope, guard: Guard | None) -> None:
        sl = node.slice
        parts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        for p in parts:
            if isinstance(p, ast.Slice):
                for bound in (p.lower, p.upper):
                    if bound is not None and not isinstance(bound, ast.Constant) and sc._per_batch(bound):
                        self.add(node, "per-batch-slice", guard, f"`{self.src(node)}` cuts to a length that "
                                 "changes per batch (a new shape, a new graph)")
                        return
            elif isinstance(p, ast.Compare) and sc.is_tensor(p) and sc.is_tensor(node.value):
                self.add(node, "data-dependent", guard, f"`{self.src(node)}`: boolean-mask indexing has a "
                         "data-dependent output shape")
                return
            elif isinstance(p, ast.Name) and sc.is_tensor(node.value) and self._mask_name(p.id, node):
                self.add(node, "data-dependent", guard, f"`{self.src(node)}`: boolean-mask indexing has a "
                         "data-dependent output shape")
                return

    # ------------------------------------------------------------ file-wide rules

    def _file_rules(self, step_loops: list[ast.AST]) -> None:
        uses_xla = cut = False
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Import) and any(a.name.split(".")[0] == "torch_xla" for a in n.names):
                uses_xla = True
            elif isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "torch_xla":
                uses_xla = True
                if any(a.name in ("MpDeviceLoader", "ParallelLoader") for a in n.names):
                    cut = True
            elif isinstance(n, ast.Call):
                ch = _chain(n.func)
                name = _func_name(n)
                if name == "xla_device":
                    uses_xla = True
                if name == "mark_step" or (name in ("sync", "compile", "step") and "torch_xla" in ch[:-1]):
                    cut = True
                if name == "sync" and ch[:-1] == ["xm"]:
                    cut = True
                if name == "optimizer_step" and _const(_kw(n, "barrier"), True):
                    cut = True
                if name in ("MpDeviceLoader", "ParallelLoader"):
                    cut = True
                self._call_anywhere(n)
            elif isinstance(n, ast.Attribute) and n.attr in ("MpDeviceLoader", "ParallelLoader"):
                cut = True
        if uses_xla and not cut:
            for lp in step_loops:
                self.add(lp, "no-sync", None, "a training loop on an XLA device with no torch_xla.sync() / "
                         "xm.mark_step() / MpDeviceLoader / torch_xla.compile anywhere in the file: the lazy graph "
                         "grows and compiles anew (the recompile storm)")

    def _call_anywhere(self, n: ast.Call) -> None:
        name = _func_name(n)
        ch = _chain(n.func)

        def add(rule: str, message: str) -> None:
            severity, fix = RULES[rule]
            if rule in _SHAPE_RULES and self.torchneuron:
                message += _EAGER_NEFFS
            key = (n.lineno, rule)
            self.found.setdefault(key, Finding(self.path, n.lineno, n.col_offset + 1, rule, severity, message, fix))

        if ch == ["torch", "compile"] or (name == "compile" and ch[:1] == ["torch"]):
            backend = _kw(n, "backend")
            if (isinstance(backend, ast.Constant) and isinstance(backend.value, str)
                    and backend.value.startswith("neuron") and _const(_kw(n, "dynamic"), True)):
                add("dynamic-neuron", "torch.compile(..., backend='neuron', dynamic=True): the neuron backend "
                    "refuses dynamic shapes")
            mode = _kw(n, "mode")
            if (isinstance(backend, ast.Constant) and isinstance(backend.value, str)
                    and backend.value.startswith("neuron") and mode is not None
                    and not _const(mode, None) and not _const(mode, "default")):
                add("mode-neuron", f"torch.compile(..., backend='neuron', mode={self.src(mode)}): TorchNeuron ignores "
                    "every mode but 'default'")
        if self.torchneuron and (name == "mark_step" or (name == "sync" and ch[:-1] in (["torch_xla"], ["xm"]))):
            add("mark-step-neuron", f"{'.'.join(ch)}() in a TorchNeuron script (the native neuron device): a call "
                "left from the XLA path")
        if name == "DataLoader":
            if any(k.arg is None for k in n.keywords):
                return  # **kwargs: cannot tell
            bs = _kw(n, "batch_size")
            if _const(bs, None) and bs is not None or _kw(n, "batch_sampler") is not None:
                return
            if not _const(_kw(n, "drop_last"), True):
                add("drop-last", "DataLoader without drop_last=True: the last batch is shorter unless the dataset "
                    "size is a multiple of the batch size (one more compile)")
        if name == "pad_sequence":
            add("pad-sequence", "pad_sequence pads each batch to its own longest sequence (a new shape per batch)")
        padding = _kw(n, "padding")
        if padding is not None and (_const(padding, True) or _const(padding, "longest")):
            add("padding-longest", f"padding={self.src(padding)} pads each batch to its longest sequence "
                "(a new shape per batch)")
        if name == "DataCollatorWithPadding" and not (_const(padding, "max_length")):
            add("padding-longest", "DataCollatorWithPadding pads each batch to its longest sequence by default "
                "(a new shape per batch)")


def lint_source(text: str, path: str = "<string>") -> list[Finding]:
    """The findings in one script's source; SyntaxError when it does not parse."""
    tree = ast.parse(text, filename=path)
    return _Linter(tree, path, text).run()
