#!/usr/bin/env bash
# In a SLURM batch script, before `srun neurondesk run --metrics-addr 0.0.0.0:9464 ...`: write this
# job's nodes as a Prometheus file_sd target file (the folder prometheus.yml's neurondesk-slurm job reads).
#   deploy/slurm_file_sd.sh /etc/prometheus/neurondesk 9464
set -euo pipefail
dir=${1:?folder read by file_sd_configs}; port=${2:-9464}
tmp=$(mktemp "$dir/.job-$SLURM_JOB_ID.XXXXXX")
{
  printf '[{"targets": ['
  scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/.*/\"&:$port\"/" | paste -sd, -
  printf '], "labels": {"slurm_job_id": "%s"}}]\n' "$SLURM_JOB_ID"
} > "$tmp"
mv "$tmp" "$dir/job-$SLURM_JOB_ID.json"  # atomic: Prometheus never reads half a file
