"""A fitted estimator's map evaluated at new points: ``x -> T_mu(x)`` for any ``x``.

Each measure of ``X`` is the context (it sets ``mu``); its query points pass
through the same network and attend to it at every layer, without being keys.
Inputs are checked in full before the network runs; the fitted input transform
is applied to the context and the queries alike, and the fitted target
transform is inverted on the images.
"""

from __future__ import annotations

import numpy as np

from .._validation import is_ragged

__all__ = ["check_transport_inputs", "transport_points", "QUERY_POINTS_PER_PASS"]

#: Without a ``batch_size``, a forward pass holds at most the fitted ``batch_size`` measures and about this many
#: query points (at least one measure).
QUERY_POINTS_PER_PASS = 2**18


def check_transport_inputs(network, X, points, batch_size=None):
    """Validate ``X`` and ``points`` against a fitted ``network`` (a ``FittedNetwork``); return what it needs.

    Returns ``(X_model, x_weights, Z_model, query_lengths, batch_size)``, where
    ``query_lengths`` is ``None`` for dense ``points`` and the number of query
    points of each measure for a ragged list.
    """
    X, x_weights, X_model = network.inputs(X)
    ragged = is_ragged(points)
    Z, z_weights, Z_model = network.inputs(points, input_name="points")
    if Z.shape[0] != X.shape[0]:
        raise ValueError(
            f"X has {X.shape[0]} measures but points has {Z.shape[0]} sets of query points; give one set of "
            "query points per measure (points[i] is transported by the map of the measure X[i]). To push the "
            "same points through every measure, repeat them: np.broadcast_to(Z, (len(X), *Z.shape))."
        )
    if batch_size is None:
        # Measures of many query points: fewer per pass, so that memory stays bounded (the images do not change).
        batch_size = max(1, min(network.batch_size, QUERY_POINTS_PER_PASS // max(Z.shape[1], 1)))
    batch_size = network.checked_batch_size(batch_size, method="transport")
    lengths = None
    if ragged:
        lengths = [Z.shape[1]] * Z.shape[0] if z_weights is None else z_weights.sum(axis=1).astype(int).tolist()
    return X_model, x_weights, Z_model, lengths, batch_size


def transport_points(network, X, points, *, batch_size=None):
    """The images of ``points[i]`` under the fitted map of the measure ``X[i]``, for every ``i``.

    See :meth:`sklearn_measattn.MeasureTransformerRegressor.transport`.
    """
    X_model, x_weights, Z_model, lengths, batch_size = check_transport_inputs(network, X, points, batch_size)
    # With context_size, fixed for a fitted network: the same points give the same images at every call.
    X_model, x_weights = network.inference_context(X_model, x_weights)
    out = []
    with network.evaluation() as module:
        for _, _, (xb, zb, wb) in network.batches(batch_size, X_model, Z_model, x_weights):
            out.append(module.transport(xb, zb, wb).cpu().numpy().astype(np.float64))
    y_model = np.concatenate(out)
    largest = float(max(np.max(np.abs(X_model)), np.max(np.abs(Z_model))))
    y_pred = network.targets(y_model, largest, what="images of the query points")
    if lengths is not None:
        return [y_pred[i, :n] for i, n in enumerate(lengths)]
    return y_pred
