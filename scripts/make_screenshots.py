"""Record the console's reference runs and render its screenshots from them.

    # render screenshots/*.svg and *.png from the journals checked in under tests/data/journals/
    python scripts/make_screenshots.py

    # record those journals again (real XLA-on-CPU runs of workloads/train.py; minutes)
    PJRT_DEVICE=CPU python scripts/make_screenshots.py --record

Screenshots come from the real app (`ConsoleApp` on a `ReplaySource`, the same reducer as a
live run) driven headless at a fixed size with a frozen clock (an instant replay's clock is the
recording's); PNGs are rendered with rsvg-convert (librsvg) or, failing that, cairosvg. Recording runs the workload under a
`RunSession`, exactly as `neurondesk run` does (probe, log parsers, host/process telemetry).
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

JOURNALS = REPO / "tests" / "data" / "journals"
SHOTS = REPO / "screenshots"
TRAIN = REPO / "workloads" / "train.py"
DEMO = ["--preset", "demo", "--log-every", "10"]

# name -> workload flags (after the preset)
RECORDINGS: dict[str, list[str]] = {
    "plain": [*DEMO, "--steps", "120"],
    "dynamic": [*DEMO, "--steps", "30", "--dynamic-shape"],
    "input_bound": [*DEMO, "--steps", "80", "--loader-delay-ms", "250", "--num-workers", "1"],
    "item": [*DEMO, "--steps", "40", "--graph-break", "item"],
}


# --------------------------------------------------------------------------- recording
def record(name: str, flags: list[str], out_root: Path) -> Path:
    """One real run owned by a recorder process, as `neurondesk run --headless` does; returns its folder."""
    from neurondesk.core.node.prices import load_price_table, resolve_price
    from neurondesk.recorder.options import RunOptions
    from neurondesk.sources.follow import FollowSource
    from neurondesk.sources.launch import launch_recorder

    run_dir = out_root / name
    if run_dir.exists():
        shutil.rmtree(run_dir)
    from neurondesk.cli.run import DEMO_INSTANCE, DEMO_PRICE_NOTE, DEMO_PRICE_PER_HOUR

    quote = resolve_price(DEMO_INSTANCE, DEMO_PRICE_PER_HOUR, load_price_table(None))  # priced as `neurondesk demo`
    steps = int(flags[flags.index("--steps") + 1])
    options = RunOptions(instance_type=quote.instance_type, price_per_hour=quote.price_per_hour,
                         price_source=DEMO_PRICE_NOTE, steps_requested=steps, run_dir=run_dir,
                         run_root=out_root / "_index", cwd=str(REPO))
    command = [sys.executable, str(TRAIN.relative_to(REPO)), *flags]
    source = FollowSource(launch_recorder(command, options).paths.dir)
    try:
        while not source.done:
            source.poll()
            time.sleep(0.1)
    finally:
        if not source.done:
            source.stop()
    source.finish()
    state = source.state
    print(f"recorded {name}: {state.steps_done} steps, {len(state.compiles)} compiles, "
          f"exit {state.exit_code} -> {run_dir}")
    return run_dir


def record_all(names: list[str]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="neurondesk-recordings-"))
    for name in names:
        run_dir = record(name, RECORDINGS[name], tmp)
        dest = JOURNALS / name
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy(run_dir / "events.jsonl", dest / "events.jsonl")
        size = (dest / "events.jsonl").stat().st_size
        print(f"  {dest / 'events.jsonl'}: {size / 1024:.0f} KiB")


# --------------------------------------------------------------------------- screenshots
def compile_wall_offset(run_dir: Path, into_s: float = 6.0) -> float:
    """Seconds into the recording at which the first compile has been running `into_s`."""
    from neurondesk.store.journal import read_journal

    events, _ = read_journal(run_dir / "events.jsonl")
    t0 = events[0].t
    started = next(e for e in events if e.kind == "compile_started")
    finished = next(e for e in events if e.kind == "compile" and e.t >= started.t)
    return min(started.t - t0 + into_s, finished.t - t0 - 0.5)


def step_offset(run_dir: Path, step: int) -> float:
    """Seconds into the recording at which the given step ended."""
    from neurondesk.store.journal import read_journal

    events, _ = read_journal(run_dir / "events.jsonl")
    return next(e.t for e in events if e.kind == "step" and e.step == step) - events[0].t


def shots() -> list[dict]:
    """(file name, journal, replay until, size, keys) for every screenshot the README shows."""
    plain, dynamic, ib = JOURNALS / "plain", JOURNALS / "dynamic", JOURNALS / "input_bound"
    return [
        dict(name="compile-wall", run=plain, until=compile_wall_offset(plain), size=(160, 48)),
        dict(name="recompiles", run=dynamic, until=None, size=(160, 48), keys=["escape"]),
        dict(name="input-bound", run=ib, until=step_offset(ib, 50), size=(160, 48)),
        dict(name="summary", run=plain, until=None, size=(160, 48)),
        dict(name="compile-wall-80x24", run=plain, until=compile_wall_offset(plain), size=(80, 24)),
        dict(name="summary-80x24", run=plain, until=None, size=(80, 24)),
        # issue 14: the advice, where the time went, the step-time line and the loss
        dict(name="summary-advice", run=dynamic, until=None, size=(160, 48)),
        dict(name="throughput-80x24", run=plain, until=None, size=(80, 24), keys=["escape", "t"]),
        dict(name="cost-80x24", run=dynamic, until=None, size=(80, 24), keys=["escape", "$"]),
        dict(name="compiles-advice-80x24", run=dynamic, until=None, size=(80, 24), keys=["escape", "c"]),
    ]


async def _screenshot(run: Path, until: float | None, size: tuple[int, int], keys: list[str]) -> str:
    from neurondesk.sources.replay import ReplaySource
    from neurondesk.views.console.app import ConsoleApp

    source = ReplaySource(run, speed=0, until=until)
    app = ConsoleApp(source, frozen=True)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.poll_now()
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
            await pilot.pause()
        return app.export_screenshot(title=f"neurondesk — {run.name}")


TEXT = re.compile(r'<text ([^>]*?)x="([\d.]+)" y="([\d.]+)" textLength="([\d.]+)"([^>]*)>([^<]*)</text>')


def svg_for_png(svg: str) -> str:
    """Textual's SVG places each run of text by x and textLength; leading blanks inside a run
    are collapsed by SVG renderers, shifting the text left. Move them into x instead."""

    def fix(m: re.Match) -> str:
        pre, x, y, length, post, body = m.groups()
        chars = html.unescape(body)
        if not chars:
            return m.group(0)
        cell = float(length) / len(chars)
        core = chars.lstrip("\u00a0 ")
        lead = len(chars) - len(core)
        core = core.rstrip("\u00a0 ")
        if not core:
            return ""
        text = html.escape(core, quote=False).replace(" ", "&#160;").replace("\u00a0", "&#160;")
        return (f'<text {pre}x="{float(x) + lead * cell:.1f}" y="{y}" textLength="{len(core) * cell:.1f}"'
                f"{post}>{text}</text>")

    return TEXT.sub(fix, svg)


def to_png(svg: str, png: Path, width_px: int) -> str | None:
    """Render with rsvg-convert (honours textLength, so the grid stays a grid), else cairosvg."""
    fixed = svg_for_png(svg).encode("utf-8")
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", "-w", str(width_px), "-o", str(png)], input=fixed, check=True)
        return "rsvg-convert"
    try:
        import cairosvg
    except ImportError:
        return None
    cairosvg.svg2png(bytestring=fixed, write_to=str(png), output_width=width_px)
    return "cairosvg"


def render(only: list[str] | None = None) -> None:
    SHOTS.mkdir(exist_ok=True)
    for shot in shots():
        if only and shot["name"] not in only:
            continue
        svg = asyncio.run(_screenshot(shot["run"], shot["until"], shot["size"], shot.get("keys", [])))
        path = SHOTS / f"{shot['name']}.svg"
        path.write_text(svg, encoding="utf-8")
        how = to_png(svg, path.with_suffix(".png"), shot["size"][0] * 12)
        print(f"{path.relative_to(REPO)}" + (f" + .png ({how})" if how else " (no PNG: install librsvg2-bin or cairosvg)"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--record", nargs="*", metavar="NAME", help=f"record journals again ({', '.join(RECORDINGS)})")
    p.add_argument("--only", nargs="*", help="render only these screenshots")
    args = p.parse_args()
    if args.record is not None:
        record_all(args.record or list(RECORDINGS))
        print(json.dumps({n: len((JOURNALS / n / "events.jsonl").read_bytes()) for n in RECORDINGS
                          if (JOURNALS / n / "events.jsonl").exists()}))
        return 0
    render(args.only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
