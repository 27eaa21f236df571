#!/usr/bin/env bash
# The GPU check a maintainer runs on a CUDA machine: the lecture's full configuration, 5,000 steps,
# with `python gpt.py` as a learner runs it. Prints val loss, wall time, tokens/s and peak GPU
# memory, and keeps the whole log. Usage: bash benchmarks/gpu_check.sh [extra gpt.py flags]
# (e.g. --dtype=float32). On an H100/A100 expect minutes; on a T4 (float16) much longer.
set -euo pipefail
cd "$(dirname "$0")/.."
log="benchmarks/gpu_check_$(date +%Y%m%d_%H%M%S).log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$log"
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$log.mem" &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT
start=$(date +%s)
PYTHONUNBUFFERED=1 python gpt.py --preset=none --out_dir=out/gpu_check --init_from=scratch "$@" 2>&1 | tee -a "$log"
end=$(date +%s)
kill $sampler 2>/dev/null || true
last=$(grep '^step.*| val ' "$log" | tail -1)
echo "---" | tee -a "$log"
echo "last evaluation: $last" | tee -a "$log"
echo "wall time: $((end - start)) s (start to sample, data and model loading included)" | tee -a "$log"
echo "peak GPU memory used (nvidia-smi, all processes): $(sort -n "$log.mem" | tail -1) MiB" | tee -a "$log"
echo "log: $log"
