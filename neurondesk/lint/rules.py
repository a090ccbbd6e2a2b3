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
import re
from dataclasses import asdict, dataclass

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
    "data-dependent": ("warning", "its output shape depends on the data (a recompile per new shape): use a fixed-"
                                  "shape form (torch.where(mask, x, 0), masked sums, a mask multiplied in)"),
}

_LOWER = {"error": "warning", "warning": "info", "info": "info"}


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


_CONVENTION = re.compile(r"^(loss|.+_loss|loss_.+|logits|outputs|output|preds|predictions|y_hat|yhat)$")
_MODEL_NAMES = re.compile(r"^(model|net|module|criterion|loss_fn|loss_func|lossfn|compiled|compiled_model|"
                          r".+_model|model_.+|ddp_model)$")
_LOADER = re.compile(r"(loader|batches|dataloader)", re.IGNORECASE)
_HOST_METHODS = {"item", "tolist", "numpy", "size", "dim", "numel", "ndimension", "element_size", "data_ptr",
                 "is_contiguous", "stride", "nelement", "get_device", "cpu", "type", "__len__", "is_floating_point"}
_HOST_ATTRS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "layout", "names"}
_NOT_TENSOR_TORCH = {"device", "Generator", "manual_seed", "no_grad", "enable_grad", "inference_mode", "autocast",
                     "compile", "load", "save", "is_tensor", "set_grad_enabled", "get_default_dtype", "Size",
                     "dtype", "is_grad_enabled", "set_default_dtype", "use_deterministic_algorithms", "numel",
                     "is_floating_point", "get_num_threads", "set_num_threads", "set_printoptions", "jit", "typename"}
_NOT_TENSOR_MODULES = {"cuda", "optim", "utils", "backends", "distributed", "nn", "jit", "onnx", "profiler", "hub",
                       "multiprocessing", "testing", "library", "export", "fx", "mps", "xpu", "amp", "cpu"}
_HOST_FUNCS = {"float", "int", "bool", "len", "round", "str", "repr", "sum", "max", "min", "abs", "list", "tuple",
               "dict", "set", "range", "enumerate", "zip", "sorted", "isinstance", "getattr", "hasattr", "format"}
_DATA_DEPENDENT = {"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere", "nonzero_static_fallback"}


