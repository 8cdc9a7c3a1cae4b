#!/usr/bin/env bash
# The CPU measurements of docs/performance.md ("Measured on an idle machine"), in one go.
# Needs the full-size fixtures with their peers (model.pt, model.onnx):
#   /work/toolvenv/bin/python tools/make_fixtures.py resnet18_full mobilenet_v2_full yolov5_style_full --keep-peers
# and torch + onnxruntime importable (PEERS_PYTHONPATH below).  Results go to $OUT (default build/bench-cpu/).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/bench-cpu}
KUIPER=${KUIPER:-.venv/bin/kuiper}
export PYTHONPATH=${PEERS_PYTHONPATH:-/work/toolvenv/lib/python3.11/site-packages}
mkdir -p "$OUT"
log() { echo "== $(date -u +%H:%M:%S) $*" >&2; }
bench() { "$KUIPER" bench "build/fixtures-full/$1" --compare torch,onnxruntime --runs 20 --pause 200 "${@:2}"; }
for model in resnet18_full mobilenet_v2_full yolov5_style_full; do
  for round in 1 2 3; do
    log "$model, 2 threads, round $round"
    bench "$model" --threads 2 > "$OUT/${model}_t2_r$round.txt" 2>&1
  done
  log "$model, 1 thread"
  bench "$model" --threads 1 > "$OUT/${model}_t1.txt" 2>&1
done
log "resnet18_full, batch 8, then batch 1 again"
bench resnet18_full --threads 2 --runs 10 --batch 8 > "$OUT/resnet18_full_t2_b8.txt" 2>&1
bench resnet18_full --threads 2 > "$OUT/resnet18_full_t2_r4.txt" 2>&1
log "fresh-process memory and start-up"
bench resnet18_full --threads 2 --runs 3 --memory > "$OUT/resnet18_full_memory.txt" 2>&1
for model in resnet18_full mobilenet_v2_full yolov5_style_full; do
  log "$model profile"
  "$KUIPER" bench "build/fixtures-full/$model" --compare none --threads 2 --runs 10 --profile > "$OUT/${model}_profile.txt" 2>&1
done
log "architectures at 2 threads (docs/models.md)"
OMP_NUM_THREADS=2 /work/toolvenv/bin/python tools/survey_models.py --retime --repeat 5 > "$OUT/survey.log" 2>&1
log "done: $OUT"
