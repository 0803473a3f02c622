"""A learned analysis step: a measure-to-measure model as the scalar update of a serial ensemble filter."""

from __future__ import annotations

import functools
from numbers import Real

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from .._param_validation import HasMethods, validate_params
from .._threads import torch_threads
from .._validation import Choices, NumberInterval
from ..estimator import MeasureTransformerRegressor, fitted_network
from ._baselines import INFLATION, LOCALIZATION, RELAXATION, AnalysisStep, SerialEnKF
from ._problem import (
    RUN_CONSTRAINTS,
    TwinProblem,
    arrays_described,
    check_problem_for_run,
)
from ._rank_histogram import RankHistogramFilter
from ._twin import _run, resolve_analysis

__all__ = [
    "ANALYSIS_FEATURES", "ANALYSIS_FEATURE_SETS", "KALMAN_ANALYSIS_FEATURES", "RANKED_ANALYSIS_FEATURES",
    "LearnedAnalysis", "analysis_features", "make_analysis_training_data",
]

# x -> -x negates the member, its centred rank and the innovation, and leaves the noise's features
_REFLECTED = {
    "member": -1.0, "rank": -1.0, "innovation": -1.0, "asinh_innovation": -1.0, "asinh_normalised_innovation": -1.0,
    "log_noise_ratio": 1.0, "kalman_gain": 1.0, "noise_tail": 1.0,
}

#: The features of every member of the scalar ensembles a learned analysis sees, in order.
ANALYSIS_FEATURES = ("member", "innovation", "log_noise_ratio", "noise_tail")
#: The same with each member's centred rank ``k / (N + 1) - 1/2`` second: its quantile level under the rank histogram.
RANKED_ANALYSIS_FEATURES = ("member", "rank", "innovation", "log_noise_ratio", "noise_tail")
#: The ranked features with the observation as a Kalman update sees it: the innovation compressed by ``asinh``, in
#: prior standard deviations and in its own (``sqrt(1 + ratio^2)`` prior sd), and the Kalman gain ``1 / (1 + ratio^2)``.
KALMAN_ANALYSIS_FEATURES = (
    "member", "rank", "asinh_innovation", "asinh_normalised_innovation", "log_noise_ratio", "kalman_gain", "noise_tail",
)
#: The feature sets by name, for :func:`analysis_features` and :func:`make_synthetic_analysis_data`.
ANALYSIS_FEATURE_SETS = {"plain": ANALYSIS_FEATURES, "ranked": RANKED_ANALYSIS_FEATURES,
                         "kalman": KALMAN_ANALYSIS_FEATURES}
_FEATURE_SET_NAMES = {len(names): name for name, names in ANALYSIS_FEATURE_SETS.items()}


