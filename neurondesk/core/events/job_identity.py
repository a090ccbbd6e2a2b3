"""Which job, node and ranks a run is: from the launchers' variables, ``--job`` / ``--node`` winning. Pure.

The recorder sees its own environment (SLURM's variables: ``srun neurondesk run ...``); torchrun sets
its variables in the workers only, so each worker's probe sends the launch variables it has in its
hello (``ProcessAttached.launch_env``) and the identity is completed from them. Which variable gave
each field is kept (``sources``), for the summary and for a user asking why.
"""

from __future__ import annotations

import msgspec

# The variables read (the probe sends the same list from the workers: probe/.../__init__.py LAUNCH_VARS).
LAUNCH_VARS = (
    "TORCHELASTIC_RUN_ID", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "RANK", "LOCAL_RANK",
    "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "SLURM_JOB_ID", "SLURM_NODEID", "SLURM_NNODES", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURMD_NODENAME",
    "PJRT_LOCAL_PROCESS_RANK", "PJRT_LOCAL_PROCESS_COUNT",
    "TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT",  # which attempt of the job (core/reduce/attempts.py)
)
MAX_NODES = 100_000
MAX_WORLD = 10**6


class JobIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """The job a run belongs to. Unknown fields are None ('' for an unknown job id)."""

    job_id: str
    node: str
    node_rank: int | None = None
    nodes: int | None = None  # nodes in the job
    world_size: int | None = None  # ranks in the job
    local_world_size: int | None = None  # ranks on this node
    launcher: str | None = None  # "torchrun" | "slurm" | "torch_xla" | None
    ranks: list[int] = []  # the global ranks seen on this node
    sources: dict[str, str] = {}  # field -> what gave it: "--job", "TORCHELASTIC_RUN_ID", "host name" ...
    problems: list[str] = []  # launch variables that disagree or are out of range, one line each


def whole_number(text: str, digits: int = 7) -> int | None:
    """``text`` as a count: ASCII digits only, at most ``digits`` of them, else None. (``str.isdigit``
    alone takes '²' or '١', which ``int`` refuses or reads as another number.)"""
    if not (text.isascii() and text.isdigit()) or len(text) > digits:
        return None
    return int(text)


def _int(env: dict[str, str], name: str, top: int) -> int | None:
    value = whole_number(env.get(name, ""))
    return value if value is not None and value <= top else None


def identify(env: dict[str, str], host: str, job_flag: str | None = None, node_flag: str | None = None,
             ranks: list[int] | None = None, problems: list[str] | None = None) -> JobIdentity:
    """The identity from ``env`` (the recorder's variables completed by a worker's), the flags first."""
    sources: dict[str, str] = {}

    def pick(field: str, *candidates: tuple[str, object]) -> object:
        for source, value in candidates:
            if value is not None and value != "":
                sources[field] = source
                return value
        return None

    torchrun_id = env.get("TORCHELASTIC_RUN_ID", "")
    torchrun_id = "" if torchrun_id == "none" else torchrun_id  # torchrun's default --rdzv-id: names no job
    job_id = pick("job_id", ("--job", job_flag), ("TORCHELASTIC_RUN_ID", torchrun_id),
                  ("SLURM_JOB_ID", env.get("SLURM_JOB_ID")))
    node = pick("node", ("--node", node_flag), ("SLURMD_NODENAME", env.get("SLURMD_NODENAME")),
                ("host name", host))
    torchrun = "GROUP_RANK" in env or "TORCHELASTIC_RUN_ID" in env
    slurm = "SLURM_JOB_ID" in env
    launcher = "torchrun" if torchrun else "slurm" if slurm else (
        "torch_xla" if "PJRT_LOCAL_PROCESS_COUNT" in env else None)
    # SLURM_PROCID is the node's index only where srun starts one task a node (srun neurondesk run torchrun ...)
    one_task_a_node = slurm and env.get("SLURM_NTASKS") == env.get("SLURM_NNODES")
    node_rank = pick("node_rank", ("GROUP_RANK", _int(env, "GROUP_RANK", MAX_NODES)),
                     ("SLURM_NODEID", _int(env, "SLURM_NODEID", MAX_NODES)),
                     ("SLURM_PROCID", _int(env, "SLURM_PROCID", MAX_NODES) if one_task_a_node else None))
    nodes = pick("nodes", ("GROUP_WORLD_SIZE", _int(env, "GROUP_WORLD_SIZE", MAX_NODES)),
                 ("SLURM_NNODES", _int(env, "SLURM_NNODES", MAX_NODES)))
    world = pick("world_size", ("WORLD_SIZE", _int(env, "WORLD_SIZE", MAX_WORLD)))
    local_world = pick("local_world_size", ("LOCAL_WORLD_SIZE", _int(env, "LOCAL_WORLD_SIZE", MAX_WORLD)),
                       ("PJRT_LOCAL_PROCESS_COUNT", _int(env, "PJRT_LOCAL_PROCESS_COUNT", MAX_WORLD)))
    found = list(problems or [])
    if node_rank is not None and nodes is not None and node_rank >= nodes:
        found.append(f"node rank {node_rank} is out of range for a job of {nodes} node(s) "
                     f"({sources['node_rank']}, {sources['nodes']}): check the launcher's --node-rank/--nnodes")
    return JobIdentity(job_id=str(job_id or ""), node=str(node or host), node_rank=node_rank, nodes=nodes,
                       world_size=world, local_world_size=local_world, launcher=launcher,
                       ranks=sorted(set(ranks or [])), sources=sources, problems=found)


def launch_env(env: dict[str, str] | object) -> dict[str, str]:
    """The launch variables of ``env`` (a mapping), values cut at 128 characters."""
    return {k: str(env[k])[:128] for k in LAUNCH_VARS if k in env}  # type: ignore[index,operator]
