"""Tests of the study engine: tail index, diagnosis, comparisons on your data, summaries and reports."""

import csv
import math

import numpy as np
import pytest
from sklearn.model_selection import train_test_split
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_measattn import MeasureTransformerRegressor
from sklearn_measattn.datasets import make_matrix_inverse
from sklearn_measattn.experiments import (
    LIGHT_TAIL_INDEX,
    TIE_STANDARD_ERRORS,
    TailIndexEstimate,
    attention_ess_table,
    check_output_path,
    compare_kernels,
    compare_kernels_on_data,
    comparison_table,
    diagnose_measures,
    estimate_tail_index,
    format_comparison,
    format_diagnosis,
    format_number,
    format_table,
    recommend,
    summarize,
    tied_with_best,
    write_csv,
)
from sklearn_measattn.metrics import energy_distance, learned_verdict, to_space
from tests.experiments.comparison_tables import DEFAULT_RUN, comparison_rows


def _draws(tail, tail_index, n_samples=40, n_points=200, n_features=2, seed=0):
    # condition=1: the points are plain draws of the base family
    X, _ = make_matrix_inverse(n_samples=n_samples, n_points=n_points, n_features=n_features, tail=tail,
                               tail_index=tail_index, condition=1.0, random_state=seed)
    return X


# --------------------------------------------------------------------------- #
# Tail index
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("tail, alpha", [("student_t", 1.0), ("pareto", 0.7), ("student_t", 3.0)])
def test_hill_estimate_is_close_to_the_true_tail_index(tail, alpha):
    est = estimate_tail_index(_draws(tail, alpha, seed=1))
    assert est.labels == ("feature 0", "feature 1", "norm")
    assert est.n_values == 8000 and est.n_tail == 89  # floor(sqrt(8000))
    # within three standard errors, and the interval covers the truth
    assert np.all(np.abs(est.tail_index - alpha) < 3 * est.standard_error), est.tail_index
    assert np.all((est.ci_lower < alpha) & (alpha < est.ci_upper))
    assert not est.light_tailed.any()
    np.testing.assert_allclose(est.standard_error, est.tail_index / math.sqrt(est.n_tail))


def test_gaussian_is_flagged_light_tailed():
    est = estimate_tail_index(_draws("gaussian", 1.0, seed=2))
    assert np.all(est.tail_index > LIGHT_TAIL_INDEX) and est.light_tailed.all()


def test_interval_covers_the_truth_at_its_level():
    # exact under a Pareto tail: about 90% of 90% intervals hold alpha
    rng = np.random.default_rng(0)
    hits = []
    for _ in range(200):
        X = (rng.pareto(1.5, size=(1, 400, 1)) + 1.0) * rng.choice([-1.0, 1.0], size=(1, 400, 1))
        est = estimate_tail_index(X, confidence=0.9, n_tail=40)
        hits.append(est.ci_lower[0] < 1.5 < est.ci_upper[0])
    assert 0.8 < np.mean(hits) < 0.97


def test_choice_of_k():
    X = _draws("student_t", 2.0, n_samples=10, n_points=100)
    assert estimate_tail_index(X).n_tail == 31
    assert estimate_tail_index(X, n_tail=50).n_tail == 50
    assert estimate_tail_index(X, n_tail=0.1).n_tail == 100
    for bad in ("log", 3, 1000, 1.5, -0.1, True):
        with pytest.raises(ValueError, match="n_tail"):
            estimate_tail_index(X, n_tail=bad)


def test_tail_index_of_ragged_measures_uses_only_their_points():
    dense = _draws("student_t", 1.0, n_samples=30, n_points=100, seed=3)
    ragged = [m[: 60 + i] for i, m in enumerate(dense)]
    est = estimate_tail_index(ragged, n_tail=40)
    assert est.n_values == sum(len(m) for m in ragged)
    # Hill by hand on the pooled distances of each point to its own measure's median
    pooled = np.concatenate([np.abs(m - np.median(m, axis=0)) for m in ragged])
    for j in range(2):
        top = np.sort(pooled[:, j])[::-1][:41]
        assert est.tail_index[j] == pytest.approx(40 / np.log(top[:40] / top[40]).sum(), rel=1e-12)


def test_tail_index_is_scale_and_location_free():
    X = _draws("pareto", 0.7, seed=4)
    shifted = 1e3 * X + np.arange(40)[:, None, None]
    np.testing.assert_allclose(estimate_tail_index(shifted).tail_index, estimate_tail_index(X).tail_index,
                               rtol=1e-6)


