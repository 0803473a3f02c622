"""Train a learned scalar analysis for a noise law you can draw from: the shipped recipe as one public function."""

from __future__ import annotations

import sys
import time
from numbers import Integral, Real

from .._lorenz96 import CauchyNoise, GaussianNoise, NoiseLaw, ObservationModel, StudentTNoise, as_noise_laws
from .._param_validation import Interval, validate_params
from ..estimator import MeasureTransformerRegressor
from ._learned import LearnedAnalysis, _checked_noise_ratio_range
from ._synthetic import make_synthetic_analysis_data

__all__ = ["fit_learned_analysis"]

#: The tails ``1 / df`` of the default noise laws: Gaussian and Cauchy twice as often as the Student-t's between.
_DEFAULT_TAILS = (0.0, 0.0, 0.2, 1 / 3, 0.5, 1 / 1.5, 1.0, 1.0)

#: The synthetic priors of the recipe: Student-t ones among them give far observations under light-tailed noise.
_DEFAULT_PRIOR_WEIGHTS = {"gaussian": 0.5, "skewed": 0.3, "bimodal": 0.2, "student_t": 0.25}


def default_noise_laws():
    """The noise laws of the shipped scalar models, from Gaussian to Cauchy (:data:`_DEFAULT_TAILS`)."""
    return [GaussianNoise() if tail == 0 else CauchyNoise() if tail == 1 else StudentTNoise(df=1.0 / tail)
            for tail in _DEFAULT_TAILS]


def _law_description(law):
    errors = getattr(law, "errors", None)
    if errors is not None:
        return f"{type(law).__name__} of {len(errors)} recorded errors (tail {law.tail:.3f})"
    return repr(law)


