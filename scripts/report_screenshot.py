"""The HTML report's screenshot (screenshots/report.png), taken by a real headless Chromium (Debian
package `chromium`).

    .venv/bin/python scripts/report_screenshot.py [RUN_DIR ...]

Without run folders: two of the recorded runs in tests/data/journals (plain and dynamic, so the
compare table shows too). The report itself is written to a temporary folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JOURNALS = REPO / "tests" / "data" / "journals"
OUT = REPO / "screenshots"


def chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


def headless(binary: str, *args: str) -> list[str]:
    """Chromium's headless command line (no sandbox: CI runs as root; no GPU on a server)."""
    return [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]


def main(argv: list[str]) -> int:
    binary = chromium()
    if binary is None:
        sys.stderr.write("report_screenshot: no chromium binary; install the Debian package `chromium`\n")
        return 2
    runs = argv or [str(JOURNALS / "plain"), str(JOURNALS / "dynamic")]
    shot = OUT / "report.png"
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        subprocess.run([sys.executable, "-m", "neurondesk.cli", "report", *runs, "-o", str(page)], check=True, cwd=REPO)
        subprocess.run(headless(binary, "--window-size=1200,2600", f"--screenshot={shot}", page.as_uri()),
                       check=True, capture_output=True, timeout=120)
    print(shot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
