"""Per-seed rows of kernel comparisons, built by hand, for testing the verdict and the printed report.

Each configuration is given by the mean and seed-to-seed standard deviation of
its held-out energy and the means of the other metrics; the three seeds get
``mean - sd``, ``mean`` and ``mean + sd`` (so the summary's sd is ``sd``), and
the collapse and learned columns follow from the library's own rules, as in a
real run.
"""

import math

from sklearn_measattn.metrics import collapse_verdict, learned_verdict

SEEDS = (0, 1, 2)

#: (kernel, transform): (energy mean, energy sd, ESS/n, spread ratio, corr(scale)), shaped like the default
#: ``measattn compare`` (Pareto tails of index 0.7: softmax and poly collapse without symlog).
DEFAULT_RUN = {
    ("softmax", "none"): (0.181, 0.0142, 0.00783, 1.09, 0.107),
    ("softmax", "symlog"): (0.0441, 0.00104, 0.900, 1.06, 0.646),
    ("poly", "none"): (0.131, 0.00646, 0.0412, 1.40, 0.319),
    ("poly", "symlog"): (0.0451, 0.000912, 0.795, 1.01, 0.631),
    ("log", "none"): (0.112, 0.0182, 0.455, 1.34, 0.212),
    ("log", "symlog"): (0.0452, 0.000804, 0.779, 0.999, 0.615),
    ("sigmoid", "none"): (0.110, 0.00845, 0.566, 1.43, 0.260),
    ("sigmoid", "symlog"): (0.0449, 0.00110, 0.791, 1.04, 0.592),
}

#: The rows that need no model: name -> (energy mean, energy sd, spread ratio, corr(scale)).
NO_MODEL = {"pooled": (0.121, 0.0111, 1.03, -0.047), "identity": (0.287, 0.0340, 0.983, -0.522),
            "oracle": (0.0541, 0.00398, 0.975, 0.628)}


def _base(kernel, transform, seed, energy, spread, corr):
    return dict(task="matrix_inverse", tail="pareto", tail_index=0.7, kernel=kernel, transform=transform, seed=seed,
                status="ok", energy_symlog=energy, w1_symlog=10 * energy, energy=40 * energy, w1=1000 * energy,
                spread_ratio_median=spread, corr_scale=corr, fit_time=30.0)


def comparison_rows(configurations=None, no_model=None, seeds=SEEDS):
    """The per-seed rows of a comparison: fits judged by the library's rules, then the no-model rows.

    Parameters
    ----------
    configurations : dict or None
        As :data:`DEFAULT_RUN` (its entries, by default).
    no_model : dict or None
        As :data:`NO_MODEL` (its entries, by default).
    seeds : sequence of int
        One row per seed (one or three).

    Returns
    -------
    rows : list of dict
        As :func:`~sklearn_measattn.experiments.compare_kernels` returns them.
    """
    configurations = DEFAULT_RUN if configurations is None else configurations
    no_model = NO_MODEL if no_model is None else no_model
    offsets = (0.0,) if len(seeds) == 1 else (-1.0, 0.0, 1.0)
    rows, references = [], []
    for seed, offset in zip(seeds, offsets):
        energies = {name: mean + offset * sd for name, (mean, sd, _, _) in no_model.items()}
        for name, (_, _, spread, corr) in no_model.items():
            references.append(dict(_base(name, "none", seed, energies[name], spread, corr), attention_ess=math.nan,
                                   collapse_attention=None, collapse_within=spread < 0.2, collapse_across=corr < 0.2,
                                   collapsed=spread < 0.2, learned=None, energy_vs_baseline=math.nan))
        for (kernel, transform), (mean, sd, ess, spread, corr) in configurations.items():
            energy = mean + offset * sd
            collapse = collapse_verdict(attention_ess=ess, spread_ratio=spread, across_correlation=corr)
            learned = learned_verdict(energy, pooled=energies.get("pooled"), identity=energies.get("identity"),
                                      oracle=energies.get("oracle"))
            rows.append(dict(_base(kernel, transform, seed, energy, spread, corr), attention_ess=ess,
                             collapse_attention=collapse["attention"], collapse_within=collapse["within"],
                             collapse_across=collapse["across"], collapsed=collapse["collapsed"],
                             learned=learned["learned"], energy_vs_baseline=learned["ratio"]))
    return rows + references