@validate_params(
    {
        "noise": [NoiseLaw, ObservationModel, list, tuple, None],
        "n_priors": [Interval(Integral, 1, None, closed="left")],
        "draws": [Interval(Integral, 1, None, closed="left")],
        "candidates": [Interval(Integral, 1, None, closed="left"), None],
        "innovation_power": [Interval(Real, 0, None, closed="left")],
        "prior_weights": [dict, None],
        "noise_ratio_range": [tuple, list],
        "ensemble_size": [Interval(Integral, 3, None, closed="left")],
        "training_level_offset": [Interval(Real, 0, 1, closed="left")],
        "level_offset": [Interval(Real, 0, 1, closed="left"), None],
        "max_epochs": [Interval(Integral, 1, None, closed="left")],
        "random_state": [Interval(Integral, 0, None, closed="left")],
        "verbose": [Interval(Integral, 0, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
def fit_learned_analysis(noise=None, *, n_priors=30000, draws=4, candidates=None, innovation_power=1.0,
                         prior_weights=None, noise_ratio_range=(0.1, 100.0), ensemble_size=40,
                         training_level_offset=0.3, level_offset=0.45, d_model=32, n_heads=4, n_layers=2,
                         max_epochs=5, lr=2e-3, batch_size=256, random_state=0, verbose=0, **estimator_params):
    """Train a learned scalar analysis for the noise laws you can draw from; returns a ready :class:`LearnedAnalysis`.

    The recipe of the shipped scalar models, likelihood-free: synthetic
    priors of ``ensemble_size + 1`` members, one of them the stand-in truth,
    observed with noise drawn from the laws of ``noise`` at noise-to-prior
    scale ratios across ``noise_ratio_range``, far observations selected
    more often (:func:`make_synthetic_analysis_data`, the 7 Kalman
    features); a residual :class:`~sklearn_measattn.MeasureTransformerRegressor`
    fitted with the quantile loss at the levels ``(k - a) / (N + 1 - 2a)``,
    ``a = training_level_offset``, so that its sorted outputs are the
    posterior's quantiles; read in the filter at ``level_offset`` (a slightly
    wider placement that a serial filter, which compounds a small loss of
    spread over dozens of updates per cycle, needs). No density is evaluated
    and no truth trajectory is used: a record of errors
    (:class:`SampledNoise`) is all it needs.

    The recipe is stored in the estimator's ``analysis_recipe_``, which
    :func:`~sklearn_measattn.save_model` writes into the model file, so
    ``LearnedAnalysis(load_model(path))`` reads the model as trained, with
    nothing passed beside it.

    The shipped scalar models are this function's output:
    ``fit_learned_analysis(random_state=0)`` is
    ``pretrained_analysis("quantile_residual_fit")``, ``n_layers=1`` its
    one-block variant, and a :class:`SampledNoise` of a record the
    record-trained ones (:data:`ANALYSIS_MODELS` gives each call).

    Time: about 4 minutes on 2 CPU cores with the defaults (the network's
    training nearly all of it).

    Parameters
    ----------
    noise : NoiseLaw, ObservationModel, list of them or None, default=None
        The noise laws to train for (an observation model stands for its
        law): their draws (``standard_noise``) and tail feature; the scale
        is set by the ratio. A :class:`SampledNoise` trains on a record of
        errors. None:
        the shipped models' laws, Gaussian, Student-t of 5, 3, 2 and 1.5
        degrees of freedom and Cauchy (Gaussian and Cauchy twice as often).
    n_priors, draws, candidates, innovation_power :
        Synthetic priors, stand-ins kept per prior, candidates they are
        selected from with weights ``(1 + |innovation|) ** innovation_power``
        (see :func:`make_synthetic_analysis_data`); ``candidates`` None: 16,
        or ``ensemble_size + 1`` if fewer.
    prior_weights : dict or None, default=None
        Weights of the kinds of synthetic prior (:data:`PRIOR_KINDS`); None:
        Gaussian 0.5, skewed 0.3, bimodal 0.2 and Student-t 0.25.
    noise_ratio_range : (float, float), default=(0.1, 100.0)
        Noise-to-prior scale ratios of the training pairs; the filter clips
        the ratios it meets to this range.
    ensemble_size : int, default=40
        Members of the synthetic priors (the model serves other sizes too).
    training_level_offset : float, default=0.3
        Offset ``a`` of the quantile levels of the loss.
    level_offset : float or None, default=0.45
        Offset of the levels at which the filter places the members (see
        ``LearnedAnalysis(level_offset=...)``); None: as trained.
    d_model, n_heads, n_layers, max_epochs, lr, batch_size :
        The network and its training (see
        :class:`~sklearn_measattn.MeasureTransformerRegressor`; AdamW with the
        one-cycle schedule).
    random_state : int, default=0
        Seeds the pairs and the network.
    verbose : int, default=0
        With 1, the estimator's progress line per epoch, and the time of the
        pairs and of the training, on stderr.
    **estimator_params
        Other parameters of the regressor (``kernel``, ``dim_feedforward``,
        ``device``, ...).

    Returns
    -------
    LearnedAnalysis
        Around the fitted estimator, reading it by its recipe; set the
        filter's ``inflation``, ``localization_radius`` and ``relaxation``
        on it (``set_params``) or tune them with :func:`tune_analysis`.

    Examples
    --------
    >>> from sklearn_measattn.assimilation import SampledNoise, contaminated_errors, fit_learned_analysis
    >>> law = SampledNoise(contaminated_errors(2000, random_state=0))
    >>> step = fit_learned_analysis(law, n_priors=300, ensemble_size=10, d_model=8, n_heads=2, n_layers=1,
    ...                             max_epochs=1)
    >>> step.estimator.analysis_recipe_["features"], step.estimator.analysis_recipe_["noise_ratio_range"]
    ('kalman', [0.1, 100.0])
    """
    laws = default_noise_laws() if noise is None else as_noise_laws(noise, caller="fit_learned_analysis")
    low_high = _checked_noise_ratio_range(noise_ratio_range)
    weights = dict(_DEFAULT_PRIOR_WEIGHTS if prior_weights is None else prior_weights)
    params = dict(kernel="softmax", transform=None, residual=True, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                  dim_feedforward=2 * d_model, loss="quantile", loss_params={"level_offset": float(training_level_offset)},
                  lr=lr, lr_schedule="onecycle", batch_size=batch_size, max_epochs=max_epochs,
                  random_state=random_state, verbose=verbose)
    params.update(estimator_params)
    estimator = MeasureTransformerRegressor(**params)
    start = time.perf_counter()
    if candidates is None:
        candidates = min(16, ensemble_size + 1)
    X, y = make_synthetic_analysis_data(laws, n_priors=n_priors, draws=draws, ensemble_size=ensemble_size,
                                        prior_weights=weights, noise_ratio_range=low_high,
                                        innovation_power=innovation_power, candidates=candidates,
                                        features="kalman", random_state=random_state)
    pairs_seconds = time.perf_counter() - start
    if verbose:
        print(f"fit_learned_analysis: {len(X)} training pairs in {pairs_seconds:.0f} s", file=sys.stderr, flush=True)
    estimator.fit(X, y)
    seconds = time.perf_counter() - start
    if verbose:
        print(f"fit_learned_analysis: trained in {seconds:.0f} s", file=sys.stderr, flush=True)
    estimator.analysis_recipe_ = {
        "kind": "scalar",
        "features": "kalman",
        "noise_ratio_range": list(low_high),
        "level_offset": None if level_offset is None else float(level_offset),
        "trained_by": {
            "function": "fit_learned_analysis",
            "noise": [_law_description(law) for law in laws],
            "n_priors": int(n_priors), "draws": int(draws), "candidates": int(candidates),
            "innovation_power": float(innovation_power),
            "prior_weights": {kind: float(weight) for kind, weight in weights.items()},
            "ensemble_size": int(ensemble_size),
            "training_level_offset": float(training_level_offset),
            "n_pairs": int(len(X)),
            "estimator": {key: value for key, value in params.items()
                          if key != "verbose" and isinstance(value, (int, float, str, bool))},
            "seconds": round(seconds, 1),
        },
    }
    return LearnedAnalysis(estimator)
