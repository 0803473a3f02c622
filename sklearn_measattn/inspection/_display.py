"""Input, target and predicted ensembles side by side, in scikit-learn's Display style."""

from __future__ import annotations

import numbers
from numbers import Real

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._param_validation import validate_params
from .._validation import Choices, Described, NumberInterval, check_measures

__all__ = ["MeasureDisplay"]

_KINDS = ("side_by_side", "overlay")
_SCALES = ("linear", "symlog")

# The domains of the arguments. The measures and feature indices and the lists of names are
# checked against the measures, in the body.
_PLOT_CONSTRAINTS = {
    "kind": [Choices(_KINDS)],
    "scale": [Choices(_SCALES, why="'symlog' shows heavy-tailed ensembles whole")],
    "clip": [NumberInterval(Real, 0, 0.5, closed="left", why="the fraction of points in each tail left out of view")],
}
_PAIRS = Described("array-like", "a pair of feature indices (i, j) or a list of pairs")
_FEATURE_CONSTRAINTS = {"features": [None, _PAIRS], "input_features": [None, _PAIRS]}


def import_pyplot(what="MeasureDisplay"):
    """``matplotlib.pyplot``, or an ImportError saying that ``what`` needs it and how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - exercised where matplotlib is missing
        raise ImportError(
            f"{what} needs matplotlib: pip install matplotlib (or pip install 'sklearn-measattn[plot]')."
        ) from exc
    return plt


def _points(batch, weights, index):
    """The real points of measure ``index`` of a checked (padded) batch."""
    points = batch[index]
    return points if weights is None else points[weights[index] > 0]


def _check_pairs(features, n_features, name):
    """``features``: one pair ``(i, j)`` or a list of pairs; each index a valid feature (one feature: (0, 0))."""
    if features is None:
        features = (0, 1) if n_features > 1 else (0, 0)
    pairs = [features] if len(features) == 2 and all(isinstance(f, numbers.Integral) for f in features) else features
    checked = []
    for pair in pairs:
        if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                or not all(isinstance(f, numbers.Integral) and not isinstance(f, bool) for f in pair)):
            raise ValueError(f"{name} must be a pair of feature indices (i, j) or a list of pairs, got {features!r}.")
        for f in pair:
            if not -n_features <= f < n_features:
                raise ValueError(f"{name}={features!r} names feature {f}, but the measures have {n_features} features.")
        checked.append(tuple(int(f) % n_features for f in pair))
    if not checked:
        raise ValueError(f"{name} is empty; give a pair of feature indices such as (0, 1).")
    return checked


def _check_names(names, n, name, default):
    if names is None:
        return [default(i) for i in range(n)]
    names = [str(v) for v in names]
    if len(names) != n:
        raise ValueError(f"{name} has {len(names)} entries but there are {n}; give one name each.")
    return names


class MeasureDisplay:
    """Input, target and predicted ensembles of chosen measures, side by side.

    Each row of the figure is one measure and one pair of features: a scatter
    of the input ensemble (when ``X`` is given), of the target ensemble and of
    the predicted ensemble, with axis labels naming the features and a title
    naming the measure. Create it with :meth:`from_estimator` or
    :meth:`from_predictions`, which draw it; ``plot`` draws it again with
    other settings. Needs matplotlib (``pip install 'sklearn-measattn[plot]'``).

    Parameters
    ----------
    y_true : list of ndarray of shape (n_points_i, n_features_out)
        The target ensembles of the displayed measures.
    y_pred : list of ndarray of shape (n_predicted_i, n_features_out)
        The predicted ensembles, in the same order.
    X : list of ndarray of shape (n_input_i, n_features_in), default=None
        The input ensembles; ``None`` leaves the input column out.
    measure_names : list of str, default=None
        Title of each displayed measure (default ``"measure i"``).
    features : list of (int, int)
        Pairs of target features, one row per measure and pair.
    input_features : list of (int, int), default=None
        Pairs of input features, one per pair of ``features`` (default: the same).
    feature_names : list of str, default=None
        Names of the target features, for the axis labels.
    input_feature_names : list of str, default=None
        Names of the input features.

    Attributes
    ----------
    figure_ : matplotlib.figure.Figure
        The figure drawn by :meth:`plot`.
    axes_ : ndarray of matplotlib Axes of shape (n_rows, n_columns)
        One row per measure and feature pair; columns input (when ``X`` is
        given), target, predicted (one column for both with ``kind="overlay"``).

    Examples
    --------
    >>> import numpy as np
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn_measattn import MeasureDisplay
    >>> rng = np.random.default_rng(0)
    >>> y, y_pred = rng.standard_normal((3, 50, 2)), rng.standard_normal((3, 50, 2))
    >>> display = MeasureDisplay.from_predictions(y, y_pred, measures=[0, 2], feature_names=["u", "v"])
    >>> display.axes_.shape
    (2, 2)
    >>> display.axes_[0, 0].get_xlabel(), display.axes_[1, 1].get_title()
    ('u', 'measure 2: predicted')
    """

    def __init__(self, *, y_true, y_pred, X=None, measure_names=None, features=((0, 1),), input_features=None,
                 feature_names=None, input_feature_names=None):
        self.y_true = y_true
        self.y_pred = y_pred
        self.X = X
        self.measure_names = measure_names
        self.features = features
        self.input_features = input_features
        self.feature_names = feature_names
        self.input_feature_names = input_feature_names

    @validate_params(_PLOT_CONSTRAINTS, prefer_skip_nested_validation=True)
    def plot(self, *, ax=None, kind="side_by_side", scale="linear", share=True, clip=0.0, point_size=6.0,
             title=None):
        """Draw the ensembles.

        Parameters
        ----------
        ax : matplotlib Axes or array-like of Axes, default=None
            Where to draw: one Axes per panel (``n_rows * n_columns`` of them,
            row by row); a single Axes for one overlay panel. ``None`` makes a
            new figure.
        kind : {"side_by_side", "overlay"}, default="side_by_side"
            Target and prediction in their own panels, or in one panel.
        scale : {"linear", "symlog"}, default="linear"
            Axis scale; ``"symlog"`` (linear near 0, logarithmic beyond 1)
            shows heavy-tailed ensembles whole.
        share : bool, default=True
            Give the target and predicted panels of a row the same limits,
            so that a prediction that is too wide or too narrow looks it.
        clip : float, default=0.0
            Fraction of points in each tail left out of the view (the axis
            limits), in ``[0, 0.5)``; the points are still drawn.
        point_size : float, default=6.0
            Marker size of the scatters.
        title : str, default=None
            Title of the figure.

        Returns
        -------
        display : MeasureDisplay
            The display, with ``figure_`` and ``axes_`` set.
        """
        plt = import_pyplot()
        pairs, input_pairs = list(self.features), list(self.input_features or self.features)
        names = self.measure_names or [f"measure {i}" for i in range(len(self.y_true))]
        columns = (["input"] if self.X is not None else []) + (
            ["target", "predicted"] if kind == "side_by_side" else ["target and predicted"])
        n_rows, n_cols = len(self.y_true) * len(pairs), len(columns)
        if ax is None:
            fig, axes = plt.subplots(n_rows, n_cols, figsize=(3.2 * n_cols, 3.0 * n_rows), squeeze=False)
        else:
            flat = np.ravel(np.asarray(ax, dtype=object))
            if flat.size != n_rows * n_cols:
                raise ValueError(
                    f"ax holds {flat.size} Axes but this display draws {n_rows} x {n_cols} panels "
                    f"({len(self.y_true)} measures x {len(pairs)} feature pairs; columns {', '.join(columns)})."
                )
            axes = flat.reshape(n_rows, n_cols)
            fig = axes[0, 0].figure
        target_labels = self.feature_names or [f"feature {i}" for i in range(np.shape(self.y_true[0])[1])]
        input_labels = self.input_feature_names or (
            None if self.X is None else [f"feature {i}" for i in range(np.shape(self.X[0])[1])])
        row = 0
        for m, name in enumerate(names):
            for pair, input_pair in zip(pairs, input_pairs):
                panels = list(axes[row])
                if self.X is not None:
                    panel = panels.pop(0)
                    x = np.asarray(self.X[m])[:, list(input_pair)]
                    panel.scatter(x[:, 0], x[:, 1], s=point_size, c="C0", label="input")
                    self._decorate(panel, f"{name}: input", input_labels, input_pair, scale, [x], clip)
                y, yp = (np.asarray(a[m])[:, list(pair)] for a in (self.y_true, self.y_pred))
                if kind == "overlay":
                    panels[0].scatter(y[:, 0], y[:, 1], s=point_size, c="0.6", label="target")
                    panels[0].scatter(yp[:, 0], yp[:, 1], s=point_size, c="C3", label="predicted")
                    panels[0].legend(fontsize=7, loc="best")
                    self._decorate(panels[0], name, target_labels, pair, scale, [y, yp], clip)
                else:
                    panels[0].scatter(y[:, 0], y[:, 1], s=point_size, c="0.4", label="target")
                    panels[1].scatter(yp[:, 0], yp[:, 1], s=point_size, c="C3", label="predicted")
                    both = [y, yp] if share else None
                    self._decorate(panels[0], f"{name}: target", target_labels, pair, scale, both or [y], clip)
                    self._decorate(panels[1], f"{name}: predicted", target_labels, pair, scale, both or [yp], clip)
                row += 1
        if title is not None:
            fig.suptitle(title, fontsize=10)
        if ax is None:
            fig.tight_layout()
        self.figure_, self.axes_ = fig, axes
        return self

    @staticmethod
    def _decorate(ax, title, labels, pair, scale, clouds, clip):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(labels[pair[0]])
        ax.set_ylabel(labels[pair[1]])
        if scale == "symlog":
            ax.set_xscale("symlog")
            ax.set_yscale("symlog")
        points = np.vstack(clouds)
        lo, hi = np.quantile(points, clip, axis=0), np.quantile(points, 1 - clip, axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        lo, hi = lo - 0.05 * span, hi + 0.05 * span
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.tick_params(labelsize=7)

    @classmethod
    @validate_params({**_FEATURE_CONSTRAINTS, **_PLOT_CONSTRAINTS}, prefer_skip_nested_validation=True)
    def from_predictions(cls, y_true, y_pred, *, X=None, measures=None, features=None, input_features=None,
                         feature_names=None, input_feature_names=None, measure_names=None, ax=None,
                         kind="side_by_side", scale="linear", share=True, clip=0.0, point_size=6.0, title=None):
        """Draw target and predicted ensembles (and the inputs) of chosen measures.

        Parameters
        ----------
        y_true : array-like of shape (n_samples, n_points, n_features_out) or list
            Target measures (a list of 2-D arrays for a ragged batch).
        y_pred : array-like of shape (n_samples, n_predicted, n_features_out) or list
            Predicted measures, one per target.
        X : array-like of shape (n_samples, n_input, n_features_in) or list, default=None
            Input measures, drawn in a first column when given.
        measures : int or list of int, default=None
            Which measures to draw (default: the first).
        features : (int, int) or list of (int, int), default=None
            Pairs of target features to plot against each other, one row per
            pair (default ``(0, 1)``, or ``(0, 0)`` for one feature).
        input_features : (int, int) or list of (int, int), default=None
            Pairs of input features, one per pair of ``features`` (default:
            the same pairs; needed when the input has fewer features).
        feature_names : list of str, default=None
            Names of the target features, e.g. the feature columns of a table
            (default ``"feature i"``).
        input_feature_names : list of str, default=None
            Names of the input features (default: ``feature_names`` when the
            input has as many features, else ``"feature i"``).
        measure_names : list of str, default=None
            Names of all ``n_samples`` measures, e.g. the measure labels of a
            table (default ``"measure i"``).
        ax : matplotlib Axes or array-like of Axes, default=None
            Where to draw, see :meth:`plot`.
        kind : {"side_by_side", "overlay"}, default="side_by_side"
            See :meth:`plot`.
        scale : {"linear", "symlog"}, default="linear"
            See :meth:`plot`.
        share : bool, default=True
            See :meth:`plot`.
        clip : float, default=0.0
            See :meth:`plot`.
        point_size : float, default=6.0
            See :meth:`plot`.
        title : str, default=None
            See :meth:`plot`.

        Returns
        -------
        display : MeasureDisplay
            The drawn display.

        Raises
        ------
        ValueError
            When the batches disagree in their numbers of measures or target
            features, a measure or feature index is out of range, a list of
            names has the wrong length, or a plot setting is unknown.

        Examples
        --------
        >>> import numpy as np
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from sklearn_measattn import MeasureDisplay
        >>> rng = np.random.default_rng(0)
        >>> X, y = rng.standard_normal((4, 30, 3)), rng.standard_normal((4, 40, 2))
        >>> display = MeasureDisplay.from_predictions(y, y * 0.5, X=X, measures=[1], input_features=(0, 2),
        ...                                           scale="symlog")
        >>> [a.get_title() for a in display.axes_[0]]
        ['measure 1: input', 'measure 1: target', 'measure 1: predicted']
        """
        y_true_arr, y_true_w = check_measures(y_true, input_name="y_true")
        y_pred_arr, y_pred_w = check_measures(y_pred, input_name="y_pred")
        n_samples = y_true_arr.shape[0]
        if y_pred_arr.shape[0] != n_samples:
            raise ValueError(f"y_true has {n_samples} measures but y_pred has {y_pred_arr.shape[0]}; give one "
                             "prediction per target measure.")
        if y_pred_arr.shape[-1] != y_true_arr.shape[-1]:
            raise ValueError(f"y_true has {y_true_arr.shape[-1]} features per point but y_pred has "
                             f"{y_pred_arr.shape[-1]}; they must live in the same space.")
        n_out = y_true_arr.shape[-1]
        if X is not None:
            X_arr, X_w = check_measures(X, input_name="X")
            if X_arr.shape[0] != n_samples:
                raise ValueError(f"X has {X_arr.shape[0]} measures but y_true has {n_samples}; give the input "
                                 "measure of every target.")
            n_in = X_arr.shape[-1]
        if measures is None:
            measures = [0]
        elif isinstance(measures, numbers.Integral) and not isinstance(measures, bool):
            measures = [measures]
        measures = list(measures)
        if not measures:
            raise ValueError("measures is empty; give the index of at least one measure.")
        for m in measures:
            if isinstance(m, bool) or not isinstance(m, numbers.Integral) or not -n_samples <= m < n_samples:
                raise ValueError(f"measures holds {m!r}, but there are {n_samples} measures (indices 0 to "
                                 f"{n_samples - 1}).")
        measures = [int(m) % n_samples for m in measures]
        pairs = _check_pairs(features, n_out, "features")
        all_names = _check_names(measure_names, n_samples, "measure_names", lambda i: f"measure {i}")
        feature_names = _check_names(feature_names, n_out, "feature_names", lambda i: f"feature {i}")
        input_pairs = inputs = None
        if X is not None:
            default_pairs = input_features
            if default_pairs is None:
                if any(f >= n_in for pair in pairs for f in pair):
                    raise ValueError(f"features={features!r} does not exist in X, which has {n_in} features; give "
                                     "input_features, the pairs of input features to draw.")
                default_pairs = pairs
            input_pairs = _check_pairs(default_pairs, n_in, "input_features")
            if len(input_pairs) != len(pairs):
                raise ValueError(f"input_features has {len(input_pairs)} pairs but features has {len(pairs)}; give "
                                 "one pair of input features per pair of target features.")
            if input_feature_names is None and n_in == n_out:
                input_feature_names = feature_names
            input_feature_names = _check_names(input_feature_names, n_in, "input_feature_names",
                                               lambda i: f"feature {i}")
            inputs = [_points(X_arr, X_w, m) for m in measures]
        display = cls(
            y_true=[_points(y_true_arr, y_true_w, m) for m in measures],
            y_pred=[_points(y_pred_arr, y_pred_w, m) for m in measures],
            X=inputs, measure_names=[all_names[m] for m in measures], features=pairs, input_features=input_pairs,
            feature_names=feature_names, input_feature_names=input_feature_names,
        )
        return display.plot(ax=ax, kind=kind, scale=scale, share=share, clip=clip, point_size=point_size, title=title)

    @classmethod
    # Not skipped as nested: the estimator's predict checks its own.
    @validate_params({**_FEATURE_CONSTRAINTS, **_PLOT_CONSTRAINTS}, prefer_skip_nested_validation=False)
    def from_estimator(cls, estimator, X, y, *, measures=None, features=None, input_features=None,
                       feature_names=None, input_feature_names=None, measure_names=None, show_input=True, ax=None,
                       kind="side_by_side", scale="linear", share=True, clip=0.0, point_size=6.0, title=None):
        """Predict the chosen measures with a fitted estimator and draw them.

        Parameters
        ----------
        estimator : MeasureTransformerRegressor
            A fitted estimator (anything with ``predict`` from measures to measures).
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures.
        y : array-like of shape (n_samples, n_points_out, n_features_out) or list
            Target measures.
        measures : int or list of int, default=None
            Which measures to draw (default: the first). Only these are predicted.
        features : (int, int) or list of (int, int), default=None
            Pairs of target features, see :meth:`from_predictions`.
        input_features : (int, int) or list of (int, int), default=None
            Pairs of input features, see :meth:`from_predictions`.
        feature_names : list of str, default=None
            Names of the target features.
        input_feature_names : list of str, default=None
            Names of the input features.
        measure_names : list of str, default=None
            Names of all ``n_samples`` measures.
        show_input : bool, default=True
            Draw the input ensembles in a first column.
        ax : matplotlib Axes or array-like of Axes, default=None
            Where to draw, see :meth:`plot`.
        kind : {"side_by_side", "overlay"}, default="side_by_side"
            See :meth:`plot`.
        scale : {"linear", "symlog"}, default="linear"
            See :meth:`plot`.
        share : bool, default=True
            See :meth:`plot`.
        clip : float, default=0.0
            See :meth:`plot`.
        point_size : float, default=6.0
            See :meth:`plot`.
        title : str, default=None
            See :meth:`plot`.

        Returns
        -------
        display : MeasureDisplay
            The drawn display.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from sklearn_measattn import MeasureDisplay, MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=8, n_points=32, random_state=0)
        >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=2,
        ...                                     random_state=0).fit(X, y)
        >>> display = MeasureDisplay.from_estimator(model, X, y, measures=[0, 3])
        >>> display.axes_.shape  # two measures; input, target, predicted
        (2, 3)
        """
        check_is_fitted(estimator)
        X_arr, X_w = check_measures(X, input_name="X")
        y_arr, y_w = check_measures(y, input_name="y")
        if X_arr.shape[0] != y_arr.shape[0]:
            raise ValueError(f"X has {X_arr.shape[0]} measures but y has {y_arr.shape[0]}; each input measure "
                             "needs its target measure.")
        n_samples = X_arr.shape[0]
        chosen = [0] if measures is None else ([measures] if isinstance(measures, numbers.Integral) else measures)
        for m in chosen:
            if isinstance(m, bool) or not isinstance(m, numbers.Integral) or not -n_samples <= m < n_samples:
                raise ValueError(f"measures holds {m!r}, but there are {n_samples} measures (indices 0 to "
                                 f"{n_samples - 1}).")
        chosen = [int(m) % n_samples for m in chosen]
        inputs = [_points(X_arr, X_w, m) for m in chosen]
        y_pred = estimator.predict(inputs)
        names = _check_names(measure_names, n_samples, "measure_names", lambda i: f"measure {i}")
        return cls.from_predictions(
            [_points(y_arr, y_w, m) for m in chosen], y_pred, X=inputs if show_input else None,
            measures=list(range(len(chosen))), features=features, input_features=input_features,
            feature_names=feature_names, input_feature_names=input_feature_names,
            measure_names=[names[m] for m in chosen], ax=ax, kind=kind, scale=scale, share=share, clip=clip,
            point_size=point_size, title=title,
        )
