"""MeasureTransformerRegressor: a scikit-learn estimator around a skorch net."""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted
from skorch import NeuralNetRegressor
from skorch.callbacks import Callback, EarlyStopping, ProgressBar
from skorch.dataset import ValidSplit
from skorch.utils import to_tensor

from ._validation import check_measures, check_n_features, check_positive, is_ragged
from .attention import BACKENDS, _attention_weight_blocks, resolve_backend
from .kernels import get_kernel
from .losses import MeasureLoss, get_loss
from .metrics import energy_distance, to_space
from .metrics._scorer import _check_space
from .preprocessing import SymlogTransformer
from .transformer import MeasureTransformer

__all__ = ["MeasureTransformerRegressor"]

_NORMS = ("post", "pre")
_FITTED_ATTRIBUTES = ("net_", "transform_X_", "transform_y_", "n_features_in_", "n_features_out_", "device_")
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_VERSION_KEY = "_sklearn_measattn_version"


def _package_version():
    # Imported lazily: the package __init__ imports this module before defining __version__.
    from . import __version__

    return __version__


def _major_minor(version):
    parts = str(version).split(".")
    return tuple(parts[:2])


def _check_float32_range(X, input_name, transform):
    """The net runs in float32: reject values it would turn into inf, before it does."""
    if not np.all(np.isfinite(X)):
        kind = "NaN" if np.any(np.isnan(X)) else "inf"
        raise ValueError(
            f"transform={transform!r} produced {kind} values from the finite {input_name}; the "
            "network needs finite inputs. Check the transformer on these data (e.g. a log of "
            "negative values), or use transform='symlog', which is finite everywhere."
        )
    largest = float(np.max(np.abs(X))) if X.size else 0.0
    if largest > _FLOAT32_MAX:
        where = f"after transform={transform!r}, " if transform is not None else ""
        raise ValueError(
            f"{input_name} has values of magnitude up to {largest:.3g} {where}beyond the float32 range "
            f"({_FLOAT32_MAX:.3g}) the network computes in. Use transform='symlog' (it maps 1e300 to "
            "about 690) or rescale the data."
        )


class _MeasureNet(NeuralNetRegressor):
    """skorch net whose batches are dicts ``{"X", "weights"?, "y_weights"?}``.

    Input point weights go to the module and, with the target weights, to the
    criterion; ``y_weights`` never reaches the module.
    """

    loader_seed = None

    def get_params_for(self, prefix):
        params = super().get_params_for(prefix)
        # Shuffling from a private generator, kept across epochs. The evaluation
        # loader gets one too: a DataLoader draws a base seed from its generator
        # (torch's global one by default) even without workers.
        if prefix in ("iterator_train", "iterator_valid") and self.loader_seed is not None:
            generators = self.__dict__.setdefault("_loader_generators", {})
            if prefix not in generators:
                generators[prefix] = torch.Generator().manual_seed(self.loader_seed)
            params.setdefault("generator", generators[prefix])
        return params

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_loader_generators", None)  # recreated from loader_seed when needed
        return state

    def infer(self, x, **fit_params):
        if isinstance(x, dict) and "y_weights" in x:
            x = {key: value for key, value in x.items() if key != "y_weights"}
        return super().infer(x, **fit_params)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        y_true = to_tensor(y_true, device=self.device)
        pred_weights = true_weights = None
        if isinstance(X, dict):
            pred_weights = to_tensor(X["weights"], device=self.device) if "weights" in X else None
            true_weights = to_tensor(X["y_weights"], device=self.device) if "y_weights" in X else None
        # Name the stage that failed: the forward pass here, the loss just below,
        # the backward pass in _StopOnNonFinite.on_grad_computed.
        if not bool(torch.isfinite(y_pred.detach()).all()):
            kind = "nan" if bool(torch.isnan(y_pred.detach()).any()) else "inf"
            raise FloatingPointError(
                f"The network's forward pass produced non-finite outputs ({kind}) at epoch {len(self.history)} "
                f"({'training' if training else 'validation'} batch), before the loss: "
                + _nonfinite_forward_hint(self.module_, X, self.device)
            )
        loss = self.criterion_(y_pred, y_true, pred_weights, true_weights)
        if not bool(torch.isfinite(loss.detach()).all()):
            name = self.criterion_.name
            culprit = (
                f"the user loss {getattr(name, '__name__', name)!r} returned it"
                if callable(name) else "the distance between prediction and target overflowed (extreme "
                "target values); use transform='symlog' or rescale y"
            )
            raise FloatingPointError(
                f"The loss became {float(loss.detach())} at epoch {len(self.history)} although the network's "
                f"outputs were finite: {culprit}."
            )
        return loss

    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        try:
            return super().fit_loop(X, y, epochs=epochs, **fit_params)
        except KeyboardInterrupt as exc:
            if _raised_by_callback(exc):
                return self  # skorch's way for a callback (EarlyStopping) to end training
            raise _TrainingInterrupted from None


class _TrainingInterrupted(BaseException):
    """Carries a KeyboardInterrupt past skorch, which would swallow it."""


def _raised_by_callback(exc):
    """Whether a KeyboardInterrupt was raised by a skorch callback's hook (skorch's
    convention to stop training, e.g. EarlyStopping) rather than by Ctrl-C."""
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    return isinstance(frame.f_locals.get("self"), Callback) and frame.f_code.co_name.startswith("on_")


