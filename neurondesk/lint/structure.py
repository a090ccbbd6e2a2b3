"""The shape of a training script as lint reads it: which loops train, which functions run every
step (or every N steps), what each name in a scope is (a tensor, a host value, a loader). Reads
source only (ast); the rules that turn this into findings are in rules.py."""

from __future__ import annotations

import ast
import re

from neurondesk.lint.guards import Guard, guard_of, guard_rank

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
                if isinstance(value, ast.Call) and _chain(value.func)[:3] != ["torch", "nn", "functional"] and (
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


class FileStructure:
    """One file's parents, functions, aliases and scopes, and where its training steps are."""

    def __init__(self, tree: ast.Module, path: str, text: str = "") -> None:
        self.tree, self.path, self.text = tree, path, text
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
        self.counters: set[str] = set()  # loop counters: range / enumerate targets, names stepped with +=
        for n in ast.walk(tree):
            if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.iter, ast.Call):
                t = n.target
                if _func_name(n.iter) == "enumerate" and isinstance(t, ast.Tuple) and t.elts:
                    t = t.elts[0]
                if _func_name(n.iter) in ("range", "enumerate") and isinstance(t, ast.Name):
                    self.counters.add(t.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and isinstance(n.target, ast.Name):
                self.counters.add(n.target.id)

    # ------------------------------------------------------------ structure

    def guard_of(self, test: ast.expr, outer: Guard | None) -> Guard | None:
        """The guard the body of `if test:` runs under, inside ``outer``'s (guards.py)."""
        return guard_of(test, outer, self.counters)

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

    def function_of(self, node: ast.AST) -> str | None:
        """The name of the function ``node`` is in (None: the module)."""
        p = self.parent.get(id(node))
        while p is not None and not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)):
            p = self.parent.get(id(p))
        return p.name if p is not None else None

    def callees(self, fn: ast.AST) -> set[str]:
        """The functions of this file ``fn`` calls by name."""
        return {c for n in _walk_local(fn) if isinstance(n, ast.Call) and (c := self._callee(n)) is not None}

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

    def step_regions(self) -> tuple[list[ast.AST], dict[str, Guard | None]]:
        """The loops that train (innermost) and how often each function they call runs: None =
        every step, else its Guard (every N steps, or once)."""
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
        # how often each function runs: None = every step, else every N steps or once
        freq: dict[str, Guard | None] = dict.fromkeys(step_funcs - self.closures)
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
                        if name not in freq or guard_rank(guard) < guard_rank(freq[name]):
                            freq[name] = guard
                            changed = True
            if not changed:
                break
        return step_loops, freq

    def _calls(self, node: ast.AST, guard: Guard | None):
        """(call, guard) for each call under `node`, the guard its `if`s give (guard_of)."""
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return
        if isinstance(node, ast.If):
            yield from self._calls(node.test, guard)
            g = self.guard_of(node.test, guard)
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
