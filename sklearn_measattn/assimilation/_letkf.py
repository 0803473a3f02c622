"""The local ensemble transform Kalman filter (Hunt, Kostelich and Szunyogh 2007), batched over the grid points."""

from __future__ import annotations

import numpy as np

from .._validation import POSITIVE_REAL
from ._baselines import CLIP, INFLATION, LOCALIZATION, AnalysisStep, _inflated, _kalman_variance, gaspari_cohn

__all__ = ["LETKF"]


def ring_distances(n_variables, observed):
    """Cyclic index distances ``(n_variables, n_observed)`` from every variable to every observed one."""
    gap = np.abs(np.arange(n_variables)[:, None] - np.asarray(observed)[None, :])
    return np.minimum(gap, n_variables - gap)


def observation_weights(n_variables, observed, radius):
    """The R-localisation weights ``(n_variables, n_observed)``: the Gaspari-Cohn taper of each observation's distance.

    ``radius=None`` gives all ones (every observation counts fully at every point).
    """
    if radius is None:
        return np.ones((n_variables, len(observed)))
    return gaspari_cohn(ring_distances(n_variables, observed), radius)


def clipped_innovation(observed_anomalies, innovation, noise_variance, clip):
    """The innovation clipped at ``clip`` innovation standard deviations ``sqrt(var(Y_j) + r)`` (None: as it is)."""
    if clip is None:
        return innovation
    bound = clip * np.sqrt(observed_anomalies.var(axis=0, ddof=1) + noise_variance)
    return np.clip(innovation, -bound, bound)


def student_t_weights(observed_anomalies, innovation, noise_variance, tail):
    """Each observation's precision factor under Student-t errors with ``df = 1 / tail`` degrees of freedom.

    A Student-t error is a Gaussian one whose precision ``lambda / r`` has a
    random factor ``lambda ~ Gamma(df / 2, rate df / 2)``. Given the
    innovation ``d_j`` and its variance under the forecast, ``v_j = var(Y_j)
    + r``, the factor's expectation ``(df + 1) / (df + d_j^2 / v_j)`` weights
    that observation's precision: up to ``(df + 1) / df`` for an innovation
    near 0, and falling as ``1 / d_j^2`` for a gross one, whose pull on the
    analysis then fades (a redescending update, where clipping keeps pulling
    at its bound). ``tail=0`` (Gaussian errors) gives weight 1.
    """
    if tail <= 0:
        return np.ones_like(innovation)
    df = 1.0 / tail
    total = observed_anomalies.var(axis=0, ddof=1) + noise_variance
    return (df + 1.0) / (df + innovation**2 / total)


def student_t_variance(law, scale):
    """The square of the scale of the Student-t errors that the weights assume, for ``law`` at ``scale``.

    The weights take ``df = 1 / law.tail`` and need the scale of the same
    Student-t: for a Student-t or Cauchy law its own scale; for a record of
    errors (which has ``fit_student_t``), whose ``tail`` is that of the
    Student-t fitted to it, the fitted law's scale, not the record's robust
    scale (for a record with 5% gross errors the two differ by a third),
    rescaled as the record is.
    """
    fit = getattr(law, "fit_student_t", None)
    ratio = 1.0 if fit is None else fit().scale / law.scale
    return (ratio * scale) ** 2


