"""The measure transformer: pointwise embedding, kernel-attention blocks, pointwise head."""

from __future__ import annotations

import contextlib
import math
from numbers import Integral, Real

import torch
from torch import nn

from ._param_validation import validate_parameter_constraints
from ._validation import POSITIVE_INT, Choices, Described, NumberInterval
from .attention import BACKENDS, log_point_weights, resolve_backend, run_attention
from .kernels import LEARNED_DEGREE_INITIAL, get_kernel, learned_degree, learned_degree_raw, poly_at_degree

__all__ = ["KernelMultiheadAttention", "MeasureTransformer"]

_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "tanh": nn.Tanh}

# The kernel and its parameters are checked by get_kernel; that n_heads divides d_model, in the body.
_ATTENTION_CONSTRAINTS = {"d_model": [POSITIVE_INT], "n_heads": [POSITIVE_INT], "backend": [Choices(BACKENDS)]}
_TRANSFORMER_CONSTRAINTS = {
    "n_features_in": [POSITIVE_INT],
    "n_features_out": [POSITIVE_INT],
    "d_model": [POSITIVE_INT],
    "n_heads": [POSITIVE_INT],
    "n_layers": [NumberInterval(Integral, 0, None, closed="left")],
    "dim_feedforward": [POSITIVE_INT],
    "dropout": [NumberInterval(Real, 0, 1, closed="left")],
    "activation": [Choices(tuple(_ACTIVATIONS))],
    "attention_backend": [Choices(BACKENDS)],
    "residual": ["boolean"],
    "random_state": [
        None,
        Described(NumberInterval(Integral, 0, None, closed="left"), "a non-negative int seed"),
        Described(torch.Generator, "a torch.Generator"),
    ],
}


