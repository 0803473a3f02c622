"""Experiments: compare attention kernels, estimate tails, diagnose your measures.

The study engine behind the ``measattn`` command line and the scripts in
``studies/``:

- :func:`diagnose_measures` (``measattn diagnose``) looks at a batch of measures
  before any training: the tail index per feature and of the point norm,
  within ensembles (:func:`estimate_tail_index`) and across samples (of the
  measures' medians), which kernels' attention integrals diverge at the
  heavier of the two, the attention effective sample size of each kernel on
  the data, and a recommended kernel and transform with the reason and the
  tails it rests on;
- :func:`compare_kernels` (``measattn compare``) trains one model per kernel,
  transform and seed on a built-in benchmark, :func:`compare_kernels_on_data`
  (``measattn compare --data``) on your own measures with held-out measures,
  and :func:`summarize`, :func:`format_comparison` and :func:`recommend` turn
  the per-fit rows into a table and a recommendation;
- :func:`phase_diagram` fits every cell of tail index x kernel growth x
  transform on the benchmarks, :func:`phase_cells` combines its seeds,
  :func:`phase_agreement` sets measured collapse against each kernel's
  threshold (:func:`kernel_threshold`) and :class:`PhaseDiagramDisplay`
  draws it;
- :func:`format_number`, :func:`format_table` and :func:`write_csv` are the one
  number format, table layout and CSV writer of every report.
"""

from .._tails import LIGHT_TAIL_INDEX, TailIndexEstimate, estimate_tail_index
from ._compare import ROW_FIELDS, compare_kernels, compare_kernels_on_data, print_progress
from ._diagnose import (
    SYMLOG_BELOW_TAIL_INDEX,
    Diagnosis,
    attention_ess_table,
    diagnose_measures,
    format_diagnosis,
)
from ._phase import (
    PHASE_FIELDS,
    PHASE_KERNELS,
    kernel_threshold,
    phase_agreement,
    phase_cells,
    phase_diagram,
    phase_key,
)
from ._phase_display import PhaseDiagramDisplay
from ._report import check_output_path, format_number, format_table, write_csv
from ._summary import (
    COMPARISON_NOTES,
    TIE_STANDARD_ERRORS,
    comparison_table,
    format_comparison,
    recommend,
    summarize,
    tied_with_best,
)

__all__ = [
    "diagnose_measures",
    "format_diagnosis",
    "Diagnosis",
    "estimate_tail_index",
    "TailIndexEstimate",
    "LIGHT_TAIL_INDEX",
    "SYMLOG_BELOW_TAIL_INDEX",
    "attention_ess_table",
    "compare_kernels",
    "compare_kernels_on_data",
    "ROW_FIELDS",
    "print_progress",
    "summarize",
    "comparison_table",
    "format_comparison",
    "COMPARISON_NOTES",
    "recommend",
    "tied_with_best",
    "TIE_STANDARD_ERRORS",
    "phase_diagram",
    "phase_key",
    "phase_cells",
    "phase_agreement",
    "kernel_threshold",
    "PhaseDiagramDisplay",
    "PHASE_KERNELS",
    "PHASE_FIELDS",
    "format_number",
    "format_table",
    "write_csv",
    "check_output_path",
]