def local_transform(anomalies, observed_anomalies, innovation, precision):
    """The ensemble transform of every local analysis, in one batch.

    For grid point ``i`` with local observation precisions ``precision[i]``
    (the inverse noise variance tapered by distance), the LETKF's analysis in
    ensemble space is ``P = [(N - 1) I + Y^T diag(precision[i]) Y]^{-1}``,
    mean weights ``w = P Y^T diag(precision[i]) d`` and perturbation weights
    ``W = sqrt((N - 1) P)`` (the symmetric square root, which keeps the
    analysis anomalies centred and closest to the forecast's). Both come from
    the thin SVD of ``diag(precision[i])^(1/2) Y`` restricted to the
    observations the taper reaches, so the cost grows with their number
    rather than with ``N^3``.

    Parameters
    ----------
    anomalies : ndarray of shape (n_members, n_variables)
        Forecast anomalies (members minus their mean).
    observed_anomalies : ndarray of shape (n_members, n_observed)
        Their values at the observed variables (``Y^T``, with ``Y`` of shape
        ``(n_observed, N)`` as in the formulas).
    innovation : ndarray of shape (n_observed,)
        Observation minus the forecast mean at the observed variables (``d``).
    precision : ndarray of shape (n_variables, n_observed)
        Local observation precision at every grid point.

    Returns
    -------
    ndarray of shape (n_members, n_variables)
        The analysis anomalies plus the mean increment: the analysis is the
        forecast mean plus this.
    """
    n_members = anomalies.shape[0]
    # Only the observations a grid point's taper reaches enter its analysis: gather them (padded with zero precision)
    local = precision > 0
    width = max(int(local.sum(axis=1).max()), 1)
    order = np.argsort(~local, axis=1, kind="stable")[:, :width]  # each row's reached observations first
    root_precision = np.sqrt(np.take_along_axis(precision, order, axis=1))  # (n_variables, m), 0 on the padding
    scaled = observed_anomalies.T[order] * root_precision[:, :, None]  # (n_variables, m, N): diag(precision_i)^1/2 Y
    # With the thin SVD diag(precision_i)^1/2 Y = V s U^T, (N - 1) I + Y^T diag(precision_i) Y has the eigenvalues
    # g = N - 1 + s^2 on U and N - 1 elsewhere: P's mean weights are U s / g V^T diag(precision_i)^1/2 d, and
    # sqrt((N - 1) P) = I + U (sqrt((N - 1) / g) - 1) U^T. The cost grows with the reached observations, not N^3.
    left, values, right = np.linalg.svd(scaled, full_matrices=False)  # (n, m, r), (n, r), (n, r, N)
    gain = n_members - 1 + values**2
    data = (left.transpose(0, 2, 1) @ (root_precision * innovation[order])[:, :, None])[:, :, 0]  # (n, r)
    mean_weights = (data * values / gain)[:, None, :] @ right  # (n, 1, N)
    shrink = np.sqrt((n_members - 1) / gain) - 1.0
    weights = (right.transpose(0, 2, 1) * shrink[:, None, :]) @ right  # (n, N, N) = U diag(shrink) U^T
    weights[:, np.arange(n_members), np.arange(n_members)] += 1.0
    weights += mean_weights.transpose(0, 2, 1)  # (n_variables, N members of the forecast, N of the analysis)
    return (anomalies.T[:, None, :] @ weights)[:, 0, :].T