def analysis_features(prior, observation, *, noise_scale, noise_tail, features="plain", noise_ratio_range=None):
    """The input measure of a learned scalar update: one point per member, the features of a named set.

    For the ensemble ``prior`` of one observed variable, with mean ``m`` and
    standard deviation ``s`` (``ddof=1``), and its observation ``o``:

    - ``member``: ``(x - m) / s``, the standardised member;
    - ``innovation``: ``(o - m) / s``, the same for every member; heavy-tailed
      when the noise is (a Cauchy outlier gives values of 1e3 and more);
    - ``log_noise_ratio``: ``log(noise_scale / s)``, how sharp the observation
      is against the forecast;
    - ``noise_tail``: ``1 / df`` of the noise law (0 Gaussian, 1 Cauchy);
    - ``rank`` (sets ``"ranked"`` and ``"kalman"``): ``k / (N + 1) - 1/2``
      for the member of rank ``k`` (1 to ``N``, ties in member order): the
      quantile level at which the rank histogram filter places the member;
    - ``asinh_innovation``, ``asinh_normalised_innovation``, ``kalman_gain``
      (set ``"kalman"``, in place of ``innovation``): ``asinh`` of the
      innovation and of the innovation over ``sqrt(1 + r^2)``, ``r =
      noise_scale / s`` (in units of its own standard deviation, were the
      noise Gaussian), and the Kalman gain ``1 / (1 + r^2)``: the quantities
      a Kalman update is a function of, bounded enough for a network
      without an input transform.

    The sets, in column order: ``"plain"``, :data:`ANALYSIS_FEATURES`;
    ``"ranked"``, :data:`RANKED_ANALYSIS_FEATURES`; ``"kalman"``,
    :data:`KALMAN_ANALYSIS_FEATURES`.

    Standardising makes one model serve every variable, scale and ensemble
    size; the noise's features let it serve every noise scale and law.

    Parameters
    ----------
    prior : array-like of shape (..., n_members)
        Scalar ensembles.
    observation : array-like of shape (...)
        Their observations.
    noise_scale : float or array-like of shape (...)
        Scale of the observation noise (one per ensemble, or one for all).
    noise_tail : float or array-like of shape (...)
        ``1 / df`` of its law (likewise).
    features : {"plain", "ranked", "kalman"}, default="plain"
        The feature set (a key of :data:`ANALYSIS_FEATURE_SETS`).
    noise_ratio_range : (float, float) or None, default=None
        Clip ``noise_scale / s`` to this range first (the ratios a model was
        trained on), or not.

    Returns
    -------
    features : ndarray of shape (..., n_members, n_features)
        ``n_features`` 4, 5 or 7.
    centre, scale : ndarray of shape (...)
        ``m`` and ``s``: a standardised output ``u`` means ``m + s * u``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.assimilation import analysis_features
    >>> features, centre, scale = analysis_features(np.array([1.0, 2.0, 3.0]), 4.0, noise_scale=1.0, noise_tail=1.0)
    >>> features[:, 0].tolist(), features[0, 1:].tolist()
    ([-1.0, 0.0, 1.0], [2.0, 0.0, 1.0])
    >>> analysis_features(np.array([1.0, 2.0, 3.0]), 4.0, noise_scale=1.0, noise_tail=1.0, features="kalman")[0].shape
    (3, 7)
    """
    if features not in ANALYSIS_FEATURE_SETS:
        raise ValueError(f"features must be one of {sorted(ANALYSIS_FEATURE_SETS)}; got {features!r}.")
    prior = np.asarray(prior, dtype=np.float64)
    centre = prior.mean(axis=-1)
    scale = prior.std(axis=-1, ddof=1)
    member = (prior - centre[..., None]) / scale[..., None]
    innovation = (np.asarray(observation, dtype=np.float64) - centre) / scale
    ratio = np.asarray(noise_scale, dtype=np.float64) / scale
    if noise_ratio_range is not None:
        ratio = np.clip(ratio, *noise_ratio_range)
    shape = member.shape
    gain = 1.0 / (1.0 + ratio**2)
    # one value per ensemble, the same for each of its members
    shared = {"innovation": innovation, "log_noise_ratio": np.log(ratio), "kalman_gain": gain,
              "noise_tail": np.asarray(noise_tail, dtype=np.float64), "asinh_innovation": np.arcsinh(innovation),
              "asinh_normalised_innovation": np.arcsinh(innovation * np.sqrt(gain))}
    columns = []
    for name in ANALYSIS_FEATURE_SETS[features]:
        if name == "member":
            columns.append(member)
        elif name == "rank":
            order = np.argsort(np.argsort(prior, axis=-1, kind="stable"), axis=-1, kind="stable")
            columns.append((order + 1.0) / (shape[-1] + 1.0) - 0.5)
        else:
            columns.append(np.broadcast_to(shared[name][..., None], shape))
    return np.stack(columns, axis=-1), centre, scale


def _checked_noise_ratio_range(ratio_range):
    """``(low, high)`` as a tuple of floats, or a ValueError: the ratios must satisfy ``0 < low < high``, both finite."""
    if not (len(ratio_range) == 2 and all(np.isfinite(ratio_range)) and 0 < ratio_range[0] < ratio_range[1]):
        raise ValueError(f"noise_ratio_range must be (low, high) with 0 < low < high, both finite; got {ratio_range!r}.")
    return float(ratio_range[0]), float(ratio_range[1])


