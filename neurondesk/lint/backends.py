"""Which backend a script trains on, and what a value read mid-step costs there, in that backend's
terms (issue 50 item 6): on torch_xla it cuts the lazy graph and waits for it (``xm.add_step_closure``
is the tool); inside a ``torch.compile``d function it is a graph break; on TorchNeuron's native device
(eager: each op runs as it comes) and on any other eager device it is a host sync, the host waiting
for the device to finish the ops queued so far. ``xm`` advice is given to torch_xla scripts only."""

from __future__ import annotations

import ast

from neurondesk.lint.structure import _chain

XLA, NEURON, EAGER, COMPILED = "torch_xla", "TorchNeuron eager", "eager", "torch.compile"

# what one read costs, said in the finding's message
COST = {
    XLA: "a graph break and a sync",
    COMPILED: "a graph break in the compiled function, and a sync",
    NEURON: "a host sync: the host waits for the Neuron device to finish the ops queued so far",
    EAGER: "a host sync: the host waits for the device to finish the ops queued so far",
}

# the fix of each value-read rule where the script is not on torch_xla ({device}: whose device waits)
_EAGER_FIX = {
    "item": "keep the loss on the device (loss.detach(), summed there) and call .item() every N steps, at the "
            "log line: each read waits for {device}",
    "host-copy": "copy to the host every N steps, not every step: each copy waits for {device}",
    "tensor-cast": "float()/int()/bool() of a tensor waits for {device}: read it every N steps",
    "print-tensor": "print loss.item() every N steps (at the log line), not the tensor every step: each print "
                    "waits for {device}",
    "fstring-tensor": "format loss.item() every N steps: formatting a tensor waits for {device}",
    "tensor-branch": "an `if`/`while` on a tensor waits for {device} mid-step: use torch.where, or check it every "
                     "N steps",
}
_COMPILED_FIX = {
    "tensor-branch": "decide with torch.where (or torch.cond) inside the compiled function, or return the tensor "
                     "and check it outside every N steps: an `if` on a tensor splits the graph",
}
_COMPILED_DEFAULT = ("return the tensor from the compiled function and read it after the call, every N steps: "
                     "each read inside splits the compiled graph in two (a graph break)")
VALUE_RULES = frozenset(_EAGER_FIX)


def fix_for(rule: str, backend: str, xla_fix: str, once: bool = False) -> str:
    """The fix of a value-read rule on ``backend``; ``xla_fix`` (rules.RULES's, torch_xla's words) on torch_xla
    and for every other rule. ``once``: the read runs on one step only (`if it == 0:`)."""
    if once and rule in VALUE_RULES:
        if backend == XLA:
            return ("one read, on one step: on torch_xla it still cuts that step's graph (one more compile); read "
                    "it after the step's sync to save that compile")
        return "one read, on one step: one wait for the device, nothing to change"
    if rule not in VALUE_RULES or backend == XLA:
        return xla_fix
    if backend == COMPILED:
        return _COMPILED_FIX.get(rule, _COMPILED_DEFAULT)
    return _EAGER_FIX[rule].format(device="the Neuron device" if backend == NEURON else "the device")


def _imports(tree: ast.AST, module: str) -> bool:
    for n in ast.walk(tree):
        if isinstance(n, ast.Import) and any(a.name.split(".")[0] == module for a in n.names):
            return True
        if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == module:
            return True
    return False


def _xla_device(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and (_chain(n.func)[-1:] == ["xla_device"] or _chain(n.func) == ["torch_xla",
               "device"]) for n in ast.walk(tree))


def torchneuron(tree: ast.AST) -> bool:
    """A TorchNeuron script: it names the native device ("neuron", "neuron:0"), or imports torch_neuronx
    and never asks for an XLA device (torch-neuronx 2.9's XLA path imports it too)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and _chain(n.func)[-1:] in (["to"], ["device"]):
            for a in (*n.args, *(k.value for k in n.keywords)):
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.split(":")[0] == "neuron":
                    return True
    return _imports(tree, "torch_neuronx") and not _xla_device(tree)


def file_backend(tree: ast.AST) -> str:
    """NEURON, XLA (torch_xla imported or an XLA device asked for), else EAGER (CUDA, CPU, MPS ...)."""
    if torchneuron(tree):
        return NEURON
    if _imports(tree, "torch_xla") or _xla_device(tree):
        return XLA
    return EAGER


def _is_torch_compile(node: ast.AST) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return _chain(target) == ["torch", "compile"]


def compiled_functions(tree: ast.AST, funcs: dict[str, list[ast.AST]], callees) -> set[str]:
    """The functions of this file that run inside torch.compile: given to it (``torch.compile(f)``), decorated
    with it (``@torch.compile``, ``@torch.compile(...)``), and the functions they call (``callees(fn)``: the
    names one function calls)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and _is_torch_compile(n) and n.args and isinstance(n.args[0], ast.Name):
            if n.args[0].id in funcs:
                out.add(n.args[0].id)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_is_torch_compile(d)
                                                                          for d in n.decorator_list):
            out.add(n.name)
    todo = list(out)
    while todo:
        for d in funcs.get(todo.pop(), []):
            for name in callees(d) - out:
                out.add(name)
                todo.append(name)
    return out
