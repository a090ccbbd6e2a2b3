"""What the console does on request or on an alert, beside its panels: ring the terminal for each
new alert (``--notify``) and read every rank's Python stacks (``k``)."""

from __future__ import annotations

from neurondesk.core.view.pulse import Alerts
from neurondesk.reports.safe_text import clean
from neurondesk.views.terminal_notify import AlertBell, notification


def ring_alerts(app, alerts: Alerts) -> None:
    """--notify (``app.alert_bell`` set): a toast, the bell and a desktop notification (OSC 777 /
    OSC 9) per new alert."""
    bell: AlertBell | None = getattr(app, "alert_bell", None)
    if bell is None:
        return
    for message in bell.new_alerts(alerts):
        app.notify(clean(message), title="alert", severity="warning", timeout=30)
        driver = getattr(app, "_driver", None)
        if driver is not None:
            driver.write(notification(message))


def read_stacks(app) -> None:
    """k: every rank's Python stacks (py-spy, or the probe's dump) into the run folder, in a thread;
    who stands where comes back as a toast."""
    take = getattr(app.source, "stacks", None)
    if take is None or not app.source.live or app.source.done:
        app.notify("stacks are read from the processes of a live run")
        return
    app.notify("reading every rank's Python stacks…", title="stacks")

    def work() -> None:
        try:
            words, path = take()
        except Exception as exc:  # noqa: BLE001 - a failed read is said, never raised into the console
            app.call_from_thread(app.notify, clean(f"stacks: {exc}"), title="stacks", severity="error")
            return
        app.call_from_thread(app.notify, clean(f"{words} (every stack: {path})"), title="stacks", timeout=60)

    app.run_worker(work, thread=True, exclusive=True, group="stacks")
