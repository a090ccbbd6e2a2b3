"""`neurondesk lint`: the recompiling and graph-breaking patterns of a training script, read from its
source (the AST); the script is never run or imported. Imports nothing else of neurondesk."""

from neurondesk.lint.files import Problem, Report, lint_paths
from neurondesk.lint.rules import SEVERITIES, Finding, lint_source

__all__ = ["SEVERITIES", "Finding", "Problem", "Report", "lint_paths", "lint_source"]
