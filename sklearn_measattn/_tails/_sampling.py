"""Base families of the benchmarks' random points: Gaussian, Student-t, Pareto.

The randomness of every point comes from a *base family* ``tail``:

- ``"gaussian"``: ``Z ~ N(0, I_d)`` (the light-tailed control);
- ``"student_t"``: the elliptical multivariate Student-t with ``df = tail_index``,
  ``Z = G / sqrt(W / df)`` with ``G ~ N(0, I_d)`` and one ``W ~ chi2(df)`` shared
  by all coordinates of a point, so ``P(|Z| > t) ~ C t^-df``;
- ``"pareto"``: independent, symmetric (mirrored) Pareto-II (Lomax) coordinates,
  ``Z_j = S_j (U_j^(-1/alpha) - 1)`` with ``S_j`` a uniform random sign,
  ``U_j ~ U(0, 1]`` and ``alpha = tail_index``, so that
  ``P(|Z_j| > t) = (1 + t)^-alpha`` exactly.

With ``tail_index = alpha``, moments of order ``>= alpha`` are infinite; in
particular for ``alpha <= 2`` (the default is 1.5) the variance is infinite and
softmax attention integrals diverge.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from .._validation import POSITIVE_INT, Choices, NumberInterval

#: Names of the base families accepted by ``tail=``.
TAILS = ("gaussian", "student_t", "pareto")

# The domains of the arguments every generator shares, for scikit-learn's ``validate_params``.
#: The base family of the points.
TAIL = Choices(TAILS, why="'gaussian' for the light-tailed control, 'student_t' or 'pareto' for polynomial tails")
#: The tail exponent of the heavy-tailed families.
TAIL_INDEX = NumberInterval(
    Real, 0, math.inf, closed="neither",
    why="the tail exponent alpha in P(|Z| > t) ~ t^-alpha; for light tails use tail='gaussian' instead of a huge "
    "tail_index",
)
#: The sizes of a batch of measures.
SIZE_CONSTRAINTS = {"n_samples": [POSITIVE_INT], "n_points": [POSITIVE_INT], "n_features": [POSITIVE_INT]}


def check_finite_samples(X, y, tail, tail_index):
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError(
            f"tail={tail!r} with tail_index={tail_index!r} produced values that overflow "
            "float64 (the tails are too heavy to represent); use a larger tail_index "
            "(e.g. >= 0.2)."
        )


# --------------------------------------------------------------------------- #
# Base families
# --------------------------------------------------------------------------- #


def sample_base(shape, tail, tail_index, rng):
    """Draw iid points of the base family; ``shape = (..., n_features)``.

    The caller validates ``tail`` and ``tail_index`` and owns ``rng`` (a
    ``numpy.random.RandomState``). Overflow for absurdly small ``tail_index``
    yields ``inf``; callers check finiteness of what they return.
    """
    shape = tuple(shape)
    if tail == "gaussian":
        return rng.standard_normal(shape)
    if tail == "student_t":
        df = tail_index
        gauss = rng.standard_normal(shape)
        chi2 = rng.chisquare(df, size=shape[:-1] + (1,))  # one W per point
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return gauss / np.sqrt(chi2 / df)
    if tail == "pareto":
        # 1 - U with U ~ U[0, 1) lies in (0, 1]: never 0, so the power is finite.
        uniform = 1.0 - rng.random_sample(shape)
        sign = np.where(rng.random_sample(shape) < 0.5, -1.0, 1.0)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            return sign * np.expm1(-np.log(uniform) / tail_index)
    raise ValueError(f"tail must be one of {list(TAILS)}, got {tail!r}.")  # pragma: no cover
