"""A fitted estimator's map evaluated at new points: ``x -> T_mu(x)`` for any ``x``.

Each measure of ``X`` is the context (it sets ``mu``); its query points pass
through the same network and attend to it at every layer, without being keys.
Inputs are checked in full before the network runs; the fitted input transform
is applied to the context and the queries alike, and the fitted target
transform is inverted on the images.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._inference import batches, evaluation
from ._training import check_float32_range, transform_points
from ._validation import check_measures, check_n_features, check_positive, is_ragged

__all__ = ["check_transport_inputs", "transport_points"]


def check_transport_inputs(model, X, points, batch_size=None):
    """Validate ``X`` and ``points`` against a fitted ``model``; return what the network needs.

    Returns ``(X_model, x_weights, Z_model, query_lengths, batch_size)``, where
    ``query_lengths`` is ``None`` for dense ``points`` and the number of query
    points of each measure for a ragged list.
    """
    check_is_fitted(model, "net_")
    ragged = is_ragged(points)
    X, x_weights = check_measures(X, input_name="X")
    Z, z_weights = check_measures(points, input_name="points")
    if Z.shape[0] != X.shape[0]:
        raise ValueError(
            f"X has {X.shape[0]} measures but points has {Z.shape[0]} sets of query points; give one set of "
            "query points per measure (points[i] is transported by the map of the measure X[i]). To push the "
            "same points through every measure, repeat them: np.broadcast_to(Z, (len(X), *Z.shape))."
        )
    check_n_features(X, model.n_features_in_)
    check_n_features(Z, model.n_features_in_, input_name="points")
    batch_size = check_positive(batch_size, "batch_size", integer=True, allow_none=True) or model.batch_size
    X_model = transform_points(model.transform_X_, X, "transform")
    check_float32_range(X_model, "X", model.transform)
    Z_model = transform_points(model.transform_X_, Z, "transform")
    check_float32_range(Z_model, "points", model.transform)
    lengths = None
    if ragged:
        lengths = [Z.shape[1]] * Z.shape[0] if z_weights is None else z_weights.sum(axis=1).astype(int).tolist()
    return X_model, x_weights, Z_model, lengths, batch_size


def transport_points(model, X, points, *, batch_size=None):
    """The images of ``points[i]`` under the fitted map of the measure ``X[i]``, for every ``i``.

    See :meth:`sklearn_measattn.MeasureTransformerRegressor.transport`.
    """
    X_model, x_weights, Z_model, lengths, batch_size = check_transport_inputs(model, X, points, batch_size)
    out = []
    with evaluation(model) as module:
        for _, _, (xb, zb, wb) in batches(model, batch_size, X_model, Z_model, x_weights):
            out.append(module.transport(xb, zb, wb).cpu().numpy().astype(np.float64))
    y_model = np.concatenate(out)
    if not np.all(np.isfinite(y_model)):
        raise FloatingPointError(
            f"The network produced non-finite images of the query points (largest |value| "
            f"{float(max(np.max(np.abs(X_model)), np.max(np.abs(Z_model)))):.3g} as the network sees the "
            "context and the points): the attention scores or activations overflowed float32 on extreme "
            "points. Train with transform='symlog' so that inputs reach the network on a logarithmic "
            "scale, or rescale the data."
        )
    y_pred = transform_points(model.transform_y_, y_model, "inverse_transform")
    if not np.all(np.isfinite(y_pred)):
        kind = "NaN" if np.any(np.isnan(y_pred)) else "inf"
        raise FloatingPointError(
            f"The network's images are finite, but transform={model.transform!r}'s inverse_transform "
            f"turned some into {kind}. Check that transformer's inverse_transform on the range of these "
            "images, or use transform='symlog'."
        )
    if lengths is not None:
        return [y_pred[i, :n] for i, n in enumerate(lengths)]
    return y_pred
