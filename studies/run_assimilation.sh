#!/usr/bin/env bash
# The assimilation study, every run behind docs/assimilation.rst, then the page's tables.
# Needs DAPPER beside the package (its own venv: DAPPER pins numpy 2.0.x):
#   python -m venv .venv-dapper && .venv-dapper/bin/pip install torch==2.13.0
#   .venv-dapper/bin/pip install -e ".[test,scores,assimilation]"
# About 1.5 hours on a 2-core CPU; rows already written are skipped, so an interrupted run resumes.
# The learned rows are those of the shipped quantile_residual_fit; the committed results also hold the rows
# of earlier learned models (log/symlog, softmax/symlog, softmax/none), kept as records.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv-dapper/bin/python}
R=studies/results
# DAPPER's Gaussian numbers (Sakov and Oke 2008), DAPPER's filters and the package's on the same problem
$PY studies/dapper_reproduction.py --cycles 3000 --pf-cycles 150 --out $R/dapper_reproduction.csv
# 40 variables, all observed every 0.05, 40 members: baselines, DAPPER, the shipped learned model, 2 seeds
$PY studies/assimilation_study.py --bayes-members 0 --out $R/assimilation.csv
# the Bayes reference at 40 variables: a 3000-member particle filter (about 2 s a cycle, so 150 cycles, one seed)
$PY studies/assimilation_study.py --only-bayes --seeds 1 --bayes-members 3000 --bayes-cycles 150 --no-dapper \
    --out $R/assimilation_bayes40.csv
# 8 variables, every other observed every 0.1, 32 members, with the Bayes reference (2048-member particle filter)
$PY studies/assimilation_study.py --variables 8 --observed every_other --dt-obs 0.1 --members 32 --cycles 1000 \
    --spin-up 200 --bayes-members 2048 --bayes-cycles 500 --out $R/assimilation_small.csv
# fewer members than variables: 20 members, with localisation (half-width 4) and without
$PY studies/assimilation_study.py --members 20 --localization-radius 4 --seeds 1 \
    --bayes-members 0 --out $R/assimilation_local.csv
$PY studies/assimilation_study.py --members 20 --seeds 1 --bayes-members 0 --no-dapper \
    --out $R/assimilation_local_none.csv
# 3000 cycles under heavy tails: does anything diverge late?
$PY studies/assimilation_study.py --cycles 3000 --noises student_t cauchy --seeds 1 --no-dapper \
    --bayes-members 0 --out $R/assimilation_long.csv
.venv/bin/python studies/render_assimilation.py
