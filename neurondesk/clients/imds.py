"""Which EC2 instance type (and region) are we on? IMDSv2, one short try, negative answer cached.

Off EC2 the metadata address usually just does not answer, so each launch would wait for the
timeout. A failed lookup is therefore remembered for a day in the user cache dir. Any HTTP 200 is
not trusted: GCP and Azure answer on the same address, so the token PUT must return 200 and the
instance type must look like one.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from neurondesk.store.input_files import read_regular

DEFAULT_BASE_URL = "http://169.254.169.254"
TOKEN_TTL_S = 60  # the token is used for three requests, right away
NEGATIVE_TTL_S = 24 * 3600
_INSTANCE_TYPE = re.compile(r"^[a-z0-9-]+\.[a-z0-9-]+$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-\d+$")
_AZ = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]$")  # a plain AZ; Local Zones do not match


@dataclass(frozen=True)
class ImdsResult:
    instance_type: str | None
    region: str | None
    status: str  # "ok" | "disabled" | "cached" | "unavailable" | "invalid"
    detail: str  # one line for the user


class _Fail(Exception):
    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is never followed: it surfaces as the HTTPError of its 3xx status."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201
        return None


# The link-local metadata addresses (IPv4, and IPv6 on Nitro); loopback is allowed for local
# emulators and tests. Nothing else is ever sent the metadata requests.
_METADATA_HOSTS = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})


def _allowed_host(base_url: str) -> bool:
    try:
        parts = urllib.parse.urlsplit(base_url)
        host = ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        return False  # a name (resolved by whom?) or no host at all
    return parts.scheme == "http" and (host in _METADATA_HOSTS or host.is_loopback)


def default_cache_path() -> Path:
    return Path(platformdirs.user_cache_dir("neurondesk")) / "imds.json"


def _request(opener: urllib.request.OpenerDirector, req: urllib.request.Request, deadline: float) -> str:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _Fail("unavailable", "instance metadata timed out")
    try:
        with opener.open(req, timeout=remaining) as resp:
            if resp.status != 200:
                raise _Fail("invalid", f"{req.get_method()} {req.full_url} returned HTTP {resp.status}")
            return resp.read(256).decode("ascii", "replace").strip()
    except urllib.error.HTTPError as e:
        redirect = " (a redirect: not followed)" if 300 <= e.code < 400 else ""
        raise _Fail("invalid", f"{req.get_method()} {req.full_url} returned HTTP {e.code}{redirect}") from None
    except (OSError, http.client.HTTPException) as e:  # timeout, refused, unreachable, not HTTP
        reason = getattr(e, "reason", e)
        raise _Fail("unavailable", f"no instance metadata at {req.full_url}: {reason}") from None


def _query(base_url: str, timeout_s: float) -> tuple[str, str | None]:
    base = base_url.rstrip("/")
    if not _allowed_host(base):
        raise _Fail("invalid", f"refusing instance metadata at {base[:80]!r}: only the link-local metadata "
                               "address (http://169.254.169.254 or http://[fd00:ec2::254]) is asked")
    deadline = time.monotonic() + timeout_s  # one budget for the whole exchange
    # No proxies: an http_proxy in the environment must not see (or swallow) this request. No
    # redirects: an answer pointing elsewhere must not take the token request (or its reply) there.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    token = _request(
        opener,
        urllib.request.Request(
            f"{base}/latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL_S)},
        ),
        deadline,
    )
    if not token:
        raise _Fail("invalid", "IMDSv2 token PUT returned an empty token")
    hdr = {"X-aws-ec2-metadata-token": token}

    def get(path: str) -> str:
        return _request(
            opener, urllib.request.Request(f"{base}/latest/meta-data/{path}", headers=hdr), deadline
        )

    itype = get("instance-type")
    if not _INSTANCE_TYPE.match(itype):
        raise _Fail("invalid", f"instance metadata gave an invalid instance type {itype[:64]!r}")
    return itype, _region(get)


def _region(get: Callable[[str], str]) -> str | None:
    """placement/region, else the AZ minus its letter (not for Local Zones); None if neither."""
    try:
        region = get("placement/region")
        if _REGION.match(region):
            return region
    except _Fail:
        pass
    try:
        m = _AZ.match(get("placement/availability-zone"))
    except _Fail:
        return None  # the instance type is what matters; the region is a nicety
    return m.group(1) if m else None


def _read_negative(cache_path: Path, base_url: str, now: float) -> str | None:
    try:
        d = json.loads(read_regular(cache_path, "the metadata cache", 1 << 16))
        if d.get("base_url") == base_url and 0 <= now - float(d["checked_at"]) < NEGATIVE_TTL_S:
            return str(d.get("detail", ""))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # no cache or an unreadable one: look again
    return None


def _write_negative(cache_path: Path, base_url: str, now: float, detail: str) -> None:
    try:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"base_url": base_url, "checked_at": now, "detail": detail}))
        tmp.replace(cache_path)
    except OSError:
        pass  # a read-only cache dir only costs the next run another timeout


def detect_instance(
    base_url: str | None = None,
    timeout_s: float = 1.0,
    cache_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    now: float | None = None,
    use_cache: bool = True,
) -> ImdsResult:
    """Instance type and region from IMDSv2, or None with the reason in ``detail``.

    One attempt within ``timeout_s`` overall. A failure is cached in ``cache_path`` (default: the
    user cache dir) for a day; ``use_cache=False`` ignores and does not write the cache.
    ``AWS_EC2_METADATA_DISABLED=true`` skips the lookup, as the AWS SDKs do; without ``base_url``,
    ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` (the SDKs' name) replaces the default address, still only
    a link-local or loopback one.
    """
    env = os.environ if env is None else env
    if base_url is None:
        base_url = env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "").strip().rstrip("/") or DEFAULT_BASE_URL
    if env.get("AWS_EC2_METADATA_DISABLED", "").strip().lower() == "true":
        return ImdsResult(None, None, "disabled", "instance metadata disabled by AWS_EC2_METADATA_DISABLED")
    now = time.time() if now is None else now
    cache_path = default_cache_path() if cache_path is None else cache_path
    if use_cache:
        cached = _read_negative(cache_path, base_url, now)
        if cached is not None:
            return ImdsResult(None, None, "cached", f"not on EC2 (cached {cache_path}): {cached}")
    try:
        itype, region = _query(base_url, timeout_s)
    except _Fail as f:
        if use_cache:
            _write_negative(cache_path, base_url, now, f.detail)
        return ImdsResult(None, None, f.status, f.detail)
    return ImdsResult(itype, region, "ok", f"EC2 instance metadata: {itype}, {region or 'region unknown'}")
