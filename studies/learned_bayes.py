"""How close is a learned scalar update to Bayes' rule: one step against the exact posterior, and held out in the cycle.

Three checks of any serial filter's scalar update, a shipped learned model
(:func:`~sklearn_measattn.assimilation.pretrained_analysis`) or one trained
by :func:`~sklearn_measattn.assimilation.fit_learned_analysis`:

- :func:`one_step_diagnostic`: standardised priors of ``N`` members
  (Gaussian or skewed, drawn by
  :func:`~sklearn_measattn.assimilation.make_synthetic_analysis_data`), an
  observation at a given innovation (in prior standard deviations) with a
  given noise law and noise-to-prior scale ratio; each step's posterior
  members against the exact posterior quantiles at levels ``k / (N + 1)``
  (the rank histogram filter's update on a fine grid: the rank-histogram
  prior times the true likelihood, integrated numerically). Reports the mean
  shift and spread of the posterior and the mean absolute quantile error, in
  prior sd.
- :func:`spread_balance`: the scalar updates on the priors a cycled rank
  histogram filter records, against its own; a step that loses spread Bayes
  keeps collapses a serial filter, which compounds the loss over a cycle.
- :func:`heldout_check`: the learned step against the rank histogram filter,
  both tuned by the reference study's protocol
  (``studies/assimilation_reference.py``), on held-out seeds, noise scales
  and laws.

Run (about 2 minutes for the diagnostic on a 2-core CPU)::

    python studies/learned_bayes.py --model quantile_residual_fit --balance

the held-out check (about an hour per setting)::

    python studies/learned_bayes.py --model quantile_residual_fit --diagnostic "" --heldout-seeds 91 92 93 \
        --heldout studies/results/learned_bayes/heldout_<date>.csv

and a model trained afresh by the package's recipe (``--layers 1``: the
shipped ``quantile_residual_fit_1layer``)::

    python studies/learned_bayes.py --fit <model file> --layers 1 --diagnostic one_step.csv

Records in ``studies/results/learned_bayes`` made by code no longer in the
repository:

- ``one_step.*``, ``cycle.*``, ``cycle_relevel.*``, ``cycle_round1_dev_full.log``, ``diag_a*.csv``,
  ``development_fits.txt``, ``one_step_cycle_ratios_*``, ``quantile_softmax.safetensors`` and
  ``ceiling_exact_posterior.safetensors``: the first recipe (energy loss, ranked symlog features; the earlier
  shipped ``quantile_softmax``), its re-levelled reading and a ceiling trained on exact posteriors.
- ``residual_identity.safetensors``, ``cycle_residual_dev.*``, ``spread_balance.log``, ``seed41_diagnosis.txt``,
  ``heldout_2026-12-05.*``, ``heldout_3000_*``, ``heldout_sizes_*``, ``gaussian_seed72_windows_2026-12-05.txt`` and
  ``far_innovations_2026-12-05.*``: the residual network of the study's own training loop, shipped earlier as
  ``quantile_residual``.
- ``fit_route*_2026-12-05.*``, ``one_step_fit_route_constant.csv`` and ``residual_fit_route.safetensors``: the
  first package-trained residual models beside ``quantile_residual``.

The held-out rows of the shipped models rerun: ``heldout_fit_t*`` with ``--model quantile_residual_fit`` and
``heldout_fit_1layer*`` with ``--model quantile_residual_fit_1layer``; ``one_step_fit_route.csv`` and
``one_step_fit_1layer.csv`` drew their priors with the study's earlier generator (a rerun draws others).
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from assimilation_reference import (
    LEARNED_GRID,
    MEMBERS,
    RHF_NAME,
    SETTINGS,
    SYSTEM,
    grids,
    held_out_rows,
    tune_by_protocol,
    write_rows,
)

from sklearn_measattn import load_model, save_model
from sklearn_measattn.assimilation import (
    CauchyNoise,
    GaussianNoise,
    LearnedAnalysis,
    ObservationModel,
    RankHistogramFilter,
    SerialEnKF,
    StudentTNoise,
    fit_learned_analysis,
    make_synthetic_analysis_data,
    make_twin_problem,
    pretrained_analysis,
    twin_experiment,
)

INNOVATIONS = (0.1, 0.5, 1.0, 2.0, 3.0, 10.0, 30.0, 1000.0)
RATIOS = (0.3, 1.0, 3.0)
#: The diagnostic's noise laws, by name; each takes its scale.
NOISE_LAWS = {"gaussian": GaussianNoise, "student_t3": functools.partial(StudentTNoise, df=3.0),
              "student_t1.5": functools.partial(StudentTNoise, df=1.5), "cauchy": CauchyNoise}
#: The held-out check's settings: the reference protocol's laws at a Cauchy scale and a Student-t df it has not.
HELDOUT_SETTINGS = {
    "cauchy, scale 1": SETTINGS["cauchy, scale 1"],
    "cauchy, scale 1.2": {**SETTINGS["cauchy, scale 1"], "noise_scale": 1.2},
    "student-t df 2.5": {**SETTINGS["student-t df 3"], "df": 2.5},
    "gaussian": SETTINGS["gaussian"],
}


# -- the one-step diagnostic -----------------------------------------------------------------------------------


def standard_priors(kind, n_priors, seed):
    """(n_priors, MEMBERS) standardised priors of one kind of :data:`~sklearn_measattn.assimilation.PRIOR_KINDS`."""
    X, _ = make_synthetic_analysis_data(GaussianNoise(), n_priors=n_priors, draws=1, ensemble_size=MEMBERS,
                                        prior_weights={kind: 1.0}, reflect=False, features="plain",
                                        random_state=seed)
    return X[..., 0].astype(np.float64)


def scalar_update(step, law, ratio):
    """The scalar update of ``step`` bound to noise ``law`` of scale ``ratio`` (the priors' sd is 1)."""
    return step.bind(ObservationModel(n_variables=4, noise=NOISE_LAWS[law](scale=ratio)), random_state=0).scalar_update


def one_step_diagnostic(steps, *, law="cauchy", ratio=1.0, innovations=INNOVATIONS, prior="gaussian", n_priors=20,
                        n_grid=20000, seed=0):
    """Posterior mean shift, spread and quantile error of each step against the exact posterior.

    Parameters
    ----------
    steps : dict of str to SerialEnKF
        Unbound serial steps by name.
    law : str, default="cauchy"
        A key of :data:`NOISE_LAWS`.
    ratio : float, default=1.0
        The noise-to-prior scale ratio.
    innovations : tuple of float
        Innovations, in prior sd.
    prior : str, default="gaussian"
        The kind of synthetic prior.
    n_priors : int, default=20
        Priors averaged over per row.
    n_grid : int, default=20000
        Grid points of the exact posterior (the rank histogram filter's update).
    seed : int, default=0
        Seed of the priors.

    Returns
    -------
    list of dict
        One row per innovation and method (``"exact"`` first).
    """
    priors = standard_priors(prior, n_priors, seed)
    exact_update = scalar_update(RankHistogramFilter(n_grid=n_grid), law, ratio)
    updates = {name: scalar_update(step, law, ratio) for name, step in steps.items()}
    rows = []
    for innovation in innovations:
        cell = {"law": law, "ratio": ratio, "prior": prior, "innovation": innovation}
        exact = np.stack([np.sort(exact_update(p, innovation)) for p in priors])
        rows.append({"method": "exact", **cell, **_moments(exact), "quantile_error": 0.0, "seconds": float("nan")})
        for name, update in updates.items():
            start = time.perf_counter()
            posterior = np.stack([np.sort(update(p, innovation)) for p in priors])
            seconds = (time.perf_counter() - start) / len(priors)
            rows.append({"method": name, **cell, **_moments(posterior),
                         "quantile_error": float(np.abs(posterior - exact).mean()), "seconds": seconds})
    return rows


def _moments(posteriors):
    return {"shift": float(posteriors.mean(axis=1).mean()), "spread": float(posteriors.std(axis=1, ddof=1).mean())}


def diagnostic_table(steps, *, laws=tuple(NOISE_LAWS), ratios=RATIOS, priors=("gaussian", "skewed"), n_priors=20,
                     seed=0, out=None):
    """:func:`one_step_diagnostic` over every prior, law and ratio; printed, and written to ``out`` if given."""
    rows = [row for prior in priors for law in laws for ratio in ratios
            for row in one_step_diagnostic(steps, law=law, ratio=ratio, prior=prior, n_priors=n_priors, seed=seed)]
    if out:
        write_rows(out, rows)
    print_table(rows)
    return rows


def print_table(rows):
    """Shift/spread (quantile error) per cell, in prior sd, then each method's mean error over the reachable cells."""
    methods = list(dict.fromkeys(row["method"] for row in rows))
    for cell in dict.fromkeys((row["prior"], row["law"], row["ratio"]) for row in rows):
        print(f"\n# prior {cell[0]}, noise {cell[1]}, noise/prior scale {cell[2]}: shift/spread (quantile error)")
        mine = [row for row in rows if (row["prior"], row["law"], row["ratio"]) == cell]
        print(f"{'innovation':>14s} " + " ".join(f"{d:>16g}" for d in dict.fromkeys(row["innovation"] for row in mine)))
        for method in methods:
            print(f"{method:>14s} " + " ".join(
                f"{row['shift']:5.2f}/{row['spread']:4.2f}({row['quantile_error']:4.2f})"
                for row in mine if row["method"] == method))
    print("\n# mean quantile error: every cell, and the cells an observation can reach, per law")
    for method in methods:
        mine = [row for row in rows if row["method"] == method]
        reachable = [row for row in mine if _reachable(row)]
        by_law = {law: np.mean([row["quantile_error"] for row in reachable if row["law"] == law])
                  for law in dict.fromkeys(row["law"] for row in mine)}
        print(f"{method:>14s} all {np.mean([row['quantile_error'] for row in mine]):.3f} reachable "
              f"{np.mean([row['quantile_error'] for row in reachable]):.3f} "
              + " ".join(f"{law} {error:.3f}" for law, error in by_law.items()), flush=True)


def _reachable(row):
    # Gaussian noise never lands 5 or more sd of prior-plus-noise away
    return row["law"] != "gaussian" or row["innovation"] < 5 * math.sqrt(1 + row["ratio"] ** 2)


# -- spread balance on cycled priors ---------------------------------------------------------------------------


def spread_balance(steps, *, setting="cauchy, scale 1", seed=41, n_cycles=300, spin_up=100, every=3,
                   bins=(0, 1, 3, 10, 30, np.inf)):
    """The scalar updates of ``steps`` on the priors a rank histogram filter's cycle gives them, against its own.

    The filter (inflation 1, relaxation 0.3) runs one problem of the
    reference protocol's system under the noise of ``setting`` (a key of
    :data:`HELDOUT_SETTINGS`); every ``every``-th recorded prior after
    ``spin_up`` and its observation go to each step. Printed per
    noise-to-prior ratio bin: the mean log ratio of posterior to prior spread
    minus the filter's (negative: the step loses spread Bayes keeps) and the
    mean absolute difference of the sorted members to the filter's, in prior
    sd.
    """
    problem = make_twin_problem(**SYSTEM, **HELDOUT_SETTINGS[setting], n_cycles=n_cycles, random_state=seed)
    reference = RankHistogramFilter(inflation=1.0, relaxation=0.3)
    with reference.recording() as recorded:
        twin_experiment(reference, problem, ensemble_size=MEMBERS, spin_up=spin_up, random_state=seed)
    start = spin_up * problem.observation_model.observed.size
    records = [(np.array(prior, dtype=np.float64), float(observation)) for prior, observation, _ in
               recorded[start::every]]
    sd = np.array([prior.std(ddof=1) for prior, _ in records])
    ratio = problem.observation_model.noise_scale / sd
    base = None
    for name, step in {"RHF": RankHistogramFilter(), **steps}.items():
        update = step.bind(problem.observation_model, random_state=0).scalar_update
        posterior = np.stack([np.sort(update(prior.copy(), observation)) for prior, observation in records])
        log_spread = np.log(posterior.std(axis=1, ddof=1) / sd)
        base = base or (posterior, log_spread)
        balance, error = log_spread - base[1], np.abs(posterior - base[0]).mean(axis=1) / sd
        cells = [f"ratio {low:g}-{high:g} (n {mask.sum()}) {balance[mask].mean():+.4f} {error[mask].mean():.3f}"
                 for low, high in zip(bins[:-1], bins[1:]) for mask in [(ratio >= low) & (ratio < high)]
                 if mask.any()]
        print(f"{name:>14s} balance {balance.mean():+.4f} member error {error.mean():.3f} | " + " | ".join(cells),
              flush=True)


# -- the held-out check ----------------------------------------------------------------------------------------


def heldout_check(step, *, settings=tuple(HELDOUT_SETTINGS), seeds=(71, 72, 73), cycles=1000, spin_up=200,
                  n_variables=None, members=None, localization_radius=None, n_jobs=None, out=None):
    """The learned ``step`` against the rank histogram filter on held-out seeds, noise scales and laws.

    Both are tuned by the reference study's protocol (its grids, on its
    tuning seeds); one row per setting, seed and method, with the ratios to
    the RHF's on the same seed, appended to ``out``. ``n_variables`` and
    ``members``: another system size than the protocol's 40 and 40 (all
    observed); with ``localization_radius``, both filters localise with that
    half-width.
    """
    system = SYSTEM if n_variables is None else {**SYSTEM, "n_variables": n_variables}
    members = members or MEMBERS
    rhf, rhf_grid = grids()[RHF_NAME]
    candidates = {"RHF": (rhf.set_params(localization_radius=localization_radius), rhf_grid),
                  "learned": (step.set_params(localization_radius=localization_radius), LEARNED_GRID)}
    for setting in settings:
        law = HELDOUT_SETTINGS[setting]
        chosen = tune_by_protocol(candidates, law, system=system, members=members, n_jobs=n_jobs)
        for row in held_out_rows(chosen, law, seeds, cycles=cycles, spin_up=spin_up, system=system, members=members,
                                 reference="RHF", n_jobs=n_jobs):
            tuned = chosen[row["step"]]
            row = {"setting": setting, "n_variables": system["n_variables"], "members": members,
                   "localization_radius": localization_radius, "seed": row.pop("seed"), "method": row.pop("step"),
                   "inflation": tuned.inflation, "relaxation": tuned.relaxation,
                   "level_offset": getattr(tuned, "level_offset", ""), "cycles": cycles, "spin_up": spin_up, **row}
            print(f"{setting:18s} {row['seed']} {row['method']:8s} infl {row['inflation']} relax {row['relaxation']} "
                  f"rmse {row['rmse']:.3f} crps {row['crps']:.3f} ratio {row['rmse_ratio']:.3f}/"
                  f"{row['crps_ratio']:.3f} {'DIVERGED ' if row['diverged'] else ''}{row['ms_per_cycle']:.1f} ms",
                  flush=True)
            if out is not None:
                append_row(out, row)


# -- files and the command line --------------------------------------------------------------------------------


def append_row(path, row):
    """Append ``row`` to the CSV file ``path``, with a header line when the file is new."""
    new = not Path(path).exists()
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def learned_step(args):
    """The learned step of the command line: trained by ``--fit`` (or read from its file), a model file, or shipped."""
    if args.fit is not None:
        path = Path(args.fit)
        if not path.exists():
            step = fit_learned_analysis(n_layers=args.layers, random_state=0, verbose=1)
            save_model(step.estimator, path)
        return LearnedAnalysis(load_model(path))
    if Path(args.model).suffix == ".safetensors":
        return LearnedAnalysis(load_model(args.model))
    return pretrained_analysis(args.model)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="quantile_residual_fit",
                        help="a shipped model's name, or a model file saved by save_model")
    parser.add_argument("--fit", default=None,
                        help="train the package's recipe (fit_learned_analysis) into this model file and use it; "
                             "an existing file is read instead")
    parser.add_argument("--layers", type=int, default=2, help="with --fit: attention blocks of the network")
    parser.add_argument("--diagnostic", default="studies/results/learned_bayes/one_step_public.csv",
                        help="csv of the one-step diagnostic (\"\": left out)")
    parser.add_argument("--balance", action="store_true", help="spread_balance on recorded cycled priors")
    parser.add_argument("--heldout", default=None, help="csv of the held-out check, appended")
    parser.add_argument("--heldout-settings", nargs="*", default=list(HELDOUT_SETTINGS), choices=list(HELDOUT_SETTINGS))
    parser.add_argument("--heldout-seeds", type=int, nargs="*", default=[71, 72, 73])
    parser.add_argument("--heldout-cycles", type=int, default=1000)
    parser.add_argument("--heldout-variables", type=int, default=None, help="system size of the held-out check")
    parser.add_argument("--heldout-members", type=int, default=None, help="ensemble size of the held-out check")
    parser.add_argument("--heldout-radius", type=float, default=None, help="localisation half-width of both filters")
    parser.add_argument("--n-jobs", type=int, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # many small networks: threads cost more than they give
    step = learned_step(args)
    if args.diagnostic:
        diagnostic_table({"RHF": RankHistogramFilter(), "SerialEnKF": SerialEnKF(), "learned": step},
                         out=args.diagnostic)
    if args.balance:
        spread_balance({"learned": step})
    if args.heldout:
        heldout_check(step, settings=args.heldout_settings, seeds=args.heldout_seeds, cycles=args.heldout_cycles,
                      n_variables=args.heldout_variables, members=args.heldout_members,
                      localization_radius=args.heldout_radius, n_jobs=args.n_jobs, out=args.heldout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
