"""The one piece of state every hook reads first: whether dynamo is tracing it.

``is_compiling`` is replaced by torch.compiler.is_compiling once torch is loaded (see
optim.OptimizerHooks.patch_compiler). Every hook that torch can call from inside a torch.compile'd
region returns at once when it is True: dynamo then traces the hook as a no-op instead of breaking
the user's graph on our code. Hooks call it as ``_state.is_compiling()`` (a module attribute), so
the replacement is seen everywhere.
"""

from __future__ import annotations


def is_compiling() -> bool:
    return False


def env_int(name: str, environ=None) -> int | None:
    """A launcher's number (RANK, WORLD_SIZE, ...) as an int, or None: ASCII digits only, at most 7 of them.
    '²' is a digit to str.isdigit and not to int(): a launch variable holding it must never raise in a hook."""
    import os

    text = (environ if environ is not None else os.environ).get(name, "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 7 else None


def dressed(call, real):
    """``call``, a wrapper of ours, named and documented as ``real`` (what introspection and pickling by
    name see), marked as ours (``_neurondesk``) and pointing at it (``__wrapped__``)."""
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(call, attr, getattr(real, attr))
        except (AttributeError, TypeError):
            pass
    call.__wrapped__, call._neurondesk = real, True
    return call


def redeliver(exc: BaseException) -> None:
    """A signal handler's exception (Ctrl-C's KeyboardInterrupt, a handler's SystemExit) raised while
    CPython ran a finalizer or a weakref callback of ours: CPython prints "Exception ignored in" and
    drops it, and the workload would train on after its Ctrl-C. It is raised again in the workload's
    own code, as the signal would have been: SIGINT is signalled again, from a thread a few
    milliseconds on (signalled from here, the handler would run here, in our frame), to a handler of
    ours that waits while the interrupted frame is still ours and then puts the workload's handler
    back. Ctrl-C under Python's own handler is then that handler's fresh KeyboardInterrupt (no frame
    of ours in its traceback); any other exception is raised as it was."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # signal handlers run in the main thread only
        return
    previous = signal.getsignal(signal.SIGINT)
    if getattr(previous, "_neurondesk_redeliver", False):  # one is on its way already: it stands for both
        return

    def once(signum, frame):
        if frame is not None and str(frame.f_globals.get("__name__", "")).startswith(_PACKAGE):
            _signal_soon()  # still in code of ours: again in a moment
            return
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
        if isinstance(exc, KeyboardInterrupt) and previous is signal.default_int_handler:
            _signal_soon()  # Python's own handler raises it, in the workload's frame
            return
        raise exc

    once._neurondesk_redeliver = True
    signal.signal(signal.SIGINT, once)
    _signal_soon()


def _signal_soon() -> None:
    """SIGINT to the main thread, a moment from now, from another thread: a real signal, so that a
    blocking call of the workload's (a sleep, a wait) is interrupted as by a Ctrl-C."""
    import _thread
    import signal
    import threading

    main = threading.main_thread().ident

    def later():
        import time

        time.sleep(0.002)
        try:
            signal.pthread_kill(main, signal.SIGINT)
        except (AttributeError, OSError, ValueError):  # no pthread_kill here: the flag alone
            _thread.interrupt_main()

    try:
        _thread.start_new_thread(later, ())
    except RuntimeError:  # no thread to be had: at once, then
        _thread.interrupt_main()


_PACKAGE = __package__ or "_neurondesk_probe"


def chain_unraisablehook() -> None:
    """The net under the finalizers and weakref callbacks of ours (``redeliver`` in each covers the
    usual case): a signal's exception that arose at their very first instruction, before their own
    ``try``, reaches sys.unraisablehook instead, and is raised again too. Everything else goes to the
    hook there was, as always (another finalizer's lost Ctrl-C is lost as it is without neurondesk)."""
    import sys

    real = getattr(sys, "unraisablehook", None)
    if real is None:  # Python 3.7: a finalizer's exception is printed by CPython alone, no hook to take it
        return

    def unraisablehook(unraisable):
        exc = unraisable.exc_value
        if (exc is not None and not isinstance(exc, Exception)
                and str(getattr(unraisable.object, "__module__", "")).startswith(_PACKAGE)):
            redeliver(exc)
            return None
        return real(unraisable)

    sys.unraisablehook = unraisablehook
