"""File the test modules into tests/<lane>/ (issue 51 item 6): the table below, then a rule for new files.

    python scripts/sort_tests.py           # print where each flat tests/test_*.py would go, move nothing
    python scripts/sort_tests.py --apply   # `git mv` them (pure renames: commit them alone, edit after)
    python scripts/sort_tests.py --check   # exit 1 naming any test module not in the folder the table says

The lanes (markers of the same names, set by tests/conftest.py from the folder):
  unit       pure reducers, parsers, core figures, stores on temporary files: no real process
  views      the console, the headless line, reports, snapshots, on recorded or generated journals
  contracts  import contracts, code shape, docs, schemas
  system     real processes that are not a training run: the CLI in a subprocess, Prometheus, Chromium,
             fake tools, the probe in a bare interpreter
  runs       real training processes: `neurondesk run` of a workload, torchrun jobs, the torch 2.13 double
`make test-fast` runs unit, views and contracts; its guard (tests/conftest.py) fails any test there that
starts a training process, so a module that does belongs in runs/ (a module that mixes both may be split).
A new module the table does not name is guessed from its text (RULES, first match wins): check the guess,
then add the file to TABLE.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
LANES = ("unit", "views", "contracts", "system", "runs")

TABLE: dict[str, str] = {}
for lane, names in {
    "contracts": """code_shape docs import_contracts metric_names test_lanes views_read_one_view
        dependency_bounds
        one_way_to_read probe_backends""",
    "views": """advice_views chart_axes console_compile_failures console_crash console_job_line console_line
        console_memory console_phases console_ranks console_replay console_snapshots figures_consistency
        hang_budget_alerts safe_text script_throughput trace_export
        compare_steady_basis disk_forecast_shared headless_final_status price_unpriced rate_precision
        fleet_screen_view headless_reads_recorder_summary""",
    "unit": """advice_core cgroup_memory checkpoint codec compare_core cost crash devices_compile_cache devices_events
        devices_neuron_monitor dynamo_pairing first_compile fleet_slow_link fuzz_hardening fuzz_readers goodput
        index job_culprit job_figures job_identity job_view journal journal_tail launch_spec logparse_neuron_cc
        logparse_neuron_real logparse_output logparse_progress logparse_pt_xla_debug logparse_torchelastic
        memory_trend metrics_counters mfu new_graphs node_health notify_webhook phase_verdict prices
        probe_backlog probe_messages run_folder_moved rundir sketch socket_dirs state_reducer step_batches
        storm_order summary_details telemetry_sources telemetry_threads torchneuron_faults_parse
        torchneuron_reduce neuron_2_34_memory
        doctor_torchneuron framework_records lint_backends logparse_corpus torchneuron_log_marks torchneuron_user_log
        hang_progress_view compile_wall_memory time_breakdown_once view_holds_copies""",
    "system": """cli_bounds cli_errors compare_board devices_host devices_inventory devices_monitor_process
        devices_neuron_ls devices_neuron_observer_graph_stats devices_nvml doctor ended_runs
        headless_open_line headless_passthrough html_report imds input_files live_registry
        logparse_torch_logs logparse_traceback long_output_lines memory_outputs mlflow_uris neuron_2_34_neuron_ls
        neuron_real_outputs node_health_prometheus notify_url_secret planted_run_files price_journal price_list
        probe_bootstrap probe_bounds probe_interpreters probe_ranges recorder_state_owner run_dir_owner
        run_dir_safety run_ids secrets_marker stacks_request telemetry_neuron_monitor_start terminal_safety
        step_phase_outputs user_debug_env write_errors
        metrics_slow_clients probe_ctrl_c benchmarks_start""",
    "runs": """abrupt_death alerts_real_run checkpoints cli_claims compare_runs console_alerts_stacks console_live
        crash_runs culprit_lightning disk_forecast disk_full dynamo_locations fleet_multinode fleet_prometheus
        fleet_slow_places flight_recorder frameworks goodput_runs goodput_two_nodes graph_stats_own_compiles
        hang_stacks job_summary library_frames lint memory_creep_run metrics_exposition neuron_2_34_faults
        neuron_2_34_graph_stats neuron_2_34_profile_summary output_relay patterns probe_failopen probe_send
        process_roles ranks ranks_jobs recorder_backpressure recorder_lifecycle run_leftover_children
        run_process_tree run_telemetry run_torch_compile run_xla_cpu sinks_real_run
        step_phases summary_contract torchneuron_bad_input torchneuron_compiled torchneuron_eager
        torchneuron_failures torchneuron_workload transparency_corpus workloads
        checkpoint_children checkpoint_tracebacks frameworks_trl job_concurrent_runs restart_counts sinks_secrets state_file torchneuron_log_fifo torchneuron_log_only torchneuron_pipeline
        torchneuron_cache torchneuron_memory""",
}.items():
    TABLE.update({f"test_{name}.py": lane for name in names.split()})

# For a module the table does not name: the first rule whose pattern its text holds gives its lane.
RULES: tuple[tuple[str, str], ...] = (
    ("runs", r"neurondesk_run\(|torchrun_job|multinode_harness|torch213|checkpoint_scripts|\bTRAIN\b|\"workloads\""),
    ("contracts", r"lint-imports|importlinter|test_code_shape"),
    ("system", r"subprocess|prometheus_harness|chromium|socket\.socket|HTTPServer"),
    ("views", r"run_test\(|snap_compare|neurondesk\.views|neurondesk\.reports"),
)


def guess(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    return next((lane for lane, pattern in RULES if re.search(pattern, text)), "unit")


def lane_of(path: Path) -> tuple[str, bool]:
    """The lane a test module belongs in, and whether the table says so (False: a guess)."""
    if path.name in TABLE:
        return TABLE[path.name], True
    return guess(path), False


def modules() -> list[Path]:
    return sorted([*TESTS.glob("test_*.py"), *TESTS.glob("*/test_*.py")])


def snapshot_folder(path: Path) -> Path:
    """pytest-textual-snapshot keeps a module's SVGs in __snapshots__/<module>/ beside the module."""
    return path.parent / "__snapshots__" / path.stem


def main(argv: list[str]) -> int:
    apply, check = "--apply" in argv, "--check" in argv
    wrong = 0
    for path in modules():
        lane, known = lane_of(path)
        target = TESTS / lane / path.name
        if path == target:
            continue
        wrong += 1
        print(f"{path.relative_to(REPO)} -> {target.relative_to(REPO)}{'' if known else '  (guessed: add it to TABLE)'}")
        if apply:
            target.parent.mkdir(exist_ok=True)
            subprocess.run(["git", "mv", str(path), str(target)], cwd=REPO, check=True)
            snaps = snapshot_folder(path)
            if snaps.is_dir():
                (target.parent / "__snapshots__").mkdir(exist_ok=True)
                subprocess.run(["git", "mv", str(snaps), str(snapshot_folder(target))], cwd=REPO, check=True)
    if check and wrong:
        print(f"{wrong} test module(s) outside their lane's folder: run python scripts/sort_tests.py --apply",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