class KernelMultiheadAttention(nn.Module):
    """Multi-head self-attention of a measure with an arbitrary attention kernel.

    Each head computes ``softmax(g(Q K^T / sqrt(d_head)) + log w) V``, the
    integral of the values against the (weighted) input measure with kernel
    ``kappa = exp(g)``.

    Parameters
    ----------
    d_model : int
        Width of the point features.
    n_heads : int
        Number of heads; must divide ``d_model``.
    kernel : str, callable or AttentionKernel, default="log"
        The attention kernel (see :func:`sklearn_measattn.kernels.get_kernel`).
    kernel_params : dict, optional
        Parameters of the kernel, e.g. ``{"degree": 2}`` for ``"poly"``.
        ``{"degree": "learn"}`` with ``"poly"`` makes the degree a parameter of
        this layer, one per head, trained with the network: ``degree = 0.001 +
        softplus(degree_raw)`` (positive for every value of the parameter,
        capped at 1000), starting at 1 in every head. It runs on the
        ``"chunked"`` backend's query blocks with autograd and recomputation
        in backward (memory O(N * chunk); on one CPU thread at N = 1024 about
        1.2-1.7 times the chunked backend with a fixed degree and 3-4 times the
        fused kernels), since the fused kernels give no gradient for a kernel's
        parameters; on CUDA ``"auto"`` runs FlexAttention, whose backward
        gives the degrees' gradient through the tensor its ``score_mod``
        captures.
    backend : str, default="auto"
        Attention backend, see :func:`sklearn_measattn.attention.kernel_attention`.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.transformer import KernelMultiheadAttention
    >>> attention = KernelMultiheadAttention(16, 4, kernel="sigmoid")
    >>> attention(torch.randn(3, 10, 16)).shape
    torch.Size([3, 10, 16])
    >>> learnt = KernelMultiheadAttention(16, 4, kernel="poly", kernel_params={"degree": "learn"})
    >>> learnt.degree().detach().round(decimals=3)  # one positive degree per head, trained with the network
    tensor([1., 1., 1., 1.])
    """

    def __init__(self, d_model, n_heads, *, kernel="log", kernel_params=None, backend="auto"):
        super().__init__()
        validate_parameter_constraints(
            _ATTENTION_CONSTRAINTS, {"d_model": d_model, "n_heads": n_heads, "backend": backend},
            caller_name=type(self).__name__,
        )
        d_model, n_heads = int(d_model), int(n_heads)
        if d_model % n_heads:
            raise ValueError(
                f"n_heads={n_heads} must divide d_model={d_model}; pick e.g. "
                f"n_heads in {[h for h in range(1, d_model + 1) if d_model % h == 0][:8]}."
            )
        self._kernel = get_kernel(kernel, **(kernel_params or {}))
        self.n_heads = n_heads
        self.backend = backend
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        if self._kernel.learns_degree:
            self.degree_raw = nn.Parameter(torch.full((n_heads,), learned_degree_raw(LEARNED_DEGREE_INITIAL)))
        self._resolved_backends = {}

    @property
    def kernel(self):
        """The attention kernel; for a learnt degree, the poly kernel at the current degrees.

        A learnt kernel is rebuilt at each access from the detached degrees,
        shape ``(n_heads, 1, 1)`` on the CPU, so that its ``log_weight``
        applies per head to ``(batch, n_heads, n_queries, n_keys)`` scores.
        """
        if not self._kernel.learns_degree or "degree_raw" not in self._parameters:
            return self._kernel
        return poly_at_degree(self._kernel, self.degree().detach().cpu()[:, None, None])

    @kernel.setter
    def kernel(self, kernel):
        self._kernel = kernel

    def degree(self):
        """The learnt degree of each head, or ``None`` when the kernel's degree is fixed.

        Returns
        -------
        torch.Tensor of shape (n_heads,) or None
            ``0.001 + softplus(degree_raw)``, capped at 1000; differentiable.
        """
        if "degree_raw" not in self._parameters:
            return None
        return learned_degree(self.degree_raw)

    def reset_kernel_parameters(self):
        """Set the learnt degrees (if any) back to their initial value, 1 in every head.

        Returns
        -------
        self : KernelMultiheadAttention
        """
        if "degree_raw" in self._parameters:
            with torch.no_grad():
                self.degree_raw.fill_(learned_degree_raw(LEARNED_DEGREE_INITIAL))
        return self

    def forward(self, x, log_weights=None, *, n_keys=None):
        """Attend from every point of ``x`` (batch, n_points, d_model) to all points.

        ``log_weights`` (batch, n_keys) are the logs of the point weights
        (``-inf`` for absent points), or ``None`` for uniform measures. With
        ``n_keys``, only the first ``n_keys`` points of ``x`` are the measure
        (keys and values); the others are query points that attend to it
        without being attended to.
        """
        batch, n_points, d_model = x.shape
        q, k, v = self._project(x)
        if n_keys is not None:
            k, v = k[:, :, :n_keys], v[:, :, :n_keys]
        backend = self.resolve_backend(device=x.device, dtype=x.dtype)
        kernel = self._kernel
        if "degree_raw" in self._parameters:  # the learnt degrees, live: the gradient reaches them
            kernel = poly_at_degree(kernel, self.degree().to(q.dtype)[:, None, None])
        out = run_attention(q, k, v, kernel, log_weights, backend, auto=self.backend == "auto")
        return self.out_proj(out.transpose(1, 2).reshape(batch, n_points, d_model))

    def resolve_backend(self, *, device, dtype=torch.float32):
        """The attention backend this layer runs for inputs on ``device`` in ``dtype``.

        Resolved once per (backend, kernel, device, dtype) and remembered, so
        that ``"auto"`` decides (and, for the fused CPU kernels, compiles or
        loads them) at the first call rather than inside every forward.

        Parameters
        ----------
        device : str or torch.device
            Device of the inputs.
        dtype : torch.dtype, default=torch.float32
            Floating-point type of the inputs.

        Returns
        -------
        str
            One of ``"sdpa"``, ``"flex"``, ``"fused"``, ``"chunked"``, ``"naive"``.
        """
        device = torch.device(device)
        key = (self.backend, str(device), str(dtype))  # plain strings: torch.compile guards on this dict
        kernel, backend = self._resolved_backends.get(key, (None, None))
        if kernel is not self._kernel:
            backend = resolve_backend(self.backend, self._kernel, torch.empty(0, device=device, dtype=dtype))
            self._resolved_backends[key] = (self._kernel, backend)
        return backend

    def __getstate__(self):
        # Which backends can run depends on the machine (a compiler for the fused
        # kernels, CUDA for flex): a pickled module decides again where it is loaded.
        state = super().__getstate__().copy()
        state["_resolved_backends"] = {}
        return state


    def _project(self, x):
        batch, n_points, d_model = x.shape
        qkv = self.in_proj(x).view(batch, n_points, 3, self.n_heads, d_model // self.n_heads)
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)

    def queries_keys(self, x):
        """Per-head queries and keys of ``x``.

        With :func:`~sklearn_measattn.kernels.get_kernel`'s ``log_weight`` they
        give this layer's attention weights ``softmax(g(q k^T / sqrt(d_head)) + log w)``.

        Parameters
        ----------
        x : torch.Tensor of shape (batch, n_points, d_model)
            Point features entering this layer.

        Returns
        -------
        q, k : torch.Tensor of shape (batch, n_heads, n_points, d_head)
            Queries and keys of every head.
        """
        q, k, _ = self._project(x)
        return q, k


