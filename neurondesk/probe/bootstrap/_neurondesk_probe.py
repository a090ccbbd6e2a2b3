"""The neurondesk probe: runs inside the user's training process, with no code change.

Rules (DESIGN.md): stdlib only, imports nothing of neurondesk, never raises into user code,
never forces a device sync, and costs a few microseconds per step. On an internal error in a hook,
that hook turns itself off (the rest of the probe runs on, see "Fail open" below) and training runs on.

What it hooks, lazily, when the user's program imports the module concerned:
  torch.optim.optimizer        global optimizer-step hooks  -> step boundaries (eager, compile)
  torch.nn.modules.module      the outermost module's calls, watched from its class -> samples, tokens
  torch.utils.data.dataloader  DataLoader iterator __next__  -> data wait
  torch_xla                    torch_xla.sync (every sync) -> XLA step boundaries,
                               compiles, graph executions; Tensor value reads -> value-access
  torch_xla...parallel_loader  PerDeviceLoader.next -> data wait under MpDeviceLoader
  torch._dynamo.callback       compile start/end callbacks -> torch.compile compiles

Messages are JSON lines shaped like neurondesk events, sent over a Unix socket to the recorder,
in batches (see _FLUSH_S). When the recorder does not read and the bounded backlog overflows,
messages are dropped, never waited for; as soon as it reads again (and at exit) the probe says so:
  {"kind":"probe_dropped","t":<time.time()>,"pid":<pid>,"dropped":<messages dropped so far by this
   process>,"dropped_steps":<how many of those were step messages>,"steps":<steps ended so far>}
Step messages carry the 0-based `step` index, which counts on through drops. If the recorder is
gone (EPIPE, ECONNRESET ...), the probe stops for good: no signal, no output, no retry.

Fail open, hook by hook: whatever the user's program hands a hook (numpy batches, dicts of them,
objects with odd `shape`s or attributes that raise), the hook never raises into it. A hook that
fails anyway is turned off alone (the others run on) and says so once, in a `notice` message.
Patching is idempotent: a module reloaded (`importlib.reload`) is patched once more, never twice.
"""

from __future__ import annotations

import atexit
import json
import operator
import os
import select
import socket
import sys
import threading
import time

_PROBE_FILE = os.path.abspath(__file__)
_LIB_MARKERS = (os.sep + "torch" + os.sep, os.sep + "torch_xla" + os.sep, "site-packages", "dist-packages")
_STDLIB = os.path.dirname(os.__file__) + os.sep  # contextlib, functools ... are not the user's code
# Frameworks that run the user's loop: their frames are never the user's line, wherever they are
# installed (a source checkout is not in site-packages); the innermost one is named beside it.
_FRAMEWORKS = frozenset({"transformers", "accelerate", "lightning", "pytorch_lightning", "lightning_fabric",
                         "deepspeed", "optimum", "peft", "trl", "neuronx_distributed", "torch_neuronx"})


def _framework_of(f) -> str | None:
    name = f.f_globals.get("__name__")
    if type(name) is not str:
        return None
    top = name.partition(".")[0]
    return top if top in _FRAMEWORKS else None

# Sending. Messages are buffered and handed to the kernel in batches: when a message that a viewer
# waits for arrives (_URGENT), when the buffer is large, or once _FLUSH_S has passed since the last
# send (checked at each message, so at every step boundary, and by a small flusher thread while the
# program is quiet), and at exit. The socket never blocks the training: while the recorder does not
# read, at most _MAX_PENDING messages (or _MAX_PENDING_BYTES) wait in the buffer, plus the one batch
# the kernel took only part of; newer ones are dropped, counted, and reported in a `probe_dropped`
# message as soon as the recorder reads again (and at exit).
_MAX_PENDING = 20000
_MAX_PENDING_BYTES = 16 << 20
_FLUSH_BYTES = 64 << 10
_FLUSH_S = 0.05
_CONNECT_WAIT_S = 2.0  # at the first message, for room in the recorder's accept backlog
_EXIT_WAIT_S = 2.0  # at exit, wait at most this long for a slow recorder to take the last messages
_URGENT = frozenset({"process_attached", "device_seen", "compile", "compile_started", "notice"})
# A recorder that died must not kill the workload with SIGPIPE, even one that set SIGPIPE to SIG_DFL.
_MSG_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)

_probe: Probe | None = None


def _is_compiling() -> bool:
    """Replaced by torch.compiler.is_compiling once torch is loaded. Every hook that torch can
    call from inside a torch.compile'd region returns at once when it is True: dynamo then
    traces the hook as a no-op instead of breaking the user's graph on our code."""
    return False


def install() -> None:
    """Called by the bootstrap sitecustomize. Cheap: imports nothing heavy."""
    global _probe
    if _probe is not None:
        return
    _probe = Probe(os.environ["NEURONDESK_SOCKET"])
    sys.meta_path.insert(0, _PostImportFinder(_probe))
    if hasattr(os, "register_at_fork"):
        # A forked DataLoader worker shares our socket; it must stay silent.
        os.register_at_fork(after_in_child=_probe.disable_in_forked_child)
    atexit.register(_probe.flush_at_exit)
    _probe.chain_excepthook()


def _dims(x) -> list[int] | None:
    """The shape of a tensor-like object as a list of non-negative ints, or None for anything else
    (a string, a number, an object whose `shape` is odd or whose attributes raise). Never raises."""
    try:
        shape = getattr(x, "shape", None)
        if not isinstance(shape, tuple) or len(shape) > 64:  # torch.Size and numpy shapes are tuples
            return None
        dims = [d if type(d) is int else operator.index(d) for d in shape]  # noqa: E721
        for d in dims:
            if d < 0:
                return None
        return dims
    except Exception:  # noqa: BLE001
        return None


def _holds_ids(x) -> bool:
    """Whether a tensor-like object holds integers (token ids): a torch dtype that is not floating
    point, a numpy dtype of kind i/u. Anything else, or an error, is no."""
    try:
        dtype = x.dtype
        floating = getattr(dtype, "is_floating_point", None)
        if type(floating) is bool:
            return not floating
        kind = getattr(dtype, "kind", None)
        return type(kind) is str and kind in ("i", "u")
    except Exception:  # noqa: BLE001
        return False