@pytest.mark.parametrize(
    "X, kwargs, error, match",
    [
        (np.full((2, 5, 1), np.nan), {}, ValueError, "NaN"),
        (np.zeros((2, 5)), {}, ValueError, "3-D"),
        (np.ones((1, 20, 1)), {}, ValueError, "5 <= k"),
        (np.ones((4, 100, 1)), {"confidence": 1.5}, ValueError, "confidence"),
        (np.ones((4, 100, 1)), {"light_tail_index": 0}, ValueError, "light_tail_index"),
    ],
)
def test_tail_index_bad_input(X, kwargs, error, match):
    with pytest.raises(error, match=match):
        estimate_tail_index(X, **kwargs)


def test_tied_values_give_nan_not_a_crash():
    X = np.zeros((4, 100, 1))
    X[:, :3] = 1.0  # fewer distinct deviations than k+1
    est = estimate_tail_index(X)
    assert np.isnan(est.tail_index[0])


# --------------------------------------------------------------------------- #
# Diagnosis
# --------------------------------------------------------------------------- #


@pytest.mark.slow
def test_diagnosis_of_heavy_tails_never_recommends_raw_softmax():
    diagnosis = diagnose_measures(_draws("student_t", 1.0, n_points=128))
    assert not diagnosis.light_tailed
    assert diagnosis.transform == "symlog" and diagnosis.kernel != "softmax"
    by_kernel = {k["kernel"]: k for k in diagnosis.kernels}
    assert by_kernel["softmax"]["integrals"] == "diverge"
    # softmax's weights concentrate far more than log's on such data
    assert by_kernel["softmax"]["ess_none"] < 0.5 * by_kernel["log"]["ess_none"]
    assert "heavy tails" in diagnosis.reason


@pytest.mark.slow
def test_diagnosis_of_gaussian_says_every_kernel_is_fine():
    diagnosis = diagnose_measures(_draws("gaussian", 1.0, n_points=128, n_features=3))
    assert diagnosis.light_tailed and (diagnosis.kernel, diagnosis.transform) == ("softmax", None)
    assert all(k["integrals"] == "converge" for k in diagnosis.kernels)
    assert "every kernel is fine" in diagnosis.reason


@pytest.mark.slow
def test_diagnosis_at_finite_variance_picks_a_converging_kernel_without_transform():
    diagnosis = diagnose_measures(_draws("student_t", 4.0, n_samples=64, n_points=256, seed=5))
    chosen = next(k for k in diagnosis.kernels if k["kernel"] == diagnosis.kernel)
    assert diagnosis.transform is None and chosen["integrals"] == "converge" and diagnosis.kernel != "softmax"


def test_diagnosis_with_softmax_only_adds_symlog():
    diagnosis = diagnose_measures(_draws("pareto", 0.7, n_points=64), kernels=["softmax"])
    assert (diagnosis.kernel, diagnosis.transform) == ("softmax", "symlog")


def test_diagnosis_ragged_rows_and_text(tmp_path):
    rng = np.random.default_rng(0)
    X = [rng.standard_cauchy(size=(int(n), 2)) for n in rng.integers(50, 120, size=30)]
    diagnosis = diagnose_measures(X, max_measures=8, max_queries=16, kernels=["softmax", "log"])
    assert diagnosis.shape[0] == 30 and diagnosis.n_measures_ess == 8
    text = format_diagnosis(diagnosis)
    assert "Recommendation: kernel=" in text and "feature 1" in text
    path = tmp_path / "d.csv"
    write_csv(path, diagnosis.rows())
    with open(path) as handle:
        rows = list(csv.DictReader(handle))
    assert [r["what"] for r in rows].count("attention_ess") == 4
    assert rows[-1]["what"] == "recommendation" and rows[-1]["detail"] == diagnosis.reason


@pytest.mark.slow
def test_diagnosis_is_seeded():
    X = _draws("student_t", 1.5, n_points=64)
    a, b = diagnose_measures(X, random_state=3), diagnose_measures(X, random_state=3)
    assert a.kernels == b.kernels