class _Dropout(nn.Dropout):
    """``nn.Dropout`` drawing its masks from ``generator`` when one is set.

    ``nn.Dropout`` draws from torch's process-global generator, which other
    threads share; a private generator keeps a seeded fit reproducible while
    they draw from it.
    """

    generator = None

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        if self.generator is None:
            return super().forward(x)
        if self.generator.device != x.device:
            seed = int(torch.randint(2**62, (1,), generator=self.generator))
            self.generator = torch.Generator(device=x.device).manual_seed(seed)
        keep = torch.empty_like(x).bernoulli_(1.0 - self.p, generator=self.generator)
        return x * keep / (1.0 - self.p)

    def __getstate__(self):
        state = super().__getstate__()
        if self.generator is not None and self.generator.device.type != "cpu":
            state["generator"] = None  # a CUDA generator would not unpickle without CUDA
        return state


def _as_generator(random_state):
    """A private ``torch.Generator`` from a checked int seed or a generator."""
    if isinstance(random_state, torch.Generator):
        return random_state
    return torch.Generator().manual_seed(int(random_state))


class _KernelTransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, dim_feedforward, dropout, activation, norm_first, kernel, kernel_params, backend):
        super().__init__()
        self.attention = KernelMultiheadAttention(
            d_model, n_heads, kernel=kernel, kernel_params=kernel_params, backend=backend
        )
        self.feedforward = nn.Sequential(
            nn.Linear(d_model, dim_feedforward),
            _ACTIVATIONS[activation](),
            _Dropout(dropout),
            nn.Linear(dim_feedforward, d_model),
        )
        self.norm_attention = nn.LayerNorm(d_model)
        self.norm_feedforward = nn.LayerNorm(d_model)
        self.dropout_attention = _Dropout(dropout)
        self.dropout_feedforward = _Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, log_weights, n_keys=None):
        if self.norm_first:
            x = x + self.dropout_attention(self.attention(self.norm_attention(x), log_weights, n_keys=n_keys))
            return x + self.dropout_feedforward(self.feedforward(self.norm_feedforward(x)))
        x = self.norm_attention(x + self.dropout_attention(self.attention(x, log_weights, n_keys=n_keys)))
        return self.norm_feedforward(x + self.dropout_feedforward(self.feedforward(x)))


