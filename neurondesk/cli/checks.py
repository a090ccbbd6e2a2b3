"""Before the first compile: `devices` (what is on this machine), `doctor` (is it ready for Neuron training)
and `lint` (the recompiling patterns of a script, read from its source) (issue 25)."""

from __future__ import annotations

import argparse
import json
import sys

from neurondesk.cli.errors import die


def cmd_devices(args) -> int:
    from neurondesk.collectors.devices.inventory import collect_inventory, format_inventory_text
    from neurondesk.collectors.devices.neuron_ls import NeuronLsFileTooLarge

    try:
        inventory = collect_inventory(neuron_ls_file=args.from_file)
    except NeuronLsFileTooLarge as exc:
        die(str(exc))
    if args.from_file is not None and inventory["neuron"] is None:  # nothing found in the file
        die(inventory["neuron_reason"] or f"{args.from_file}: no neuron-ls output found")
    sys.stdout.write(json.dumps(inventory, indent=2, default=str) + "\n" if args.json else format_inventory_text(inventory))
    return 0


def cmd_doctor(args) -> int:
    from neurondesk.doctor.check import exit_code
    from neurondesk.doctor.report import as_json, as_text, tables_text
    from neurondesk.doctor.run import Options, run_doctor

    if args.tables:
        sys.stdout.write(tables_text())
        return 0
    opts = Options.from_env(python=args.python, instance_type=args.instance_type, script=args.script or [],
                            timeout=args.timeout)
    checks = run_doctor(opts)
    sys.stdout.write(as_json(checks) if args.json else as_text(checks))
    return exit_code(checks)


def _severity_at_least(severity: str, floor: str) -> bool:
    from neurondesk.lint import SEVERITIES

    return SEVERITIES.index(severity) >= SEVERITIES.index(floor)


def cmd_lint(args) -> int:
    from neurondesk.lint import lint_paths

    report = lint_paths(args.paths)
    failing = [f for f in report.findings if _severity_at_least(f.severity, args.fail_on)]
    if args.format == "json":
        sys.stdout.write(json.dumps({"files": report.files, "findings": [f.as_dict() for f in report.findings],
                                     "problems": [p.message for p in report.problems],
                                     "fail_on": args.fail_on, "failing": len(failing)}, indent=2) + "\n")
    else:
        for f in report.findings:
            sys.stdout.write(f"{f.path}:{f.line}:{f.col}: {f.severity} [{f.rule}] {f.message}\n    fix: {f.fix}\n")
        n = len(report.findings)
        sys.stdout.write(f"{report.files} file(s) read, {n} finding(s)"
                         + (f", {len(failing)} at or above {args.fail_on}" if n else "") + "\n")
    for p in report.problems:
        sys.stderr.write(f"neurondesk: lint: {p.message}\n")
    if report.problems:
        return 2
    return 1 if failing else 0


def add_parsers(sub) -> None:
    from neurondesk.lint import SEVERITIES

    devs = sub.add_parser("devices", help="what is on this machine: Neuron devices, GPUs, CPU")
    devs.add_argument("--json", action="store_true")
    devs.add_argument("--from-file", metavar="PATH", help="read a saved neuron-ls output (JSON or table)")
    devs.set_defaults(fn=cmd_devices)

    doc = sub.add_parser("doctor", help="is this machine ready for Neuron training: devices, driver, packages, "
                                        "compatibility, disk, environment (exit 0 ok, 1 warnings, 2 failures)")
    doc.add_argument("--json", action="store_true", help="the checks as JSON")
    doc.add_argument("--python", metavar="PATH", help="the workload's interpreter, asked its package versions in a "
                                                      "subprocess (default: python on PATH)")
    doc.add_argument("--instance-type", metavar="TYPE", help="e.g. trn1.32xlarge (default: neuron-ls, then the "
                                                              "instance metadata service)")
    doc.add_argument("--script", metavar="S", action="append", help="also lint this training script (repeatable)")
    doc.add_argument("--tables", action="store_true", help="list the bundled compatibility tables, their dates "
                                                           "and sources, and exit")
    doc.add_argument("--timeout", type=float, default=30.0, help=argparse.SUPPRESS)
    doc.set_defaults(fn=cmd_doctor)

    lint = sub.add_parser("lint", help="the recompiling and graph-breaking patterns of a training script, read "
                                       "from its source (never run): neurondesk lint SCRIPT|DIR ...")
    lint.add_argument("paths", nargs="+", metavar="SCRIPT|DIR", help="scripts, or folders (every *.py in them)")
    lint.add_argument("--format", choices=("text", "json"), default="text")
    lint.add_argument("--fail-on", choices=SEVERITIES, default="warning",
                      help="exit 1 when a finding of this severity or above exists (default warning)")
    lint.set_defaults(fn=cmd_lint)
