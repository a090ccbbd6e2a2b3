"""The webhook sender against real loopback HTTP servers: one that answers, one that answers 500,
one that accepts and never answers; the URL's query string is never in what it says."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from neurondesk.core.rules.alert_rules import Alert
from neurondesk.recorder.notify_webhook import WebhookSender, check_url, redact

SECRET = "token=s3cr3t"


class Hook:
    """A loopback HTTP server answering ``status`` and keeping every request's body."""

    def __init__(self, status: int = 200) -> None:
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                n = int(self.headers.get("Content-Length", 0))
                hook.bodies.append(json.loads(self.rfile.read(n)))
                hook.paths.append(self.path)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook?{SECRET}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def said():
    return []


def alert(event: str = "hung", message: str = "hung at step 12 for 12 min") -> Alert:
    return Alert(event=event, level="error", message=message, t=1000.0, figures={"step": 12, "idle_s": 720.0})


def test_an_alert_is_posted_as_json_with_a_slack_text(said):
    hook = Hook()
    try:
        sender = WebhookSender(hook.url, "run-1", said.append, timeout_s=5, backoff_s=0.01)
        sender.send(alert())
        sender.close(10)
    finally:
        hook.close()
    (body,) = hook.bodies
    assert body == {"run_id": "run-1", "event": "hung", "level": "error", "message": "hung at step 12 for 12 min",
                    "figures": {"step": 12, "idle_s": 720.0}, "t": 1000.0,
                    "text": "neurondesk run-1: hung at step 12 for 12 min"}
    assert hook.paths == [f"/hook?{SECRET}"]  # the whole URL is used ...
    assert sender.sent == 1 and said == []


def test_a_500_is_retried_with_backoff_then_said_once_without_the_query(said):
    hook = Hook(status=500)
    try:
        sender = WebhookSender(hook.url, "run-1", said.append, timeout_s=5, retries=2, backoff_s=0.01)
        sender.send(alert())
        sender.send(alert("finished", "finished: 20 steps"))
        sender.close(10)
    finally:
        hook.close()
    assert len(hook.bodies) == 6  # each alert: the first try and 2 retries
    assert sender.failed == 2 and sender.sent == 0
    assert len(said) == 1 and "HTTP 500" in said[0]  # once, not per alert
    assert SECRET not in said[0] and "s3cr3t" not in said[0] and "/hook" not in said[0]  # ... but never written
    assert "http://127.0.0.1:" in said[0]  # the host is said: which webhook fails


def test_a_4xx_is_not_retried(said):
    hook = Hook(status=404)
    try:
        sender = WebhookSender(hook.url, "run-1", said.append, timeout_s=5, retries=3, backoff_s=0.01)
        sender.send(alert())
        sender.close(10)
    finally:
        hook.close()
    assert len(hook.bodies) == 1 and "HTTP 404" in said[0]


@pytest.mark.slow  # seconds of waiting: make test runs it, make test-fast does not
def test_a_server_that_never_answers_times_out_and_send_never_waits(said):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepted by the kernel, never read, never answered
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook?{SECRET}"
    try:
        sender = WebhookSender(url, "run-1", said.append, timeout_s=0.5, retries=1, backoff_s=0.01)
        for _ in range(200):  # far more than the queue holds: none of these calls blocks
            sender.send(alert())
        assert sender.dropped > 0
        sender.close(3)  # a bounded wait, whatever is left
    finally:
        listener.close()
    assert sender.failed >= 1 and sender.sent == 0
    assert said and "timed out" in said[0] and "s3cr3t" not in said[0]


def test_urls_redacted_and_checked():
    assert redact("https://user:pw@hooks.example.com:8443/services/T/B?token=x#f") == \
        "https://hooks.example.com:8443/…"
    # Slack and Discord put the token in the path: it is never written either (issue 34 item 3)
    assert redact("https://hooks.slack.com/services/T000/B000/XXXXsecret") == "https://hooks.slack.com/…"
    assert "secret" not in redact("hooks.slack.com/services/T/B/secret")  # no scheme: all of it is a path
    assert redact("https://hooks.example.com") == "https://hooks.example.com"
    assert "secret" not in (check_url("hooks.slack.com/services/T/B/secret", "NEURONDESK_NOTIFY_URL") or "")
    assert check_url("x", "NEURONDESK_NOTIFY_URL").startswith("NEURONDESK_NOTIFY_URL: ")
    assert check_url("ftp://x/y") is not None and check_url("https://hooks.example.com/x?y=1") is None
    assert "y=1" not in (check_url("file:///etc?y=1") or "")