def _trained_level_offset(estimator):
    """The quantile levels ``(k - a) / (N + 1 - 2a)`` at which ``estimator``'s sorted outputs sit: ``a``."""
    loss, params = getattr(estimator, "loss", None), getattr(estimator, "loss_params", None) or {}
    if loss == "quantile":
        return float(params.get("level_offset", 0.5))
    if loss == "energy" and params.get("beta", 1.0) == 1.0:
        return 0.5  # against one point, the energy loss is twice the CRPS, the quantile loss at offset 0.5 (times 4)
    raise ValueError(
        f"level_offset needs a model whose outputs are quantiles at known levels: one trained with loss='quantile' "
        f"(its level_offset) or loss='energy' (offset 0.5); this one has loss={loss!r}. Pass level_offset=None."
    )


def _level_map(trained, wanted):
    """A function of sorted members ``(..., N)`` at the levels of offset ``trained`` -> the members at ``wanted``.

    Linear interpolation of the quantile function between the members, the
    outer segments extended beyond them.
    """

    @functools.lru_cache(maxsize=8)
    def interpolation(n):  # the same for every update of a filter: computed once per ensemble size
        k = np.arange(1, n + 1)
        at, to = (k - trained) / (n + 1 - 2 * trained), (k - wanted) / (n + 1 - 2 * wanted)
        left = np.clip(np.searchsorted(at, to) - 1, 0, n - 2)
        return left, left + 1, (to - at[left]) / (at[left + 1] - at[left])

    def relevel(members):
        left, right, weight = interpolation(members.shape[-1])
        lower = members[..., left]
        return lower + weight * (members[..., right] - lower)

    return relevel


def _scalar_recipe(estimator):
    """The estimator's recipe of a learned scalar analysis, None when it has none, or a ValueError if of another kind."""
    recipe = getattr(estimator, "analysis_recipe_", None)
    if recipe is not None and (not isinstance(recipe, dict) or recipe.get("kind") != "scalar"):
        kind = recipe.get("kind") if isinstance(recipe, dict) else None
        hint = " (a local model: put it in LocalLearnedAnalysis)" if kind == "local" else ""
        raise ValueError(
            f"LearnedAnalysis reads a model by a recipe of kind 'scalar' (fit_learned_analysis writes one); this "
            f"estimator's analysis_recipe_ has kind {kind!r}{hint}."
        )
    return recipe


def _check_recipe_features(recipe, feature_set):
    """A ValueError if the recipe names another feature set than the one the model's input size says."""
    if recipe is not None and recipe.get("features") != feature_set:
        raise ValueError(
            f"The model's recipe says it was trained on the {recipe.get('features')!r} features, but it takes "
            f"{len(ANALYSIS_FEATURE_SETS[feature_set])} features (the {feature_set!r} set): the recipe does not "
            "belong to this model."
        )


