"""Likelihood-free training pairs for a learned scalar update, from synthetic priors and a noise law's draws."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state

from .._lorenz96 import NoiseLaw, ObservationModel, as_noise_laws
from .._param_validation import Interval, validate_params
from .._validation import Choices
from ._learned import _REFLECTED, ANALYSIS_FEATURE_SETS, _checked_noise_ratio_range, analysis_features

__all__ = ["PRIOR_KINDS", "make_synthetic_analysis_data"]

#: The kinds of synthetic prior :func:`make_synthetic_analysis_data` draws.
PRIOR_KINDS = ("gaussian", "skewed", "bimodal", "student_t")


def _draw_priors(kind, n_priors, n_members, rng):
    """(n_priors, n_members) members of one kind of prior (not standardised)."""
    z = rng.standard_normal((n_priors, n_members))
    if kind == "gaussian":
        return z
    if kind == "skewed":  # lognormal, shape 0.5 to 1
        return np.exp(rng.uniform(0.5, 1.0, (n_priors, 1)) * z)
    if kind == "student_t":  # Student-t with 3 degrees of freedom: members far out, as an overconfident forecast meets
        return rng.standard_t(3.0, (n_priors, n_members))
    # bimodal: two Gaussian modes 3 to 5 sd apart, weights 0.2 to 0.8
    gap = rng.uniform(3.0, 5.0, (n_priors, 1))
    weight = rng.uniform(0.2, 0.8, (n_priors, 1))
    return z + gap * (rng.uniform(size=(n_priors, n_members)) < weight)


@validate_params(
    {
        "noise": [NoiseLaw, ObservationModel, list, tuple],
        "n_priors": [Interval(Integral, 1, None, closed="left")],
        "draws": [Interval(Integral, 1, None, closed="left")],
        "ensemble_size": [Interval(Integral, 3, None, closed="left")],
        "prior_weights": [dict, None],
        "noise_ratio_range": [tuple, list],
        "innovation_power": [Interval(Real, 0, None, closed="left")],
        "candidates": [Interval(Integral, 1, None, closed="left"), None],
        "reflect": ["boolean", Choices(("auto",))],
        "features": [Choices(tuple(ANALYSIS_FEATURE_SETS))],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_synthetic_analysis_data(
    noise,
    *,
    n_priors=20000,
    draws=4,
    ensemble_size=40,
    prior_weights=None,
    noise_ratio_range=(0.2, 30.0),
    innovation_power=0.0,
    candidates=None,
    reflect="auto",
    features="ranked",
    random_state=None,
):
    """Likelihood-free training pairs for a :class:`LearnedAnalysis`: synthetic priors, simulated observations.

    No filter runs and no density is evaluated; a noise law is needed only
    to draw from (a :class:`NoiseLaw`, e.g. :class:`CauchyNoise`, or a
    :class:`SampledNoise` that resamples recorded errors). Each
    synthetic prior has ``ensemble_size + 1`` exchangeable members, of a
    kind drawn by ``prior_weights`` from :data:`PRIOR_KINDS` (Gaussian;
    skewed: lognormal with shape 0.5 to 1; bimodal: two modes 3 to 5 sd
    apart; student_t: Student-t with 3 degrees of freedom, whose far
    members give the observations far from the ensemble that light-tailed
    noise otherwise never shows a model). ``draws`` times per prior, a different member stands in for the
    truth and the other ``ensemble_size`` form the prior; the observation is
    the stand-in plus noise of a law of ``noise`` (one per prior, at random)
    at a noise-to-prior scale ratio drawn log-uniformly from
    ``noise_ratio_range``. The stand-in is exchangeable with the members, so
    its law given the prior and the observation is Bayes' posterior: a model
    fitted with the energy loss on the pairs (against one point, the CRPS of
    the output ensemble, minimised by the posterior's quantiles) learns Bayes'
    rule for the scalar update. Fit it, then give ``LearnedAnalysis`` the same
    ``noise_ratio_range``.

    Parameters
    ----------
    noise : NoiseLaw, ObservationModel or list of them
        The noise laws: their ``standard_noise`` draws and their ``tail``
        feature (``noise_scale`` is not used: the ratio sets the scale). A
        law listed twice is drawn twice as often.
    n_priors : int, default=20000
        Synthetic priors.
    draws : int, default=4
        Stand-ins (and observations) per prior: ``n_pairs = n_priors *
        draws``, twice that with reflection.
    ensemble_size : int, default=40
        Members of each prior (the filter's ensemble size).
    prior_weights : dict or None, default=None
        Weight of each kind of :data:`PRIOR_KINDS`; None:
        ``{"gaussian": 0.5, "skewed": 0.3, "bimodal": 0.2}``.
    noise_ratio_range : (float, float), default=(0.2, 30.0)
        Range of the noise-to-prior scale ratios (a cycled filter meets
        ratios of 10 and more once its spread is small).
    innovation_power : float, default=0.0
        With ``candidates``, keep the ``draws`` observations out of
        ``candidates`` with weights ``(1 + |innovation|) ** innovation_power``
        (innovation in prior sd): far observations, rare under heavy tails,
        are seen more often. The selection depends on the observation
        alone, so the stand-in's law given the observation is still the
        posterior.
    candidates : int or None, default=None
        Candidate stand-ins per prior to select from (at least ``draws``,
        at most ``ensemble_size + 1``); None: ``draws``, no selection.
    reflect : bool or "auto", default="auto"
        Add every pair reflected (``x -> -x``): Bayes' rule commutes with
        the reflection when the noise law is symmetric. ``"auto"``: when
        every law of ``noise`` is (``symmetric``).
    features : {"ranked", "kalman", "plain"}, default="ranked"
        The feature set of :func:`analysis_features` (a key of
        :data:`ANALYSIS_FEATURE_SETS`).
    random_state : int, RandomState instance or None, default=None
        Seeds the priors, the stand-ins and the noise.

    Returns
    -------
    X : ndarray of shape (n_pairs, ensemble_size, n_features)
        The measures of :func:`analysis_features` of the set ``features``
        (5 features for ``"ranked"``, 7 for ``"kalman"``, 4 for
        ``"plain"``), float32.
    y : ndarray of shape (n_pairs, 1, 1)
        The stand-ins, standardised like the members, float32.

    Examples
    --------
    >>> from sklearn_measattn import MeasureTransformerRegressor
    >>> from sklearn_measattn.assimilation import (CauchyNoise, GaussianNoise, LearnedAnalysis,
    ...                                            make_synthetic_analysis_data, make_twin_problem,
    ...                                            twin_experiment)
    >>> laws = [CauchyNoise(), GaussianNoise()]
    >>> X, y = make_synthetic_analysis_data(laws, n_priors=200, draws=2, ensemble_size=10, random_state=0)
    >>> X.shape, y.shape
    ((800, 10, 5), (800, 1, 1))
    >>> model = MeasureTransformerRegressor(kernel="softmax", transform="symlog", d_model=16, n_heads=2,
    ...                                     n_layers=1, max_epochs=2, random_state=0).fit(X, y)
    >>> step = LearnedAnalysis(model, noise_ratio_range=(0.2, 30.0), relaxation=0.3)
    >>> problem = make_twin_problem(n_variables=8, noise="cauchy", n_cycles=40, random_state=1)
    >>> result = twin_experiment(step, problem, spin_up=10, ensemble_size=10, random_state=1)
    >>> result.rmse_per_cycle.shape
    (40,)
    """
    laws = as_noise_laws(noise, caller="make_synthetic_analysis_data")
    weights = {"gaussian": 0.5, "skewed": 0.3, "bimodal": 0.2} if prior_weights is None else dict(prior_weights)
    unknown = sorted(set(weights) - set(PRIOR_KINDS))
    if unknown or not weights or any(not (np.isfinite(w) and w >= 0) for w in weights.values()) \
            or sum(weights.values()) <= 0:
        raise ValueError(
            f"prior_weights must map kinds among {PRIOR_KINDS} to non-negative weights, not all zero; "
            f"got {prior_weights!r}."
        )
    low_high = _checked_noise_ratio_range(noise_ratio_range)
    n_members = ensemble_size
    n_candidates = draws if candidates is None else candidates
    if not draws <= n_candidates <= n_members + 1:
        raise ValueError(
            f"candidates must be between draws ({draws}) and ensemble_size + 1 ({n_members + 1}): each candidate "
            f"is a different member of a prior; got {n_candidates}."
        )
    reflect = all(law.symmetric for law in laws) if reflect == "auto" else reflect

    rng = check_random_state(random_state)
    kinds = [kind for kind in PRIOR_KINDS if weights.get(kind, 0) > 0]
    p = np.array([weights[kind] for kind in kinds], dtype=np.float64)
    counts = rng.multinomial(n_priors, p / p.sum())
    priors = np.concatenate([_draw_priors(kind, c, n_members + 1, rng) for kind, c in zip(kinds, counts)])
    priors = priors[rng.permutation(len(priors))]
    P = len(priors)
    ratio = np.exp(rng.uniform(*np.log(low_high), size=P))
    law_of = rng.randint(len(laws), size=P)
    noise_draws = np.empty((P, n_candidates))
    tail = np.empty(P)
    for index, law in enumerate(laws):
        rows = law_of == index
        noise_draws[rows] = law.standard_noise((int(rows.sum()), n_candidates), rng)
        tail[rows] = law.tail
    # distinct members stand in for the truth
    stand_in = np.argsort(rng.uniform(size=(P, n_members + 1)), axis=1)[:, :n_candidates]
    truth = np.take_along_axis(priors, stand_in, axis=1)
    # each candidate's innovation, in the sd of the prior without it
    total, total_sq = priors.sum(axis=1, keepdims=True), (priors**2).sum(axis=1, keepdims=True)
    mean = (total - truth) / n_members
    sd = np.sqrt(np.maximum((total_sq - truth**2 - n_members * mean**2) / (n_members - 1), 1e-300))
    observation = truth + ratio[:, None] * sd * noise_draws
    if n_candidates > draws:
        weight = (1.0 + np.abs((observation - mean) / sd)) ** innovation_power
        keys = np.log(rng.uniform(size=weight.shape)) / weight  # weighted sampling without replacement
        chosen = np.argsort(-keys, axis=1)[:, :draws]
    else:
        chosen = np.tile(np.arange(draws), (P, 1))
    Xs, ys = [], []
    everyone = np.arange(P)
    for j in range(draws):
        column = chosen[:, j:j + 1]
        member = np.take_along_axis(stand_in, column, axis=1)[:, 0]
        keep = np.ones(priors.shape, dtype=bool)
        keep[everyone, member] = False
        prior = priors[keep].reshape(P, n_members)
        obs = np.take_along_axis(observation, column, axis=1)[:, 0]
        prior_sd = prior.std(axis=1, ddof=1)
        measures, centre, scale = analysis_features(prior, obs, noise_scale=ratio * prior_sd, noise_tail=tail,
                                                    features=features)
        Xs.append(measures)
        ys.append(((priors[everyone, member] - centre) / scale)[:, None, None])
    X, y = np.concatenate(Xs), np.concatenate(ys)
    if reflect:
        reflected = X * np.array([_REFLECTED[name] for name in ANALYSIS_FEATURE_SETS[features]])
        X, y = np.concatenate([X, reflected]), np.concatenate([y, -y])
    return X.astype(np.float32), y.astype(np.float32)
