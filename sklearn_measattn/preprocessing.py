"""Pointwise preprocessing of measures: the symmetric-log transform, and transforms applied point by point.

Heavy-tailed measures (Student-t, Pareto) have a few points far out in the
tails; ``symlog(x) = sign(x) * log1p(|x| / scale)`` compresses those tails to
logarithmic growth while leaving the bulk ``|x| << scale`` almost unchanged
(``symlog(x) ~ x / scale`` near zero). It is applied feature by feature and
point by point, so it maps a batch of measures ``(n_samples, n_points,
n_features)`` to a batch of the same shape, and it is exactly invertible.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from ._validation import NumberInterval, check_measures, is_ragged

__all__ = ["SymlogTransformer", "symlog", "inverse_symlog"]

# float32 stays float32; everything else (ints, float16, ...) becomes float64
FLOAT_DTYPES = (np.float64, np.float32)


def symlog(X, scale=1.0):
    """Symmetric logarithm ``sign(X) * log1p(|X| / scale)``, elementwise.

    Stateless helper behind :class:`SymlogTransformer`; no validation beyond
    converting ``X`` to a float array.

    Parameters
    ----------
    X : array-like
        Values of any shape. Integer input is converted to float64; float32
        stays float32.
    scale : float, default=1.0
        Width of the linear region around zero; must be > 0.

    Returns
    -------
    Y : ndarray of the same shape as ``X``
        The transformed values; finite wherever ``X`` is.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.preprocessing import symlog
    >>> symlog(np.array([-(np.e - 1.0), 0.0, np.e - 1.0]))
    array([-1.,  0.,  1.])
    """
    X = np.asarray(X)
    dtype = X.dtype if X.dtype in FLOAT_DTYPES else np.dtype(np.float64)
    # In float64 whatever the dtype: a scale outside float32's range (1e-50, 1e50)
    # would become 0 or inf there.
    absX = np.abs(X.astype(np.float64, copy=False))
    with np.errstate(over="ignore"):
        ratio = absX / float(scale)
    out = np.log1p(ratio)
    overflow = np.isinf(ratio) & np.isfinite(absX)
    if np.any(overflow):  # |X| / scale overflowed: log1p(r) = log(|X|) - log(scale)
        out[overflow] = np.log(absX[overflow]) - math.log(scale)
    return np.copysign(out, X).astype(dtype, copy=False)


def inverse_symlog(Y, scale=1.0):
    """Inverse of :func:`symlog`: ``sign(Y) * scale * expm1(|Y|)``, elementwise.

    Values whose inverse exceeds the largest finite float of ``Y``'s dtype
    saturate at that value (with its sign) instead of overflowing to ``inf``.

    Parameters
    ----------
    Y : array-like
        Values of any shape. Integer input is converted to float64; float32
        stays float32.
    scale : float, default=1.0
        The ``scale`` used by :func:`symlog`; must be > 0.

    Returns
    -------
    X : ndarray of the same shape as ``Y``
        The values ``X`` with ``symlog(X, scale) == Y``; always finite for
        finite ``Y``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.preprocessing import inverse_symlog, symlog
    >>> x = np.array([-1e30, -2.5, 0.0, 1e-300, 7.0])
    >>> bool(np.allclose(inverse_symlog(symlog(x, 3.0), 3.0), x, rtol=1e-12))
    True
    """
    Y = np.asarray(Y)
    dtype = Y.dtype if Y.dtype in FLOAT_DTYPES else np.dtype(np.float64)
    scale = float(scale)
    absY = np.abs(Y.astype(np.float64, copy=False))
    with np.errstate(over="ignore"):
        out = scale * np.expm1(absY)
        overflow = np.isinf(out) & np.isfinite(absY)
        if np.any(overflow):  # expm1 overflowed before the multiplication by scale
            out[overflow] = np.exp(absY[overflow] + math.log(scale))
    # saturate at the largest finite value of the output dtype, then cast
    np.minimum(out, float(np.finfo(dtype).max), out=out, where=np.isfinite(absY))
    return np.copysign(out, Y).astype(dtype, copy=False)


class SymlogTransformer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Symmetric-log transform of each feature, for tables and batches of measures.

    ``symlog(x) = sign(x) * log1p(|x| / scale)`` grows logarithmically in the
    tails and linearly (slope ``1 / scale``) near zero. Applied before a
    transformer, it turns polynomial tails into exponential ones, which keeps
    softmax attention from giving all its weight to the most extreme point.
    :meth:`inverse_transform` is the exact inverse
    ``sign(y) * scale * expm1(|y|)``.

    The transform is elementwise and does not learn anything from the data:
    :meth:`fit` only validates the input and records its number of features.
    It accepts 2-D tables ``(n_samples, n_features)`` (and so works in a
    :class:`~sklearn.pipeline.Pipeline`) and 3-D batches of measures
    ``(n_samples, n_points, n_features)``; features are always the last axis.

    Parameters
    ----------
    scale : float, default=1.0
        Width of the linear region around zero, in the units of the data;
        must be > 0. Values with ``|x| << scale`` are nearly unchanged (up to
        the factor ``1 / scale``); values with ``|x| >> scale`` are compressed
        to ``log(|x| / scale)``.

    Attributes
    ----------
    n_features_in_ : int
        Number of features seen during :term:`fit` (the size of the last axis).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during :term:`fit`. Defined only when `X` is a
        2-D table with string column names (e.g. a pandas DataFrame).

    See Also
    --------
    symlog : The stateless function.
    sklearn.preprocessing.FunctionTransformer : Generic elementwise transforms.

    Notes
    -----
    NaN and infinite values are rejected. Inverse values beyond the largest
    finite float saturate at that float rather than overflowing to ``inf``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_measattn.preprocessing import SymlogTransformer
    >>> X = np.array([[[-100.0, 0.5], [0.0, 1e6]]])  # 1 measure, 2 points, 2 features
    >>> st = SymlogTransformer(scale=1.0).fit(X)
    >>> st.n_features_in_
    2
    >>> np.round(st.transform(X), 3)
    array([[[-4.615,  0.405],
            [ 0.   , 13.816]]])
    >>> bool(np.allclose(st.inverse_transform(st.transform(X)), X, rtol=1e-12))
    True
    """

    _parameter_constraints: dict = {"scale": [NumberInterval(Real, 0, None, closed="neither")]}

    def __init__(self, *, scale=1.0):
        self.scale = scale

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.three_d_array = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def _validate_input(self, X, *, reset):
        """Validate ``X`` as a 2-D table or a 3-D batch of measures."""
        if is_ragged(X) and len({np.shape(x)[0] for x in X}) > 1:
            raise ValueError(
                "X is a ragged list of measures with different numbers of points; "
                "SymlogTransformer works on arrays. Transform each measure on its own "
                "(it is 2-D with features last): [st.transform(m) for m in X]."
            )
        try:
            ndim = X.ndim if hasattr(X, "ndim") else np.asarray(X).ndim
        except (ValueError, TypeError):  # inhomogeneous nested lists: let check_array explain
            ndim = 2
        if ndim > 3:
            raise ValueError(
                f"X must be 2-D (n_samples, n_features) or 3-D (n_samples, n_points, "
                f"n_features), got a {ndim}-D array of shape {np.shape(X)}. Reshape it "
                "so that the features are the last axis: X.reshape(-1, n_points, n_features)."
            )
        if ndim < 3:
            return validate_data(self, X, reset=reset, dtype=FLOAT_DTYPES)
        X, _ = check_measures(X, input_name="X", dtype=FLOAT_DTYPES)
        if reset:
            self.n_features_in_ = X.shape[-1]
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        elif X.shape[-1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[-1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input. Pass measures whose last axis "
                f"has size {self.n_features_in_}."
            )
        return X

    def fit(self, X, y=None):
        """Validate ``X`` and record its number of features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or \
                (n_samples, n_points, n_features)
            A table or a batch of measures; finite values only.
        y : None
            Ignored.

        Returns
        -------
        self : SymlogTransformer
            The fitted transformer.
        """
        self._validate_params()
        self._validate_input(X, reset=True)
        return self

    def transform(self, X):
        """Apply ``sign(x) * log1p(|x| / scale)`` elementwise.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or \
                (n_samples, n_points, n_features)
            Data with ``n_features_in_`` features (last axis).

        Returns
        -------
        X_tr : ndarray of the same shape as ``X``
            The transformed data, float32 if ``X`` is float32, else float64.

        Raises
        ------
        ValueError
            When ``scale`` is so large that nonzero values would become 0 in
            the output dtype (information silently lost otherwise).
        """
        check_is_fitted(self)
        X = self._validate_input(X, reset=False)
        out = symlog(X, self.scale)
        lost = (out == 0) & (X != 0)
        if np.any(lost):
            raise ValueError(
                f"scale={self.scale!r} maps nonzero values of X (e.g. {X[lost][0]!r}) to 0 in "
                f"{out.dtype}: |x| / scale is below its smallest number. Use a scale closer to the "
                "magnitude of the data, or pass float64 data."
            )
        return out

    def inverse_transform(self, X):
        """Apply the inverse ``sign(y) * scale * expm1(|y|)`` elementwise.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or \
                (n_samples, n_points, n_features)
            Transformed data with ``n_features_in_`` features (last axis).

        Returns
        -------
        X_original : ndarray of the same shape as ``X``
            Data in the original units; values too large to represent saturate
            at the largest finite float.
        """
        check_is_fitted(self)
        X = self._validate_input(X, reset=False)
        return inverse_symlog(X, self.scale)


# ----------------------------------------------------------------- transforms of measures, point by point
# The estimator's ``transform`` parameter: a transformer fitted on the points of the measures (each point a row).
def make_transform(transform):
    """A fresh transformer for a ``transform`` parameter (None, "symlog" or a transformer)."""
    if transform is None:
        return None
    if isinstance(transform, str):
        if transform != "symlog":
            raise ValueError(f"transform must be None, 'symlog' or a transformer object, got {transform!r}.")
        return SymlogTransformer()
    return clone(transform)


def fit_transform_points(transformer, X, weights):
    """Fit ``transformer`` on the real (positive-weight) points of ``X``; transform all of them."""
    if transformer is None:
        return X
    points = X.reshape(-1, X.shape[-1]) if weights is None else X[weights > 0]
    transformer.fit(points)
    return transform_points(transformer, X, "transform")


def transform_points(transformer, X, method):
    """``transformer.<method>`` (``"transform"`` or ``"inverse_transform"``) applied to every point of ``X``.

    ``X`` has shape ``(n_samples, n_points, n_features)``; the result is float64
    of shape ``(n_samples, n_points, n_features_after)``. ``None`` is the identity.
    """
    if transformer is None:
        return X
    flat = getattr(transformer, method)(X.reshape(-1, X.shape[-1]))
    return np.asarray(flat, dtype=np.float64).reshape(*X.shape[:2], -1)


def map_points(transformer, X, method):
    """:func:`transform_points` without the transformer's input checks where the map is known (symlog).

    For inputs already checked: a fitted :class:`SymlogTransformer` is applied
    as the function it is, which costs less than its checks on small inputs.
    """
    if type(transformer) is SymlogTransformer:
        function = symlog if method == "transform" else inverse_symlog
        return np.asarray(function(np.asarray(X, dtype=np.float64), transformer.scale), dtype=np.float64)
    return transform_points(transformer, X, method)