class LearnedAnalysis(SerialEnKF):
    """A serial ensemble filter whose scalar update is a fitted measure-to-measure model.

    Observations are assimilated one at a time, as in :class:`SerialEnKF`: the
    observed variable's ensemble is updated, then every variable moves by its
    ensemble regression on it (localised by ``localization_radius``). The
    scalar update is the learned part: ``estimator`` maps the measure of
    :func:`analysis_features` (each member standardised, with the
    observation, the noise scale and the noise law as features) to the
    standardised posterior members. How far to trust an observation that
    lands far from the forecast, the non-linear part of Bayes' rule under
    heavy-tailed noise, is learned; the spreading of the update to other
    variables stays the linear regression that keeps ensemble filters stable
    over many cycles, and the features make one model serve any number of
    variables, members, noise scales and laws.

    Missing (NaN) observations are skipped, as in :class:`SerialEnKF`: only
    the present ones are updated, and a cycle with none leaves the forecast
    as it is.

    ``update`` says what of the learned posterior is used:

    - ``"ensemble"`` (default): the learned members themselves, assigned to
      the prior members by rank (the monotone map, optimal transport in one
      dimension), so that every member moves as little as the learned
      posterior allows: non-Gaussian posteriors (two modes when an
      observation is ambiguous) carry over.
    - ``"moments"``: only its mean and its spread, the spread at least the
      Kalman update's (the most a Gaussian observation of the nominal
      variance would shrink it); the prior's members are shifted and scaled
      to them (a learned square-root update with the prior's shape).

    A filter makes dozens of scalar updates per cycle and hundreds of cycles,
    so a small bias in the learned update compounds: tune ``inflation`` and
    ``relaxation`` as for any ensemble filter, and check a new model in a
    cycled experiment before trusting it (one-step skill does not carry over
    by itself).

    Train the estimator on :func:`make_analysis_training_data` (pairs of
    standardised scalar forecasts and the standardised truth, drawn from a
    cycled filter), with the energy loss: against a single true point it is
    the energy score, a proper scoring rule, so the model learns a calibrated
    posterior ensemble rather than a point estimate.

    Parameters
    ----------
    estimator : fitted estimator
        A measure-to-measure regressor with ``predict``, fitted on inputs of
        the 4 features of :data:`ANALYSIS_FEATURES`, the 5 of
        :data:`RANKED_ANALYSIS_FEATURES` or the 7 of
        :data:`KALMAN_ANALYSIS_FEATURES` (the step gives it the set it was
        fitted on, told by their number) and 1 output feature,
        e.g. :class:`~sklearn_measattn.MeasureTransformerRegressor`. A
        ``MeasureTransformerRegressor`` runs its network directly (batched in
        torch, without re-validation at every cycle).
    update : {"ensemble", "moments"}, default="ensemble"
        What of the learned posterior moves the members (above).
    inflation : float, default=1.0
        Multiplicative inflation of the forecast anomalies, in [1, 10].
    localization_radius : float or None, default=None
        Gaspari-Cohn half-width of the regression step, in variables; None:
        none (with fewer members than variables, set one).
    relaxation : float, default=0.0
        Relaxation to prior spread after the update, in [0, 1) (see
        :class:`SerialEnKF`): a learned update that is slightly over-confident
        at each of many serial steps would otherwise shrink the ensemble.
    noise_ratio_range : (float, float), None or "auto", default="auto"
        The range of ``noise_scale / s`` (the noise against the prior's
        standard deviation) the model was trained on: ratios outside it are
        clipped to it, so the model is never asked about sharper or vaguer
        observations than it saw (beyond them Bayes' rule changes little).
        None: no clipping. ``"auto"``: the range in the model's recipe
        (``analysis_recipe_``, written by :func:`fit_learned_analysis` and
        kept in its model file), else None. A range other than the recipe's
        is refused: the model would read features it was not trained on.
    reflect : bool or "auto", default="auto"
        Average the update with the update of the reflected problem ``x ->
        -x`` (members and innovation negated, the output negated back):
        exact for Bayes' rule under a symmetric noise law, and it removes
        the part of the model's error that is not. ``"auto"``: when the
        observation model's law is symmetric (``symmetric``; not for a
        record of errors, :class:`SampledNoise`, whose law may be skewed).
    batch_disjoint : bool, default=False
        With localisation, update together the observations whose
        localisation supports do not overlap, in one forward pass of the
        network per group (see :class:`SerialEnKF`: the same filter with the
        observations in another order). The network's cost is mostly per
        call, so this divides the step's time by about the number of
        observations per group (five at 40 variables and radius 2).
    level_offset : float, None or "auto", default="auto"
        Read the learned posterior at other quantile levels: the ``N``
        sorted output members of a model trained with the quantile loss of
        offset ``a0`` (:func:`~sklearn_measattn.losses.quantile_loss`,
        ``loss_params["level_offset"]``; the energy loss against one point
        is ``a0 = 0.5``) are the posterior's quantiles at the levels ``(k -
        a0) / (N + 1 - 2 a0)``; with ``level_offset=a`` the members are
        placed at ``(k - a) / (N + 1 - 2a)`` instead, by linear
        interpolation of that quantile function (linear extrapolation beyond
        the outer members). A larger ``a`` spreads them wider: an inflation
        that acts on each scalar update, where a serial filter compounds a
        small loss of spread. None: the members as output. ``"auto"``
        (default): the recipe's reading offset, else None.
    far_innovation : (float, float) or None, default=(2.0, 3.0)
        Where the update turns to Bayes' rule: an observation whose distance
        from the forecast mean is ``z`` times ``sqrt(s ** 2 + w ** 2)`` (``s``
        the prior's spread, ``w`` the law's width: the 95% quantile of the
        absolute noise divided by 1.96, ``noise_scale`` for Gaussian noise,
        6.5 times it for Cauchy noise) gets the learned update for ``z`` up to the
        first value, the update of :class:`RankHistogramFilter` (Bayes' rule
        with the law's density and a rank histogram prior) beyond the second,
        and between them the two posteriors' quantiles blended linearly. Far
        observations are where the likelihood-free pairs have little or no
        mass (a stand-in exchangeable with the members is rarely far from
        them), and where a model trained on them extrapolates: the learned
        update widens the posterior there instead of following the law.
        A law known only by a record of errors
        (:class:`SampledNoise`) has no density; its kernel density
        (:meth:`SampledNoise.kernel_density`) stands in.
        None: the learned update everywhere.

    Attributes
    ----------
    recipe_ : dict or None
        The model's recipe (``analysis_recipe_``), None for a model without one.
    noise_ratio_range_, level_offset_ : tuple or None, float or None
        The range and the reading offset in use.
    far_width_ : float
        The law's width ``w`` of ``far_innovation`` (with ``far_innovation`` set).

    Examples
    --------
    >>> from sklearn_measattn import MeasureTransformerRegressor
    >>> from sklearn_measattn.assimilation import (LearnedAnalysis, make_analysis_training_data,
    ...                                            make_twin_problem, twin_experiment)
    >>> training = make_twin_problem(n_variables=8, noise="cauchy", n_cycles=60, random_state=0)
    >>> X, y = make_analysis_training_data(training, ensemble_size=16, spin_up=10, random_state=0)
    >>> X.shape, y.shape
    ((400, 16, 4), (400, 1, 1))
    >>> model = MeasureTransformerRegressor(kernel="log", transform="symlog", d_model=16, n_heads=2, n_layers=1,
    ...                                     max_epochs=2, random_state=0).fit(X, y)
    >>> problem = make_twin_problem(n_variables=8, noise="cauchy", n_cycles=50, random_state=1)
    >>> result = twin_experiment(LearnedAnalysis(model, inflation=1.05), problem, spin_up=10, ensemble_size=16,
    ...                          random_state=1)
    >>> result.rmse_per_cycle.shape
    (50,)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["predict"])],
        "update": [Choices(("ensemble", "moments"))],
        "inflation": [INFLATION],
        "localization_radius": LOCALIZATION,
        "relaxation": [RELAXATION],
        "noise_ratio_range": [tuple, list, None, Choices(("auto",))],
        "reflect": ["boolean", Choices(("auto",))],
        "batch_disjoint": ["boolean"],
        "level_offset": [NumberInterval(Real, 0, 1, closed="left"), None, Choices(("auto",))],
        "far_innovation": [tuple, list, None],
    }

    def __init__(self, estimator, *, update="ensemble", inflation=1.0, localization_radius=None, relaxation=0.0,
                 noise_ratio_range="auto", reflect="auto", batch_disjoint=False, level_offset="auto",
                 far_innovation=(2.0, 3.0)):
        self.estimator = estimator
        self.update = update
        self.inflation = inflation
        self.localization_radius = localization_radius
        self.relaxation = relaxation
        self.noise_ratio_range = noise_ratio_range
        self.reflect = reflect
        self.batch_disjoint = batch_disjoint
        self.level_offset = level_offset
        self.far_innovation = far_innovation

    def _prepare(self):
        super()._prepare()
        estimator = self.estimator
        check_is_fitted(estimator)
        self.recipe_ = recipe = _scalar_recipe(estimator)
        n_in = getattr(estimator, "n_features_in_", None)
        n_out = getattr(estimator, "n_features_out_", 1)
        if n_in not in _FEATURE_SET_NAMES or n_out != 1:
            sets = "; ".join(f"{name!r}: {len(names)} features {names}" for name, names in ANALYSIS_FEATURE_SETS.items())
            raise ValueError(
                f"LearnedAnalysis needs an estimator fitted on measures of one of the feature sets ({sets}) with "
                f"targets of 1 feature; this one has n_features_in_={n_in}, n_features_out_={n_out}. Fit it on "
                "make_analysis_training_data(...) or make_synthetic_analysis_data(...)."
            )
        self.feature_set_ = _FEATURE_SET_NAMES[n_in]
        self.features_ = ANALYSIS_FEATURE_SETS[self.feature_set_]
        _check_recipe_features(recipe, self.feature_set_)
        if isinstance(self.noise_ratio_range, str):
            self.noise_ratio_range_ = None if recipe is None else tuple(recipe["noise_ratio_range"])
        else:
            self.noise_ratio_range_ = None if self.noise_ratio_range is None \
                else _checked_noise_ratio_range(self.noise_ratio_range)
            if recipe is not None and self.noise_ratio_range_ != tuple(recipe["noise_ratio_range"]):
                raise ValueError(
                    f"noise_ratio_range={self.noise_ratio_range!r}, but the model was trained on the noise-to-prior "
                    f"ratios {tuple(recipe['noise_ratio_range'])} (its analysis_recipe_): a model reads features in "
                    "the range it was trained on; leave noise_ratio_range='auto'."
                )
        if isinstance(self.level_offset, str):
            self.level_offset_ = None if recipe is None else recipe["level_offset"]
        else:
            self.level_offset_ = self.level_offset
        self._relevel = None if self.level_offset_ is None else _level_map(
            _trained_level_offset(estimator), self.level_offset_)
        self._reflection = np.array([_REFLECTED[name] for name in self.features_])
        self._bayes = self._far_update()
        model = self.observation_model_
        self.noise_tail_ = model.tail
        self.reflect_ = model.symmetric if self.reflect == "auto" else self.reflect
        # the package's own estimator runs its network directly: its input checks cost more than the network
        # at every one of the thousands of updates of a cycled run
        self._network = fitted_network(estimator) if isinstance(estimator, MeasureTransformerRegressor) else None

    def _far_update(self):
        """The Bayes update of far observations, bound to the observation model's law, or None without one."""
        if self.far_innovation is None:
            return None
        far = self.far_innovation
        if not (len(far) == 2 and all(np.isfinite(far)) and 0 <= far[0] < far[1]):
            raise ValueError(
                f"far_innovation must be (low, high) with 0 <= low < high, both finite (in innovation standard "
                f"deviations), or None; got {far!r}."
            )
        model = self.observation_model_
        law = model.law
        # a record has no density: its kernel density stands in
        likelihood = law.kernel_density() if not hasattr(law, "log_density") and hasattr(law, "kernel_density") else None
        # the law's width: the Gaussian's 95% interval, 1.96 sd, holds 95% of the noise when widened to 1.96 w
        draws = model.standard_noise(100_000, np.random.RandomState(0))
        self.far_width_ = model.noise_scale * float(np.quantile(np.abs(draws), 0.95)) / 1.959964
        return RankHistogramFilter(inflation=1.0, likelihood=likelihood).bind(model)

    def _predict_standardised(self, features):
        """(n_updates, n_members, n_features) features -> (n_updates, n_members) standardised posteriors, each sorted.

        With ``reflect_``, the model runs on every problem and on its
        reflection ``x -> -x`` (members and innovation negated) in one batch,
        and the sorted members of the two posteriors (the second reflected
        back) are averaged: Bayes' rule commutes with the reflection for a
        symmetric noise law, and the average removes the part of the model's
        error that does not.
        """
        n_updates = features.shape[0]
        batch = np.concatenate([features, features * self._reflection]) if self.reflect_ else features
        estimator = self.estimator
        if self._network is None:
            out = np.asarray(estimator.predict(batch), dtype=np.float64).reshape(len(batch), -1)
        else:
            out = self._network.run(batch).reshape(len(batch), -1)
        if not self.reflect_:
            posteriors = np.sort(out, axis=-1)
        else:
            posteriors = 0.5 * (np.sort(out[:n_updates], axis=-1) + np.sort(-out[n_updates:], axis=-1))
        if self._relevel is not None:
            posteriors = self._relevel(posteriors)
        return posteriors

    def analyse(self, forecast, observation):
        # one scalar ensemble is a small tensor: threads would wait for each other; the thread count and the
        # network's evaluation mode are set once per analysis, as changing either costs more than one update;
        # inference mode skips autograd's bookkeeping (the outputs become numpy arrays at once)
        if self._network is None:
            with torch_threads(1):
                return super().analyse(forecast, observation)
        with torch_threads(1), self._network.evaluation(), torch.inference_mode():
            return super().analyse(forecast, observation)

    def scalar_update(self, prior, observation):
        return self.scalar_updates(prior[None, :], np.asarray([observation], dtype=np.float64))[0]

    def scalar_updates(self, priors, observations):
        features, centre, scale = analysis_features(
            priors, observations, noise_scale=self.observation_model_.noise_scale, noise_tail=self.noise_tail_,
            features=self.feature_set_, noise_ratio_range=self.noise_ratio_range_,
        )
        posteriors = self._predict_standardised(features)
        if self.update == "ensemble":
            # the learned members go to the prior members by rank
            matched = np.empty_like(posteriors)
            np.put_along_axis(matched, np.argsort(priors, axis=-1, kind="stable"), posteriors, axis=-1)
            return self._with_far_update(priors, observations, centre[:, None] + scale[:, None] * matched)
        # "moments": the learned posterior's mean and spread move the prior's own members, its spread bounded below
        log_ratio = features[:, 0, self.features_.index("log_noise_ratio")]
        kalman_shrink = 1.0 / np.sqrt(1.0 + np.exp(-2.0 * log_ratio))  # sqrt(r^2 / (1 + r^2)), r = noise / s
        spread = np.maximum(posteriors.std(axis=-1, ddof=1), kalman_shrink)
        return self._with_far_update(priors, observations, centre[:, None] + scale[:, None] * (
            posteriors.mean(axis=-1, keepdims=True) + spread[:, None] * features[..., 0]))

    def _with_far_update(self, priors, observations, learned):
        """``learned`` (members in the order of ``priors``), turned to Bayes' rule for the far observations."""
        if self._bayes is None:
            return learned
        low, high = self.far_innovation
        z = np.abs(observations - priors.mean(axis=-1)) / np.sqrt(priors.var(axis=-1, ddof=1) + self.far_width_**2)
        weight = np.clip((z - low) / (high - low), 0.0, 1.0)
        for row in np.flatnonzero(weight > 0):
            # both posteriors place each member at its prior rank: the blend is one of their quantile functions
            bayes = self._bayes.scalar_update(priors[row], float(observations[row]))
            learned[row] += weight[row] * (bayes - learned[row])
        return learned