def _shifted(shift, n_samples=200, n_points=64, n_features=2, seed=0):
    """Gaussian ensembles, each moved as a whole by one draw of ``shift`` (shared by all its points)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_samples, n_points, n_features)) + shift(rng, (n_samples, 1, n_features))


@pytest.mark.slow
def test_diagnosis_sees_heavy_tails_across_samples_that_are_light_within_ensembles():
    X = _shifted(lambda rng, size: rng.standard_cauchy(size))
    diagnosis = diagnose_measures(X, kernels=["softmax", "poly", "log", "sigmoid"])
    within, across = diagnosis.tails, diagnosis.across_tails
    assert within.light_tailed.all() and within.norm[0] > LIGHT_TAIL_INDEX
    assert across.n_values == 200 and across.n_tail == 14
    alpha, lower, upper = across.norm
    assert abs(alpha - 1.0) < 3 * across.standard_error[-1] and lower < 1.0 < upper
    assert not across.light_tailed.any()
    assert diagnosis.tail_basis == "across samples" and diagnosis.basis_tails is across
    assert not diagnosis.light_tailed
    assert not (diagnosis.kernel == "softmax" and diagnosis.transform is None)
    assert diagnosis.transform == "symlog"  # the interval reaches below 2
    assert "heavy tails across samples" in diagnosis.reason and "within ensembles the points read light" in diagnosis.reason
    by_kernel = {k["kernel"]: k for k in diagnosis.kernels}
    assert by_kernel["softmax"]["integrals"] == "diverge" and by_kernel["poly"]["integrals"] != "converge"
    # the same ensembles, each centred on its own median: nothing left across samples but rounding
    unshifted = diagnose_measures(X - np.median(X, axis=1, keepdims=True), kernels=["softmax"])
    assert np.isnan(unshifted.across_tails.tail_index).all() and unshifted.tail_basis == "within ensembles"
    assert (unshifted.kernel, unshifted.transform) == ("softmax", None)
    text = format_diagnosis(diagnosis)
    assert "Tails within ensembles" in text and "Tails across samples" in text
    assert "Basis: the tails across samples" in text
    rows = diagnosis.rows()
    across_rows = [r for r in rows if r["what"] == "tail_index_across_samples"]
    assert [r["of"] for r in across_rows] == ["feature 0", "feature 1", "norm"]
    assert all(r["detail"].endswith("heavy") for r in across_rows)
    (basis,) = [r for r in rows if r["what"] == "tail_basis"]
    assert basis["detail"] == "across samples" and basis["value"] == alpha
    assert rows[-1]["what"] == "recommendation"


def test_the_same_shifts_are_not_seen_by_the_tails_within_ensembles_alone():
    # what the diagnosis read before it looked across samples: light tails, softmax without a transform
    X = _shifted(lambda rng, size: rng.standard_cauchy(size))
    assert estimate_tail_index(X).light_tailed.all()


@pytest.mark.parametrize("tail, alpha", [("student_t", 1.0), ("pareto", 0.7)])
def test_diagnosis_of_iid_heavy_points_rests_on_the_tails_within_ensembles(tail, alpha):
    diagnosis = diagnose_measures(_draws(tail, alpha, n_samples=64, n_points=128), kernels=["softmax", "log"])
    assert diagnosis.tail_basis == "within ensembles" and diagnosis.basis_tails is diagnosis.tails
    # the median of 128 such points has light tails: the measures do not shift as wholes
    assert diagnosis.across_tails is not None and diagnosis.across_tails.light_tailed[-1]
    assert diagnosis.transform == "symlog" and "heavy tails within ensembles" in diagnosis.reason
    assert "Basis: the tails within ensembles" in format_diagnosis(diagnosis)


@pytest.mark.slow
def test_gaussian_shifts_do_not_read_heavy_across_samples():
    # from a few dozen medians Hill's estimate of a Gaussian tail is small (about 4 from 40): not a power law
    estimates = []
    for seed in range(10):
        X = _shifted(lambda rng, size: 3.0 * rng.standard_normal(size), n_samples=40, n_features=1, seed=seed)
        diagnosis = diagnose_measures(X, kernels=["softmax", "log"], max_measures=8, max_queries=16)
        estimates.append(diagnosis.across_tails.norm[0])
        assert diagnosis.across_tails.light_tailed.all() and diagnosis.tail_basis == "within ensembles"
        assert (diagnosis.kernel, diagnosis.transform) == ("softmax", None)
    assert np.mean(np.array(estimates) < LIGHT_TAIL_INDEX) > 0.5  # the estimate alone would mostly say heavy


@pytest.mark.slow
def test_gaussian_tail_index_is_what_hill_gives_on_gaussian_values():
    rng = np.random.default_rng(0)
    for m in (40, 200):
        estimates = [estimate_tail_index(rng.standard_normal((1, m, 1))) for _ in range(300)]
        reference = estimates[0].gaussian_tail_index
        assert all(e.gaussian_tail_index == reference for e in estimates)
        assert np.median([e.tail_index[0] for e in estimates]) == pytest.approx(reference, rel=0.1)
    assert estimates[0].gaussian_tail_index > estimate_tail_index(rng.standard_normal((1, 40, 1))).gaussian_tail_index


def test_too_few_measures_for_the_tails_across_samples_says_so():
    diagnosis = diagnose_measures(_shifted(lambda rng, size: rng.standard_cauchy(size), n_samples=24),
                                  kernels=["softmax", "log"])
    assert diagnosis.across_tails is None and diagnosis.tail_basis == "within ensembles"
    assert any("too few (25 at least)" in note for note in diagnosis.notes)
    assert "Tails across samples: not estimated" in format_diagnosis(diagnosis)
    assert not [r for r in diagnosis.rows() if r["what"] == "tail_index_across_samples"]
    assert diagnose_measures(_shifted(lambda rng, size: rng.standard_cauchy(size), n_samples=25),
                             kernels=["softmax"]).across_tails.n_tail == 5


def test_tails_across_samples_use_each_measure_s_own_points():
    rng = np.random.default_rng(4)
    ragged = [rng.standard_normal((int(n), 2)) + rng.standard_cauchy(2) for n in rng.integers(20, 60, size=36)]
    diagnosis = diagnose_measures(ragged, kernels=["log"])
    medians = np.array([np.median(m, axis=0) for m in ragged])  # the zero padding left out
    np.testing.assert_array_equal(diagnosis.across_tails.tail_index, estimate_tail_index(medians[None]).tail_index)


def test_one_point_per_measure_rests_on_the_tails_across_samples():
    # nothing to see within ensembles of one point; across samples they are the points themselves
    X = np.random.default_rng(5).standard_cauchy((400, 1, 2))
    diagnosis = diagnose_measures(X, kernels=["softmax", "log"], n_tail=10)
    assert np.isnan(diagnosis.tails.norm[0]) and diagnosis.tail_basis == "across samples"
    assert diagnosis.transform == "symlog"


@pytest.mark.parametrize("kwargs, match", [({"kernels": []}, "kernels is empty"), ({"max_queries": 0}, "max_queries"),
                                           ({"kernels": ["gauss"]}, "Unknown attention kernel")])
def test_diagnosis_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        diagnose_measures(np.ones((2, 64, 1)), **kwargs)


# --------------------------------------------------------------------------- #
# Comparison on your own data
# --------------------------------------------------------------------------- #

@pytest.fixture(scope="module")
def compare_params(tiny_network):
    """compare_kernels's settings for the tiny network: one epoch of batches of four."""
    return {"estimator": MeasureTransformerRegressor(**tiny_network, max_epochs=1, batch_size=4)}