def _nonfinite_forward_hint(module, batch, device):
    """Which parameters are already non-finite, or else which layer first went non-finite."""
    bad = [name for name, p in module.named_parameters() if not bool(torch.isfinite(p.detach()).all())]
    if bad:
        return (
            f"parameters {', '.join(bad[:4])}{' ...' if len(bad) > 4 else ''} are already non-finite "
            "(an optimizer step diverged); use a smaller lr or transform='symlog'."
        )
    stage = _first_nonfinite_layer(module, batch, device)
    if stage is not None and stage.endswith(".attention"):
        kernel = module.get_submodule(stage).kernel
        if kernel.growth == "user":
            return (
                f"the attention in {stage} went non-finite on finite inputs: the user kernel "
                f"{kernel.name!r} returned inf or nan for some attention scores. Make g finite for "
                "all scores (e.g. clamp its argument), or use a built-in kernel."
            )
        return (
            f"the attention in {stage} overflowed float32 on extreme input points (softmax attention "
            "on raw heavy-tailed data is the typical cause). Use transform='symlog', a slower-growing "
            "kernel ('log', 'sigmoid', 'poly'), or rescale X."
        )
    where = f"in {stage} " if stage is not None else ""
    return (
        f"the activations {where}overflowed float32 on extreme input points. Use transform='symlog' "
        "or rescale X, or a smaller lr."
    )


def _first_nonfinite_layer(module, batch, device):
    """Name of the first layer whose inputs are finite and whose output is not, or None."""
    if not isinstance(batch, dict) or "X" not in batch:
        return None
    X = to_tensor(batch["X"], device=device)
    weights = to_tensor(batch["weights"], device=device) if "weights" in batch else None
    found = []

    def finite(values):
        return all(bool(torch.isfinite(v).all()) for v in values if isinstance(v, torch.Tensor))

    def record(name):
        def hook(layer, inputs, output):
            if not found and finite(inputs) and not finite([output]):
                found.append(name)
        return hook

    handles = [layer.register_forward_hook(record(name)) for name, layer in module.named_modules() if name]
    try:
        with torch.no_grad():
            module(X, weights)
    finally:
        for handle in handles:
            handle.remove()
    return found[0] if found else None


# Callback names the estimator or skorch already use.
_RESERVED_CALLBACK_NAMES = (
    "stop_on_non_finite", "early_stopping", "progress_bar", "epoch_timer", "train_loss", "valid_loss",
    "print_log",
)


def _check_callbacks(callbacks):
    if callbacks is None:
        return
    if not isinstance(callbacks, (list, tuple)):
        raise TypeError(f"callbacks must be a list of skorch callbacks or None, got {type(callbacks).__name__}.")
    names = set()
    for index, entry in enumerate(callbacks):
        name, callback = entry if isinstance(entry, tuple) and len(entry) == 2 else (None, entry)
        is_callback = isinstance(callback, Callback) or (isinstance(callback, type) and issubclass(callback, Callback))
        if not is_callback:
            raise TypeError(
                f"callbacks[{index}] is {callback!r}, not a skorch Callback; pass instances of "
                "skorch.callbacks.Callback subclasses, optionally as (name, callback) pairs."
            )
        if name is None:
            continue
        if not isinstance(name, str):
            raise TypeError(f"callbacks[{index}] has name {name!r}; callback names must be strings.")
        if name in _RESERVED_CALLBACK_NAMES:
            raise ValueError(
                f"callbacks[{index}] is named {name!r}, which the estimator already uses "
                f"({', '.join(_RESERVED_CALLBACK_NAMES)}); give it another name. Early stopping "
                "and progress output are the parameters early_stopping, patience and verbose."
            )
        if name in names:
            raise ValueError(f"Two callbacks are named {name!r}; callback names must be unique.")
        names.add(name)


def _check_paired_counts(X, x_weights, y, y_weights):
    """loss='mse' pairs the i-th output point with the i-th target point of each measure."""
    x_counts = np.full(X.shape[0], X.shape[1]) if x_weights is None else (x_weights > 0).sum(axis=1)
    y_counts = np.full(y.shape[0], y.shape[1]) if y_weights is None else (y_weights > 0).sum(axis=1)
    differ = np.flatnonzero(x_counts != y_counts)
    if differ.size:
        i = int(differ[0])
        raise ValueError(
            f"loss='mse' needs paired targets with as many points as their inputs, but measure {i} "
            f"has {x_counts[i]} input and {y_counts[i]} target points ({differ.size} measure(s) "
            "differ); use loss='energy', 'sliced' or 'sinkhorn', which compare unpaired ensembles."
        )


def _check_validation_split(n_samples, fraction):
    """early_stopping needs at least one measure on each side of the split."""
    n_valid = math.ceil(n_samples * fraction)
    if n_samples * fraction < 1 or n_samples - n_valid < 1:
        raise ValueError(
            f"early_stopping with validation_fraction={fraction} splits {n_samples} measure(s) into "
            f"{n_samples - n_valid} for training and {n_valid} held out; each side needs at least one. "
            "Pass more measures or change validation_fraction."
        )