@arrays_described
@validate_params(
    {
        "problem": [TwinProblem],
        "teacher": [AnalysisStep, None],
        **RUN_CONSTRAINTS,
        "target": [Choices(("member", "truth"))],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_analysis_training_data(
    problem,
    teacher=None,
    *,
    ensemble_size=40,
    spin_up=100,
    initial_spread=1.0,
    target="member",
    random_state=None,
):
    """Training pairs for a :class:`LearnedAnalysis`: scalar forecast ensembles from a cycled filter, and their targets.

    Runs a twin experiment on ``problem`` (see :func:`twin_experiment` for
    the parameters) with a serial filter, ``teacher``, and records, for every observation of
    every cycle after ``spin_up``, the ensemble of the observed variable just
    before it is updated: the priors a learned step sees in the same place,
    with the shapes (skewness, outliers) a cycled Lorenz-96 filter gives them.
    Each becomes the measure of :func:`analysis_features` and a one-point
    target, standardised alike. Trained with the energy loss (against one
    point, the energy score, a proper scoring rule) a model learns a
    posterior ensemble, not a point estimate.

    ``target`` chooses what the posterior is of:

    - ``"member"`` (default): the teacher runs ``ensemble_size + 1`` members;
      at each record one member, chosen at random, stands in for the truth,
      the other ``ensemble_size`` form the prior, and the observation is
      simulated from the stand-in with the problem's noise law and scale.
      The stand-in is exchangeable with the members, so the prior is
      calibrated by construction and the model learns Bayes' rule for the
      scalar update: it trusts the prior's spread, as a Kalman update does,
      and leaves the calibration of the spread across cycles to inflation.
    - ``"truth"``: the problem's truth and observations. The model then also
      learns how the *teacher's* spread is miscalibrated, which stops holding
      once the learned step runs the cycle itself (its spread drifts and the
      filter can collapse); use it with a learned teacher (data aggregation).

    Concatenate pairs from several noise laws and scales to train one model
    for all of them.

    Parameters
    ----------
    problem : TwinProblem
        Truth and observations (:func:`make_twin_problem`). A missing (NaN)
        observation is skipped by the teacher and gives no pair.
    teacher : SerialEnKF or LearnedAnalysis, default=None
        The serial filter that runs the cycles; None means
        ``SerialEnKF(inflation=1.05, clip=2.0)``, a robust filter that holds
        the truth under heavy-tailed noise.
    ensemble_size, spin_up, initial_spread
        As in :func:`twin_experiment`.
    target : {"member", "truth"}, default="member"
        What the one-point targets are (above).
    random_state : int, RandomState instance or None, default=None
        Seeds the ensemble, the teacher and the stand-ins.

    Returns
    -------
    X : ndarray of shape (n_pairs, ensemble_size, 4)
        The measures of :func:`analysis_features`, ``n_pairs = (n_cycles -
        spin_up) * n_observed`` (fewer if the teacher diverged or
        observations are missing: one pair per present observation).
    y : ndarray of shape (n_pairs, 1, 1)
        The standardised targets.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import make_analysis_training_data, make_twin_problem
    >>> problem = make_twin_problem(n_variables=8, observed="every_other", n_cycles=30, random_state=0)
    >>> X, y = make_analysis_training_data(problem, spin_up=5, ensemble_size=10, random_state=0)
    >>> X.shape, y.shape
    ((100, 10, 4), (100, 1, 1))
    """
    if not isinstance(teacher, (SerialEnKF, type(None))):
        raise TypeError(
            f"teacher must be a SerialEnKF or a LearnedAnalysis (a serial filter, whose scalar priors are "
            f"recorded), got {type(teacher).__name__}."
        )
    check_problem_for_run(problem, spin_up=spin_up)
    rng = check_random_state(random_state)
    teacher = SerialEnKF(inflation=1.05, clip=2.0) if teacher is None else teacher
    step = resolve_analysis(teacher, problem.observation_model, random_state=rng)
    priors, observations, truths = [], [], []
    n_members = ensemble_size + (target == "member")
    with step.recording() as records:

        def record(cycle, forecast, analysis, truth):
            if cycle >= spin_up:
                for prior, observation, variable in records:
                    priors.append(prior)
                    observations.append(observation)
                    truths.append(truth[variable])
            records.clear()

        _run(step, problem, ensemble_size=n_members, spin_up=spin_up, initial_spread=initial_spread, rng=rng,
             callback=record, name="teacher")
    model = problem.observation_model
    priors = np.asarray(priors).reshape(-1, n_members)
    if target == "member":
        stand_in = rng.randint(n_members, size=len(priors))
        truths = priors[np.arange(len(priors)), stand_in]
        keep = np.ones(priors.shape, dtype=bool)
        keep[np.arange(len(priors)), stand_in] = False
        priors = priors[keep].reshape(-1, ensemble_size)
        observations = truths + model.noise_scale * model.standard_noise(truths.shape, rng)
    X, centre, scale = analysis_features(
        priors, np.asarray(observations), noise_scale=model.noise_scale, noise_tail=model.tail
    )
    y = ((np.asarray(truths) - centre) / scale)[:, None, None]
    return X, y
