"""A data-assimilation benchmark: forecast ensembles of the Lorenz-96 model and their analyses."""

from __future__ import annotations

import warnings
from numbers import Integral

import numpy as np
from scipy.special import log_softmax
from sklearn.utils import check_random_state

from .._lorenz96 import (
    FORCING,
    MIN_VARIABLES,
    NOISE,
    OBSERVATION_NOISES,
    OBSERVED,
    ObservationModel,
    attractor_states,
    integrate_lorenz96,
)
from .._param_validation import validate_params
from .._tails import SIZE_CONSTRAINTS
from .._validation import POSITIVE_INT, POSITIVE_REAL, NumberInterval

__all__ = ["make_lorenz96_analysis", "integrate_lorenz96", "OBSERVATION_NOISES"]

_CENTRE_PERTURBATION = 0.1  # the ensemble centres: forcing plus this much noise, spun up onto the attractor


@validate_params(
    {
        **SIZE_CONSTRAINTS,
        "n_features": [
            NumberInterval(Integral, MIN_VARIABLES, None, closed="left",
                           why="each tendency couples four neighbours; the classical choice is 40"),
        ],
        "forcing": [FORCING],
        "lead_time": [POSITIVE_REAL],
        "time_step": [POSITIVE_REAL],
        "initial_spread": [POSITIVE_REAL],
        "observation_noise": [NOISE],
        "noise_scale": [POSITIVE_REAL],
        "df": [POSITIVE_REAL],
        "observed": OBSERVED,
        "prior_size": [POSITIVE_INT],
        "append_innovation": ["boolean"],
        "return_params": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_lorenz96_analysis(
    n_samples=64,
    n_points=32,
    n_features=8,
    *,
    forcing=8.0,
    lead_time=0.2,
    time_step=0.01,
    initial_spread=1.0,
    observation_noise="student_t",
    noise_scale=1.0,
    df=1.5,
    observed="every_other",
    prior_size=2048,
    append_innovation=False,
    return_params=False,
    random_state=None,
):
    r"""Generate forecast ensembles of the Lorenz-96 model and their analysis ensembles.

    The benchmark of ensemble data assimilation: the input measure is a forecast
    (prior) ensemble, the target is the analysis (posterior) ensemble after one
    noisy observation of the true state, and the map between them (Bayes' rule)
    depends on the whole forecast ensemble, not on single members. An ensemble
    Kalman filter approximates it under a Gaussian assumption; here the noise
    may be heavy-tailed, where that assumption fails.

    The analysis also depends on the observation, which the forecast alone does
    not contain: to learn the map, pass ``append_innovation=True``, which
    appends to every member ``x`` its innovation ``o - H x`` (the observation
    minus the member's observed coordinates) as extra features. Heavy-tailed
    noise then makes the inputs heavy-tailed across samples: now and then a
    whole ensemble sits far out, where softmax attention saturates.

    **Model.** The Lorenz-96 system in ``d = n_features`` cyclic coordinates,

    .. math::

        \frac{dx_i}{dt} = (x_{i+1} - x_{i-2})\, x_{i-1} - x_i + F,
        \qquad x_{-1} = x_{d-1},\ x_{-2} = x_{d-2},\ x_d = x_0,

    integrated with the classical fourth-order Runge-Kutta scheme, vectorised
    over every member of every ensemble, with the largest step
    ``<= time_step`` that divides the duration.

    **Sample** ``i``. A centre ``c_i`` is spun up for 10 time units from
    ``F + N(0, 0.01 I)``, which puts it on the attractor. The truth and the
    ensemble members before the forecast are iid ``c_i + initial_spread N(0, I)``,
    so the truth is a draw from the prior; all are propagated for ``lead_time``.
    ``X[i]`` holds ``n_points`` forecast members (the prior) and ``prior_size``
    other members form the reference pool. The observation of the coordinates
    ``H = observed`` is

    .. math:: o_i = H x^{\mathrm{true}}_i + \sigma \varepsilon, \qquad
        \varepsilon_j \text{ iid Gaussian, Student-t(df) or Cauchy},

    with ``sigma = noise_scale``. The analysis ``y[i]`` is a sample of the
    posterior ``p(x | o_i) ∝ p(o_i | x) p(x)``.

    **Reference posterior: importance resampling.** Each pool member
    ``x^(k)`` gets the weight ``w_k ∝ p(o_i | x^(k)) = prod_j p_eps((o_ij -
    x^(k)_{H_j}) / sigma)``, normalised to sum to 1; ``y[i]`` is ``n_points``
    draws with replacement from the pool with these weights (multinomial
    resampling). The pool is an iid sample of the forecast distribution, so the
    weighted pool is a self-normalised importance sampler of the posterior with
    the prior as proposal: its expectations converge to the posterior's as
    ``prior_size -> infinity`` (the likelihood is bounded, so the weights have
    finite variance), and ``y[i]`` is then an iid posterior sample. At finite
    ``prior_size`` the accuracy is governed by the effective sample size
    ``ESS = 1 / sum_k w_k^2`` (returned with ``return_params=True``): when it
    is small (sharp likelihood: small ``noise_scale``, many observed
    coordinates, long ``lead_time``) few distinct members carry the weight and
    ``y[i]`` repeats them (a ``UserWarning`` says so when the median ``ESS``
    is below ``n_points``); raise ``prior_size`` until ``ESS`` well exceeds
    ``n_points``. Importance sampling degenerates as the number of observed
    coordinates grows: with ``n_features=40`` all observed, a pool of
    thousands is not enough; observe fewer coordinates or widen the noise.

    The forecast is light-tailed (a smooth map of Gaussian initial errors);
    heavy-tailed noise makes observations that are occasionally far off, which
    Bayes' rule largely ignores and a Kalman update follows in proportion.

    Parameters
    ----------
    n_samples : int, default=64
        Number of (forecast, analysis) pairs.
    n_points : int, default=32
        Number of members in each forecast and each analysis ensemble.
    n_features : int, default=8
        Dimension ``d >= 4`` of the Lorenz-96 state (40 is the classical choice).
    forcing : float, default=8.0
        Forcing ``F``; 8 gives chaotic dynamics.
    lead_time : float, default=0.2
        Forecast length in model time units (0.2 is about one day of weather
        in Lorenz's scaling); longer forecasts are more non-Gaussian.
    time_step : float, default=0.01
        Largest Runge-Kutta step.
    initial_spread : float, default=1.0
        Standard deviation of the Gaussian errors of the members before the
        forecast.
    observation_noise : {"gaussian", "student_t", "cauchy"}, default="student_t"
        Family of the observation errors ``epsilon``.
    noise_scale : float, default=1.0
        Scale ``sigma`` of the observation errors (the standard deviation for
        Gaussian noise).
    df : float, default=1.5
        Degrees of freedom of the Student-t noise (validated, unused otherwise);
        moments of order ``>= df`` are infinite.
    observed : {"all", "every_other"} or list of int, default="every_other"
        The observed coordinates: all, those with even index, or these indices.
    prior_size : int, default=2048
        Size of the forecast pool the posterior is resampled from.
    append_innovation : bool, default=False
        If True, ``X`` gets ``n_observed`` more features: ``X[i, k, d + j] =
        o_ij - X[i, k, observed[j]]``.
    return_params : bool, default=False
        If True, also return a dict describing each sample.
    random_state : int, RandomState instance or None, default=None
        Seed or generator for reproducible output (see
        :func:`sklearn.utils.check_random_state`).

    Returns
    -------
    X : ndarray of shape (n_samples, n_points, n_features [+ n_observed])
        Forecast (prior) ensembles, float64, followed by the innovations of
        the members when ``append_innovation=True``.
    y : ndarray of shape (n_samples, n_points, n_features)
        Analysis (posterior) ensembles, float64.
    params : dict
        Only when ``return_params=True``: ``"truth"`` ``(n_samples,
        n_features)``, ``"observation"`` ``(n_samples, n_observed)``,
        ``"observed"`` (the observed indices), ``"ess"`` ``(n_samples,)`` (the
        effective sample size of the pool's weights) and ``"noise_scale"``.

    Raises
    ------
    TypeError
        If a size is not an integer, a real parameter is not a real number,
        ``observed`` is not a pattern or a list of integers, or
        ``append_innovation`` or ``return_params`` is not a bool.
    ValueError
        If a size or scale is ``<= 0``, ``n_features < 4``,
        ``observation_noise`` is unknown, ``observed`` holds an index out of
        range or twice, or the integration overflowed (use a smaller
        ``time_step``).

    See Also
    --------
    load_measures : Load forecast and analysis ensembles of your own.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.datasets import make_lorenz96_analysis
    >>> X, y, params = make_lorenz96_analysis(
    ...     n_samples=8, n_points=16, n_features=8, observation_noise="gaussian",
    ...     observed="all", return_params=True, random_state=0)
    >>> X.shape, y.shape, params["observation"].shape
    ((8, 16, 8), (8, 16, 8), (8, 8))
    >>> prior_error = np.abs(X.mean(axis=1) - params["observation"]).mean()
    >>> posterior_error = np.abs(y.mean(axis=1) - params["observation"]).mean()
    >>> bool(posterior_error < prior_error)  # the analysis moves toward the data
    True
    """
    model = ObservationModel(n_variables=n_features, observed=observed, noise=observation_noise, df=df,
                             noise_scale=noise_scale)
    observed = model.observed
    forcing, lead_time, time_step, initial_spread = (float(value) for value in (forcing, lead_time, time_step, initial_spread))
    rng = check_random_state(random_state)

    centres = attractor_states((n_samples, n_features), forcing=forcing, time_step=time_step,
                               perturbation=_CENTRE_PERTURBATION, random_state=rng)
    n_members = 1 + n_points + prior_size  # the truth, the forecast ensemble, the pool
    members = centres[:, np.newaxis, :] + initial_spread * rng.standard_normal((n_samples, n_members, n_features))
    members = integrate_lorenz96(members, lead_time, forcing=forcing, time_step=time_step)
    if not np.all(np.isfinite(members)):
        raise ValueError(
            f"The Lorenz-96 integration overflowed (forcing={forcing}, time_step={time_step}); "
            "use a smaller time_step."
        )
    truth, X, pool = members[:, 0], members[:, 1 : 1 + n_points], members[:, 1 + n_points :]

    observation = model.sample(truth, rng)
    log_weights = log_softmax(model.log_likelihood(observation[:, np.newaxis, :], pool), axis=1)
    weights = np.exp(log_weights)
    ess = 1.0 / np.sum(weights**2, axis=1)
    if np.median(ess) < n_points:
        warnings.warn(
            f"The reference posterior rests on few pool members: the median effective sample size is "
            f"{np.median(ess):.3g} < n_points={n_points}, so the analysis ensembles repeat members. Raise "
            "prior_size or noise_scale, observe fewer coordinates, or shorten lead_time.",
            UserWarning,
            stacklevel=2,
        )
    y = np.empty_like(X)
    for i in range(n_samples):
        chosen = rng.choice(prior_size, size=n_points, replace=True, p=weights[i])
        y[i] = pool[i, chosen]
    X = X.copy()
    if append_innovation:
        X = np.concatenate([X, observation[:, np.newaxis, :] - X[:, :, observed]], axis=-1)
    if return_params:
        params = {
            "truth": truth.copy(),
            "observation": observation,
            "observed": observed,
            "ess": ess,
            "noise_scale": model.noise_scale,
        }
        return X, y, params
    return X, y
