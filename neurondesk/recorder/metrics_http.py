"""Moved to neurondesk/exporter/endpoint.py. These names stay here for the command line's imports
only (neurondesk/cli.py); delete this file once it imports them from neurondesk.exporter.endpoint."""

from neurondesk.exporter.endpoint import MetricsExporter, parse_metrics_addr

__all__ = ["MetricsExporter", "parse_metrics_addr"]
