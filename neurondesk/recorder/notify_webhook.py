"""``--notify-url URL``: POST each alert as a small JSON object, from a thread of its own.

The body: ``run_id``, ``event``, ``level``, ``message``, ``figures``, ``t`` and a Slack-compatible
``text`` (an incoming-webhook URL of Slack, Mattermost or Discord's /slack endpoint shows it as is).
Each POST has a timeout; a refused connection, a timeout or a 5xx answer is retried a few times with
backoff, a 4xx answer is not. The queue is bounded: an alert that finds it full is dropped and
counted, so the recorder never waits on the network. The URL's path and query string (where webhook
services put their secret) are never written anywhere: every word about the URL uses ``redact``.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import urlsplit

import msgspec

from neurondesk.core.rules.alert_rules import Alert
from neurondesk.sinks import redact as redaction

TIMEOUT_S = 5.0
RETRIES = 3  # after the first try
BACKOFF_S = 1.0  # doubled after each failed try
QUEUE_MAX = 64


def redact(url: str) -> str:
    """The URL's scheme and host only, what may be written in a log: its path (Slack and Discord put
    their token there), query string (most others), fragment and user info become ``/…``."""
    return redaction.shown_url(url, path=False)


def check_url(url: str, what: str = "--notify-url") -> str | None:
    """Why ``url`` cannot be a webhook (one line, ``what`` naming where it came from), or None."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{what}: not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{what}: {redact(url)} is no http:// or https:// URL; give one"
    return None


def payload(run_id: str, alert: Alert) -> bytes:
    return json.dumps({"run_id": run_id, "event": alert.event, "level": alert.level, "message": alert.message,
                       "figures": msgspec.to_builtins(alert.figures), "t": alert.t,
                       "text": f"neurondesk {run_id}: {alert.message}"}).encode()


class WebhookSender:
    """``send(alert)`` never blocks; ``close(wait_s)`` lets the queue drain for at most ``wait_s``.
    ``say(words)`` is called (from the sender's thread) once when deliveries start failing and once
    when one succeeds again."""

    def __init__(self, url: str, run_id: str, say: Callable[[str], None], timeout_s: float = TIMEOUT_S,
                 retries: int = RETRIES, backoff_s: float = BACKOFF_S) -> None:
        self._url, self._shown = url, redact(url)
        self._run_id, self._say = run_id, say
        self._timeout_s, self._retries, self._backoff_s = timeout_s, retries, backoff_s
        self._queue: queue.Queue[Alert | None] = queue.Queue(maxsize=QUEUE_MAX)
        self._closing = threading.Event()
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self._failing = False
        self._thread = threading.Thread(target=self._loop, name="neurondesk-webhook", daemon=True)
        self._thread.start()

    def send(self, alert: Alert) -> None:
        try:
            self._queue.put_nowait(alert)
        except queue.Full:
            self.dropped += 1

    def close(self, wait_s: float = 10.0) -> None:
        """No more alerts; what is queued is tried until ``wait_s`` has passed, then left."""
        deadline = time.monotonic() + wait_s
        try:
            self._queue.put(None, timeout=wait_s)
        except queue.Full:
            pass
        self._thread.join(max(0.0, deadline - time.monotonic()))
        self._closing.set()  # a try still running gives up its backoff

    def _loop(self) -> None:
        while True:
            alert = self._queue.get()
            if alert is None:
                return
            self._deliver(alert)

    def _deliver(self, alert: Alert) -> None:
        body = payload(self._run_id, alert)
        delay = self._backoff_s
        why = ""
        for attempt in range(self._retries + 1):
            why, retry = self._post(body)
            if not why:
                self.sent += 1
                if self._failing:
                    self._failing = False
                    self._say(f"alerts reach {self._shown} again")
                return
            if not retry or attempt == self._retries or self._closing.wait(delay):
                break
            delay *= 2
        self.failed += 1
        if not self._failing:
            self._failing = True
            self._say(f"an alert could not be sent to {self._shown} ({why}); the run goes on, "
                      "alerts are also in the run's notices")

    def _post(self, body: bytes) -> tuple[str, bool]:
        """("", _) when delivered; else (why, whether to retry)."""
        bare, auth = redaction.basic_auth(self._url)  # urllib sends no user info of its own
        req = urllib.request.Request(bare, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "neurondesk", **auth})
        try:
            with urllib.request.urlopen(req, timeout=self._timeout_s) as answer:
                answer.read(4096)
            return "", False
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code}", exc.code >= 500 or exc.code == 429
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            text = redaction.redact(str(reason).replace(self._url, self._shown).replace(bare, self._shown),
                                    redaction.secret_values(urls=[self._url]))
            return (text or type(exc).__name__)[:120], True
        except Exception as exc:  # noqa: BLE001 - the sender's thread never dies of one alert
            return type(exc).__name__, False

    @property
    def shown_url(self) -> str:
        return self._shown