def test_compare_on_data_splits_measures_by_seed(compare_params):
    rng = np.random.default_rng(0)
    X = rng.standard_t(2, size=(14, 10, 2))
    rows = compare_kernels_on_data(X, X[:, :6] * 2.0, kernels=["sigmoid"], transforms=[None], seeds=[0, 1],
                                   test_size=0.3, name="mine", **compare_params)
    fits, references = rows[:2], rows[2:]
    assert [(r["task"], r["seed"], r["n_samples"], r["n_test"]) for r in fits] == [("mine", 0, 9, 5), ("mine", 1, 9, 5)]
    assert all(r["status"] == "ok" and 0 < r["attention_ess"] <= 1 for r in fits)
    assert fits[0]["energy_symlog"] != fits[1]["energy_symlog"]  # another split and another model
    # own data: the no-model rows of each split, no oracle (the true target law is unknown)
    assert [(r["kernel"], r["seed"]) for r in references] == [("pooled", 0), ("identity", 0), ("pooled", 1),
                                                              ("identity", 1)]


def test_reference_rows_are_scored_like_fits_and_judge_learning(compare_params):
    """Identity, scored by the same columns, is exactly what copying the input gives; a fit is judged
    against the lower of its split's pooled and identity rows."""
    rng = np.random.default_rng(1)
    X = rng.standard_t(2, size=(16, 12, 2))
    y = 0.5 * X
    rows = compare_kernels_on_data(X, y, kernels=["log"], transforms=["symlog"], test_size=5, **compare_params)
    fit, pooled, identity = rows
    _, X_test, _, y_test = train_test_split(X, y, test_size=5, random_state=0)
    assert identity["energy_symlog"] == pytest.approx(energy_distance(to_space(y_test, "symlog"),
                                                                      to_space(X_test, "symlog")))
    assert pooled["transform"] == identity["transform"] == "none"
    assert math.isnan(pooled["attention_ess"]) and pooled["learned"] is None
    verdict = learned_verdict(fit["energy_symlog"], pooled=pooled["energy_symlog"],
                              identity=identity["energy_symlog"])
    assert fit["learned"] == verdict["learned"]
    assert fit["energy_vs_baseline"] == pytest.approx(verdict["ratio"])


