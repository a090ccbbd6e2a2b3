"""Moved to neurondesk/exporter/viewer.py. These names stay here for the command line's imports
only (neurondesk/cli.py); delete this file once it imports them from neurondesk.exporter.viewer."""

from neurondesk.exporter.viewer import publish_on_poll, run_headless_replay

__all__ = ["publish_on_poll", "run_headless_replay"]
