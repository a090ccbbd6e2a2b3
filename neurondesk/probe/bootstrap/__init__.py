"""Not a package the workload imports: this folder is put on the workload's PYTHONPATH. The file
exists so that the import contracts (import-linter) see the probe's modules."""