def _probe_loss(loss, loss_params, n_features_out):
    """Call the loss once on two tiny batches and say what is wrong, before training."""
    generator = torch.Generator().manual_seed(0)
    if loss == "sliced" and "generator" not in loss_params:
        loss_params = {**loss_params, "generator": generator}  # not torch's global generator
    loss_fn = get_loss(loss, **loss_params)
    y_pred = torch.randn(2, 3, n_features_out, generator=generator, requires_grad=True)
    y_true = torch.randn(2, 3, n_features_out, generator=generator)
    name = getattr(loss, "__name__", loss)
    try:
        value = loss_fn(y_pred, y_true, None, None)
    except Exception as exc:
        raise ValueError(
            f"loss={name!r} raised {type(exc).__name__}: {exc} on a test batch of shape "
            "(2, 3, n_features_out); a loss is called as loss(y_pred, y_true, pred_weights, "
            "true_weights) with torch tensors (weights may be None)."
        ) from exc
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"loss={name!r} returned {type(value).__name__}; it must return a scalar torch tensor "
            "computed from y_pred with torch operations, so that it can be backpropagated."
        )
    if value.numel() != 1:
        hint = " (loss_params has reduction='none')" if loss_params.get("reduction") == "none" else ""
        raise ValueError(
            f"loss={name!r} returned a tensor of shape {tuple(value.shape)}{hint}; training needs "
            "a scalar loss. Use reduction='mean' or 'sum'."
        )
    if not value.dtype.is_floating_point or not value.requires_grad:
        raise TypeError(
            f"loss={name!r} returned a {value.dtype} tensor that does not depend on y_pred through "
            "autograd; compute it from y_pred with differentiable torch operations."
        )
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"loss={name!r} returned {float(value.detach())} on a finite test batch.")


class _StopOnNonFinite(Callback):
    """Abort training at the first non-finite gradient or loss, naming the stage.

    Non-finite forward outputs and losses are caught in ``_MeasureNet.get_loss``;
    gradients here, before the optimizer step writes them into the weights.
    """

    def on_grad_computed(self, net, named_parameters, X=None, y=None, training=False, **kwargs):
        bad = [name for name, p in named_parameters if p.grad is not None and not bool(torch.isfinite(p.grad).all())]
        if bad:
            raise FloatingPointError(
                f"The backward pass produced non-finite gradients at epoch {len(net.history)} for "
                f"{', '.join(bad[:4])}{' ...' if len(bad) > 4 else ''}, while the forward pass and the "
                "loss were finite. The gradient overflowed on extreme points; use transform='symlog', "
                "a slower-growing kernel ('log', 'sigmoid', 'poly'), a smaller lr, or "
                "attention_backend='chunked'."
            )

    def on_batch_end(self, net, batch=None, training=None, **kwargs):
        key = "train_loss" if training else "valid_loss"
        loss = net.history[-1, "batches", -1, key]
        if not np.isfinite(loss):
            raise FloatingPointError(
                f"The training loss became {loss} at epoch {len(net.history)}; the network's outputs "
                "or the loss overflowed. Use transform='symlog' or a smaller lr."
            )


