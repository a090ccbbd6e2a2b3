"""IMDSv2 lookups against a real local HTTP server that implements the token flow."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from neurondesk.clients.imds import NEGATIVE_TTL_S, detect_instance

TOKEN = "AQAEAFakeToken=="
NOW = 1_800_000_000.0


class FakeImds(BaseHTTPRequestHandler):
    server: "Server"

    def log_message(self, *args):
        pass

    def _send(self, code, body=b""):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        srv = self.server
        srv.hits.append(("PUT", self.path, self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")))
        if srv.mode == "sleep":
            if not srv.release.wait(120):  # never answers; the client must give up first
                srv.outwaited = True
            return
        if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self._send(400)
        if srv.mode in ("401", "403"):
            return self._send(int(srv.mode), b"Forbidden")
        if srv.mode == "redirect-put":
            return self._redirect()
        self._send(200, TOKEN.encode())

    def _redirect(self):
        self.send_response(307)
        self.send_header("Location", self.server.location + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        srv = self.server
        srv.hits.append(("GET", self.path, self.headers.get("X-aws-ec2-metadata-token")))
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            return self._send(401)
        if srv.mode == "redirect-get":
            return self._redirect()
        answers = {
            "/latest/meta-data/instance-type": srv.instance_type,
            "/latest/meta-data/placement/region": srv.region,
            "/latest/meta-data/placement/availability-zone": "us-west-2b",
        }
        body = answers.get(self.path)
        if body is None:
            return self._send(404)
        self._send(200, body.encode())


class Server(ThreadingHTTPServer):
    daemon_threads = True
    mode = "good"
    instance_type = "trn1.32xlarge"
    region: str | None = "us-east-1"
    location = ""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), FakeImds)
        self.hits = []
        self.release = threading.Event()
        self.outwaited = False

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def imds():
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


def _detect(imds, tmp_path, **kw):
    kw.setdefault("env", {})
    kw.setdefault("now", NOW)
    return detect_instance(
        imds.url, timeout_s=kw.pop("timeout_s", 1.0), cache_path=tmp_path / "imds.json", **kw
    )


def test_good_answer(imds, tmp_path):
    r = _detect(imds, tmp_path)
    assert (r.status, r.instance_type, r.region) == ("ok", "trn1.32xlarge", "us-east-1")
    assert imds.hits[0] == ("PUT", "/latest/api/token", "60")
    assert ("GET", "/latest/meta-data/instance-type", TOKEN) in imds.hits
    assert not (tmp_path / "imds.json").exists()  # only "not on EC2" is cached


def test_region_falls_back_to_the_availability_zone(imds, tmp_path):
    imds.region = None  # placement/region answers 404
    r = _detect(imds, tmp_path)
    assert (r.instance_type, r.region) == ("trn1.32xlarge", "us-west-2")


@pytest.mark.parametrize("code", ["401", "403"])
def test_token_refused(imds, tmp_path, code):
    imds.mode = code
    r = _detect(imds, tmp_path)
    assert (r.status, r.instance_type) == ("invalid", None)
    assert f"HTTP {code}" in r.detail
    assert not [h for h in imds.hits if h[0] == "GET"]  # no metadata read without a token


@pytest.mark.parametrize("garbage", ["<html><body>Metadata</body></html>", "TRN1.32XLARGE", "trn1", ""])
def test_garbage_instance_type_is_rejected(imds, tmp_path, garbage):
    imds.instance_type = garbage
    r = _detect(imds, tmp_path)
    assert (r.status, r.instance_type) == ("invalid", None)
    assert "invalid instance type" in r.detail


def test_timeout_is_one_short_try_and_is_cached(imds, tmp_path):
    imds.mode = "sleep"
    r = _detect(imds, tmp_path, timeout_s=0.3)
    # the server never answered (it is still holding the request): the client gave up on its own
    assert not imds.outwaited and not imds.release.is_set()
    assert (r.status, r.instance_type) == ("unavailable", None)
    assert len(imds.hits) == 1  # one attempt
    cache = json.loads((tmp_path / "imds.json").read_text())
    assert cache["checked_at"] == NOW and cache["base_url"] == imds.url


def test_cached_negative_answer_makes_no_network_call(imds, tmp_path):
    imds.mode = "sleep"
    _detect(imds, tmp_path, timeout_s=0.2)
    imds.mode = "good"  # it would answer now, but the cache says not to ask
    hits = len(imds.hits)
    r = _detect(imds, tmp_path, now=NOW + 3600)
    assert (r.status, r.instance_type) == ("cached", None)
    assert len(imds.hits) == hits  # the server was not asked
    # after a day it looks again
    r = _detect(imds, tmp_path, now=NOW + NEGATIVE_TTL_S + 1)
    assert (r.status, r.instance_type) == ("ok", "trn1.32xlarge")
    assert len(imds.hits) > hits


def test_use_cache_false_ignores_the_cache(imds, tmp_path):
    (tmp_path / "imds.json").write_text(json.dumps({"base_url": imds.url, "checked_at": NOW, "detail": "x"}))
    assert _detect(imds, tmp_path, use_cache=False).instance_type == "trn1.32xlarge"


def test_unreadable_cache_means_look_again(imds, tmp_path):
    (tmp_path / "imds.json").write_text("{torn")
    assert _detect(imds, tmp_path).status == "ok"


def test_disabled_by_environment(imds, tmp_path):
    r = _detect(imds, tmp_path, env={"AWS_EC2_METADATA_DISABLED": "True"})
    assert (r.status, r.instance_type) == ("disabled", None)
    assert imds.hits == [] and not (tmp_path / "imds.json").exists()


def test_nothing_listening(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = detect_instance(f"http://127.0.0.1:{port}", cache_path=tmp_path / "c.json", env={}, now=NOW)
    assert (r.status, r.instance_type) == ("unavailable", None)
    assert (tmp_path / "c.json").exists()


@pytest.mark.parametrize("mode", ["redirect-put", "redirect-get"])
def test_a_redirect_is_never_followed(imds, tmp_path, mode):
    elsewhere = Server()
    thread = threading.Thread(target=elsewhere.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        imds.mode, imds.location = mode, elsewhere.url
        r = _detect(imds, tmp_path)
        assert r.instance_type is None and r.status == "invalid"
        assert "returned HTTP 307 (a redirect: not followed)" in r.detail
        assert elsewhere.hits == []  # neither the token request nor the token went there
    finally:
        elsewhere.shutdown()
        elsewhere.server_close()


@pytest.mark.parametrize("url", ["http://example.invalid", "http://10.0.0.1", "https://169.254.169.254", "file:///x"])
def test_only_the_link_local_metadata_address_is_asked(tmp_path, url):
    r = detect_instance(url, timeout_s=1.0, cache_path=tmp_path / "imds.json", env={}, now=NOW, use_cache=False)
    assert r.status == "invalid" and "only the link-local metadata address" in r.detail


def test_the_endpoint_variable_replaces_the_default_address_but_not_the_rule(imds, tmp_path):
    r = detect_instance(cache_path=tmp_path / "imds.json", now=NOW,
                        env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url + "/"})
    assert (r.status, r.instance_type) == ("ok", "trn1.32xlarge")
    r = detect_instance(cache_path=tmp_path / "imds.json", now=NOW, use_cache=False,
                        env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://example.invalid"})
    assert r.status == "invalid" and "only the link-local metadata address" in r.detail


def _run_without_instance_type(tmp_path, env):
    import subprocess
    import sys

    from conftest import REPO

    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "neurondesk.cli", "run", "--headless", "--run-dir", str(run_dir), "--",
           sys.executable, "-c", "print('hello')"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads((run_dir / "summary.json").read_text())


def test_run_without_instance_type_asks_the_metadata_service(imds, tmp_path):
    """`neurondesk run` with no --instance-type: IMDSv2 is asked (here a local server), the run is
    priced as that instance; "not on EC2" is remembered in the user cache folder."""
    from conftest import base_env

    env = base_env(tmp_path)
    del env["AWS_EC2_METADATA_DISABLED"]
    env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = imds.url
    imds.instance_type = "trn1.2xlarge"
    s = _run_without_instance_type(tmp_path / "a", env)
    assert s["cost"]["instance_type"] == "trn1.2xlarge"
    assert s["cost"]["price_per_hour"] == 1.34375  # the bundled table's trn1.2xlarge row
    assert ("PUT", "/latest/api/token", "60") in imds.hits
    assert ("GET", "/latest/meta-data/instance-type", TOKEN) in imds.hits

    imds.mode = "401"  # refused: no instance type, the run says why and is not priced
    s = _run_without_instance_type(tmp_path / "b", env)
    assert s["cost"]["instance_type"] is None and s["cost"]["price_per_hour"] is None
    assert "HTTP 401" in json.dumps(s["cost"])
    cache = tmp_path / "user" / "cache" / "neurondesk" / "imds.json"
    assert json.loads(cache.read_text())["base_url"] == imds.url