@pytest.mark.slow
def test_benchmark_comparison_has_an_oracle_row_near_the_two_sample_floor(compare_params):
    rows = compare_kernels(kernels=["log"], transforms=[None], tail="gaussian", n_samples=8, n_points=64, n_test=6,
                           **compare_params)
    by_kernel = {row["kernel"]: row for row in rows}
    assert set(by_kernel) == {"log", "pooled", "identity", "oracle"}
    # a fresh sample of the true law is closer to the targets than the input (the matrix inverse moves it)
    assert by_kernel["oracle"]["energy_symlog"] < by_kernel["identity"]["energy_symlog"]
    assert by_kernel["oracle"]["corr_scale"] > 0


@pytest.mark.parametrize(
    "X, y, kwargs, match",
    [
        (np.zeros((10, 4, 2)), np.zeros((9, 4, 2)), {}, "X has 10 measures but y has 9"),
        (np.zeros((6, 4, 2)), np.zeros((6, 4, 2)), {"test_size": 0.25}, "at least 3 held-out"),
        (np.zeros((6, 4, 2)), np.zeros((6, 4, 2)), {"test_size": 5}, "2 for training"),
        (np.zeros((10, 4, 2)), np.zeros((10, 4, 2)), {"test_size": 1.5}, "test_size"),
        (np.zeros((10, 4, 2)), np.zeros((10, 4, 2)), {"kernels": ["nope"]}, "kernel"),
    ],
)
def test_compare_on_data_rejects_bad_input_before_training(X, y, kwargs, match, compare_params):
    with pytest.raises(ValueError, match=match):
        compare_kernels_on_data(X, y, **dict(compare_params, **kwargs))


# --------------------------------------------------------------------------- #
# Summaries and recommendation
# --------------------------------------------------------------------------- #


def _row(**overrides):
    base = dict(task="t", tail="pareto", tail_index=0.7, kernel="softmax", transform="none", status="ok",
                energy=1.0, w1=1.0, energy_symlog=0.2, w1_symlog=0.5, attention_ess=0.5,
                spread_ratio_median=0.5, corr_scale=0.5, fit_time=1.0, collapse_attention=False,
                collapse_within=False, collapse_across=False, collapsed=False, learned=True,
                energy_vs_baseline=0.5)
    return dict(base, **overrides)


def _reference(kernel, energy_symlog):
    return _row(kernel=kernel, energy_symlog=energy_symlog, attention_ess=math.nan, collapse_attention=None,
                learned=None, energy_vs_baseline=math.nan)


def test_recommendation_only_among_configurations_that_learned():
    references = [_reference("pooled", 0.08), _reference("identity", 0.2), _reference("oracle", 0.03)]
    rows = [_row(kernel="softmax", energy_symlog=0.05, learned=False),  # lowest, but did not learn
            _row(kernel="log", energy_symlog=0.06)] + references
    verdict = _verdict(recommend(summarize(rows)))
    assert verdict["use"] == "kernel='log', transform=None, the only configuration that learned"
    assert verdict["did not learn"].startswith("softmax without a transform")
    assert verdict["learned"] == "log without a transform, energy 0.0600"
    nothing = _verdict(recommend(summarize([_row(kernel="log", learned=False), *references])))
    assert nothing["use"].startswith("none: no configuration learned the map")
    assert "--epochs" in nothing["use"] and "--n-samples" in nothing["use"] and "learned" not in nothing
    header, body = comparison_table(summarize(rows))
    assert [line[0] for line in body] == ["softmax", "log", "pooled", "identity", "oracle"]
    learned = header.index("learned")
    assert [line[learned] for line in body] == ["no", "yes", "-", "-", "-"]
    assert body[2][1] == "no model" and body[2][header.index("ESS/n")] == "-"


