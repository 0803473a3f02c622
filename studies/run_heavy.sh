#!/usr/bin/env bash
# The reproduction grid in the learning regime: the `compare` defaults (512 training
# measures x 128 points, 64 held out, 30 epochs: sizes at which the slow kernels on
# symlog data learn the map, see benchmarks/RESULTS.md), Pareto(0.7) and Student-t(1)
# tails (infinite mean) plus the Gaussian control, both benchmarks, every kernel with
# and without symlog, 2 seeds. One CSV per configuration; existing CSVs are kept, so
# an interrupted run resumes. Then the attempts at finding 2 on the sheared swap:
# softmax with symlog trained three times longer, and at a heavier tail.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=studies/results/heavy
mkdir -p "$OUT"
run() {  # run NAME compare-options...
  local name=$1; shift
  [ -f "$OUT/$name.csv" ] && return 0
  $PY -m sklearn_measattn compare "$@" --n-jobs 2 --threads 1 --device cpu --out "$OUT/$name.csv.tmp" \
      > "$OUT/$name.txt"
  mv "$OUT/$name.csv.tmp" "$OUT/$name.csv"
}
for config in "pareto 0.7" "student_t 1" "gaussian 1"; do
  set -- $config
  for task in matrix_inverse sheared_swap; do
    run "${task}_$1" --task "$task" --tail "$1" --tail-index "$2" --seeds 2
  done
done
run finding2_longer --task sheared_swap --tail pareto --tail-index 0.7 --seeds 2 --kernels softmax \
    --transforms symlog --epochs 90
run finding2_heavier --task sheared_swap --tail pareto --tail-index 0.4 --seeds 2 --kernels softmax \
    --transforms none symlog