class LETKF(AnalysisStep):
    """The local ensemble transform Kalman filter (Hunt, Kostelich and Szunyogh 2007).

    Every grid point has its own analysis: a deterministic (square-root)
    ensemble transform Kalman update with the observations near it, each
    observation's precision tapered by the Gaspari-Cohn function of its
    distance (R-localisation), so that far observations fade out smoothly.
    The local analyses are independent given the forecast and are computed
    together, in one batch of small SVDs (each grid point's ensemble at the
    observations its taper reaches).
    The observation-error variance is that of :class:`EnKF` (the noise law's
    variance, or ``noise_scale ** 2`` for laws without one, times
    ``variance_factor``). With ``clip``, each innovation is first clipped at
    ``clip`` innovation standard deviations (``sqrt(var(Hx) + R)``), the
    Huber-type safeguard of :class:`RobustEnKF` against heavy-tailed errors
    (a robust LETKF); the ensemble transform itself is unchanged. With
    ``student_t=True``, each observation's precision is instead weighted by
    the Student-t expectation of its error's precision given its innovation
    (``df = 1 / tail`` of the noise law, the variance the square of that
    Student-t's scale times ``variance_factor``: a Student-t or Cauchy law's
    own scale, for a record of errors the scale of the Student-t fitted to
    it, whose ``df`` its ``tail`` is): a gross error's
    weight falls as the inverse square of its innovation, so its pull fades
    where clipping keeps pulling at the bound; under Gaussian noise (tail 0)
    nothing changes. Missing (NaN) observations are left out; a cycle with
    none returns the forecast unchanged.

    Parameters
    ----------
    inflation : float, default=1.05
        Multiplicative inflation of the forecast anomalies, in [1, 10],
        applied before the update (DAPPER's ``infl`` multiplies the analysis
        anomalies after it: over a cycle the two are nearly the same).
    localization_radius : float or None, default=4.0
        Gaspari-Cohn half-width in variables: an observation's precision is
        tapered to 0 at twice this distance from the grid point. None: every
        observation counts fully everywhere (the global ETKF).
    variance_factor : float, default=1.0
        Multiplies the observation-error variance.
    clip : float or None, default=None
        Clipping threshold of the innovations, in innovation standard
        deviations; None: no clipping (the LETKF of Hunt et al.).
    student_t : bool, default=False
        Weight each observation's precision by the Student-t expectation of
        its precision factor, ``(df + 1) / (df + d^2 / (var(Hx) + r))`` for
        innovation ``d``, with ``df = 1 / tail`` of the noise law (the
        one-step expectation of a variational Student-t update). False: every
        observation has the noise law's precision.

    Attributes
    ----------
    observation_variance_ : float
        The observation-error variance of the update (with ``student_t`` and
        a heavy-tailed law, the square of the Student-t's scale times
        ``variance_factor``, which the weights multiply).

    Examples
    --------
    >>> from sklearn_measattn.assimilation import LETKF, make_twin_problem, twin_experiment
    >>> problem = make_twin_problem(n_variables=40, observed="every_other", n_cycles=200, random_state=0)
    >>> result = twin_experiment(LETKF(inflation=1.05, localization_radius=4.0), problem, spin_up=50,
    ...                          ensemble_size=10, random_state=0)
    >>> bool(result.rmse < 0.5), result.diverged
    (True, False)
    """

    _parameter_constraints: dict = {
        "inflation": [INFLATION],
        "localization_radius": LOCALIZATION,
        "variance_factor": [POSITIVE_REAL],
        "clip": [CLIP, None],
        "student_t": ["boolean"],
    }

    def __init__(self, *, inflation=1.05, localization_radius=4.0, variance_factor=1.0, clip=None, student_t=False):
        self.inflation = inflation
        self.localization_radius = localization_radius
        self.variance_factor = variance_factor
        self.clip = clip
        self.student_t = student_t

    def _prepare(self):
        model = self.observation_model_
        self._weights_tail = model.tail if self.student_t else 0.0  # 0: no Student-t weights
        self.observation_variance_ = (student_t_variance(model.law, model.noise_scale) * self.variance_factor
                                      if self._weights_tail > 0 else _kalman_variance(model, self.variance_factor))

    def analyse(self, forecast, observation):
        forecast = _inflated(forecast, self.inflation)
        observed = self.observation_model_.observed
        mean = forecast.mean(axis=0)
        anomalies = forecast - mean
        innovation = observation - mean[observed]
        precision = observation_weights(forecast.shape[1], observed, self.localization_radius)
        if self._weights_tail > 0:
            weights = student_t_weights(anomalies[:, observed], innovation, self.observation_variance_,
                                        self._weights_tail)
            precision = precision * weights
        precision = precision / self.observation_variance_
        innovation = clipped_innovation(anomalies[:, observed], innovation, self.observation_variance_, self.clip)
        return mean + local_transform(anomalies, anomalies[:, observed], innovation, precision)