def _verdict(text):
    """The verdict's lines by label (continuation lines joined to their label's)."""
    lines = text.splitlines()
    assert lines[0].startswith("Verdict (")
    found, label = {}, None
    for line in lines[1:]:
        head = line[:17].strip()
        if head:
            label = head.rstrip(":")
            found[label] = line[17:]
        else:
            found[label] += " " + line[17:]
    return found


def test_summarize_counts_disagreeing_seeds():
    rows = [_row(collapsed=True, collapse_attention=True, attention_ess=0.004), _row(collapsed=False)]
    (summary,) = summarize(rows)
    assert summary["collapsed"] == "1/2"
    assert summary["n_seeds"] == 2 and summary["energy_std"] == 0.0 and summary["n_attention"] == 1


def test_recommendation_names_best_uncollapsed_and_noise():
    rows = [
        _row(kernel="softmax", collapsed=True, collapse_attention=True, energy_symlog=0.05),
        _row(kernel="softmax", energy_symlog=0.05),
        _row(kernel="log", energy_symlog=0.10), _row(kernel="log", energy_symlog=0.12),
        _row(kernel="sigmoid", energy_symlog=0.30), _row(kernel="sigmoid", energy_symlog=0.32),
    ]
    verdict = _verdict(recommend(summarize(rows)))
    # softmax has the lowest energy but collapsed: it is not recommended.
    assert verdict["use"] == "kernel='log', transform=None: its energy is below the next (sigmoid/none) by more " \
                             "than seed noise"
    assert verdict["collapsed"].startswith("softmax (1/2 seeds) without a transform (ESS/n < 0.05")
    assert verdict["why"] == ("the kernel matters without a transform: log learns best, sigmoid learns less well, "
                              "softmax collapses")
    close = _verdict(recommend(summarize([_row(kernel="log", energy_symlog=e) for e in (0.10, 0.14)]
                                         + [_row(kernel="poly", energy_symlog=e) for e in (0.11, 0.13)])))
    assert "tied within seed noise" in close["use"] and close["why"].startswith("neither the kernel nor")
    assert _verdict(recommend(summarize([_row(collapsed=True)])))["use"].startswith("none")
    one_seed = _verdict(recommend(summarize([_row(kernel="log"), _row(kernel="poly", energy_symlog=0.3)])))
    assert "one seed cannot tell ties apart" in one_seed["use"] and one_seed["collapsed"] == "none"


def test_configurations_within_two_standard_errors_of_the_best_are_named_as_tied():
    seeds = {"softmax": (0.040, 0.046, 0.043), "log": (0.041, 0.050, 0.045), "sigmoid": (0.042, 0.047, 0.045),
             "poly": (0.0600, 0.0610, 0.0590)}
    rows = [_row(kernel=kernel, energy_symlog=value) for kernel, values in seeds.items() for value in values]
    summary = summarize(rows)
    usable = sorted(summary, key=lambda s: s["energy_symlog_mean"])
    assert [s["kernel"] for s in tied_with_best(usable)] == ["sigmoid", "log"]
    verdict = _verdict(recommend(summary))
    assert verdict["use"] == ("transform=None with kernel 'softmax' or 'sigmoid' or 'log': they are tied within "
                              "seed noise")
    assert verdict["why"] == "the kernel matters without a transform: softmax, log and sigmoid learn best, poly " \
                             "learns less well"
    # Far apart with the same noise: a winner, and the margin beyond seed noise.
    seeds["log"] = (0.080, 0.083, 0.081)
    seeds["sigmoid"] = (0.090, 0.091, 0.092)
    apart = _verdict(recommend(summarize([_row(kernel=k, energy_symlog=v) for k, values in seeds.items()
                                          for v in values])))
    assert apart["use"] == ("kernel='softmax', transform=None: its energy is below the next (poly/none) by more "
                            "than seed noise")
    assert TIE_STANDARD_ERRORS == 2.0


