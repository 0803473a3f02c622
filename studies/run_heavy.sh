#!/usr/bin/env bash
# The reproduction grid in the regime where the phenomenon is large: 256 points per
# measure, Pareto(0.7) and Student-t(1) tails (infinite mean) plus the Gaussian control,
# both benchmarks, every kernel with and without symlog, 2 seeds (the `compare` defaults
# otherwise: 128 training / 64 held-out measures, 12 epochs). One CSV per configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
for config in "pareto 0.7" "student_t 1" "gaussian 1"; do
  set -- $config
  for task in matrix_inverse sheared_swap; do
    out=studies/results/heavy/${task}_$1.csv
    [ -f "$out" ] && continue
    $PY -m sklearn_measattn compare --task $task --tail $1 --tail-index $2 --seeds 2 \
        --n-jobs 2 --threads 1 --device cpu --out "$out.tmp" > "studies/results/heavy/${task}_$1.txt"
    mv "$out.tmp" "$out"
  done
done