def _chain(node: ast.AST) -> list[str]:
    """torch.nn.functional.relu -> ['torch', 'nn', 'functional', 'relu']; [] when not a plain chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return []


def _func_name(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _const(node: ast.AST | None, value) -> bool:
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


def _walk_local(node: ast.AST):
    """ast.walk, not descending into nested functions, lambdas or classes."""
    todo = list(ast.iter_child_nodes(node))
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(n))


def _is_step_call(call: ast.Call) -> bool:
    f = call.func
    if not isinstance(f, ast.Attribute):
        return isinstance(f, ast.Name) and f.id == "optimizer_step"
    if f.attr == "backward" or f.attr == "optimizer_step":
        return True
    if f.attr == "step":
        ch = _chain(f.value)
        return bool(ch) and re.search(r"(opt|optim|optimizer|scaler)$", ch[-1], re.IGNORECASE) is not None
    return False


def _mod_guard(test: ast.expr) -> str | None:
    """'N' of the first `x % N` in an if-test (a step-frequency guard), else None."""
    for n in ast.walk(test):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and not isinstance(n.left, (ast.Constant, ast.JoinedStr)):
            return " ".join(ast.unparse(n.right).split())
    return None


class _Scope:
    """Which names of one function (or the module) hold tensors, and which hold per-batch lengths."""

    def __init__(self, node: ast.AST, params: list[str], aliases_models: set[str]) -> None:
        self.tensors: set[str] = {p for p in params if _CONVENTION.match(p)}
        self.models: set[str] = set(aliases_models)
        self.lengths: set[str] = set()
        host: set[str] = set()
        assigns: list[tuple[list[str], ast.expr | None, ast.AST]] = []
        for n in sorted(_walk_local(node), key=lambda x: (getattr(x, "lineno", 0), getattr(x, "col_offset", 0))):
            if isinstance(n, ast.Assign):
                assigns.append(([t for tgt in n.targets for t in self._names(tgt)], n.value, n))
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                assigns.append((self._names(n.target), n.value, n))
            elif isinstance(n, (ast.For, ast.AsyncFor)) and self._is_loader_iter(n.iter):
                tgt = n.target
                if self._enumerate(n.iter) and isinstance(tgt, ast.Tuple) and len(tgt.elts) == 2:
                    tgt = tgt.elts[1]
                self.tensors.update(self._names(tgt))
        for _ in range(2):  # a second pass: names defined from names defined later in the text
            for names, value, n in assigns:
                if value is None:
                    continue
                if isinstance(value, ast.Call) and (
                    _chain(value.func)[:2] in (["torch", "compile"],) or _chain(value.func)[:2] == ["torch", "nn"]
                    or _chain(value.func)[:1] == ["nn"]
                ):
                    self.models.update(names)
                    continue
                if self._host_value(value):
                    host.update(names)
                elif self.is_tensor(value) or (self._plain_call(value) and any(_CONVENTION.match(x) for x in names)):
                    self.tensors.update(x for x in names if isinstance(n, ast.AugAssign) or x not in host
                                        or _CONVENTION.match(x))
                if self._per_batch(value) and not isinstance(n, ast.AugAssign):
                    self.lengths.update(names)
        self.tensors -= host

    @staticmethod
    def _names(t: ast.AST) -> list[str]:
        if isinstance(t, ast.Name):
            return [t.id]
        if isinstance(t, (ast.Tuple, ast.List)):
            return [x for e in t.elts for x in _Scope._names(e)]
        if isinstance(t, ast.Starred):
            return _Scope._names(t.value)
        return []

    @staticmethod
    def _enumerate(it: ast.expr) -> bool:
        return isinstance(it, ast.Call) and _func_name(it) == "enumerate"

    def _is_loader_iter(self, it: ast.expr) -> bool:
        if self._enumerate(it) and it.args:
            return self._is_loader_iter(it.args[0])
        if isinstance(it, ast.Call):
            name = _func_name(it) or ""
            if name in ("tqdm", "iter") and it.args:
                return self._is_loader_iter(it.args[0])
            return name in ("DataLoader", "MpDeviceLoader", "ParallelLoader") or bool(_LOADER.search(name))
        ch = _chain(it)
        return bool(ch) and bool(_LOADER.search(ch[-1]))

    def _plain_call(self, e: ast.expr) -> bool:
        """f(...) or self.f(...) (a model, a criterion, a compute_loss); not a method of some other object."""
        if not isinstance(e, ast.Call) or self._host_call(e):
            return False
        f = e.func
        return isinstance(f, ast.Name) or (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                                           and f.value.id in ("self", "cls"))

    @staticmethod
    def _host_call(e: ast.expr) -> bool:
        return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in _HOST_FUNCS

    def _host_value(self, e: ast.expr) -> bool:
        """A value on the host: .item(), float(t), a constant, len() ..."""
        if isinstance(e, ast.Constant | ast.JoinedStr | ast.List | ast.Dict | ast.Tuple | ast.ListComp | ast.DictComp):
            return isinstance(e, ast.Constant | ast.JoinedStr)
        if self._host_call(e):
            return True
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("item", "tolist"):
            return True
        if isinstance(e, ast.BinOp):
            return self._host_value(e.left) and self._host_value(e.right)
        return False

    def _per_batch(self, e: ast.expr) -> bool:
        """A length that changes from batch to batch: lengths.max(), mask.sum(), max(lens), random.randint()."""
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and n.id in self.lengths:
                return True
            if isinstance(n, ast.Call):
                ch = _chain(n.func)
                if isinstance(n.func, ast.Attribute) and n.func.attr in ("max", "sum", "item") and not (
                        ch and ch[0] in ("args", "self", "config", "cfg", "np", "math", "torch")):
                    return True
                if isinstance(n.func, ast.Name) and n.func.id == "max" and n.args and not all(
                        isinstance(a, ast.Constant) for a in n.args):
                    return True
                if ch[:1] == ["random"] or ch[:2] == ["np", "random"] or ch[:2] == ["numpy", "random"]:
                    return True
        return False

    def is_tensor(self, e: ast.AST | None) -> bool:
        if e is None:
            return False
        if isinstance(e, ast.Name):
            return e.id in self.tensors
        if isinstance(e, ast.Call):
            f = e.func
            ch = _chain(f)
            if ch and ch[0] in ("torch", "F") and len(ch) >= 2:
                if ch[0] == "torch" and len(ch) >= 3 and ch[1] == "nn" and ch[2] == "functional":
                    return True
                if ch[0] == "torch" and (ch[1] in _NOT_TENSOR_MODULES or ch[-1] in _NOT_TENSOR_TORCH):
                    return False
                return ch[0] == "F" or len(ch) == 2 or ch[1] in ("linalg", "fft", "special")
            if isinstance(f, ast.Name) and (f.id in self.models or _MODEL_NAMES.match(f.id)):
                return True
            if ch[:2] == ["self", "model"] or (ch and ch[0] == "self" and len(ch) == 2 and _MODEL_NAMES.match(ch[1])):
                return True
            if isinstance(f, ast.Attribute):
                if f.attr in _HOST_METHODS:
                    return False
                if f.attr == "to" and e.args and _const(e.args[0], "cpu"):
                    return False
                return self.is_tensor(f.value)
            return False
        if isinstance(e, ast.Attribute):
            if e.attr in _HOST_ATTRS:
                return False
            if isinstance(e.value, ast.Name) and _CONVENTION.match(e.value.id) and e.value.id in self.tensors:
                return True
            return self.is_tensor(e.value) and e.attr in ("grad", "T", "data", "mT", "real", "imag", "loss", "logits")
        if isinstance(e, ast.Subscript):
            return self.is_tensor(e.value)
        if isinstance(e, ast.BinOp):
            return self.is_tensor(e.left) or self.is_tensor(e.right)
        if isinstance(e, ast.UnaryOp):
            return self.is_tensor(e.operand)
        if isinstance(e, ast.Compare):
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
                return False
            return self.is_tensor(e.left) or any(self.is_tensor(c) for c in e.comparators)
        if isinstance(e, ast.BoolOp):
            return any(self.is_tensor(v) for v in e.values)
        return False


class _Linter:
    def __init__(self, tree: ast.Module, path: str, text: str = "") -> None:
        self.tree, self.path, self.text = tree, path, text
        self.found: dict[tuple[int, str], Finding] = {}
        self.parent: dict[int, ast.AST] = {}
        for n in ast.walk(tree):
            for c in ast.iter_child_nodes(n):
                self.parent[id(c)] = n
        self.funcs: dict[str, list[ast.AST]] = {}
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.funcs.setdefault(n.name, []).append(n)
        self.aliases: dict[str, str] = {}
        self.closures: set[str] = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                v = n.value
                if isinstance(v, ast.Call) and _chain(v.func) == ["torch", "compile"] and v.args:
                    v = v.args[0]
                if isinstance(v, ast.IfExp):
                    v = v.body if isinstance(v.body, ast.Name) else v.orelse
                if isinstance(v, ast.Name) and v.id in self.funcs:
                    self.aliases[n.targets[0].id] = v.id
            if isinstance(n, ast.Call) and _func_name(n) == "add_step_closure" and n.args:
                if isinstance(n.args[0], ast.Name):
                    self.closures.add(n.args[0].id)
        self.scopes: dict[int, _Scope] = {}

    # ------------------------------------------------------------ structure

    def src(self, node: ast.AST) -> str:
        """The node's own text (one line, at most 80 characters)."""
        seg = ast.get_source_segment(self.text, node) if self.text else None
        seg = " ".join((seg or ast.unparse(node)).split())
        return seg if len(seg) <= 80 else seg[:77] + "..."

    def scope_of(self, node: ast.AST) -> _Scope:
        p = self.parent.get(id(node))
        while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
            p = self.parent.get(id(p))
        owner = p if p is not None else self.tree
        if id(owner) not in self.scopes:
            params = [a.arg for a in owner.args.args + owner.args.kwonlyargs] if p is not None else []
            models = {k for k, v in self.aliases.items()}
            self.scopes[id(owner)] = _Scope(owner, params, models)
        return self.scopes[id(owner)]

    def _callee(self, call: ast.Call) -> str | None:
        f = call.func
        name = None
        if isinstance(f, ast.Name):
            name = self.aliases.get(f.id, f.id)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
            name = f.attr
        return name if name in self.funcs and name not in self.closures else None

    def _direct_step(self, fn: ast.AST) -> bool:
        for n in _walk_local(fn):
            if isinstance(n, ast.Call) and _is_step_call(n) and not self._inside_loop(n, fn):
                return True
        return False

    def _inside_loop(self, node: ast.AST, stop: ast.AST) -> bool:
        p = self.parent.get(id(node))
        while p is not None and p is not stop:
            if isinstance(p, (ast.For, ast.AsyncFor, ast.While)):
                return True
            p = self.parent.get(id(p))
        return False

    def _trains(self, loop: ast.AST, step_funcs: set[str]) -> bool:
        for stmt in loop.body:
            for n in [stmt, *_walk_local(stmt)]:
                if isinstance(n, ast.Call) and (_is_step_call(n) or self._callee(n) in step_funcs):
                    return True
        return False

    # ------------------------------------------------------------ the pass

    def run(self) -> list[Finding]:
        step_funcs = {name for name, defs in self.funcs.items() if any(self._direct_step(d) for d in defs)}
        loops = [n for n in ast.walk(self.tree) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))]
        # a function that trains once per call is a step only when a loop of this file calls it (a test
        # function, a framework's training_step or GradScaler.step called from elsewhere is not)
        called_in_loops = {self._callee(n) for lp in loops for s in lp.body for n in [s, *_walk_local(s)]
                           if isinstance(n, ast.Call)}
        step_funcs &= called_in_loops
        training = [lp for lp in loops if self._trains(lp, step_funcs)]
        tset = {id(lp) for lp in training}
        step_loops = [lp for lp in training
                      if not any(id(n) in tset for s in lp.body for n in [s, *_walk_local(s)] if n is not lp)]
        # how often each function runs: None = every step, "N" = every N steps
        freq: dict[str, str | None] = dict.fromkeys(step_funcs - self.closures)
        for _ in range(8):
            changed = False
            regions = [(lp.body, None) for lp in step_loops]
            regions += [(d.body, f) for name, f in freq.items() for d in self.funcs[name]]
            for body, base in regions:
                for stmt in body:
                    for call, guard in self._calls(stmt, base):
                        name = self._callee(call)
                        if name is None or name in step_funcs:
                            continue
                        if name not in freq or (freq[name] is not None and guard is None):
                            freq[name] = guard
                            changed = True
            if not changed:
                break
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

    def _calls(self, node: ast.AST, guard: str | None):
        """(call, guard) for each call under `node`, the guard the innermost `if x % N` body gives."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return
        if isinstance(node, ast.If):
            yield from self._calls(node.test, guard)
            g = _mod_guard(node.test) or guard
            for s in node.body:
                yield from self._calls(s, g)
            for s in node.orelse:
                yield from self._calls(s, guard)
            return
        if isinstance(node, ast.Call):
            if _func_name(node) == "add_step_closure":
                return
            yield node, guard
        for c in ast.iter_child_nodes(node):
            yield from self._calls(c, guard)

    def add(self, node: ast.AST, rule: str, guard: str | None, message: str) -> None:
        severity, fix = RULES[rule]
        if rule == "no-sync":
            pass
        elif guard is not None:
            severity = _LOWER[severity]
            message = f"{message}, every {guard if guard.isdigit() else '`' + guard + '`'} steps"
        else:
            message = f"{message}, every step"
        key = (node.lineno, rule)
        if key not in self.found:
            self.found[key] = Finding(self.path, node.lineno, node.col_offset + 1, rule, severity, message, fix)

    def _visit(self, node: ast.AST, guard: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return
        sc = self.scope_of(node)
        if isinstance(node, ast.If):
            self._test(node.test, sc, guard, node)
            self._visit(node.test, guard)
            g = _mod_guard(node.test) or guard
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

    def _test(self, test: ast.expr, sc: _Scope, guard: str | None, node: ast.AST) -> None:
        if sc.is_tensor(test):
            self.add(test, "tensor-branch", guard, f"`{type(node).__name__.lower()} {self.src(test)}` decides on "
                     "the host from a tensor, a graph break")

    def _call(self, call: ast.Call, sc: _Scope, guard: str | None) -> None:
        f = call.func
        name = _func_name(call)
        if isinstance(f, ast.Attribute):
            if f.attr == "item" and not call.args:
                self.add(call, "item", guard, f"`{self.src(call)}` copies a device value to the host "
                         "mid-step (a graph break and a sync)")
            elif not call.args and (f.attr == "numpy" or (f.attr == "cpu" and sc.is_tensor(f.value))):
                self.add(call, "host-copy", guard, f"`{self.src(call)}` copies a tensor to the host mid-step")
            elif f.attr == "to" and call.args and _const(call.args[0], "cpu") and sc.is_tensor(f.value):
                self.add(call, "host-copy", guard, f"`{self.src(call)}` copies a tensor to the host mid-step")
            elif f.attr == "tolist" and sc.is_tensor(f.value):
                self.add(call, "host-copy", guard, f"`{self.src(call)}` copies a tensor to the host mid-step")
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

    def _subscript(self, node: ast.Subscript, sc: _Scope, guard: str | None) -> None:
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

    def _mask_name(self, name: str, at: ast.AST) -> bool:
        sc_owner = self.parent.get(id(at))
        while sc_owner is not None and not isinstance(sc_owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sc_owner = self.parent.get(id(sc_owner))
        owner = sc_owner if sc_owner is not None else self.tree
        sc = self.scope_of(at)
        for n in _walk_local(owner):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
                v = n.value
                if isinstance(v, ast.Compare) and not any(
                        isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in v.ops) and (
                        sc.is_tensor(v) or isinstance(v.left, (ast.Name, ast.Attribute, ast.Subscript))):
                    return True
        return False

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
            key = (n.lineno, rule)
            self.found.setdefault(key, Finding(self.path, n.lineno, n.col_offset + 1, rule, severity, message, fix))

        if ch == ["torch", "compile"] or (name == "compile" and ch[:1] == ["torch"]):
            backend = _kw(n, "backend")
            if (isinstance(backend, ast.Constant) and isinstance(backend.value, str)
                    and backend.value.startswith("neuron") and _const(_kw(n, "dynamic"), True)):
                add("dynamic-neuron", "torch.compile(..., backend='neuron', dynamic=True): the neuron backend "
                    "refuses dynamic shapes")
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