def test_the_verdict_of_the_default_run_puts_the_transform_before_the_kernel():
    verdict = _verdict(recommend(summarize(comparison_rows())))
    assert verdict == {
        "learned": "softmax, poly, log and sigmoid with symlog, energy 0.0441 to 0.0452",
        "collapsed": "softmax and poly without a transform (ESS/n < 0.05: attention on one point)",
        "did not learn": "log and sigmoid without a transform (energy not below 0.8 x the no-model rows)",
        "use": "transform='symlog', with any kernel tried: they are tied within seed noise",
        "why": "the transform matters more than the kernel here; without it, the kernel matters: softmax and poly "
               "collapse, log and sigmoid do not collapse but do not learn",
    }


def test_the_verdict_follows_the_results_not_a_script():
    # softmax without symlog neither collapses nor falls behind: the verdict must not say it collapsed.
    healthy = {**DEFAULT_RUN, ("softmax", "none"): (0.0445, 0.001, 0.6, 1.0, 0.6)}
    verdict = _verdict(recommend(summarize(comparison_rows(healthy))))
    assert "softmax" not in verdict["collapsed"] and verdict["collapsed"].startswith("poly without a transform")
    assert verdict["learned"] == "softmax, poly, log and sigmoid with symlog; softmax without a transform, energy " \
                                 "0.0441 to 0.0452"
    assert verdict["use"] == "any of softmax/symlog, softmax/none, sigmoid/symlog, poly/symlog, log/symlog: they " \
                             "are tied within seed noise"  # best first
    assert verdict["why"].startswith("the transform matters more than the kernel here; without it, the kernel "
                                     "matters: softmax does as well, poly collapses")
    # Only log learns with symlog: the kernel matters, and the verdict names it alone.
    only_log = {key: (0.11, 0.01, 0.5, 1.2, 0.3) for key in DEFAULT_RUN}
    only_log[("log", "symlog")] = DEFAULT_RUN[("log", "symlog")]
    only_log[("softmax", "symlog")] = (0.2, 0.01, 0.01, 1.0, 0.1)
    verdict = _verdict(recommend(summarize(comparison_rows(only_log))))
    assert verdict["use"] == "kernel='log', transform='symlog', the only configuration that learned"
    assert verdict["collapsed"] == "softmax with symlog (ESS/n < 0.05: attention on one point)"
    assert verdict["why"] == "the kernel matters with symlog: log learns best, softmax collapses, poly and sigmoid " \
                             "do not collapse but do not learn"
    # Nothing learned: nothing is recommended, and the verdict says what to raise.
    untrained = {key: (0.115, 0.005, 0.5, 1.2, 0.3) for key in DEFAULT_RUN}
    verdict = _verdict(recommend(summarize(comparison_rows(untrained))))
    assert "learned" not in verdict and verdict["use"].startswith("none: no configuration learned the map")
    assert "why" not in verdict and verdict["collapsed"] == "none"


def test_verdict_lines_are_short_and_agree_with_the_table():
    summary = summarize(comparison_rows())
    text = recommend(summary)
    assert max(len(line) for line in text.splitlines()) <= 100
    # the no-model level the verdict's first line gives is the lower energy of the pooled and identity rows
    assert "0.121 with no model" in text.splitlines()[0]
    header, body = comparison_table(summary)
    collapsed = {row[0] for row in body if row[1] == "none" and row[header.index("collapsed")].startswith("yes")}
    assert collapsed == {"softmax", "poly"}


def test_the_legend_says_what_the_plus_minus_is_and_defines_every_column():
    summary = summarize(comparison_rows())
    text = format_comparison(summary, title="t")
    header, body = comparison_table(summary)
    legend = text.split("\n\n", 1)[1]
    assert "± is the standard deviation (sd) across seeds, not a standard error" in " ".join(legend.split())
    for column in header[2:]:
        assert f"\n{column.split()[0]}" in "\n" + legend, column
    assert "oracle" in legend and "not a floor" in legend
    # the ± the table prints is the sample standard deviation over the seeds
    (softmax,) = [row for row in body if row[:2] == ["softmax", "symlog"]]
    assert softmax[2] == f"{format_number(0.0441)} ± {format_number(0.00104)}"
    assert max(len(line) for line in text.splitlines()) <= 120


# --------------------------------------------------------------------------- #
# Reports
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "value, text",
    [(1, "1.00"), (0.96, "0.960"), (0.5, "0.500"), (123.4, "123"), (1234.5, "1.23e+03"), (-0.0456, "-0.0456"),
     (0.0, "0.00"), (float("nan"), "nan"), (None, "nan"), (float("-inf"), "-inf"), (np.float32(2.5), "2.50")],
)
def test_format_number(value, text):
    assert format_number(value) == text


