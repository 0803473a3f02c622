"""Energy score and CRPS of ensembles against their true states: exactness, invariances, bad input."""

import numpy as np
import pytest

from sklearn_measattn.metrics import crps_ensemble, energy_distance, energy_score

try:  # the reference implementation; it needs numpy >= 1.25, so the run at the oldest numpy goes without it
    import scoringrules as sr
except ImportError:
    sr = None
needs_scoringrules = pytest.mark.skipif(sr is None, reason="scoringrules is not installed (pip install -e '.[scores]')")

RTOL, ATOL = 1e-10, 1e-12


def _case(seed, lead, n_members, n_features=None, *, ties=False):
    rng = np.random.default_rng(seed)
    member_shape = lead + (n_members,) + (() if n_features is None else (n_features,))
    truth_shape = lead + (() if n_features is None else (n_features,))
    if ties:  # repeated members, and truths equal to a member
        ensemble = rng.integers(-2, 3, size=member_shape).astype(float)
        truth = rng.integers(-2, 3, size=truth_shape).astype(float)
    else:
        ensemble = rng.standard_t(3, size=member_shape) * 2.0 + 1.0
        truth = rng.standard_normal(truth_shape)
    weights = rng.random(lead + (n_members,)) * (rng.random(lead + (n_members,)) > 0.3)
    weights[..., 0] += 0.1  # every ensemble keeps a member
    return ensemble, truth, weights


SHAPES = [((), 1), ((), 2), ((), 9), ((5,), 1), ((5,), 30), ((2, 3), 7), ((4, 1, 2), 16)]


# --------------------------------------------------------------------------- #
# Exactness against scoringrules
# --------------------------------------------------------------------------- #


@needs_scoringrules
@pytest.mark.parametrize("lead, n_members", SHAPES)
@pytest.mark.parametrize("n_features", [1, 3])
@pytest.mark.parametrize("ties", [False, True])
def test_energy_score_matches_scoringrules(lead, n_members, n_features, ties):
    ensemble, truth, weights = _case(len(lead) + n_members + n_features, lead, n_members, n_features, ties=ties)
    ours = energy_score(ensemble, truth)
    assert np.shape(ours) == lead and (isinstance(ours, float) or ours.dtype == np.float64)
    np.testing.assert_allclose(ours, sr.es_ensemble(truth, ensemble, estimator="nrg"), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ours, sr.es_ensemble(truth, ensemble), rtol=RTOL, atol=ATOL)  # nrg is its default
    np.testing.assert_allclose(energy_score(ensemble, truth, weights=weights),
                               sr.es_ensemble(truth, ensemble, ens_w=weights), rtol=RTOL, atol=ATOL)


