"""Ctrl-C is the workload's. CPython drops an exception raised while a finalizer or a weakref
callback runs ("Exception ignored in ..."), and the probe's call-through ends (callthrough.Ending.__del__)
and value-read ends (values.ValueReads._released) run in exactly those: a Ctrl-C that landed in one was
lost and the training ran on (seen in CI: a headless run that never ended after its SIGINT). The
exception is raised again in the workload's main thread, and nothing of ours is printed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

BOOTSTRAP = REPO / "neurondesk" / "probe" / "bootstrap"

TRAIN_ON = """
import time
try:
    {call}
    for _ in range(2000):  # the workload's next instructions: the interrupt must land in them
        time.sleep(0.0005)
    print("trained on")
except {expected} as exc:
    print("stopped:", type(exc).__name__, exc)
"""


def run(setup: str, call: str, expected: str = "KeyboardInterrupt") -> subprocess.CompletedProcess:
    script = f"import sys\nsys.path.insert(0, {str(BOOTSTRAP)!r})\n" + textwrap.dedent(setup) + TRAIN_ON.format(
        call=call, expected=expected)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_ctrl_c_landing_in_a_call_through_end_stops_the_workload():
    p = run("""
        from _neurondesk_probe import callthrough
        def end(state):
            raise KeyboardInterrupt  # what Python's SIGINT handler raises, at this instruction of ours
        sync = callthrough.CallThrough(lambda n: n + 1, lambda: "begun", end)
        """, "sync(1)")
    assert p.stdout == "stopped: KeyboardInterrupt \n" and p.stderr == "", (p.stdout, p.stderr)


def test_ctrl_c_landing_in_a_value_read_end_stops_the_workload():
    p = run("""
        import weakref
        from _neurondesk_probe import values
        class Probe:
            disabled, off = False, set()
            def guarded(self, fn, *args, hook):
                return fn(*args)
        reads = values.ValueReads(Probe())
        def settle():
            raise KeyboardInterrupt
        reads.settle = settle
        class Bound:
            pass
        bound = Bound()
        reads.local.pending = (weakref.ref(bound, reads._released), (0, 0))
        """, "del bound")
    assert p.stdout == "stopped: KeyboardInterrupt \n" and p.stderr == "", (p.stdout, p.stderr)


@pytest.mark.parametrize("handler", ["python", "users"])
def test_a_signal_at_the_first_instruction_of_a_callback_of_ours_is_raised_again(handler):
    # before the callback's own try: only sys.unraisablehook sees it. A user's SIGINT handler that
    # exits (SystemExit) is the workload's too.
    users = handler == "users"
    p = run(f"""
        import signal, weakref
        from _neurondesk_probe import _state
        _state.chain_unraisablehook()
        if {users}:
            def on_int(signum, frame):
                raise SystemExit("users handler")
            signal.signal(signal.SIGINT, on_int)
        def callback(ref):
            raise {"SystemExit('users handler')" if users else "KeyboardInterrupt"}
        callback.__module__ = "_neurondesk_probe.values"
        class Held:
            pass
        held = Held()
        ref = weakref.ref(held, callback)
        """, "del held", expected="SystemExit" if users else "KeyboardInterrupt")
    want = "stopped: SystemExit users handler\n" if users else "stopped: KeyboardInterrupt \n"
    assert p.stdout == want and p.stderr == "", (p.stdout, p.stderr)


def test_another_finalizers_lost_ctrl_c_is_lost_as_without_neurondesk():
    p = run("""
        import weakref
        from _neurondesk_probe import _state
        _state.chain_unraisablehook()
        def callback(ref):
            raise KeyboardInterrupt
        class Held:
            pass
        held = Held()
        ref = weakref.ref(held, callback)
        """, "del held")
    assert p.stdout == "trained on\n" and "Exception ignored" in p.stderr


def test_two_interrupts_landing_in_our_code_before_the_first_is_raised_again_are_one():
    # both dropped by CPython in our ends, before the workload ran again: one KeyboardInterrupt reaches it,
    # and none is left behind to land later, outside the workload's `try`
    p = run("""
        import time
        from _neurondesk_probe import callthrough
        def end(state):
            raise KeyboardInterrupt
        sync = callthrough.CallThrough(lambda n: n + 1, lambda: "begun", end)
        """, "sync(1); sync(2)")
    assert p.stdout == "stopped: KeyboardInterrupt \n" and p.stderr == "", (p.stdout, p.stderr)
    p = run("""
        import time
        from _neurondesk_probe import callthrough
        def end(state):
            raise KeyboardInterrupt
        sync = callthrough.CallThrough(lambda n: n + 1, lambda: "begun", end)
        import signal
        try:
            sync(1); sync(2)
            time.sleep(1)
        except KeyboardInterrupt:
            pass
        print("the workload's handler is back:", signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        """, "time.sleep(0.5)")
    assert p.stdout == "the workload's handler is back: True\ntrained on\n" and p.stderr == "", (p.stdout, p.stderr)