def test_format_table_styles_and_errors():
    plain = format_table(["a", "bb"], [["1.00", "x"]], title="T", notes=["n"]).splitlines()
    assert plain == ["T", "a     bb", "----  --", "1.00  x", "", "n"]
    rst = format_table(["a", "bb"], [["1.00", "x"]], style="rst").splitlines()
    assert rst == ["====  ==", "a     bb", "====  ==", "1.00  x", "====  =="]
    with pytest.raises(ValueError, match="style"):
        format_table(["a"], [], style="html")
    with pytest.raises(ValueError, match="row 0 has 2 cells for 1 columns"):
        format_table(["a"], [["1", "2"]])


def test_write_csv_round_trips_floats(tmp_path):
    path = tmp_path / "r.csv"
    value = 0.1 + 0.2
    assert write_csv(path, [{"a": value, "b": math.nan, "c": True}], ["a", "b"]) == 1
    with open(path) as handle:
        (row,) = list(csv.DictReader(handle))
    assert float(row["a"]) == value and row["b"] == "" and "c" not in row


def test_check_output_path(tmp_path):
    assert check_output_path(tmp_path / "ok.csv") == str(tmp_path / "ok.csv")
    with pytest.raises(ValueError, match="is a folder"):
        check_output_path(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        check_output_path(tmp_path / "missing" / "r.csv", what="--out")


def test_check_output_path_tries_the_write(tmp_path, monkeypatch):
    """Permission bits are not enough (root passes them everywhere, a read-only file system too): the
    check creates a file in the folder, and a refused creation is a refused path."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(30, "Read-only file system")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", refuse)
    with pytest.raises(ValueError, match="cannot be written .Read-only file system"):
        check_output_path(tmp_path / "results.csv", what="--out")


# --------------------------------------------------------------------------- #
# studies in parallel
# --------------------------------------------------------------------------- #
@pytest.mark.slow
def test_study_in_parallel_gives_the_serial_table(tiny_network):
    params = dict(kernels=["softmax", "log"], transforms=[None], n_samples=8, n_points=12, n_test=3,
                  estimator=MeasureTransformerRegressor(max_epochs=1, **tiny_network, batch_size=16, device="cpu"))
    serial = compare_kernels(**params, n_jobs=1)
    parallel = compare_kernels(**params, n_jobs=2)
    varying = {"fit_time"}
    assert len(serial) == len(parallel)

    def comparable(row):  # NaN (the no-model rows' empty attention columns) as a string: NaN != NaN
        return {k: ("nan" if isinstance(v, float) and v != v else v) for k, v in row.items() if k not in varying}

    for a, b in zip(serial, parallel):
        assert comparable(a) == comparable(b)


@pytest.mark.parametrize(
    "call, name, reason",
    [
        (lambda X: estimate_tail_index(X, n_tail=3), "n_tail", "Hill's estimator needs k >= 5 order statistics"),
        (lambda X: estimate_tail_index(X, n_tail=1.5), "n_tail", "the fraction of the points in the tail"),
        (lambda X: estimate_tail_index(X, confidence=0.0), "confidence", "the level of the interval"),
        (lambda X: estimate_tail_index(X, light_tail_index=-1.0), "light_tail_index", r"\(0.0, inf\]"),
        (lambda X: estimate_tail_index(X, feature_names="x"), "feature_names", "array-like"),
        (lambda X: diagnose_measures(X, max_measures=0), "max_measures", r"\[1, inf\)"),
        (lambda X: diagnose_measures(X, max_queries=2.0), "max_queries", r"\[1, inf\)"),
        (lambda X: diagnose_measures(X, n_draws=True), "n_draws", r"\[1, inf\)"),
        (lambda X: diagnose_measures(X, n_tail="all"), "n_tail", "Hill's estimator"),
        (lambda X: attention_ess_table(tail_index="1.5"), "tail_index", r"\(0.0, inf\)"),
        (lambda X: TailIndexEstimate(("norm",), *np.ones((4, 1)), 0.95, 5, 100, light_rule="median"),
         "light_rule", "'estimate', 'interval'"),
    ],
)
def test_bad_arguments_raise_invalid_parameter_error(call, name, reason):
    with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of \w+ must be .*{reason}"):
        call(np.ones((4, 100, 1)))
