"""Secrets out of every word neurondesk writes: the one redaction of a service's text (issue 45 item 2).

A URL given to neurondesk may carry credentials (``http://user:PASSWORD@host/``, ``?token=...``, a webhook's
token in its path) and a tool's error text quotes the URL it failed on (MLflow: "API request to
http://user:PASSWORD@host/api/... failed"; botocore: 'Could not connect to the endpoint URL: "..."'). Every
text that comes from a service's library goes through ``redact`` where it enters neurondesk, before any
notice, journal line, summary, index row or stream can hold it: user info is dropped from every URL in it,
every query string becomes ``?…``, ``password=``/``token=``-like values and ``Bearer``/``Basic`` credentials
become ``***``, and each value known to be secret (``secret_values``: the URL's password, the environment's
``*_PASSWORD``, ``*_TOKEN``, ``*_API_KEY``, ``*_SECRET*`` ...) is replaced wherever it stands, as given or
percent-encoded. A command line's secrets are the values of its flags whose name says so (``--hf-token X``,
``--api-key=Y``, ``--password X``: ``argv_secrets``); ``redact_argv`` is the command as it may be shown.
``shown_url`` is what may be said of a URL; ``basic_auth`` turns a URL's user info into the
``Authorization`` header that urllib (which cannot read user info) sends.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote, urlsplit, urlunsplit

HIDDEN = "***"
MIN_SECRET = 6  # shorter values (a "1", a "true") are no secret worth replacing everywhere
_SECRET_NAME = re.compile(r"PASSWORD|PASSWD|TOKEN|SECRET|API_?KEY|ACCESS_KEY|CREDENTIAL|AUTH", re.IGNORECASE)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#'\"<>]*@")
_QUERY = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s?#'\"<>]*)\?[^\s#'\"<>)]*")
_KEY_VALUE = re.compile(r"(?i)\b(password|passwd|pwd|token|access_token|api[_-]?key|secret|signature|sig)"
                        r"(['\"]?\s*[=:]\s*['\"]?)[^\s&,;'\"<>)]+")
_SCHEME_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)\s+[a-z0-9._~+/=-]{8,}")
_SECRET_FLAG = re.compile(r"(?i)^--?[a-z0-9_.-]*(password|passwd|token|secret|api[_-]?key|access[_-]?key|credential)"
                          r"[a-z0-9_.-]*$")
MIN_ARG_SECRET = 3  # a flag's value shorter than this is hidden where it stands, not searched for in other text


def secret_values(env: Mapping[str, str] | None = None, urls: Iterable[str | None] = ()) -> tuple[str, ...]:
    """The values that are secrets: every variable of ``env`` whose name says so (``MLFLOW_TRACKING_PASSWORD``,
    ``MLFLOW_TRACKING_TOKEN``, ``WANDB_API_KEY``, ``AWS_SECRET_ACCESS_KEY`` ...) and each URL's password;
    longest first, so that a secret holding another is replaced whole."""
    found = {v for k, v in (env or {}).items() if _SECRET_NAME.search(k) and len(v) >= MIN_SECRET}
    for url in urls:
        try:
            password = urlsplit(url or "").password
        except ValueError:
            password = None
        if password and len(password) >= 3:
            found |= {password, unquote(password)}
    return tuple(sorted(found, key=len, reverse=True))


def _flag_value(argv: list[str], i: int) -> tuple[str | None, bool]:
    """(the secret value argument ``i`` gives or names, whether it is the next argument)."""
    flag, eq, value = argv[i].partition("=")
    if not _SECRET_FLAG.match(flag):
        return None, False
    if eq:
        return value, False
    nxt = argv[i + 1] if i + 1 < len(argv) else None
    return (nxt, True) if nxt is not None and not nxt.startswith("-") else (None, False)


def argv_secrets(argv: list[str]) -> tuple[str, ...]:
    """The values a command line gives to its secret flags (``--hf-token X``, ``--api-key=Y``), longest first."""
    found = {v for i in range(len(argv)) for v, _ in [_flag_value(argv, i)] if v and len(v) >= MIN_ARG_SECRET}
    return tuple(sorted(found, key=len, reverse=True))


def redact_argv(argv: list[str], secrets: Iterable[str] = ()) -> list[str]:
    """The command as it may be shown: each secret flag's value ``***`` (``--api-key=***``, ``--hf-token ***``)
    and every other argument through ``redact`` (a secret of the environment given under another flag)."""
    out, hide = [], False
    for i, arg in enumerate(argv):
        if hide:
            out.append(HIDDEN)
            hide = False
            continue
        value, hide = _flag_value(argv, i)
        out.append(f"{arg.partition('=')[0]}={HIDDEN}" if value is not None and not hide else redact(arg, secrets))
    return out


def replace_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """Each known secret value in ``text`` (as given or percent-encoded) as ``***``; nothing else changed."""
    for secret in secrets:
        if secret:
            for form in {secret, quote(secret, safe=""), quote(secret)}:
                text = text.replace(form, HIDDEN)
    return text


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without any credential: what may be written anywhere."""
    text = replace_secrets(text, secrets)
    text = _USERINFO.sub(r"\1", text)
    text = _QUERY.sub(r"\1?…", text)
    text = _KEY_VALUE.sub(rf"\1\2{HIDDEN}", text)
    return _SCHEME_CREDENTIAL.sub(rf"\1 {HIDDEN}", text)


def shown_url(url: str, path: bool = True) -> str:
    """The URL as it may be said: scheme, host, port and (``path``) its path; never its user info, query
    string or fragment. Without ``path`` a path or query is ``/…`` (a webhook's token is in its path)."""
    try:
        parts = urlsplit(url)
        host = _netloc(parts)
    except ValueError:
        return "the URL"
    if not parts.scheme or not host:
        return redact(url) if path else "the URL"
    if path:
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    hidden = "/…" if parts.path.strip("/") or parts.query or parts.fragment else parts.path
    return urlunsplit((parts.scheme, host, hidden, "", ""))


def basic_auth(url: str) -> tuple[str, dict[str, str]]:
    """(the URL without user info, the headers that carry it): urllib sends no user info of its own (it
    takes ``user:pw@host`` for a host name); ``{}`` when the URL has none."""
    try:
        parts = urlsplit(url)
        if parts.username is None and parts.password is None:
            return url, {}
        host = _netloc(parts)
    except ValueError:
        return url, {}
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}".encode()
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return bare, {"Authorization": "Basic " + base64.b64encode(pair).decode()}


def _netloc(parts) -> str:
    """Host and port of a split URL, without its user info (an IPv6 host in its brackets); ValueError for a bad port."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return host + (f":{parts.port}" if parts.port else "")
