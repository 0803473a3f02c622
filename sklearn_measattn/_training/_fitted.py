"""A trained network with everything that runs it: the one object inference, inspection, model files and
checkpoints go through.

A fitted estimator hands out a :class:`FittedNetwork` (and a fit returns one),
so that the code that runs or saves a network reads this object instead of the
estimator's attributes.
"""

from __future__ import annotations

import numpy as np
import torch

from .._validation import check_float32_range, check_measures, check_n_features
from ..preprocessing import map_points, transform_points
from ._context import subsampled_context
from ._inference import batches, checked_batch_size, evaluation, targets_from_network
from ._streams import RandomStreams

__all__ = ["FittedNetwork"]


class FittedNetwork:
    """A trained :class:`~sklearn_measattn.transformer.MeasureTransformer` and what runs it.

    Parameters
    ----------
    net : skorch.NeuralNetRegressor
        The trained net (``net.module_`` is the network; its seed, from which
        the named :attr:`streams` derive, is ``net.loader_seed``).
    transform_X, transform_y : transformer or None
        The fitted transforms of the input and target points.
    n_features_in, n_features_out : int
        Features per input and per target point.
    transform : None, str or transformer, default=None
        The estimator's ``transform`` parameter, named in error messages.
    batch_size : int, default=32
        Measures per forward pass unless a call says otherwise.
    context_size : int or None, default=None
        At inference, every point attends to one fixed subsample of at most
        this many points of its measure (None: the whole measure).
    owner : str, default="MeasureTransformerRegressor"
        The class that hands the network out, for error messages (``owner.method``).
    """

    def __init__(self, net, *, transform_X, transform_y, n_features_in, n_features_out, transform=None,
                 batch_size=32, context_size=None, owner="MeasureTransformerRegressor"):
        self.net = net
        self.transform_X = transform_X
        self.transform_y = transform_y
        self.n_features_in = int(n_features_in)
        self.n_features_out = int(n_features_out)
        self.transform = transform
        self.batch_size = batch_size
        self.context_size = context_size
        self.owner = owner

    @property
    def module(self):
        """The trained ``MeasureTransformer``."""
        return self.net.module_

    @property
    def device(self):
        """The device the network runs on, as a string."""
        return str(self.net.device)

    @property
    def streams(self):
        """The network's named random streams (:class:`~._streams.RandomStreams`)."""
        return RandomStreams(self.net.loader_seed)

    @property
    def history(self):
        """The skorch ``History`` of the training."""
        return self.net.history

    def learned_kernel_params(self):
        """The kernel parameters the network learnt, e.g. ``{"degree": array (n_layers, n_heads)}``; empty
        for kernels whose parameters are fixed."""
        degrees = [block.attention.degree() for block in self.module.blocks]
        if not degrees or degrees[0] is None:
            return {}
        return {"degree": np.stack([d.detach().cpu().double().numpy() for d in degrees])}

    # ------------------------------------------------------------- inputs
    def inputs(self, X, *, input_name="X"):
        """Validate measures ``X`` for this network; return ``(X, x_weights, X_model)``.

        ``X`` is the padded float array, ``x_weights`` its point weights
        (``None`` for dense input) and ``X_model`` what the network sees (after
        the fitted input transform, checked to fit float32).
        """
        X, x_weights = check_measures(X, input_name=input_name)
        check_n_features(X, self.n_features_in, input_name=input_name)
        X_model = transform_points(self.transform_X, X, "transform")
        check_float32_range(X_model, input_name, self.transform)
        return X, x_weights, X_model

    def checked_batch_size(self, batch_size, *, method):
        """``batch_size`` checked (a positive integer), or :attr:`batch_size` when ``None``; ``method`` names
        the owner's method that took it, for the error message."""
        return checked_batch_size(batch_size, self.batch_size, caller=f"{self.owner}.{method}")

    def inference_context(self, X_model, x_weights):
        """The context each point attends to at inference: ``(X_model, x_weights)`` themselves, or with
        ``context_size`` one fixed subsample of each measure (the same at every call)."""
        if self.context_size is None:
            return X_model, x_weights
        return subsampled_context(X_model, x_weights, self.context_size,
                                  seed=self.streams.seed_of("inference_context"))

    # ------------------------------------------------------------- running
    def evaluation(self):
        """Context manager: the network in evaluation mode without gradients, its mode restored afterwards."""
        return evaluation(self.module)

    def batches(self, batch_size, *arrays):
        """``(start, stop, tensors)`` over the measures as float32 tensors on the device (run inside
        :meth:`evaluation`)."""
        return batches(self.device, batch_size, *arrays)

    def targets(self, y_model, largest_input, *, what="predictions"):
        """The network's float64 outputs in target units, refused when not finite."""
        return targets_from_network(self.transform_y, self.transform, y_model, largest_input, what=what)

    def run(self, X):
        """The network's outputs, in target units, on raw measures that the caller has already checked.

        One forward pass over ``X`` (float array ``(n_samples, n_points,
        n_features_in)``, dense, finite): the fitted input transform, the
        network in evaluation mode (its mode restored afterwards), the fitted
        target transform inverted. No validation and no batching: for callers
        that run the network many times on small inputs they built themselves.
        Returns a float64 array ``(n_samples, n_points, n_features_out)``.
        """
        X_model = map_points(self.transform_X, X, "transform")
        with self.evaluation() as module:
            out = module(torch.as_tensor(X_model, dtype=torch.float32, device=self.device))
        return map_points(self.transform_y, out.to(torch.float64).cpu().numpy(), "inverse_transform")

    def outputs(self, X_model, x_weights, batch_size):
        """The network's outputs on checked, transformed measures (float64, network units), batch by batch.

        Runs the module itself: the net's evaluation loader may subsample
        (``context_size`` in training).
        """
        with self.evaluation() as module:
            return np.concatenate([
                module(xb, wb).cpu().numpy().astype(np.float64)
                for _, _, (xb, wb) in self.batches(batch_size, X_model, x_weights)
            ])