class MeasureTransformer(nn.Module):
    """Post-norm transformer mapping an input measure to an output measure.

    Every point is embedded by the same linear map, passes through ``n_layers``
    blocks of kernel self-attention and a feed-forward network (each followed by
    a residual connection and LayerNorm: ``norm_first=False``, the post-norm
    transformer; ``norm_first=True`` gives the pre-norm variant for ablations),
    and is mapped to an output point by a shared linear head. The map is
    permutation equivariant and accepts any number of points. With
    ``residual=True`` the head gives a displacement: each output point is its
    input point's first ``n_features_out`` features plus the head's output,
    and the head starts at zero, so that the untrained map is the identity
    (for maps that move points a little, such as a Bayesian update by an
    observation that carries little information).

    Parameters
    ----------
    n_features_in : int
        Features per input point.
    n_features_out : int
        Features per output point.
    d_model : int, default=64
        Width of the hidden point features.
    n_heads : int, default=4
        Attention heads; must divide ``d_model``.
    n_layers : int, default=2
        Number of transformer blocks.
    dim_feedforward : int, default=128
        Hidden width of each feed-forward network.
    dropout : float, default=0.0
        Dropout on the residual branches and inside the feed-forward networks.
    kernel : str, callable or AttentionKernel, default="log"
        The attention kernel (see :func:`sklearn_measattn.kernels.get_kernel`).
    kernel_params : dict, optional
        Parameters of the kernel, e.g. ``{"degree": 2}`` for ``"poly"``;
        ``{"degree": "learn"}`` learns one degree per block and head (see
        :class:`KernelMultiheadAttention`).
    norm_first : bool, default=False
        Pre-norm blocks instead of the post-norm default.
    activation : {"gelu", "relu", "tanh"}, default="gelu"
        Activation of the feed-forward networks.
    attention_backend : str, default="auto"
        See :func:`sklearn_measattn.attention.kernel_attention`.
    residual : bool, default=False
        Output each point's first ``n_features_out`` input features plus
        the head's output (a displacement), with the head initialised at
        zero; needs ``n_features_out <= n_features_in``.
    random_state : None, int or torch.Generator, default=None
        Source of the initial weights and of the dropout masks. ``None`` draws
        from torch's global generator, like any ``nn.Module``; a seed or a
        generator makes the module reproducible without reading or changing
        the global generator (so that concurrent threads cannot perturb it).

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.transformer import MeasureTransformer
    >>> model = MeasureTransformer(2, 3, d_model=16, n_heads=2, n_layers=1, kernel="poly")
    >>> X = torch.randn(4, 50, 2)
    >>> model(X).shape
    torch.Size([4, 50, 3])
    >>> weights = torch.ones(4, 50)
    >>> weights[:, 40:] = 0.0  # the last ten points of each measure are absent
    >>> model(X, weights).shape
    torch.Size([4, 50, 3])
    """

    def __init__(
        self,
        n_features_in,
        n_features_out,
        *,
        d_model=64,
        n_heads=4,
        n_layers=2,
        dim_feedforward=128,
        dropout=0.0,
        kernel="log",
        kernel_params=None,
        norm_first=False,
        activation="gelu",
        attention_backend="auto",
        residual=False,
        random_state=None,
    ):
        super().__init__()
        validate_parameter_constraints(
            _TRANSFORMER_CONSTRAINTS,
            {
                "random_state": random_state, "n_features_in": n_features_in, "n_features_out": n_features_out,
                "d_model": d_model, "n_heads": n_heads, "n_layers": n_layers, "dim_feedforward": dim_feedforward,
                "dropout": dropout, "activation": activation, "attention_backend": attention_backend,
                "residual": residual,
            },
            caller_name=type(self).__name__,
        )
        if residual and n_features_out > n_features_in:
            raise ValueError(
                f"residual=True adds the head's output to the first n_features_out={n_features_out} input "
                f"features, but a point has only n_features_in={n_features_in}; use residual=False."
            )
        self.residual = bool(residual)
        generator = None if random_state is None else _as_generator(random_state)
        n_features_in, n_features_out, d_model, n_layers, dim_feedforward = (
            int(size) for size in (n_features_in, n_features_out, d_model, n_layers, dim_feedforward)
        )
        dropout = float(dropout)
        # Seeded modules are built without drawing from the global generator
        # (on the meta device, allocated afterwards) and initialised from theirs.
        with torch.device("meta") if generator is not None else contextlib.nullcontext():
            self.embedding = nn.Linear(n_features_in, d_model)
            self.blocks = nn.ModuleList(
                _KernelTransformerBlock(
                    d_model, n_heads, dim_feedforward, dropout, activation, bool(norm_first),
                    kernel, kernel_params, attention_backend,
                )
                for _ in range(n_layers)
            )
            self.final_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
            self.head = nn.Linear(d_model, n_features_out)
        if generator is not None:
            self.to_empty(device="cpu")
            self.reset_parameters(generator=generator)
        elif self.residual:
            self._zero_head()

    def _zero_head(self):
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def reset_parameters(self, *, generator=None):
        """Draw fresh initial weights, PyTorch's defaults, from ``generator``.

        Linear layers get ``nn.Linear``'s initialisation (Kaiming-uniform
        weights, uniform biases in ``+-1/sqrt(fan_in)``; the head zeros with
        ``residual=True``), LayerNorms ones and zeros. With a ``generator``, the dropout masks are drawn from it too.

        Parameters
        ----------
        generator : torch.Generator, optional
            Source of the random numbers; ``None`` uses torch's global generator.

        Returns
        -------
        self : MeasureTransformer
        """
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                if module.bias is not None:
                    bound = 1.0 / math.sqrt(module.in_features) if module.in_features > 0 else 0.0
                    nn.init.uniform_(module.bias, -bound, bound, generator=generator)
            elif isinstance(module, nn.LayerNorm):
                module.reset_parameters()
            elif isinstance(module, _Dropout):
                module.generator = generator
            elif isinstance(module, KernelMultiheadAttention):
                module.reset_kernel_parameters()
            elif next(module.parameters(recurse=False), None) is not None:
                raise RuntimeError(f"reset_parameters has no initialisation for {type(module).__name__}.")
        if self.residual:
            self._zero_head()
        return self

    def resolve_attention_backends(self, *, device="cpu", dtype=torch.float32):
        """Decide each block's attention backend now, for inputs on ``device``.

        The forward pass does this at its first call for each device and dtype
        and remembers the answer; calling this first (for example when training
        starts) moves that decision, and the first-use build of the fused CPU
        kernels that ``"auto"`` may trigger, out of the first training step.

        Parameters
        ----------
        device : str or torch.device, default="cpu"
            Device of the inputs.
        dtype : torch.dtype, default=torch.float32
            Floating-point type of the inputs.

        Returns
        -------
        list of str
            The backend of each block, in order.

        Examples
        --------
        >>> import torch
        >>> from sklearn_measattn.transformer import MeasureTransformer
        >>> model = MeasureTransformer(2, 2, d_model=8, n_heads=2, n_layers=2, kernel="softmax")
        >>> model.resolve_attention_backends(device="cpu")
        ['sdpa', 'sdpa']
        """
        return [block.attention.resolve_backend(device=device, dtype=dtype) for block in self.blocks]

    def attention_inputs(self, X, weights=None, *, layer=0):
        """What the attention of block ``layer`` sees: per-head queries, keys, log weights.

        Runs the embedding and the blocks before ``layer`` (and, for pre-norm
        blocks, the block's input LayerNorm), so that the attention weights of
        that block are ``softmax(g(q k^T / sqrt(d_head)) + log w)``.

        Parameters
        ----------
        X : torch.Tensor of shape (batch, n_points, n_features_in)
            Measures.
        weights : torch.Tensor of shape (batch, n_points), optional
            Point weights (zero = absent).
        layer : int, default=0
            Index of the block, ``0 <= layer < n_layers``.

        Returns
        -------
        q, k : torch.Tensor of shape (batch, n_heads, n_points, d_head)
        log_weights : torch.Tensor of shape (batch, n_points) or None
        """
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(self.blocks):
            raise ValueError(f"layer must be an integer in [0, {len(self.blocks)}), got {layer!r}.")
        log_weights = self._log_weights(X, weights)
        hidden = self.embedding(X)
        for block in self.blocks[:layer]:
            hidden = block(hidden, log_weights)
        block = self.blocks[layer]
        if block.norm_first:
            hidden = block.norm_attention(hidden)
        q, k = block.attention.queries_keys(hidden)
        return q, k, log_weights

    def _log_weights(self, X, weights):
        if X.ndim != 3:
            raise ValueError(f"X must be 3-D (batch, n_points, n_features), got shape {tuple(X.shape)}.")
        if weights is None:
            return None
        if tuple(weights.shape) != tuple(X.shape[:2]):
            raise ValueError(f"weights must have shape {tuple(X.shape[:2])}, got {tuple(weights.shape)}.")
        return log_point_weights(weights.to(X.dtype))

    def hidden_states(self, X, weights=None):
        """The hidden point features after the embedding and after every block.

        Parameters
        ----------
        X : torch.Tensor of shape (batch, n_points, n_features_in)
            Measures.
        weights : torch.Tensor of shape (batch, n_points), optional
            Point weights (zero = absent); ``None`` means uniform.

        Returns
        -------
        list of torch.Tensor of shape (batch, n_points, d_model)
            ``n_layers + 1`` tensors: the embedding, then the output of each
            block (the residual stream, before the pre-norm variant's final
            LayerNorm).

        Examples
        --------
        >>> import torch
        >>> from sklearn_measattn.transformer import MeasureTransformer
        >>> model = MeasureTransformer(2, 2, d_model=8, n_heads=2, n_layers=3, random_state=0)
        >>> [tuple(h.shape) for h in model.hidden_states(torch.randn(4, 10, 2))]
        [(4, 10, 8), (4, 10, 8), (4, 10, 8), (4, 10, 8)]
        """
        log_weights = self._log_weights(X, weights)
        hidden = self.embedding(X)
        states = [hidden]
        for block in self.blocks:
            hidden = block(hidden, log_weights)
            states.append(hidden)
        return states

    def forward(self, X, weights=None):
        """Map measures ``X`` (batch, n_points, n_features_in) to (batch, n_points, n_features_out).

        ``weights`` (batch, n_points) are nonnegative point weights (zero = the
        point is absent, e.g. padding of ragged measures); ``None`` means uniform.
        Absent points still get an output, which the caller should ignore.
        """
        log_weights = self._log_weights(X, weights)
        hidden = self.embedding(X)
        for block in self.blocks:
            hidden = block(hidden, log_weights)
        return self._output(X, hidden)

    def _output(self, points, hidden):
        out = self.head(self.final_norm(hidden))
        return points[..., : out.shape[-1]] + out if self.residual else out

    def transport(self, X, Z, weights=None):
        """The images of query points ``Z`` under the map that measures ``X`` define.

        Every point of ``Z`` goes through the same blocks as the points of
        ``X``, attending at every layer to the measure ``X`` (weighted by
        ``weights``) while ``X`` attends only to itself: the query points are
        not keys, so they do not change the measure nor each other's images.
        ``transport(X, X)`` equals ``forward(X)`` up to rounding. Memory grows
        linearly in ``n_points + n_queries`` on the chunked and fused backends.

        Parameters
        ----------
        X : torch.Tensor of shape (batch, n_points, n_features_in)
            The measures (the context).
        Z : torch.Tensor of shape (batch, n_queries, n_features_in)
            Query points, one set per measure.
        weights : torch.Tensor of shape (batch, n_points), optional
            Point weights of ``X`` (zero = absent); ``None`` means uniform.

        Returns
        -------
        torch.Tensor of shape (batch, n_queries, n_features_out)
            The image of every query point.

        Examples
        --------
        >>> import torch
        >>> from sklearn_measattn.transformer import MeasureTransformer
        >>> model = MeasureTransformer(2, 2, d_model=8, n_heads=2, n_layers=2, random_state=0)
        >>> X, Z = torch.randn(3, 20, 2), torch.randn(3, 100, 2)
        >>> model.transport(X, Z).shape
        torch.Size([3, 100, 2])
        >>> bool(torch.allclose(model.transport(X, X), model(X), atol=1e-5))
        True
        """
        log_weights = self._log_weights(X, weights)
        if Z.ndim != 3 or Z.shape[0] != X.shape[0] or Z.shape[2] != X.shape[2]:
            raise ValueError(
                f"Z must be 3-D (batch, n_queries, n_features) with X's batch and features "
                f"{(X.shape[0], X.shape[2])}, got shape {tuple(Z.shape)}."
            )
        n_keys = X.shape[1]
        hidden = self.embedding(torch.cat([X, Z], dim=1))
        for block in self.blocks:
            hidden = block(hidden, log_weights, n_keys)
        return self._output(Z, hidden[:, n_keys:])
