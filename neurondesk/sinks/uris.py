"""``--mlflow URI``: every tracking URI MLflow takes, or a one-line refusal before the training starts (issue 45
item 3). Local stores are made absolute where the command was given, so nothing is written anywhere the user
did not name (``file:DIR`` was once a folder literally named ``file:DIR`` in the current directory).

- ``http://`` / ``https://``: a tracking server (its credentials in ``MLFLOW_TRACKING_USERNAME`` /
  ``MLFLOW_TRACKING_PASSWORD`` or ``MLFLOW_TRACKING_TOKEN``, MLflow's own variables, rather than in the URL).
- ``databricks``, ``databricks://PROFILE``: Databricks, as MLflow resolves it.
- ``file:DIR``, ``file:///ABS``: MLflow's file store in DIR (its artifacts inside it, as MLflow keeps them).
  MLflow 3.13 and later refuse that store unless ``MLFLOW_ALLOW_FILE_STORE`` is true: the user named it, so the
  sink says true for its own process unless the variable is set, and refuses here when it is set false.
- ``sqlite:///FILE``: MLflow's SQLite store (the artifacts of the experiment it creates in ``artifacts/`` beside
  FILE: MLflow's default would be ``./mlruns`` wherever the recorder runs).
- a folder (no scheme): ``FOLDER/mlflow.db`` with artifacts in ``FOLDER/artifacts``.
- no URI (``--mlflow`` alone): ``MLFLOW_TRACKING_URI`` of the environment, so that nothing of it is on the
  command line (``ps`` shows a command line to every user of the machine).
Other databases (their artifacts would go to ``./mlruns``) and other schemes are refused, naming what is taken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from neurondesk.sinks.base import SinkError
from neurondesk.sinks.redact import shown_url

URI_ENV = "MLFLOW_TRACKING_URI"
ALLOW_FILE_STORE = "MLFLOW_ALLOW_FILE_STORE"
TAKEN = "http(s)://HOST, databricks, file:DIR, sqlite:///FILE or a folder"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_DATABASES = ("postgresql", "mysql", "mssql", "oracle")


@dataclass(frozen=True)
class MlflowTarget:
    uri: str  # what MlflowClient is given (a local store's absolute)
    shown: str  # what may be said of it: never user info or a query string
    store: Path | None = None  # a local store's folder, made before MLflow opens it
    artifacts: Path | None = None  # the artifact root of an experiment the sink creates (None: the store's own)
    file_store: bool = False  # MLflow's file store (MLFLOW_ALLOW_FILE_STORE)

    @property
    def look(self) -> str:
        """How to see what was written there."""
        return f"mlflow ui --backend-store-uri {self.uri}" if self.store is not None else self.shown


def mlflow_target(text: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> MlflowTarget:
    """The store ``text`` names (relative paths against ``cwd``, default the current directory); SinkError in
    one line for one that is not taken."""
    env = env or {}
    if not text:
        text = env.get(URI_ENV, "").strip()
        if not text:
            raise SinkError(f"--mlflow without a URI takes {URI_ENV}, which is not set: give --mlflow URI "
                            f"({TAKEN}) or set {URI_ENV}")
    base = Path.cwd() if cwd is None else cwd
    match = _SCHEME.match(text)
    scheme = match.group(1).lower() if match else ""
    if scheme in ("http", "https"):
        if not urlsplit(text).hostname:
            raise SinkError(f"--mlflow {shown_url(text)}: no host in the URL; give http(s)://HOST[:PORT]")
        return MlflowTarget(uri=text, shown=shown_url(text))
    if text == "databricks" or scheme == "databricks":
        return MlflowTarget(uri=text, shown=shown_url(text) if scheme else text)
    if scheme == "file":
        return _file_store(text, env, base)
    if scheme == "sqlite":
        return _sqlite_store(text, base)
    if not scheme:
        folder = _absolute(text, base)
        return MlflowTarget(uri=f"sqlite:///{folder / 'mlflow.db'}", shown=str(folder), store=folder,
                            artifacts=folder / "artifacts")
    if scheme.split("+")[0] in _DATABASES:
        raise SinkError(f"--mlflow {shown_url(text)}: neurondesk writes to no database but SQLite directly (MLflow "
                        "would put the artifacts in ./mlruns wherever the recorder runs); run `mlflow server "
                        "--backend-store-uri ... --artifacts-destination ...` there and give its http:// URL")
    raise SinkError(f"--mlflow {shown_url(text)}: {scheme}: is no MLflow tracking URI neurondesk takes; give {TAKEN} "
                    f"(a folder whose name has a colon: ./{text})")


def _absolute(path: str, base: Path) -> Path:
    p = Path(unquote(path)).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _file_store(text: str, env: dict[str, str], base: Path) -> MlflowTarget:
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost") or not parts.path or parts.query:
        raise SinkError(f"--mlflow {shown_url(text)}: a file store is file:DIR or file:///ABSOLUTE/DIR (a host "
                        "after file:// would be dropped by MLflow, the store written elsewhere)")
    allow = env.get(ALLOW_FILE_STORE, "").strip().lower()
    if allow in ("false", "0"):
        raise SinkError(f"--mlflow {text}: {ALLOW_FILE_STORE}={env[ALLOW_FILE_STORE]} refuses MLflow's file store; "
                        "unset it, or give sqlite:///FILE or a folder (an SQLite store there)")
    folder = _absolute(parts.path, base)
    return MlflowTarget(uri=folder.as_uri(), shown=folder.as_uri(), store=folder, file_store=True)


def _sqlite_store(text: str, base: Path) -> MlflowTarget:
    rest = text[len("sqlite:"):]
    path = rest[3:].split("?")[0] if rest.startswith("///") else ""
    if not path or path == ":memory:":
        raise SinkError(f"--mlflow {text}: an SQLite store is sqlite:///FILE (relative) or sqlite:////ABSOLUTE/FILE; "
                        "an in-memory one keeps nothing")
    db = _absolute(path, base)
    return MlflowTarget(uri=f"sqlite:///{db}", shown=f"sqlite:///{db}", store=db.parent, artifacts=db.parent / "artifacts")


def password_warning(text: str | None) -> str | None:
    """The one line said when ``--mlflow``'s URL carries a password or token on the command line, or None."""
    if not text or not _SCHEME.match(text):
        return None
    try:
        parts = urlsplit(text)
        secret = parts.password or any(k.lower() in ("token", "access_token", "api_key") for k, _, _ in
                                       (q.partition("=") for q in parts.query.split("&")))
    except ValueError:
        return None
    if not secret:
        return None
    return (f"warning: --mlflow puts the password of {shown_url(text)} on the command line, where every user of "
            "this machine reads it (ps, /proc/PID/cmdline) for the whole run; give the URL without it and set "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN), or set "
            f"{URI_ENV} and give --mlflow alone")