class MeasureTransformerRegressor(RegressorMixin, BaseEstimator):
    """Measure-to-measure regression with a kernel-attention transformer.

    Each sample of ``X`` is an input ensemble (an empirical measure, shape
    ``(n_points, n_features)``) and each sample of ``y`` its target ensemble.
    A post-norm :class:`~sklearn_measattn.transformer.MeasureTransformer` maps
    every input point to an output point, attending to the whole input measure
    with the chosen attention kernel, and is trained with a distance between
    the predicted and target ensembles (energy distance by default), so ``y``
    need not be paired with ``X`` point by point, nor have as many points.
    Training runs through a skorch ``NeuralNetRegressor`` (``net_``).

    Parameters
    ----------
    kernel : str or callable, default="log"
        Attention kernel: ``"softmax"``, ``"poly"``, ``"log"``, ``"sigmoid"``,
        ``"softplus"`` or a callable log-weight ``g`` (see
        :func:`~sklearn_measattn.kernels.get_kernel`). Slower-growing kernels
        avoid ensemble collapse on heavy-tailed data.
    kernel_params : dict, default=None
        Kernel parameters, e.g. ``{"degree": 2}`` for ``"poly"``.
    transform : None, "symlog" or transformer, default=None
        Pointwise transform fitted on the points of ``X`` and (separately) of
        ``y``, applied before training and inverted on the predictions.
        ``"symlog"`` is :class:`~sklearn_measattn.preprocessing.SymlogTransformer`;
        any scikit-learn transformer with ``inverse_transform`` works (it sees
        the points as rows of a 2-D array).
    d_model : int, default=64
        Width of the hidden point features.
    n_heads : int, default=4
        Attention heads; must divide ``d_model``.
    n_layers : int, default=2
        Transformer blocks.
    dim_feedforward : int, default=128
        Hidden width of the feed-forward networks.
    norm : {"post", "pre"}, default="post"
        Post-norm blocks (LayerNorm after each residual) or pre-norm.
    dropout : float, default=0.0
        Dropout rate in [0, 1).
    loss : str or callable, default="energy"
        ``"energy"``, ``"sliced"``, ``"sinkhorn"``, ``"mse"`` (paired targets)
        or a callable ``loss(y_pred, y_true, pred_weights, true_weights)``;
        see :mod:`sklearn_measattn.losses`.
    loss_params : dict, default=None
        Keyword parameters of the loss, e.g. ``{"n_projections": 32}``.
    lr : float, default=1e-3
        Learning rate of AdamW.
    weight_decay : float, default=0.0
        AdamW weight decay.
    batch_size : int, default=32
        Measures per batch.
    max_epochs : int, default=100
        Training epochs (an upper bound with ``early_stopping``).
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the measures and stop when their
        loss has not improved for ``patience`` epochs, keeping the best weights.
    validation_fraction : float, default=0.1
        Held-out fraction for early stopping, in (0, 1).
    patience : int, default=5
        Epochs without improvement before stopping.
    device : {"auto", "cpu", "cuda"} or "cuda:N", default="auto"
        ``"auto"`` uses CUDA when available.
    attention_backend : {"auto", "sdpa", "flex", "fused", "chunked", "naive"}, default="auto"
        How attention is computed, see
        :func:`~sklearn_measattn.attention.kernel_attention` and :ref:`gpu`.
        ``"auto"``: SDPA for softmax, FlexAttention on CUDA, the fused C++
        kernels on CPU (compiled on first use), else ``"chunked"``. A backend
        that cannot run the kernel on the chosen device raises ``ValueError``
        in ``fit`` before training.
    random_state : int, RandomState instance or None, default=None
        Seeds weight initialisation, shuffling, dropout and the validation
        split; an int gives identical predictions on CPU. The global torch
        random state is left untouched.
    verbose : int, default=0
        0 is silent; 1 prints skorch's per-epoch table and a progress bar.
    callbacks : list of skorch callbacks, default=None
        Extra callbacks (e.g. ``skorch.callbacks.LRScheduler``,
        ``Checkpoint``), as objects or ``(name, callback)`` pairs.
    score_space : {"raw", "symlog"}, default="raw"
        Where :meth:`score` compares predicted and target measures: as they
        are, or after ``sign(y) * log1p(|y|)`` of every coordinate (see
        :func:`~sklearn_measattn.metrics.to_space`). On data with infinite
        moments the raw energy distance is dominated by a few extreme points;
        use ``"symlog"`` there. It does not change training.
    warm_start : bool, default=False
        When True and the estimator is fitted, :meth:`fit` continues training
        the fitted net for ``max_epochs`` more epochs (keeping its weights,
        optimizer state, fitted transforms and history) instead of starting
        afresh. Architecture and data shape must stay the same. See also
        :meth:`partial_fit` for one epoch at a time.

    Attributes
    ----------
    net_ : skorch.NeuralNetRegressor
        The trained net; ``net_.module_`` is the ``MeasureTransformer``.
    history_ : skorch.History
        Per-epoch (and per-batch) losses and timings.
    n_features_in_ : int
        Features per input point.
    n_features_out_ : int
        Features per target point.
    transform_X_, transform_y_ : transformer or None
        The fitted transforms of the input and target points.
    device_ : str
        The device the net was trained on.

    Examples
    --------
    >>> from sklearn_measattn import MeasureTransformerRegressor
    >>> from sklearn_measattn.datasets import make_matrix_inverse
    >>> X, y = make_matrix_inverse(n_samples=16, n_points=32, tail="gaussian", random_state=0)
    >>> model = MeasureTransformerRegressor(
    ...     kernel="log", d_model=16, n_heads=2, n_layers=1, max_epochs=2, random_state=0
    ... ).fit(X, y)
    >>> model.predict(X[:2]).shape
    (2, 32, 2)
    >>> model.predict(X[:2, :10]).shape  # any number of points at inference
    (2, 10, 2)
    >>> score = model.score(X, y)  # negative energy distance, higher is better
    >>> model.attention_ess(X[:3]).shape  # trained attention ESS / n per measure and head
    (3, 2)
    """

    def __init__(
        self,
        *,
        kernel="log",
        kernel_params=None,
        transform=None,
        d_model=64,
        n_heads=4,
        n_layers=2,
        dim_feedforward=128,
        norm="post",
        dropout=0.0,
        loss="energy",
        loss_params=None,
        lr=1e-3,
        weight_decay=0.0,
        batch_size=32,
        max_epochs=100,
        early_stopping=False,
        validation_fraction=0.1,
        patience=5,
        device="auto",
        attention_backend="auto",
        random_state=None,
        verbose=0,
        callbacks=None,
        score_space="raw",
        warm_start=False,
    ):
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.transform = transform
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.dim_feedforward = dim_feedforward
        self.norm = norm
        self.dropout = dropout
        self.loss = loss
        self.loss_params = loss_params
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.device = device
        self.attention_backend = attention_backend
        self.random_state = random_state
        self.verbose = verbose
        self.callbacks = callbacks
        self.score_space = score_space
        self.warm_start = warm_start

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.input_tags.two_d_array = False
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        tags.regressor_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Train the transformer to map each measure of ``X`` to that of ``y``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures; a list of ``(n_points_i, n_features_in)`` arrays
            is a ragged batch (padded internally, padding weighted 0).
        y : array-like of shape (n_samples, n_points_out, n_features_out) or list
            Target measures; ``n_points_out`` may differ from ``n_points``
            (except with ``loss="mse"``).

        Returns
        -------
        self : MeasureTransformerRegressor
            The fitted estimator.

        Raises
        ------
        ValueError
            On an invalid parameter (the message names it) or invalid data,
            before any training.
        FloatingPointError
            When the training loss becomes non-finite; the estimator is then
            left unfitted.
        KeyboardInterrupt
            On Ctrl-C during training; the estimator is then left unfitted
            (skorch would keep the half-trained net).

        Notes
        -----
        With ``warm_start=True`` a fitted estimator continues training its
        net for ``max_epochs`` more epochs on this data, keeping the fitted
        transforms.
        """
        return self._fit(X, y, epochs=None)

    def partial_fit(self, X, y):
        """Train for one more epoch (pass over ``X``), continuing from the fitted net.

        The first call on an unfitted estimator builds the network and fits
        the transforms on this data, then trains one epoch; later calls keep
        the weights, optimizer state, transforms and history, as skorch's
        ``partial_fit`` does. ``max_epochs`` and early stopping do not apply.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures.
        y : array-like of shape (n_samples, n_points_out, n_features_out) or list
            Target measures.

        Returns
        -------
        self : MeasureTransformerRegressor
            The estimator, trained one more epoch.

        Raises
        ------
        ValueError
            On invalid parameters or data, or data whose number of features
            differs from the fitted one, before any training.
        FloatingPointError
            When the training loss becomes non-finite; the estimator is then
            left unfitted.

        Examples
        --------
        >>> from sklearn_measattn import MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=8, n_points=16, random_state=0)
        >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, random_state=0)
        >>> for _ in range(3):
        ...     model = model.partial_fit(X, y)
        >>> len(model.history_)
        3
        """
        return self._fit(X, y, epochs=1)

    def _fit(self, X, y, *, epochs):
        """Fit afresh, or continue the fitted net (warm start, partial fit) for ``epochs``."""
        config = self._check_params()
        resume = hasattr(self, "net_") and (epochs is not None or self.warm_start)
        X, x_weights = check_measures(X, input_name="X")
        y, y_weights = check_measures(y, input_name="y")
        if resume:
            check_n_features(X, self.n_features_in_)
            check_n_features(y, self.n_features_out_, input_name="y")
        if X.shape[0] != y.shape[0]:
            raise ValueError(
                f"X has {X.shape[0]} measures but y has {y.shape[0]}; each input measure needs "
                "its target measure."
            )
        if self.loss == "mse":
            _check_paired_counts(X, x_weights, y, y_weights)
        if self.early_stopping:
            _check_validation_split(X.shape[0], self.validation_fraction)
        _probe_loss(self.loss, self.loss_params or {}, y.shape[-1])

        if resume:
            net, transform_X, transform_y = self.net_, self.transform_X_, self.transform_y_
            X_model = _transform_points(transform_X, X, "transform")
            y_model = _transform_points(transform_y, y, "transform")
        else:
            transform_X = self._make_transform()
            transform_y = self._make_transform()
            X_model = _fit_transform_points(transform_X, X, x_weights)
            y_model = _fit_transform_points(transform_y, y, y_weights)
        _check_float32_range(X_model, "X", self.transform)
        _check_float32_range(y_model, "y", self.transform)
        inputs = _as_batch(X_model, x_weights, y_weights)
        if not resume:
            seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)
            net = self._build_net(X.shape[-1], y.shape[-1], config, seed)

        # A failed fit leaves the estimator unfitted, never half-fitted.
        for attribute in _FITTED_ATTRIBUTES:
            self.__dict__.pop(attribute, None)
        total = (len(net.history) if resume else 0) + (epochs or self.max_epochs)
        try:
            if resume:
                net.max_epochs = self.max_epochs
                net.partial_fit(inputs, y_model.astype(np.float32), epochs=epochs)
            elif epochs is not None:
                net.initialize()
                net.partial_fit(inputs, y_model.astype(np.float32), epochs=epochs)
            else:
                net.fit(inputs, y_model.astype(np.float32))
        except _TrainingInterrupted:
            # skorch would swallow Ctrl-C and leave a half-trained net that looks
            # fitted; a scikit-learn estimator (and a GridSearchCV around it) stops.
            raise KeyboardInterrupt(
                f"Training interrupted at epoch {len(net.history)} of {total}; the "
                "estimator is left unfitted."
            ) from None

        # Only now, after training succeeded, does the estimator become fitted.
        self.net_ = net
        self.transform_X_ = transform_X
        self.transform_y_ = transform_y
        self.n_features_in_ = X.shape[-1]
        self.n_features_out_ = y.shape[-1]
        self.device_ = config["device"]
        return self

    # ---------------------------------------------------------- persistence
    def __getstate__(self):
        state = super().__getstate__()
        state[_VERSION_KEY] = _package_version()
        return state

    def __setstate__(self, state):
        state = dict(state)
        saved = state.pop(_VERSION_KEY, None)
        current = _package_version()
        if saved is None:
            warnings.warn(
                f"This {type(self).__name__} was pickled without a sklearn_measattn version stamp "
                f"(an unknown, older version); loading it with version {current} may fail or "
                "give wrong predictions. Refit and save it again.",
                UserWarning,
                stacklevel=2,
            )
        elif _major_minor(saved) != _major_minor(current):
            raise RuntimeError(
                f"This {type(self).__name__} was saved with sklearn_measattn {saved}, but this is "
                f"sklearn_measattn {current}; models are only loadable within the same major.minor "
                f"version. Install sklearn_measattn=={saved} to load it, or refit the model."
            )
        super().__setstate__(state)
        device = self.__dict__.get("device_")
        if isinstance(device, str) and device.startswith("cuda") and not torch.cuda.is_available():
            warnings.warn(
                f"This {type(self).__name__} was trained on device {device!r}, but CUDA is not "
                "available here; it was loaded on the CPU (device_='cpu').",
                UserWarning,
                stacklevel=2,
            )
            self.device_ = "cpu"

    @property
    def history_(self):
        """The skorch ``History`` of the last fit (losses per epoch and batch)."""
        check_is_fitted(self, "net_")
        return self.net_.history

    def predict(self, X):
        """Predict the output measure of each input measure.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures; ``n_points`` may differ from the training data. A
            list of 2-D arrays (ragged batch) gives a list of predictions.

        Returns
        -------
        y_pred : ndarray of shape (n_samples, n_points, n_features_out) or list
            One output point per input point; a list of
            ``(n_points_i, n_features_out)`` arrays for a list input.

        Raises
        ------
        ValueError
            On invalid measures (wrong rank, NaN/inf, empty, wrong
            ``n_features``) or values beyond the float32 range of the network.
        FloatingPointError
            When the network's output is not finite (extreme inputs without
            ``transform="symlog"``); NaN is never returned.
        """
        check_is_fitted(self, "net_")
        ragged = is_ragged(X)
        X, x_weights = check_measures(X, input_name="X")
        check_n_features(X, self.n_features_in_)
        X_model = _transform_points(self.transform_X_, X, "transform")
        _check_float32_range(X_model, "X", self.transform)
        with torch.no_grad():
            y_model = self.net_.predict(_as_batch(X_model, x_weights, None)).astype(np.float64)
        if not np.all(np.isfinite(y_model)):
            raise FloatingPointError(
                f"The network produced non-finite predictions for X (largest |value| "
                f"{float(np.max(np.abs(X_model))):.3g} as the network sees it): the attention scores "
                "or activations overflowed float32 on extreme points. Train with transform='symlog' "
                "so that inputs reach the network on a logarithmic scale, or rescale the data."
            )
        y_pred = _transform_points(self.transform_y_, y_model, "inverse_transform")
        if not np.all(np.isfinite(y_pred)):
            kind = "NaN" if np.any(np.isnan(y_pred)) else "inf"
            raise FloatingPointError(
                f"The network's predictions are finite, but transform={self.transform!r}'s "
                f"inverse_transform turned some into {kind}. Check that transformer's "
                "inverse_transform on the range of these predictions, or use transform='symlog'."
            )
        if ragged:
            lengths = x_weights.sum(axis=1).astype(int) if x_weights is not None else [X.shape[1]] * len(X)
            return [y_pred[i, :n] for i, n in enumerate(lengths)]
        return y_pred

    def score(self, X, y, sample_weight=None):
        """Negative energy distance between predicted and target measures.

        :class:`~sklearn.base.RegressorMixin`'s R^2 does not take 3-D targets;
        higher is better, 0 is perfect. With ``score_space="symlog"`` both
        measures are compared after symlog of every coordinate.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures.
        y : array-like of shape (n_samples, n_points_out, n_features_out) or list
            Target measures.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the measures in the average.

        Returns
        -------
        score : float
            ``-energy_distance(y, self.predict(X))`` in ``score_space``.
        """
        space = _check_space(self.score_space)
        return -energy_distance(to_space(y, space), to_space(self.predict(X), space), sample_weight=sample_weight)

    # --------------------------------------------------------- diagnostics
    def attention_ess(self, X, *, layer=0, max_queries=None, random_state=0, batch_size=None):
        """Effective sample size of the trained attention on measures ``X``, per head.

        For every measure, the attention weights of block ``layer`` are
        ``w_ij = a_j kappa(s_ij) / sum_l a_l kappa(s_il)`` with the model's
        learnt queries and keys (point weights ``a`` respected; padding of a
        ragged batch has weight 0). The ESS of query ``i`` is
        ``1 / sum_j w_ij^2``, as a fraction of the measure's own effective size
        ``1 / sum_j a_j^2`` (``n`` for uniform weights), averaged over queries
        with weights ``a_i``: the same definition as
        :func:`sklearn_measattn.metrics.attention_ess`, on the trained model
        instead of random projections. Near ``1/n``: every query puts all its
        weight on one point (attention collapse); near 1: flat attention.

        Computed in float64 one block of queries at a time, so the N x N
        weights are never held in memory.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures, raw (the fitted ``transform`` is applied here).
        layer : int, default=0
            Block whose attention is measured, ``0 <= layer < n_layers``. The
            first block is the one that sees the data's scale.
        max_queries : int, default=None
            Evaluate at most this many queries per measure, drawn at random
            among its present points (each against all keys): an unbiased
            estimate at a fraction of the cost for large ``n_points``.
            ``None`` uses every query.
        random_state : int, RandomState instance or None, default=0
            Seeds the query subsample.
        batch_size : int, default=None
            Measures per forward pass (default: the fitted ``batch_size``).

        Returns
        -------
        ess : ndarray of shape (n_samples, n_heads)
            ESS / n in ``(0, 1]`` per measure and head.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_measattn import MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=8, n_points=32, tail="pareto", tail_index=0.7,
        ...                            random_state=0)
        >>> model = MeasureTransformerRegressor(kernel="softmax", d_model=16, n_heads=2, n_layers=1,
        ...                                     max_epochs=1, random_state=0).fit(X, y)
        >>> ess = model.attention_ess(X)
        >>> ess.shape
        (8, 2)
        >>> bool(np.median(ess) < 0.1)  # softmax on raw Pareto(0.7) data: one point takes the weight
        True
        """
        batches, n_heads = self._attention_inputs(X, layer, batch_size)
        max_queries = check_positive(max_queries, "max_queries", integer=True, allow_none=True)
        rng = check_random_state(random_state)
        out = []
        for q, k, a in batches:
            for i in range(q.shape[0]):
                present = np.flatnonzero(a[i] > 0)
                queries = present
                if max_queries is not None and len(present) > max_queries:
                    queries = np.sort(rng.choice(present, max_queries, replace=False))
                a_i = torch.as_tensor(a[i], dtype=torch.float64)
                log_a = torch.log(a_i)[None, :]
                q_i = q[i : i + 1, :, torch.as_tensor(queries)]
                inverse_ess = torch.cat(
                    [(w * w).sum(dim=-1)[0] for _, _, w in _attention_weight_blocks(q_i, k[i : i + 1], self._kernel_(), log_a)],
                    dim=-1,
                )  # (heads, n_queries drawn)
                query_weights = a_i[torch.as_tensor(queries)]
                base_ess = 1.0 / float((a_i * a_i).sum())
                ess = ((1.0 / inverse_ess) * query_weights).sum(dim=-1) / query_weights.sum() / base_ess
                out.append(ess.numpy())
        return np.stack(out).reshape(-1, n_heads)

    def attention_weights(self, X, *, layer=0, batch_size=None):
        """The trained attention weights of block ``layer`` on measures ``X`` (for plots).

        Materialises ``n_points x n_points`` weights per measure and head, so it
        is meant for small measures; :meth:`attention_ess` summarises large ones
        without doing so.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_points, n_features_in) or list
            Input measures, raw.
        layer : int, default=0
            Block whose attention is returned.
        batch_size : int, default=None
            Measures per forward pass (default: the fitted ``batch_size``).

        Returns
        -------
        weights : ndarray of shape (n_samples, n_heads, n_points, n_points) or list
            ``weights[i, h, q, j]``: how much query point ``q`` of measure ``i``
            attends to point ``j`` in head ``h``; each row sums to 1. For a
            list (ragged) input, a list of ``(n_heads, n_i, n_i)`` arrays.

        Raises
        ------
        ValueError
            When the weights would take more than 2 GiB (use
            :meth:`attention_ess`, or pass fewer measures).

        Examples
        --------
        >>> from sklearn_measattn import MeasureTransformerRegressor
        >>> from sklearn_measattn.datasets import make_matrix_inverse
        >>> X, y = make_matrix_inverse(n_samples=4, n_points=16, random_state=0)
        >>> model = MeasureTransformerRegressor(d_model=8, n_heads=2, n_layers=1, max_epochs=1,
        ...                                     random_state=0).fit(X, y)
        >>> W = model.attention_weights(X)
        >>> W.shape
        (4, 2, 16, 16)
        >>> bool(abs(W.sum(axis=-1) - 1).max() < 1e-12)
        True
        """
        check_is_fitted(self, "net_")
        ragged = is_ragged(X)
        n_samples = len(X) if ragged else np.shape(X)[0]
        n_points = max(np.shape(m)[0] for m in X) if ragged else np.shape(X)[1]
        n_heads = self.net_.module_.blocks[0].attention.n_heads
        size = 8 * n_samples * n_heads * n_points * n_points
        if size > 2**31:
            raise ValueError(
                f"attention_weights would hold {size / 2**30:.1f} GiB ({n_samples} measures x {n_heads} heads x "
                f"{n_points}^2 points); pass fewer or smaller measures, or use attention_ess, which never "
                "materialises the weights."
            )
        batches, _ = self._attention_inputs(X, layer, batch_size)
        blocks = []
        for q, k, a in batches:
            log_a = torch.log(torch.as_tensor(a, dtype=torch.float64))
            blocks.append(torch.cat([w for _, _, w in _attention_weight_blocks(q, k, self._kernel_(), log_a)], dim=2))
        weights = torch.cat(blocks).numpy()
        if ragged:
            lengths = [np.shape(m)[0] for m in X]
            return [weights[i, :, :n, :n] for i, n in enumerate(lengths)]
        return weights

    def _kernel_(self):
        return self.net_.module_.blocks[0].attention.kernel

    def _attention_inputs(self, X, layer, batch_size):
        """Validate; yield float64 ``(q, k, a)`` per batch of measures (``a``: normalised point weights)."""
        check_is_fitted(self, "net_")
        module = self.net_.module_
        n_layers = len(module.blocks)
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not 0 <= layer < n_layers:
            raise ValueError(f"layer must be an integer in [0, {n_layers}) for this {n_layers}-block model, got {layer!r}.")
        batch_size = check_positive(batch_size, "batch_size", integer=True, allow_none=True) or self.batch_size
        X, x_weights = check_measures(X, input_name="X")
        check_n_features(X, self.n_features_in_)
        X_model = _transform_points(self.transform_X_, X, "transform")
        _check_float32_range(X_model, "X", self.transform)
        weights = np.ones(X.shape[:2]) if x_weights is None else x_weights.astype(np.float64)
        weights = weights / weights.sum(axis=1, keepdims=True)
        device = self.device_
        n_heads = module.blocks[layer].attention.n_heads

        def batches():
            was_training = module.training
            module.eval()
            try:
                with torch.no_grad():
                    for start in range(0, X.shape[0], batch_size):
                        stop = min(start + batch_size, X.shape[0])
                        xb = torch.as_tensor(X_model[start:stop], dtype=torch.float32, device=device)
                        wb = None if x_weights is None else torch.as_tensor(
                            x_weights[start:stop], dtype=torch.float32, device=device
                        )
                        q, k, _ = module.attention_inputs(xb, wb, layer=int(layer))
                        if not (bool(torch.isfinite(q).all()) and bool(torch.isfinite(k).all())):
                            raise FloatingPointError(
                                f"The queries or keys of layer {layer} overflowed float32 on measures "
                                f"{start}..{stop - 1}, so their attention weights are undefined. Train "
                                "with transform='symlog' so that the network sees a logarithmic scale."
                            )
                        yield q.double().cpu(), k.double().cpu(), weights[start:stop]
            finally:
                module.train(was_training)

        return batches(), n_heads

    # -------------------------------------------------------------- helpers
    def _check_params(self):
        """Check every hyper-parameter, naming the bad one; return derived config."""
        if self.kernel_params is not None and not isinstance(self.kernel_params, dict):
            raise TypeError(f"kernel_params must be a dict or None, got {type(self.kernel_params).__name__}.")
        try:
            kernel = get_kernel(self.kernel, **(self.kernel_params or {}))
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"Invalid kernel={self.kernel!r} / kernel_params={self.kernel_params!r}: {exc}") from None
        if self.loss_params is not None and not isinstance(self.loss_params, dict):
            raise TypeError(f"loss_params must be a dict or None, got {type(self.loss_params).__name__}.")
        try:
            get_loss(self.loss, **(self.loss_params or {}))
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"Invalid loss={self.loss!r} / loss_params={self.loss_params!r}: {exc}") from None
        self._make_transform()
        for name in ("d_model", "n_heads", "n_layers", "dim_feedforward", "batch_size", "max_epochs", "patience"):
            check_positive(getattr(self, name), name, integer=True)
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads={self.n_heads} must divide d_model={self.d_model}.")
        if self.norm not in _NORMS:
            raise ValueError(f"norm must be 'post' or 'pre', got {self.norm!r}.")
        dropout = check_positive(self.dropout, "dropout", allow_zero=True)
        if dropout >= 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}.")
        check_positive(self.lr, "lr")
        check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        if not isinstance(self.early_stopping, (bool, np.bool_)):
            raise TypeError(f"early_stopping must be True or False, got {self.early_stopping!r}.")
        fraction = check_positive(self.validation_fraction, "validation_fraction")
        if fraction >= 1:
            raise ValueError(f"validation_fraction must be in (0, 1), got {self.validation_fraction!r}.")
        if self.attention_backend not in BACKENDS:
            raise ValueError(
                f"attention_backend must be one of {', '.join(map(repr, BACKENDS))}, got {self.attention_backend!r}."
            )
        check_positive(self.verbose, "verbose", integer=True, allow_zero=True)
        _check_callbacks(self.callbacks)
        check_random_state(self.random_state)
        _check_space(self.score_space)
        if not isinstance(self.warm_start, (bool, np.bool_)):
            raise TypeError(f"warm_start must be True or False, got {self.warm_start!r}.")
        device = self._resolve_device()
        # A backend that cannot run this kernel on this device (sdpa with log,
        # fused on CUDA) fails here, before any training, not at the first batch.
        probe = torch.empty(0, device=device)  # the network trains in float32
        try:
            resolve_backend(self.attention_backend, kernel, probe)
        except ValueError as exc:
            raise ValueError(f"attention_backend={self.attention_backend!r} cannot run here: {exc}") from None
        return {"device": device}

    def _resolve_device(self):
        device = self.device
        if not isinstance(device, str) or not (device in ("auto", "cpu", "cuda") or device.startswith("cuda:")):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}.")
        if device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(
                f"device={device!r} was requested but CUDA is not available on this machine "
                f"(torch {torch.__version__}); use device='cpu' or device='auto'."
            )
        return device

    def _make_transform(self):
        transform = self.transform
        if transform is None:
            return None
        if isinstance(transform, str):
            if transform != "symlog":
                raise ValueError(f"transform must be None, 'symlog' or a transformer object, got {transform!r}.")
            return SymlogTransformer()
        if not all(hasattr(transform, method) for method in ("fit", "transform", "inverse_transform")):
            raise TypeError(
                "transform must be None, 'symlog' or a transformer with fit, transform and "
                f"inverse_transform methods, got {type(transform).__name__}."
            )
        return clone(transform)

    def _build_net(self, n_features_in, n_features_out, config, seed):
        loss_params = dict(self.loss_params or {})
        if self.loss == "sliced" and "generator" not in loss_params:
            # on the CPU whatever the device: a CUDA generator would not unpickle without CUDA
            loss_params["generator"] = torch.Generator().manual_seed(seed + 1)
        callbacks = [("stop_on_non_finite", _StopOnNonFinite())]
        # User callbacks run before early stopping so they also see the last epoch.
        for index, callback in enumerate(self.callbacks or []):
            callbacks.append(callback if isinstance(callback, tuple) else (f"user_callback_{index}", callback))
        if self.early_stopping:
            callbacks.append(
                ("early_stopping", EarlyStopping(monitor="valid_loss", patience=self.patience, load_best=True))
            )
        if self.verbose:
            callbacks.append(("progress_bar", ProgressBar()))
        train_split = (
            ValidSplit(self.validation_fraction, stratified=False, random_state=seed) if self.early_stopping else None
        )
        net = _MeasureNet(
            MeasureTransformer,
            module__n_features_in=n_features_in,
            module__n_features_out=n_features_out,
            module__d_model=self.d_model,
            module__n_heads=self.n_heads,
            module__n_layers=self.n_layers,
            module__dim_feedforward=self.dim_feedforward,
            module__dropout=self.dropout,
            module__kernel=self.kernel,
            module__kernel_params=self.kernel_params,
            module__norm_first=self.norm == "pre",
            module__attention_backend=self.attention_backend,
            # Private generators for weights, dropout, shuffling and loss
            # projections: torch's global generator is shared by every thread.
            module__random_state=seed,
            criterion=MeasureLoss,
            criterion__name=self.loss,
            **{f"criterion__{key}": value for key, value in loss_params.items()},
            optimizer=torch.optim.AdamW,
            lr=self.lr,
            optimizer__weight_decay=self.weight_decay,
            batch_size=self.batch_size,
            max_epochs=self.max_epochs,
            train_split=train_split,
            iterator_train__shuffle=True,
            callbacks=callbacks,
            device=config["device"],
            verbose=self.verbose,
        )
        net.loader_seed = seed
        return net


def _as_batch(X, x_weights, y_weights):
    """The dict of float32 arrays that skorch slices into batches."""
    batch = {"X": X.astype(np.float32)}
    if x_weights is not None:
        batch["weights"] = x_weights.astype(np.float32)
    if y_weights is not None:
        batch["y_weights"] = y_weights.astype(np.float32)
    return batch


def _fit_transform_points(transformer, X, weights):
    """Fit ``transformer`` on the real (positive-weight) points of ``X``; transform all."""
    if transformer is None:
        return X
    points = X.reshape(-1, X.shape[-1]) if weights is None else X[weights > 0]
    transformer.fit(points)
    return _transform_points(transformer, X, "transform")


def _transform_points(transformer, X, method):
    if transformer is None:
        return X
    flat = getattr(transformer, method)(X.reshape(-1, X.shape[-1]))
    return np.asarray(flat, dtype=np.float64).reshape(*X.shape[:2], -1)
