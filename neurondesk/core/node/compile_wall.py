"""The compile wall's host memory: while compiler processes run (64 ranks compiling at once on a
trn2.48xlarge, each neuronx-cc holding gigabytes), the host's available memory is watched, and a fall
that would empty it soon is said before the kernel's OOM killer ends the job
(aws-neuron-sdk #1369: one rank's compiler dies, the other 63 at a barrier).

The rate is the least-squares slope of the host's available memory over the latest WINDOW_S
(core/node/disk.py's ``growth_rate``, as the disk forecast fits free space); it is said only while
compilers run, the fall is real (MIN_SAMPLES over MIN_SPAN_S) and the memory would be gone within
WARN_FULL_IN_S. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from neurondesk.core.node.disk import duration_words, full_in_s, growth_rate
from neurondesk.core.node.units import size_text

WINDOW_S = 30.0  # a compile wall moves fast: the latest half minute of host samples (1 Hz)
MIN_SPAN_S = 4.0
MIN_SAMPLES = 4
WARN_FULL_IN_S = 300.0  # said when host memory would be gone within 5 minutes at this rate
FIX = ("fewer compiles at once: one TORCH_NEURONX_NEFF_CACHE_DIR shared by every rank (one compiles each graph, "
       "the others read it), a cache warmed before the job, or a precompile pass (neuron_parallel_compile)")


HOST, CGROUP = "host memory", "the workload's cgroup memory limit"


@dataclass(frozen=True)
class CompileWallMemory:
    compilers: int  # compiler processes running at the latest process sample
    compilers_rss: int  # their resident memory together, bytes
    available: int  # the host's available memory at the latest host sample, bytes
    falling_bytes_per_s: float  # how fast it falls (> 0)
    full_in_s: float  # when none is left at that rate
    limit: str = HOST  # what runs out: the host's memory, or the cgroup's limit (a pod, a Slurm job) when sooner

    @property
    def when(self) -> str:
        return f"{self.full_in_s:.0f} s" if self.full_in_s < 60 else duration_words(self.full_in_s)

    @property
    def short(self) -> str:
        """For a status line."""
        what = "host memory full" if self.limit == HOST else "cgroup memory limit reached"
        return f"{what} in about {self.when} ({self.compilers} compiles in flight)"

    @property
    def words(self) -> str:
        reached = "it is full" if self.limit == HOST else "it is reached"
        return (f"{self.limit}: at this rate {reached} in about {self.when}; {self.compilers} compiles in flight "
                f"(their RSS {size_text(self.compilers_rss)}, {size_text(self.available)} available, falling "
                f"{size_text(int(self.falling_bytes_per_s))}/s): {FIX}")


def compile_wall_memory(available: Iterable[tuple[float, int]], compilers: int, compilers_rss: int,
                        limit: str = HOST) -> CompileWallMemory | None:
    """The warning, from (time, bytes left) samples in time order (the host's available memory, or the
    cgroup's limit less the workload's RSS) and the latest process sample's compilers; None while no
    compiler runs, memory is not falling, or not soon gone."""
    points = list(available)
    if compilers <= 0 or not points:
        return None
    rate = growth_rate(points, WINDOW_S, MIN_SPAN_S, MIN_SAMPLES)  # bytes/s of available memory used up
    left = full_in_s(points[-1][1], rate)
    if rate is None or left is None or left > WARN_FULL_IN_S:
        return None
    return CompileWallMemory(compilers=compilers, compilers_rss=compilers_rss, available=points[-1][1],
                             falling_bytes_per_s=rate, full_in_s=left, limit=limit)


class CompileWallWarnings:
    """One notice when a compile wall starts to empty host memory; said again only after the wall
    (its compilers) ended."""

    def __init__(self) -> None:
        self.said = False

    def check(self, figure: CompileWallMemory | None, compilers: int) -> str | None:
        if figure is not None and not self.said:
            self.said = True
            return figure.words
        if compilers == 0:
            self.said = False
        return None