@needs_scoringrules
@pytest.mark.parametrize("lead, n_members", SHAPES)
@pytest.mark.parametrize("ties", [False, True])
def test_crps_matches_scoringrules(lead, n_members, ties):
    ensemble, truth, weights = _case(len(lead) + n_members, lead, n_members, ties=ties)
    ours = crps_ensemble(ensemble, truth)
    assert np.shape(ours) == lead
    for estimator in ("nrg", "qd"):  # the energy form and scoringrules' default: equal for every ensemble
        np.testing.assert_allclose(ours, sr.crps_ensemble(truth, ensemble, estimator=estimator), rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(crps_ensemble(ensemble, truth, weights=weights),
                                   sr.crps_ensemble(truth, ensemble, ens_w=weights, estimator=estimator),
                                   rtol=RTOL, atol=ATOL)


@needs_scoringrules
def test_crps_is_not_the_fair_estimator():
    # the fair estimator divides the spread term by M (M - 1): on two members it differs
    ensemble, truth = np.array([0.0, 2.0]), 1.0
    assert crps_ensemble(ensemble, truth) == pytest.approx(1.0 - 0.5 * 1.0)  # E|X-y| = 1, E|X-X'| = (2+2)/4
    assert sr.crps_ensemble(truth, ensemble, estimator="fair") == pytest.approx(0.0)


@pytest.mark.slow
def test_crps_of_a_large_ensemble_by_sorting_matches_the_pairs():
    rng = np.random.default_rng(7)
    ensemble, truth = rng.standard_cauchy(size=(3, 2000)), rng.standard_normal(3)
    pairs = np.abs(ensemble[:, :, None] - ensemble[:, None, :]).mean(axis=(1, 2))
    direct = np.abs(ensemble - truth[:, None]).mean(axis=1) - 0.5 * pairs
    np.testing.assert_allclose(crps_ensemble(ensemble, truth), direct, rtol=1e-9)


def test_energy_score_in_one_dimension_is_the_crps():
    ensemble, truth, weights = _case(3, (6,), 11)
    np.testing.assert_allclose(energy_score(ensemble[..., None], truth[..., None], weights=weights),
                               crps_ensemble(ensemble, truth, weights=weights), rtol=1e-12)


@pytest.mark.parametrize("n_features", [1, 4])
def test_energy_distance_to_the_point_mass_at_the_truth_is_twice_the_energy_score(n_features):
    # 2 E|X - y| - E|X - X'| - E|y - y| = 2 ES, with X from the ensemble and y the truth
    ensemble, truth, weights = _case(11, (5,), 9, n_features)
    for w in (None, weights):
        distance = energy_distance(truth[:, None, :], ensemble, weights_pred=w, multioutput="raw_values")
        np.testing.assert_allclose(distance, 2.0 * energy_score(ensemble, truth, weights=w), rtol=1e-10)
    if n_features == 1:
        np.testing.assert_allclose(energy_distance(truth[:, None, :], ensemble, multioutput="raw_values"),
                                   2.0 * crps_ensemble(ensemble[..., 0], truth[..., 0]), rtol=1e-10)


# --------------------------------------------------------------------------- #
# Properties
# --------------------------------------------------------------------------- #


def test_integer_weights_equal_repeated_members_and_zero_weight_drops_a_member():
    rng = np.random.default_rng(1)
    ensemble, truth = rng.standard_normal((4, 5, 2)), rng.standard_normal((4, 2))
    counts = np.array([1, 3, 0, 2, 1])
    repeated = np.repeat(ensemble, counts, axis=1)
    np.testing.assert_allclose(energy_score(ensemble, truth, weights=np.tile(counts, (4, 1))),
                               energy_score(repeated, truth), rtol=1e-12)
    np.testing.assert_allclose(crps_ensemble(ensemble[..., 0], truth[:, 0], weights=np.tile(counts, (4, 1))),
                               crps_ensemble(repeated[..., 0], truth[:, 0]), rtol=1e-12)
    # only ratios matter, whatever their magnitude
    np.testing.assert_allclose(energy_score(ensemble, truth, weights=1e300 * np.tile(counts, (4, 1))),
                               energy_score(repeated, truth), rtol=1e-12)


def test_members_order_does_not_matter():
    ensemble, truth, weights = _case(2, (3,), 8, 2)
    order = np.random.default_rng(0).permutation(8)
    np.testing.assert_allclose(energy_score(ensemble[:, order], truth, weights=weights[:, order]),
                               energy_score(ensemble, truth, weights=weights), rtol=1e-12)
    np.testing.assert_allclose(crps_ensemble(ensemble[:, order, 0], truth[:, 0], weights=weights[:, order]),
                               crps_ensemble(ensemble[..., 0], truth[:, 0], weights=weights), rtol=1e-12)


def test_a_perfect_ensemble_scores_zero():
    truth = np.array([[1.5, -2.0, 3e5], [0.0, 0.0, 0.0]])
    ensemble = np.repeat(truth[:, None, :], 6, axis=1)
    assert np.all(energy_score(ensemble, truth) == 0.0)
    assert np.all(crps_ensemble(ensemble[..., 0], truth[:, 0]) == 0.0)
    # members of weight 0 elsewhere do not count
    ensemble[:, 0] += 10.0
    weights = np.array([[0.0] + [1.0] * 5] * 2)
    assert np.all(energy_score(ensemble, truth, weights=weights) == 0.0)
    assert np.all(crps_ensemble(ensemble[..., 0], truth[:, 0], weights=weights) == 0.0)
    assert energy_score(ensemble, truth)[0] > 0.0


def test_a_closer_ensemble_scores_lower():
    rng = np.random.default_rng(3)
    noise = rng.standard_normal((20, 3))
    noise = np.concatenate([noise, -noise])  # symmetric: the score grows with the offset along any ray
    truth = np.array([1.0, -1.0, 2.0])
    direction = np.array([0.6, 0.0, 0.8])
    offsets = [0.0, 0.5, 1.0, 2.0, 4.0]
    es = [energy_score(truth + s * direction + noise, truth) for s in offsets]
    crps = [crps_ensemble(truth[0] + s + noise[:, 0], truth[0]) for s in offsets]
    assert np.all(np.diff(es) > 0) and np.all(np.diff(crps) > 0)
    # and a sharper ensemble at the truth scores lower than a wider one
    assert energy_score(truth + 0.1 * noise, truth) < energy_score(truth + noise, truth)


@pytest.mark.parametrize("scale", [1e12, 1e200, 1e-200])
def test_scores_are_proportional_to_the_scale_without_overflow(scale):
    ensemble, truth, weights = _case(5, (4,), 10, 3)
    es = energy_score(scale * ensemble, scale * truth, weights=weights)
    crps = crps_ensemble(scale * ensemble[..., 0], scale * truth[..., 0], weights=weights)
    assert np.all(np.isfinite(es)) and np.all(es > 0)
    np.testing.assert_allclose(es, scale * energy_score(ensemble, truth, weights=weights), rtol=1e-12)
    np.testing.assert_allclose(crps, scale * crps_ensemble(ensemble[..., 0], truth[..., 0], weights=weights),
                               rtol=1e-12)


def test_crps_far_from_the_truth_keeps_its_digits():
    # the ensemble's spread (1) far from the origin (1e12): the terms of the sorted sum never cancel
    ensemble = 1e12 + np.array([0.0, 1.0, 2.0])
    assert crps_ensemble(ensemble, 1e12 + 1.0) == pytest.approx(2.0 / 9.0, rel=1e-12)
    assert crps_ensemble(ensemble, 0.0) == pytest.approx(1e12 + 1.0 - 4.0 / 9.0, rel=1e-14)


def test_scores_of_no_leading_axes_are_floats_and_lists_are_accepted():
    assert isinstance(energy_score([[0.0, 0.0], [3.0, 4.0]], [0.0, 0.0]), float)
    assert isinstance(crps_ensemble([0.0, 1.0], 0.5), float)
    assert crps_ensemble([0.0, 1.0], np.float64(0.5)) == crps_ensemble(np.array([0.0, 1.0]), np.array(0.5))


def test_torch_tensors_are_scored_like_arrays():
    torch = pytest.importorskip("torch")
    ensemble, truth, weights = _case(8, (3,), 6, 2)
    as_tensor = torch.tensor(ensemble, requires_grad=True)
    np.testing.assert_array_equal(energy_score(as_tensor, torch.tensor(truth), weights=torch.tensor(weights)),
                                  energy_score(ensemble, truth, weights=weights))
    np.testing.assert_array_equal(crps_ensemble(as_tensor[..., 0], torch.tensor(truth[:, 0])),
                                  crps_ensemble(ensemble[..., 0], truth[:, 0]))


def test_empty_leading_axes_give_empty_scores():
    assert energy_score(np.zeros((0, 4, 2)), np.zeros((0, 2))).shape == (0,)
    assert crps_ensemble(np.zeros((2, 0, 4)), np.zeros((2, 0))).shape == (2, 0)


def test_large_ensembles_are_scored_in_blocks(monkeypatch):
    from sklearn_measattn.metrics import _ensemble_scores

    ensemble, truth, weights = _case(9, (3, 2), 40, 5)
    whole = energy_score(ensemble, truth, weights=weights)
    monkeypatch.setattr(_ensemble_scores, "_BLOCK_ENTRIES", 7 * 40 * 5)  # 7 rows of one ensemble at a time
    np.testing.assert_allclose(energy_score(ensemble, truth, weights=weights), whole, rtol=1e-13)
    monkeypatch.setattr(_ensemble_scores, "_BLOCK_ENTRIES", 2 * 40 * 40 * 5)  # two ensembles at a time
    np.testing.assert_allclose(energy_score(ensemble, truth, weights=weights), whole, rtol=1e-13)


def test_many_members_take_the_compiled_distances_and_score_alike(monkeypatch):
    from sklearn_measattn.metrics import _ensemble_scores

    ensemble, truth, weights = _case(11, (2,), 300, 4)  # above the member count that switches to scipy's cdist
    assert ensemble.shape[-2] > _ensemble_scores._CDIST_MEMBERS
    compiled = energy_score(ensemble, truth, weights=weights)
    monkeypatch.setattr(_ensemble_scores, "_CDIST_MEMBERS", 10**9)  # numpy's broadcast differences instead
    np.testing.assert_allclose(compiled, energy_score(ensemble, truth, weights=weights), rtol=1e-13)
    monkeypatch.setattr(_ensemble_scores, "_CDIST_MEMBERS", 1)
    monkeypatch.setattr(_ensemble_scores, "_BLOCK_ENTRIES", 7 * 300)  # compiled, 7 rows at a time
    np.testing.assert_allclose(energy_score(ensemble, truth, weights=weights), compiled, rtol=1e-13)


# --------------------------------------------------------------------------- #
# Bad input
# --------------------------------------------------------------------------- #

ENS, TRUTH = np.zeros((4, 5, 2)), np.zeros((4, 2))


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: energy_score(ENS, np.zeros((3, 2))), ValueError, r"truth has shape \(3, 2\) but ensemble has shape \(4, 5, 2\)"),
        (lambda: energy_score(ENS, np.zeros((4, 3))), ValueError, r"\(4, 2\): one true state per ensemble"),
        (lambda: energy_score(ENS, np.zeros((4, 5, 2))), ValueError, r"truth has shape \(4, 5, 2\)"),
        (lambda: energy_score(np.zeros(5), np.zeros(())), ValueError, r"at least 2-D.*crps_ensemble"),
        (lambda: energy_score(np.zeros((4, 0, 2)), TRUTH), ValueError, "at least 1 member"),
        (lambda: energy_score(ENS, TRUTH, weights=np.ones((4, 4))), ValueError,
         r"weights has shape \(4, 4\) but ensemble has shape \(4, 5, 2\).*\(4, 5\)"),
        (lambda: energy_score(ENS, TRUTH, weights=-np.ones((4, 5))), ValueError, "negative entry at index"),
        (lambda: energy_score(ENS, TRUTH, weights=np.eye(4, 5) * [[1], [0], [1], [1]]), ValueError,
         r"all 0 for the ensemble at index \(1,\)"),
        (lambda: energy_score(np.where(np.arange(40).reshape(4, 5, 2) == 13, np.nan, ENS), TRUTH), ValueError,
         r"ensemble contains NaN at index \(1, 1, 1\)"),
        (lambda: energy_score(ENS, np.full((4, 2), np.inf)), ValueError, r"truth contains infinity.*8 non-finite"),
        (lambda: energy_score(ENS, TRUTH, weights=np.full((4, 5), np.nan)), ValueError, "weights contains NaN"),
        (lambda: energy_score(ENS.astype(str), TRUTH), TypeError, "strings"),
        (lambda: energy_score(ENS + 1j, TRUTH), TypeError, "complex"),
        (lambda: energy_score(ENS, "truth"), TypeError, "truth"),
        (lambda: crps_ensemble(np.zeros((4, 5)), np.zeros(5)), ValueError,
         r"truth has shape \(5,\) but ensemble has shape \(4, 5\).*ensemble.shape\[:-1\] = \(4,\)"),
        (lambda: crps_ensemble(np.zeros((4, 5)), 0.0), ValueError, r"truth has shape \(\) but ensemble has shape \(4, 5\)"),
        (lambda: crps_ensemble(np.array(1.0), 0.0), ValueError, "at least 1-D"),
        (lambda: crps_ensemble(np.zeros((4, 0)), np.zeros(4)), ValueError, "0 members"),
        (lambda: crps_ensemble(np.zeros((4, 5)), np.zeros(4), weights=np.ones(5)), ValueError, r"weights has shape \(5,\)"),
        (lambda: crps_ensemble(np.zeros((4, 5)), [0.0, np.nan, 0.0, 0.0]), ValueError, r"truth contains NaN at index \(1,\)"),
        (lambda: crps_ensemble(np.zeros((4, 5)), np.zeros(4), weights=np.zeros((4, 5))), ValueError, "all 0"),
        (lambda: crps_ensemble([[object()]], [0.0]), TypeError, "non-numeric"),
        (lambda: crps_ensemble(np.zeros(3), 0.0, weights=1.0), TypeError, "weights"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_huge_values_far_apart_refuse_to_overflow():
    with pytest.raises(ValueError, match="beyond the float64 range"):
        crps_ensemble(np.array([-1.7e308, -1.7e308]), 1.7e308)  # the score is 3.4e308
    with pytest.raises(ValueError, match="beyond the float64 range"):
        energy_score(np.array([[-1.7e308, 0.0]]), np.array([1.7e308, 0.0]))