class _PostImportFinder:
    """Runs a probe patch right after a watched module has executed."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.patches = {  # module -> (its patch, the hook turned off if the patch fails)
            "torch.compiler": (probe.patch_compiler, "compiler"),
            "torch.optim.optimizer": (probe.patch_optimizer, "optimizer"),
            "torch.nn.modules.module": (probe.patch_module, "forward"),
            "torch.utils.data.dataloader": (probe.patch_dataloader, "dataloader"),
            "torch_xla": (probe.patch_torch_xla, "xla-sync"),
            "torch_xla.distributed.parallel_loader": (probe.patch_parallel_loader, "parallel-loader"),
            "torch._dynamo.callback": (probe.patch_dynamo, "dynamo"),
            "torch._logging._internal": (probe.patch_torch_logging, "dynamo-logs"),
            "torch.autograd": (probe.patch_autograd, "presync"),
        }
        self.busy: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        entry = self.patches.get(name)
        if entry is None or name in self.busy or self.probe.disabled:
            return None
        patch, hook = entry
        self.busy.add(name)
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        # A reload finds the module's own spec again (importlib.util.find_spec returns the loaded
        # module's __spec__), whose loader we wrapped the first time: wrap the real one, once.
        real_exec = getattr(spec.loader.exec_module, "_neurondesk_real", spec.loader.exec_module)
        probe = self.probe

        def exec_module(module):
            real_exec(module)
            probe.guarded(patch, module, hook=hook)

        exec_module._neurondesk_real = real_exec
        spec.loader.exec_module = exec_module
        return spec


class Probe:
    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.disabled = False
        self.pid = os.getpid()
        self.off: set[str] = set()  # hooks that failed: each is off for the rest of the run, alone
        self.pid_tail = f',"pid":{self.pid}}}\n'  # the end of every preformatted step line
        # sending state, guarded by self.lock (the flusher thread and the compile watcher send too)
        self.sock: socket.socket | None = None
        self.buf: list[bytes] = []  # whole messages not yet handed to the kernel
        self.buf_bytes = 0
        self.partial: bytes | memoryview = b""  # the rest of a batch the kernel took only part of
        self.last_flush = 0.0  # perf_counter of the last attempt to send
        self.flusher_started = False
        self.steps_ended = 0  # step messages made, sent or dropped: the `steps` of probe_dropped
        self.dropped = 0  # messages dropped because the recorder did not read
        self.dropped_steps = 0  # how many of those were step messages
        self.dropped_reported = 0  # `dropped` as of the last probe_dropped message queued
        self.hello_sent = False
        self.lock = threading.Lock()  # guards the socket and the buffer only
        self.last_shapes: list | None = None  # the input shapes of the last step message, and their JSON
        self.last_shapes_json = ""
        self.train_thread = threading.main_thread().ident
        # step state
        self.step = 0
        self.step_start: float | None = None  # perf_counter at the start of the current step
        self.step_start_wall: float | None = None
        self.opt_stepped = False  # an optimizer step happened since the last boundary
        self.lead_optimizer: int | None = None
        self.has_optimizer = False  # an optimizer exists: syncs before its first step are inside step 0
        self.device_reported = False  # by the optimizer's parameters (device and precision)
        self.xla_device_reported = False  # by a sync before any optimizer (device only)
        self.is_xla = False
        self.samples = 0
        self.tokens = 0
        self.tokens_known = True
        self.shapes: list[list[int]] = []
        self.loader_samples = 0
        self.loader_tokens = 0
        self.loader_shapes: list[list[int]] = []
        self.data_wait = 0.0
        self.step_execs = 0
        self.step_compiles = 0
        self.boundary_execs = 0  # executions of the boundary sync itself
        self.top_module = None  # weakref.ref to the outermost module, once its first call is seen
        self.watched: dict = {}  # id -> weakref.ref of the watched modules (the outermost, its wrappers)
        self.in_forward = False  # a watched forward is running: modules it calls are not counted
        self.seq_first = False  # the model takes (sequence, batch) inputs
        self.backward_seen = False  # a backward ran: a training script, even without an optimizer
        self.backward_pending = False  # a backward since the last step ended
        self.autocast: str | None = None
        self.forwards_since_step = 0  # training forwards since the last step ended
        self.presync: float | None = None  # time from the step's start to its first sync point
        self.train_dims: list[int] | None = None  # the last training forward's input shape
        # evaluation: forwards under no_grad / inference_mode / module.eval() in a script with an
        # optimizer. Its time, batches and compiles are its own, never the training step's.
        self.in_eval = False
        self.grad_modes = None  # (torch.is_grad_enabled, torch.is_inference_mode_enabled), once torch is in
        self.eval_start = 0.0
        self.eval_s_in_step = 0.0  # evaluation time inside the current step, left out of its duration
        self.eval_batches = self.eval_samples = self.eval_tokens = 0
        self.eval_compiles = self.eval_execs = 0
        self.eval_wait = 0.0
        self.eval_dims: list[int] | None = None
        # XLA state
        self.xlac = None
        self.xlac_seen: bool | None = None  # torch_xla patched once already (its watcher thread runs)
        self.sync_depth = 0
        self.compiles_seen = 0  # torch_xla's UncachedCompile count as of the last sync or value read we saw
        self.sync_started: float | None = None
        self.sync_compiles_at_start = 0
        self.compile_announced = False
        self.compile_samples_seen = 0
        self.sync_time_in_loader = 0.0
        self.in_loader = False
        self.value_guard = threading.local()
        self.debug_file: str | None = None
        self.debug_offset = 0
        # dynamo state
        self.dynamo_starts: dict[str, float] = {}
        self._setup_pt_xla_debug()

    # ---------------------------------------------------------------- plumbing
    def guarded(self, fn, *args, hook: str):
        """Run a probe function for `hook`; on any error turn that hook off (alone) and say so
        once. Never raises into user code."""
        if self.disabled or hook in self.off:
            return None
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - fail open by design
            self.hook_failed(hook, exc)
            return None

    def hook_failed(self, hook: str, exc: BaseException) -> None:
        """Turn one hook off for the rest of the run and tell the recorder, once per hook."""
        if hook in self.off:
            return
        self.off.add(hook)
        try:
            why = f"{type(exc).__name__}: {exc}"
        except Exception:  # noqa: BLE001 - an exception whose str() raises
            why = type(exc).__name__
        try:
            self.send({"kind": "notice", "level": "warn", "source": "probe",
                       "message": f"probe hook {hook!r} failed in pid {self.pid} ({why[:500]}); that hook is off "
                                  f"from now on, the rest of the probe runs on and training continues"})
        except Exception:  # noqa: BLE001
            pass

    def disable_in_forked_child(self) -> None:
        self.disabled = True
        self.sock = None  # the parent's connection; never write to it from here
        self.buf, self.buf_bytes, self.partial = [], 0, b""
        self.dropped = self.dropped_reported  # nothing to report from here either
        self.lock = threading.Lock()  # the parent's may have been held by its flusher at the fork

    def send(self, msg: dict) -> None:
        """Queue one message (a dict shaped like an event). Never blocks, never raises OSError."""
        if self.disabled:
            return
        msg.setdefault("t", time.time())
        msg.setdefault("pid", self.pid)
        data = (json.dumps(msg, separators=(",", ":"), default=str) + "\n").encode()
        self._queue(data, False, msg.get("kind") in _URGENT)

    def _queue(self, data: bytes, is_step: bool, urgent: bool, now: float | None = None) -> None:
        if now is None:
            now = time.perf_counter()
        with self.lock:
            if self.sock is None:
                if self.disabled or not self._connect(now):
                    return
            full = len(self.buf) >= _MAX_PENDING or self.buf_bytes >= _MAX_PENDING_BYTES
            if full and now - self.last_flush >= _FLUSH_S:
                self._flush(now)  # the recorder may be reading again: that makes room
                full = len(self.buf) >= _MAX_PENDING or self.buf_bytes >= _MAX_PENDING_BYTES
            if is_step:
                self.steps_ended += 1  # after that flush: a drop report it queues is before this step
            if full:
                self.dropped += 1
                if is_step:
                    self.dropped_steps += 1
                return
            self.buf.append(data)
            self.buf_bytes += len(data)
            if urgent or self.buf_bytes >= _FLUSH_BYTES or now - self.last_flush >= _FLUSH_S:
                self._flush(now)

    def _connect(self, now: float) -> bool:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.setblocking(False)  # never let a slow recorder block training
                while True:
                    try:
                        s.connect(self.socket_path)
                        break
                    except (BlockingIOError, InterruptedError):
                        # Its accept backlog is full (many ranks connecting at once): wait a little
                        # for room, but not for a recorder that is stopped.
                        if time.perf_counter() - now > _CONNECT_WAIT_S:
                            raise
                        time.sleep(0.005)
            except BaseException:
                s.close()
                raise
        except OSError:
            self.disabled = True  # nobody is listening: stay out of the way
            return False
        self.sock = s
        self.last_flush = now
        if not self.hello_sent:
            self.hello_sent = True
            hello = (json.dumps(self._hello(), separators=(",", ":"), default=str) + "\n").encode()
            self.buf.append(hello)
            self.buf_bytes += len(hello)
        if not self.flusher_started:
            self.flusher_started = True
            threading.Thread(target=self._flusher, name="neurondesk-probe-flush", daemon=True).start()
        return True

    def _flush(self, now: float) -> None:
        """Hand the buffer to the kernel, as far as it takes it without blocking. Holds self.lock."""
        self.last_flush = now
        sock = self.sock
        if sock is None:
            return
        try:
            while True:
                if not self.partial:
                    if self.dropped != self.dropped_reported:
                        self._queue_drop_report()  # the recorder reads again: tell it what it missed
                    if not self.buf:
                        return
                    self.partial = self.buf[0] if len(self.buf) == 1 else b"".join(self.buf)
                    self.buf, self.buf_bytes = [], 0
                n = sock.send(self.partial, _MSG_NOSIGNAL)
                if n < len(self.partial):
                    self.partial = memoryview(self.partial)[n:]
                    return
                self.partial = b""
        except (BlockingIOError, InterruptedError):
            return  # the recorder is not reading right now: keep it for the next try
        except OSError:
            self._lost_peer()  # EPIPE, ECONNRESET, ENOTCONN ...: the recorder is gone

    def _lost_peer(self) -> None:
        """The recorder is gone: stop sending for good. No reconnect, no notice, no output; the
        hooks see `disabled` and return at once, so the rest of the run costs nothing."""
        self.disabled = True
        self.buf, self.buf_bytes, self.partial = [], 0, b""
        sock, self.sock = self.sock, None
        try:
            if sock is not None:
                sock.close()
        except OSError:
            pass

    def _queue_drop_report(self) -> None:
        self.dropped_reported = self.dropped
        data = (json.dumps({"kind": "probe_dropped", "t": time.time(), "pid": self.pid, "dropped": self.dropped,
                            "dropped_steps": self.dropped_steps, "steps": self.steps_ended},
                           separators=(",", ":")) + "\n").encode()
        self.buf.append(data)
        self.buf_bytes += len(data)

    def _flusher(self) -> None:
        # Sends what waits in the buffer while the program is quiet (a long step, an eval, a
        # checkpoint after a burst of fast steps), so viewers hear of it within ~0.1 s.
        try:
            while not self.disabled:
                time.sleep(_FLUSH_S)
                if not (self.buf or self.partial or self.dropped != self.dropped_reported):
                    continue
                now = time.perf_counter()
                if now - self.last_flush >= _FLUSH_S:
                    with self.lock:
                        self._flush(now)
        except Exception:  # noqa: BLE001 - fail open: without it, steps and exit still send
            return

    def flush_at_exit(self) -> None:
        """atexit: send what is left (with a probe_dropped report if anything was dropped), waiting
        a little for a slow recorder, never long, never raising."""
        self.guarded(self.close_at_exit, hook="exit")
        if self.sock is None:
            return
        try:
            with self.lock:
                deadline = time.perf_counter() + _EXIT_WAIT_S
                if self.dropped != self.dropped_reported:
                    self._queue_drop_report()  # over the cap if need be: it is the final count
                while True:
                    now = time.perf_counter()
                    self._flush(now)
                    if self.sock is None or not (self.partial or self.buf):
                        return
                    left = deadline - now
                    if left <= 0 or not select.select([], [self.sock], [], left)[1]:
                        return  # the recorder has stopped reading: leave the rest
        except Exception:  # noqa: BLE001 - never raise at the user's exit
            return

    def close_at_exit(self) -> None:
        """The last evaluation, and an XLA step whose optimizer step no sync followed (a script
        that never cuts its graph), end with the process."""
        self.leave_eval()
        if self.xlac is not None:
            self._catch_up(self._counts())
        if self.opt_stepped and self.is_xla:
            self.end_step()
        elif self.backward_pending and self.manual_steps():
            top = self.top_module() if self.top_module is not None else None
            self.end_manual_step(top)  # the last step of a loop with no optimizer ends with the process

    def _hello(self) -> dict:
        torch = sys.modules.get("torch")
        txla = sys.modules.get("torch_xla")
        rank = None
        for var in ("RANK", "PJRT_LOCAL_PROCESS_RANK", "LOCAL_RANK"):
            if os.environ.get(var, "").isdigit():
                rank = int(os.environ[var])
                break
        local = os.environ.get("LOCAL_RANK", "")
        world = os.environ.get("WORLD_SIZE", "")
        return {"kind": "process_attached", "t": time.time(), "pid": self.pid, "ppid": os.getppid(),
                "rank": rank, "local_rank": int(local) if local.isdigit() else None,
                "world_size": int(world) if world.isdigit() else None, "python": sys.executable, "argv": list(sys.argv),
                "torch_version": getattr(torch, "__version__", None),
                "torch_xla_version": getattr(txla, "__version__", None)}

    def _setup_pt_xla_debug(self) -> None:
        # The launcher asks for PT_XLA_DEBUG_LEVEL=1 only when the user did not set it. Each
        # process writes its compile analysis to its own file, read back right after a compile.
        if os.environ.get("NEURONDESK_PTXLA_DEBUG") != "1":
            return
        folder = os.path.dirname(self.socket_path)
        self.debug_file = os.path.join(folder, f"ptxla-{self.pid}.log")
        os.environ["PT_XLA_DEBUG_FILE"] = self.debug_file

    def read_debug_text(self) -> str | None:
        if not self.debug_file:
            return None
        try:
            with open(self.debug_file, "rb") as f:
                f.seek(self.debug_offset)
                data = f.read(1 << 20)
            self.debug_offset += len(data)
            return data.decode("utf-8", "replace")
        except OSError:
            return None

    @staticmethod
    def user_location(depth: int = 2) -> str | None:
        """file:line of the innermost frame that is the user's code (not torch, not us). A thread
        with no user frame of its own (autograd runs an XLA or CUDA backward, and compiles it, on a
        device thread) gets where the main thread stands: the user's ``loss.backward()``."""
        found = Probe.user_frame(sys._getframe(depth))
        if found is None and threading.current_thread() is not threading.main_thread():
            try:
                found = Probe.user_frame(sys._current_frames().get(threading.main_thread().ident))
            except Exception:  # noqa: BLE001 - a location is a nicety; never an error in user code
                found = None
        return found

    @staticmethod
    def user_frame(f) -> str | None:
        while f is not None:
            fn = f.f_code.co_filename
            if (fn != _PROBE_FILE and not fn.startswith(("<", _STDLIB))
                    and not any(m in fn for m in _LIB_MARKERS) and _framework_of(f) is None):
                return f"{fn}:{f.f_lineno}"
            f = f.f_back
        return None

    @staticmethod
    def library_location(depth: int = 2) -> str | None:
        """The innermost frame of a framework that runs the user's loop (Trainer, Lightning ...):
        'transformers Trainer.evaluation_loop at trainer.py:4675'. Only at a compile, never per step."""
        try:
            f = sys._getframe(depth)
            while f is not None:
                pkg = _framework_of(f)
                if pkg is not None:
                    code = f.f_code
                    where = getattr(code, "co_qualname", code.co_name)
                    return f"{pkg} {where} at {os.path.basename(code.co_filename)}:{f.f_lineno}"
                f = f.f_back
        except Exception:  # noqa: BLE001 - a nicety
            return None
        return None

    @staticmethod
    def sync_point(depth: int = 2) -> str:
        """The call path from the sync up to the user's frame: two syncs reached from the same user
        line through different library lines (torch_xla.compile's entry and exit) differ."""
        parts = []
        f = sys._getframe(depth)
        while f is not None and len(parts) < 12:
            fn = f.f_code.co_filename
            if fn != _PROBE_FILE:
                parts.append(f"{os.path.basename(fn)}:{f.f_lineno}")
                if (not fn.startswith(("<", _STDLIB)) and not any(m in fn for m in _LIB_MARKERS)
                        and _framework_of(f) is None):
                    break
            f = f.f_back
        return ">".join(parts)

    # ---------------------------------------------------------------- steps
    def note_activity(self) -> None:
        if self.step_start is None:
            self.step_start = time.perf_counter()
            self.step_start_wall = time.time()

    def end_step(self) -> None:
        # The step message is formatted here rather than through json.dumps of a dict: the same
        # keys in the same order with the same types (tests/test_probe_send.py checks it) at a
        # fraction of the cost. Times are written fixed-point (t to the microsecond, durations to
        # the nanosecond): the shortest round-trip repr json.dumps uses was the largest cost left.
        now = time.perf_counter()
        start = self.step_start if self.step_start is not None else now
        if self.in_eval:  # evaluation runs on into the next step: its time so far belongs to this one
            self.eval_s_in_step += now - self.eval_start
            self.eval_start = now
        line = (f'{{"kind":"step","t":{time.time():.6f},"step":{self.step},'
                f'"duration_s":{max(0.0, now - start - self.eval_s_in_step):.9f},'
                f'"data_wait_s":{self.data_wait:.9f},"compiles":{self.step_compiles}')
        if self.samples:
            line += self._inputs_json(self.samples, self.tokens if self.tokens_known else 0, self.shapes)
        elif self.loader_samples:
            line += self._inputs_json(self.loader_samples, self.loader_tokens, self.loader_shapes)
        if self.is_xla:
            line += f',"executions":{self.step_execs}'
        if self.eval_s_in_step:
            line += f',"eval_s":{self.eval_s_in_step:.9f}'
        if self.presync is not None:
            line += f',"presync_s":{self.presync:.9f}'
        if self.dropped:
            line += f',"dropped_before":{self.dropped}'
        self.step += 1  # counts on through drops: the receiver can tell how many it missed
        self.step_start = now
        self.opt_stepped = False
        self.samples = self.tokens = 0
        self.tokens_known = True
        self.shapes = []
        self.loader_samples = self.loader_tokens = 0
        self.loader_shapes = []
        self.data_wait = 0.0
        self.step_execs = self.step_compiles = 0
        self.forwards_since_step = 0
        self.backward_pending = False
        self.presync = None
        self.eval_s_in_step = 0.0
        self._queue((line + self.pid_tail).encode(), True, False, now)

    # ---------------------------------------------------------------- ranks
    def mark_presync(self) -> None:
        """The step reaches its first synchronising point (backward, where DDP all-reduces; the
        optimizer step; an XLA sync): the time before it is this rank's own (data wait plus
        forward), before any wait for the other ranks. A straggler shows there."""
        if self.presync is None and self.step_start is not None and not self.in_eval:
            self.presync = time.perf_counter() - self.step_start

    def note_backward(self) -> None:
        self.mark_presync()
        if not self.in_eval and threading.get_ident() == self.train_thread:
            self.backward_seen = self.backward_pending = True

    def manual_steps(self) -> bool:
        """Steps come from backwards: no optimizer exists, and no XLA sync cuts the steps."""
        return not self.has_optimizer and self.lead_optimizer is None and not self.is_xla

    def end_manual_step(self, mod) -> None:
        """A training loop with no optimizer (`p.data.add_(p.grad, alpha=-lr)`, as pytorch/examples'
        word_language_model does): its step ends at the next training forward after a backward,
        or at exit. The device is the model's, said once."""
        if not self.device_reported:
            self.device_reported = True
            params = getattr(mod, "parameters", None)
            param = next(iter(params()), None) if callable(params) else None
            if param is not None:
                self.guarded(self.report_param_device, param, hook="device")
        self.end_step()

    def patch_autograd(self, module) -> None:
        real = module.backward
        if getattr(real, "_neurondesk", False):
            return
        probe = self

        def backward(*args, **kwargs):
            if not (_is_compiling() or probe.disabled or "presync" in probe.off):
                probe.guarded(probe.note_backward, hook="presync")
            return real(*args, **kwargs)

        backward.__doc__, backward.__wrapped__, backward._neurondesk = real.__doc__, real, True
        module.backward = backward

    def chain_excepthook(self) -> None:
        """A process that dies of an uncaught exception says which and where, once, before the
        hook it had (the user's, or Python's) prints it as always. Under torchrun the rank that
        failed first is told from the ranks the agent then tears down."""
        real = sys.excepthook
        probe = self

        def excepthook(kind, value, tb):
            probe.guarded(probe.report_failure, kind, value, tb, hook="failure")
            probe.guarded(probe.flush_at_exit, hook="failure")
            return real(kind, value, tb)

        sys.excepthook = excepthook

    def report_failure(self, kind, value, tb) -> None:
        if kind is KeyboardInterrupt or self.disabled:
            return
        import traceback

        lines = traceback.format_exception(kind, value, tb)
        text = "".join(lines).splitlines()
        self.send({"kind": "process_failed", "error": f"{kind.__name__}: {value}"[:2000], "step": self.step,
                   "traceback": text[-60:]})

    # ---------------------------------------------------------------- evaluation
    def is_eval_forward(self, mod) -> bool:
        """A forward that is not training: in a script that has an optimizer, one run without
        grad (no_grad, inference_mode) or on a module in eval mode."""
        if not (self.has_optimizer or self.backward_seen):
            return False  # an inference script: its forwards are its steps
        if self.grad_modes is None:  # looked up once, not at every forward
            import torch

            self.grad_modes = (torch.is_grad_enabled, torch.is_inference_mode_enabled)
        grad_enabled, inference_mode = self.grad_modes
        if not grad_enabled() or inference_mode():
            return True
        return getattr(mod, "training", True) is False

    def enter_eval(self) -> None:
        if not self.in_eval:
            self.in_eval = True
            self.eval_start = time.perf_counter()
            self.eval_batches = self.eval_samples = self.eval_tokens = 0
            self.eval_compiles = self.eval_execs = 0
            self.eval_wait = 0.0

    def leave_eval(self) -> None:
        """Training is back (a training forward or an optimizer step): the evaluation phase ends."""
        if not self.in_eval:
            return
        now = time.perf_counter()
        self.in_eval = False
        self.eval_s_in_step += now - self.eval_start
        self.send({"kind": "eval_phase", "step": self.step, "duration_s": now - self.eval_start,
                   "batches": self.eval_batches, "samples": self.eval_samples, "tokens": self.eval_tokens,
                   "data_wait_s": self.eval_wait, "compiles": self.eval_compiles, "executions": self.eval_execs})

    @property
    def phase(self) -> str:
        return "eval" if self.in_eval else "train"

    def _inputs_json(self, samples, tokens, shapes) -> str:
        """`,"samples":..,"tokens":..,"input_shapes":..` of a step message; the shapes' JSON is
        reused while they do not change (the usual case: one batch shape)."""
        if shapes != self.last_shapes:
            self.last_shapes = shapes
            self.last_shapes_json = json.dumps(shapes, separators=(",", ":"), default=str)
        if type(samples) is not int or type(tokens) is not int:  # noqa: E721 - not a subclass: SymInt
            out = "," + json.dumps({"samples": samples, **({"tokens": tokens} if tokens else {})},
                                   separators=(",", ":"), default=str)[1:-1]
        else:
            out = f',"samples":{samples},"tokens":{tokens}' if tokens else f',"samples":{samples}'
        return out + ',"input_shapes":' + self.last_shapes_json

    def report_device(self, optimizer) -> None:
        self.device_reported = True
        param = None
        for group in optimizer.param_groups:
            if group["params"]:
                param = group["params"][0]
                break
        if param is not None:
            self.report_param_device(param)

    def report_param_device(self, param) -> None:
        dev = param.device
        kind, name = dev.type, str(dev)
        if kind == "xla":
            self.is_xla = True
            hw = "CPU"
            try:
                import torch_xla.runtime as xr

                hw = xr.device_type() or "CPU"
            except Exception:  # noqa: BLE001
                pass
            kind = "neuron" if hw.upper() == "NEURON" else ("xla-cpu" if hw.upper() == "CPU" else f"xla-{hw.lower()}")
            name = f"{dev} ({hw})"
        elif kind == "cuda":
            try:
                import torch

                name = torch.cuda.get_device_name(dev)
            except Exception:  # noqa: BLE001
                pass
        dtype = str(param.dtype).replace("torch.", "")
        precision = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype)
        if self.autocast and precision == "fp32":
            precision = f"{self.autocast}-autocast"
        self.send({"kind": "device_seen", "device_kind": kind, "device_name": name, "precision": precision})

    def report_xla_device(self) -> None:
        """The device seen from a sync, before any optimizer (an inference loop, or a setup sync
        before the optimizer exists): no precision yet; the optimizer's report adds it later."""
        self.xla_device_reported = True
        import torch_xla
        import torch_xla.runtime as xr

        hw = (xr.device_type() or "CPU").upper()
        kind = "neuron" if hw == "NEURON" else ("xla-cpu" if hw == "CPU" else f"xla-{hw.lower()}")
        self.send({"kind": "device_seen", "device_kind": kind, "device_name": f"{torch_xla.device()} ({hw})",
                   "precision": None})

    # optimizer hooks
    def patch_compiler(self, module) -> None:
        global _is_compiling
        if hasattr(module, "is_compiling"):
            _is_compiling = module.is_compiling

    def patch_optimizer(self, module) -> None:
        # Once per module execution: a reload makes new hook tables (and a new Optimizer class).
        if self._opt_pre not in getattr(module, "_global_optimizer_pre_hooks", {}).values():
            module.register_optimizer_step_pre_hook(self._opt_pre)
        if self._opt_post not in getattr(module, "_global_optimizer_post_hooks", {}).values():
            module.register_optimizer_step_post_hook(self._opt_post)
        real_init = module.Optimizer.__init__
        if getattr(real_init, "_neurondesk", False):
            return
        probe = self

        def __init__(opt, *args, **kwargs):
            probe.has_optimizer = True
            return real_init(opt, *args, **kwargs)

        __init__._neurondesk = True
        module.Optimizer.__init__ = __init__

    def _opt_pre(self, optimizer, args, kwargs):
        if _is_compiling() or self.disabled or "optimizer" in self.off:
            return None
        try:  # guarded inline: this runs at every step
            self._on_opt_pre(optimizer)
        except Exception as exc:  # noqa: BLE001 - fail open: this hook alone turns off
            self.hook_failed("optimizer", exc)
        return None

    def _on_opt_pre(self, optimizer) -> None:
        self.leave_eval()
        self.note_activity()
        self.mark_presync()
        if not self.device_reported:
            self.guarded(self.report_device, optimizer, hook="device")  # an odd optimizer: no device, steps on
        if self.lead_optimizer is None:
            self.lead_optimizer = id(optimizer)
        elif self.is_xla and self.opt_stepped and id(optimizer) == self.lead_optimizer:
            self.end_step()  # two steps with no sync in between: close the previous one here

    def _opt_post(self, optimizer, args, kwargs):
        if _is_compiling() or self.disabled or "optimizer" in self.off:
            return None
        if id(optimizer) == self.lead_optimizer:
            if self.is_xla:
                self.opt_stepped = True  # the next sync ends the step
            else:
                try:
                    self.end_step()
                except Exception as exc:  # noqa: BLE001
                    self.hook_failed("optimizer", exc)
        return None

    # forward watch: the outermost module's inputs give samples and tokens
    def patch_module(self, module) -> None:
        """The first module called is the outermost one: wrap Module._call_impl until that first
        call, then watch that module from its class (see _adopt_top_module). No global module
        hook (torch.compile(module) warns about those: the script's output must stay its own), and
        Module.__call__ stays torch's own (torch.compile(module) captures it before any call)."""
        if self.top_module is not None:
            return  # a reload after the outermost module was found: its class goes on being watched
        cls = module.Module
        real_impl = cls._call_impl
        if getattr(real_impl, "_neurondesk", False):
            return
        probe = self

        def _call_impl(mod, *args, **kwargs):
            if _is_compiling() or cls.__dict__.get("_call_impl") is not _call_impl:
                return real_impl(mod, *args, **kwargs)
            cls._call_impl = real_impl  # one call only: from now on torch's own, untouched
            if not (probe.disabled or "forward" in probe.off or probe.top_module is not None):
                probe.guarded(probe._adopt_top_module, mod, hook="forward")
            return type(mod)._call_impl(mod, *args, **kwargs)  # the watch sees this first call too

        _call_impl._neurondesk = True
        cls._call_impl = _call_impl

    def _adopt_top_module(self, mod) -> None:
        """Watch the outermost module's calls from its class, never from the object: no hook,
        attribute or bound method of ours on it (they would hold the probe's lock and socket), so
        the model deep-copies, pickles, saves and scripts exactly as without neurondesk. Watched
        modules are known by weak references; other instances of their classes (an EMA copy, a
        teacher) pass straight through, and a class pickles by name, so nothing of ours travels
        with it. A bare torch class as the outermost module (nn.Sequential, nn.Linear) is watched
        the same way: its other instances cost one identity test a call.

        What a wrapper holds is watched too, and what later wraps a watched module: Trainer and
        accelerate train through torch.compile's OptimizedModule (or DDP) but evaluate the module
        inside it, and a script may call its model once before compiling it. A forward counts only
        when no watched forward is running (DDP calling its module is one forward, not two)."""
        self.seq_first = self._sequence_first(mod)
        self._watch(mod)
        inner = mod
        for _ in range(4):
            inner = self._wrapped(inner)
            if inner is None:
                break
            self._watch(inner)

    @staticmethod
    def _wrapped(mod):
        """The module a wrapper holds: torch.compile's `_orig_mod`, DDP's / DataParallel's `module`."""
        subs = getattr(mod, "_modules", None)
        if not isinstance(subs, dict) or len(subs) != 1:
            return None
        inner = subs.get("_orig_mod") or subs.get("module")
        return inner if inner is not None and hasattr(type(inner), "_call_impl") else None

    @staticmethod
    def _sequence_first(mod) -> bool:
        """Whether the model takes (sequence, batch, ...) inputs: its recurrent / transformer /
        attention layers say batch_first=False, none says True (an LSTM language model's [35, 20]
        batch holds 20 samples, not 35). Looked at once."""
        firsts = set()
        for i, m in enumerate(mod.modules()):
            if i > 10000:
                break
            flag = getattr(m, "batch_first", None)
            if type(flag) is bool:
                firsts.add(flag)
        return firsts == {False}

    def _watch(self, mod) -> None:
        import weakref

        self.watched[id(mod)] = weakref.ref(mod)
        self.top_module = self.top_module or self.watched[id(mod)]
        self._watch_class(type(mod))

    def is_watched(self, mod) -> bool:
        ref = self.watched.get(id(mod))
        if ref is not None and ref() is mod:
            return True
        inner = self._wrapped(mod)  # a wrapper made after the first call (torch.compile, DDP)?
        if inner is None or not self.is_watched(inner):
            return False
        self._watch(mod)
        return True

    def _watch_class(self, cls) -> None:
        real = cls._call_impl  # torch's own (the first-call wrapper is gone), or the class's override
        if getattr(real, "_neurondesk", False):
            return  # this class is watched already
        probe = self
        tracing = self._jit_tracing_state()

        def _call_impl(m, *args, **kwargs):
            # _is_compiling() first: inside a compiled region dynamo folds it to True and reads
            # nothing else of ours (a read of probe.in_forward there would become a guard, and
            # each change of it a recompile)
            if _is_compiling() or probe.in_forward or probe.disabled or "forward" in probe.off:
                return real(m, *args, **kwargs)
            try:  # guarded inline: this runs at every call of a watched class's modules
                ours = tracing() is None and probe.is_watched(m)
            except Exception as exc:  # noqa: BLE001 - fail open: the watch alone turns off
                probe.hook_failed("forward", exc)
                ours = False
            if not ours:
                return real(m, *args, **kwargs)
            probe._top_forward(m, args, kwargs)
            probe.in_forward = True
            try:
                return real(m, *args, **kwargs)
            finally:
                probe.in_forward = False

        _call_impl._neurondesk = True
        _call_impl.__wrapped__ = real
        cls._call_impl = _call_impl

    @staticmethod
    def _jit_tracing_state():
        """torch.jit.trace runs forwards that are no training: the watch stays out of them."""
        import torch

        state = getattr(torch._C, "_get_tracing_state", None)
        return state if callable(state) else (lambda: None)

    def _top_forward(self, mod, args, kwargs):
        """One forward of a watched module: the one entry of the class watch; never raises."""
        if _is_compiling() or self.disabled or "forward" in self.off:
            return None
        self.guarded(self._on_forward, mod, args, kwargs, hook="forward")
        return None

    def _on_forward(self, mod, args, kwargs) -> None:
        self.note_activity()
        x = kwargs.get("input_ids") if kwargs else None
        dims = _dims(x) if x is not None else None
        if dims is None:
            for a in args:
                dims = _dims(a)
                if dims is not None:
                    x = a
                    break
        batch_dim = 1 if self.seq_first and dims and len(dims) >= 2 else 0
        if self.is_eval_forward(mod):
            self.enter_eval()
            self.eval_batches += 1
            if dims:
                self.eval_samples += dims[batch_dim]
                self.eval_tokens += dims[0] * dims[1] if len(dims) >= 2 and _holds_ids(x) else 0
                self.eval_dims = dims
            return
        self.leave_eval()
        if self.backward_pending and self.manual_steps():
            self.end_manual_step(mod)  # no optimizer: a backward, then the next forward, is a step
        self.forwards_since_step += 1
        if not dims:
            return
        self.samples += dims[batch_dim]
        if len(dims) >= 2 and _holds_ids(x):
            self.tokens += dims[0] * dims[1]
        else:
            self.tokens_known = False
        self.shapes.append(dims)
        self.train_dims = dims
        if self.autocast is None:
            try:
                device_type = x.device.type
            except Exception:  # noqa: BLE001 - not a torch tensor (numpy's .device is a str)
                device_type = None
            if isinstance(device_type, str):
                self.autocast = self._autocast_state(device_type)

    @staticmethod
    def _autocast_state(device_type: str) -> str:
        import torch

        try:
            if torch.is_autocast_enabled(device_type):
                dt = torch.get_autocast_dtype(device_type)
                return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dt, str(dt))
        except Exception:  # noqa: BLE001
            pass
        return ""

    # data loader
    def patch_dataloader(self, module) -> None:
        cls = module._BaseDataLoaderIter
        real_next = cls.__next__
        probe = self

        if getattr(real_next, "_neurondesk", False):
            return  # already ours (the same class patched again)

        def __next__(it):
            if probe.disabled or "dataloader" in probe.off or threading.get_ident() != probe.train_thread:
                return real_next(it)
            t0 = time.perf_counter()
            try:
                batch = real_next(it)
            finally:
                probe.guarded(probe.note_wait, t0, hook="dataloader")
            probe.guarded(probe.note_batch, batch, hook="dataloader")
            return batch

        __next__._neurondesk = True
        cls.__next__ = __next__
        real_init = cls.__init__

        def __init__(it, *args, **kwargs):
            real_init(it, *args, **kwargs)
            if probe.in_eval and not probe.disabled and threading.get_ident() == probe.train_thread:
                probe.guarded(probe.new_eval_pass, hook="dataloader")

        __init__._neurondesk = True
        cls.__init__ = __init__

    def new_eval_pass(self) -> None:
        """A new pass over a data loader while an evaluation is open is a new evaluation (Trainer's
        evaluation at step 60 and its final evaluate(); Lightning's validation, test, predict):
        back-to-back, they are phases of their own, not one."""
        if self.in_eval and self.eval_batches:
            self.leave_eval()

    def note_wait(self, t0: float) -> None:
        if self.in_eval:
            self.eval_wait += time.perf_counter() - t0
            return
        if self.step_start is None:
            self.step_start, self.step_start_wall = t0, time.time()
        self.data_wait += time.perf_counter() - t0

    def note_batch(self, batch) -> None:
        """Samples and tokens from a DataLoader batch: used for the steps in which the model's
        forward could not be seen (a forward inside a torch.compile'd function). A batch of
        anything (numpy arrays, strings, the user's own objects) is read without raising."""
        x = batch
        for _ in range(3):
            if isinstance(x, dict):
                x = x.get("input_ids", next(iter(x.values()), None))
            elif isinstance(x, (list, tuple)):
                x = x[0] if x else None
            else:
                break
        dims = _dims(x)
        if not dims:
            return
        self.loader_samples += dims[0]
        if len(dims) >= 2 and _holds_ids(x):
            self.loader_tokens += dims[0] * dims[1]
        self.loader_shapes.append(dims)

    def patch_parallel_loader(self, module) -> None:
        cls = module.PerDeviceLoader
        real_next = cls.next
        probe = self

        if getattr(real_next, "_neurondesk", False):
            return

        def next(loader):  # noqa: A001 - same name as the method it wraps
            if probe.disabled or "parallel-loader" in probe.off:
                return real_next(loader)
            t0 = time.perf_counter()
            probe.in_loader, probe.sync_time_in_loader = True, 0.0
            try:
                return real_next(loader)
            finally:
                probe.in_loader = False
                probe.guarded(probe.note_loader_wait, t0, hook="parallel-loader")

        next._neurondesk = True
        cls.next = next
        cls.__next__ = next

    def note_loader_wait(self, t0: float) -> None:
        if self.step_start is None:
            self.step_start, self.step_start_wall = t0, time.time()
        # The loader syncs (ending the previous step) and then waits for a batch.
        wait = max(0.0, time.perf_counter() - t0 - self.sync_time_in_loader)
        if self.in_eval:
            self.eval_wait += wait
        else:
            self.data_wait += wait

    # ---------------------------------------------------------------- XLA
    def patch_torch_xla(self, module) -> None:
        # Wrap torch_xla.sync (which mark_step, MpDeviceLoader and torch_xla.compile all go
        # through) *above* the real one, so torch_xla's own debug analysis still finds its
        # `sync` frame on top of the stack and names the cause correctly.
        self.xlac = module._XLAC
        inner = sys.modules.get("torch_xla.torch_xla")
        real_sync = module.sync
        probe = self
        first = self.xlac_seen is None
        self.xlac_seen = True
        if getattr(real_sync, "_neurondesk", False):
            return

        def sync(*args, **kwargs):
            if probe.disabled or probe.sync_depth or "xla-sync" in probe.off:
                return real_sync(*args, **kwargs)
            before = probe.guarded(probe.sync_begin, hook="xla-sync")
            try:
                return real_sync(*args, **kwargs)
            finally:
                if before is not None:
                    probe.guarded(probe.sync_end, before, hook="xla-sync")

        sync.__doc__, sync.__wrapped__, sync._neurondesk = real_sync.__doc__, real_sync, True
        module.sync = sync
        if inner is not None and getattr(inner, "sync", None) is real_sync:
            inner.sync = sync
        self.guarded(self._patch_value_reads, hook="value-access")
        if first:
            threading.Thread(target=self._compile_watcher, name="neurondesk-probe", daemon=True).start()

    def _counts(self) -> tuple[int, int]:
        cv = self.xlac._xla_counter_value
        return (cv("UncachedCompile") or 0), (cv("CachedCompile") or 0)

    def _catch_up(self, counts: tuple[int, int]) -> None:
        """Compiles torch_xla counted outside any sync or value read we saw (xm.mesh_reduce and
        collectives sync through _xla_sync_multi directly): counted now, so that compiles always
        equal torch_xla's, without a line (none is known)."""
        if counts[0] > self.compiles_seen:
            n, self.compiles_seen = counts[0] - self.compiles_seen, counts[0]
            self._report_compiles(n, "outside-sync", 0, located=False)

    def sync_begin(self):
        self.note_activity()
        self.mark_presync()
        self.sync_depth += 1
        counts = self._counts()
        self._catch_up(counts)
        self.sync_compiles_at_start = counts[0]
        self.compile_announced = False
        self.sync_started = time.perf_counter()
        return counts

    def sync_end(self, before) -> None:
        self.sync_depth -= 1
        elapsed = time.perf_counter() - self.sync_started
        self.sync_started = None
        if self.in_loader:
            self.sync_time_in_loader += elapsed
        after = self._counts()
        self.compiles_seen = max(self.compiles_seen, after[0])
        compiles = after[0] - before[0]
        execs = compiles + after[1] - before[1]
        self.is_xla = True
        if execs and not (self.device_reported or self.xla_device_reported) and not self.has_optimizer:
            self.report_xla_device()  # an inference loop: no optimizer will tell us the device
        # Training: the first sync after an optimizer step ends the step. With no optimizer at
        # all (inference, tracing) a sync that runs a graph after a forward is a step; one with
        # neither a forward nor an optimizer step since the last (a setup broadcast) is not.
        boundary = self.opt_stepped or (not self.has_optimizer and self.forwards_since_step > 0)
        trigger = "loader" if self.in_loader else "sync"
        if self.in_eval and not self.opt_stepped:  # an evaluation batch: its graphs are not the step's
            self.eval_execs += execs
            if compiles:
                self._report_compiles(compiles, trigger, 3)
            return
        self.step_execs += execs
        if compiles:
            self._report_compiles(compiles, trigger, 3)
        if boundary:
            if execs or self.opt_stepped:
                self.end_step()
        elif execs:
            self.send({"kind": "graph_executed", "step": self.step, "trigger": trigger,
                       "location": self.user_location(3), "executions": execs, "compiles": compiles})

    def _phase_shapes(self) -> list[list[int]] | None:
        """The input shape of the last forward of the phase that compiles: the graph's inputs,
        not every batch the step has seen (an evaluation loop inside a step is not a new shape)."""
        dims = self.eval_dims if self.in_eval else self.train_dims
        return [dims] if dims else None

    def count_compiles(self, n: int) -> None:
        """Compiles belong to the phase they happen in: an evaluation's never mark a training step."""
        if self.in_eval:
            self.eval_compiles += n
        else:
            self.step_compiles += n

    def _report_compiles(self, n: int, trigger: str, depth: int, located: bool = True) -> None:
        self.count_compiles(n)
        durations: list[float | None] = [None] * n
        data = self.xlac._xla_metric_data("CompileTime")
        if data:
            total, samples = data[0], data[2]
            new = total - self.compile_samples_seen
            self.compile_samples_seen = total
            values = [v / 1e9 for _, v in samples[-new:]] if new > 0 else []
            durations = (values + durations)[:n] if len(values) < n else values[-n:]
        location = self.user_location(depth + 1) if located else None
        library = self.library_location(depth + 1) if located else None
        point = f"{trigger}@{self.sync_point(depth + 1)}" if located else trigger
        debug_text = self.read_debug_text()
        for i, d in enumerate(durations):
            self.send({"kind": "compile", "source": "probe", "step": self.step, "duration_s": d,
                       "cache": "miss", "trigger": trigger, "point": point, "phase": self.phase,
                       "location": location, "library": library, "input_shapes": self._phase_shapes(),
                       "debug_text": debug_text if i == 0 else None})

    def _compile_watcher(self) -> None:
        # The compiler releases the GIL; this thread sees the compile counter move during a
        # long sync and announces the compile so the console can run a live wall timer.
        while not self.disabled:
            time.sleep(0.25)
            started = self.sync_started
            if started is None or self.compile_announced or time.perf_counter() - started < 0.5:
                continue
            try:
                if (self.xlac._xla_counter_value("UncachedCompile") or 0) > self.sync_compiles_at_start:
                    self.compile_announced = True
                    self.send({"kind": "compile_started", "source": "probe", "step": self.step})
            except Exception:  # noqa: BLE001
                return

    def _patch_value_reads(self, tensor_cls=None) -> None:
        """Wrap the Tensor methods that read a value back to the host (.item(), print, if t:).
        The counting around the real call is guarded like every hook: whatever fails there turns
        the value-access hook off, and the user's call returns (or raises) exactly as without us."""
        if tensor_cls is None:
            import torch

            tensor_cls = torch.Tensor
        probe = self
        for name in ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__",
                     "__index__", "__repr__", "__format__"):
            real = getattr(tensor_cls, name, None)
            if real is None or getattr(real, "_neurondesk", False):
                continue

            def make(real=real, name=name):
                def wrapper(self, *args, **kwargs):
                    guard = probe.value_guard
                    # inside a sync (a step closure reading .item()) the sync counts the graphs
                    if (_is_compiling() or probe.disabled or "value-access" in probe.off
                            or probe.sync_depth or getattr(guard, "on", False)):
                        return real(self, *args, **kwargs)
                    guard.on = True
                    try:
                        before = probe.guarded(probe.value_read_begin, hook="value-access")
                        result = real(self, *args, **kwargs)
                        if before is not None:
                            probe.guarded(probe.value_read_done, before, hook="value-access")
                        return result
                    finally:
                        guard.on = False
                        probe.sync_started = None

                wrapper.__name__ = name
                wrapper.__qualname__ = f"Tensor.{name}"
                wrapper.__doc__ = getattr(real, "__doc__", None)
                wrapper._neurondesk = True
                return wrapper

            setattr(tensor_cls, name, make())

    def value_read_begin(self) -> tuple[int, int]:
        """A value read syncs too: the compile watcher announces a long compile in it."""
        counts = self._counts()
        self._catch_up(counts)
        self.sync_compiles_at_start = counts[0]
        self.compile_announced = False
        self.sync_started = time.perf_counter()
        return counts

    def value_read_done(self, before) -> None:
        after = self._counts()
        self.compiles_seen = max(self.compiles_seen, after[0])
        if after != before:
            self.value_access(before, after)

    def value_access(self, before, after) -> None:
        compiles = after[0] - before[0]
        execs = compiles + after[1] - before[1]
        location = self.user_location(5)
        if compiles:
            self._report_compiles(compiles, "value-access", 5)
        if self.in_eval:
            self.eval_execs += execs
            return
        self.step_execs += execs
        self.send({"kind": "graph_executed", "step": self.step, "trigger": "value-access",
                   "location": location, "executions": execs, "compiles": compiles})

    # ---------------------------------------------------------------- dynamo
    def patch_dynamo(self, module) -> None:
        module.on_compile_start(self._dynamo_start)
        module.on_compile_end(self._dynamo_end)

    def patch_torch_logging(self, module) -> None:
        """Dynamo's recompile reasons and graph breaks, to the recorder rather than to the
        script's stderr: the launcher asks for them this way when the user set no TORCH_LOGS of
        their own. torch's logging setup (_init_logs, also run by torch._logging.set_logs) is
        wrapped so these two artifacts stay enabled and ours; an artifact logger made later
        (a dynamo module imported lazily) is configured as it is made."""
        if os.environ.get("NEURONDESK_DYNAMO_LOGS") != "1":
            return
        import logging

        probe = self
        mine = ("recompiles", "graph_breaks")

        class ToProbe(logging.Handler):
            def emit(self, record) -> None:
                probe.guarded(probe.send_torch_log, record, hook="dynamo-logs")

        handler = ToProbe(logging.DEBUG)
        real_configure, real_init = module.configure_artifact_log, module._init_logs

        def take(log) -> None:
            log.setLevel(logging.DEBUG)
            log.propagate = False  # never to torch's stream handlers: the script's stderr stays its own
            if handler not in log.handlers:
                log.addHandler(handler)

        def configure_artifact_log(log) -> None:
            if getattr(log, "artifact_name", None) in mine:
                take(log)
            else:
                real_configure(log)

        def _init_logs(*args, **kwargs):
            result = real_init(*args, **kwargs)
            for name in mine:
                module.log_state.enable_artifact(name)
            for qname in module.log_registry.get_artifact_log_qnames():
                log = logging.getLogger(qname)
                if getattr(log, "artifact_name", None) in mine:
                    take(log)
            return result

        module.configure_artifact_log, module._init_logs = configure_artifact_log, _init_logs
        for name in mine:
            module.log_state.enable_artifact(name)

    def send_torch_log(self, record) -> None:
        """One dynamo log record, as the lines TORCH_LOGS would have printed (the recorder reads
        them with the same parser)."""
        t = record.created
        prefix = (time.strftime("V%m%d %H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1e6):06d} {self.pid} "
                  f"{record.pathname}:{record.lineno}] [__{getattr(record, 'name', '').rsplit('__', 1)[-1]}] ")
        text = "\n".join(prefix + line for line in record.getMessage().splitlines())
        self.send({"kind": "torch_log", "text": text[:100_000]})

    def _dynamo_start(self, args=None) -> None:
        self.guarded(self._on_dynamo_start, args, hook="dynamo")

    def _on_dynamo_start(self, args) -> None:
        key = str(getattr(args, "compile_id", ""))
        self.dynamo_starts[key] = time.perf_counter()
        self.send({"kind": "compile_started", "source": "dynamo", "step": self.step})

    def _dynamo_end(self, args=None) -> None:
        self.guarded(self._on_dynamo_end, args, hook="dynamo")

    def _on_dynamo_end(self, args) -> None:
        key = str(getattr(args, "compile_id", ""))
        trigger = getattr(getattr(args, "callback_trigger", None), "name", "")
        started = self.dynamo_starts.pop(key, None)
        duration = time.perf_counter() - started if started is not None else None
        self.count_compiles(1)
        self.send({"kind": "compile", "source": "dynamo", "step": self.step, "location": self.user_location(3),
                   "library": self.library_location(3),
                   "duration_s": duration, "trigger": "dynamo", "phase": self.phase,
                   "point": f"dynamo@{key.split('/')[0]}:{trigger}" if key else None,
                   "input_shapes": self._phase_shapes()})
