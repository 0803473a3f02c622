"""Closed forms of attention kernels that need one ``exp`` per score.

The chunked and fused attention backends compute ``kappa`` through these
factorisations; :mod:`sklearn_measattn.kernels` attaches one to each built-in
kernel that has it.
"""

from __future__ import annotations

import torch

__all__ = ["KappaFactorization"]


class KappaFactorization:
    """Closed forms that let attention compute ``kappa`` with one ``exp`` per score.

    A kernel with a factorisation writes

        kappa(s)  = exp(min(s, 0)) * phi(s),
        kappa'(s) = exp(min(s, 0)) * psi(s),

    with ``phi`` bounded below by a positive constant and neither factor
    overflowing for ``|s| <= 1e4``. The chunked backend then takes the
    exponential part through a (fused, vectorised) softmax of ``min(s, 0) + log w``
    and multiplies by ``phi``, instead of evaluating ``exp(g(s) - lse)`` with
    ``g = log kappa``: this saves one or two transcendental functions per score,
    and ``psi`` replaces the autograd derivative of ``g`` in backward
    (``kappa'/kappa = psi/phi = g'``).

    Subclasses implement the in-place methods :meth:`phi_` and :meth:`phi_psi_`,
    which may overwrite their argument (a scratch buffer of scores); the
    out-of-place :meth:`phi`, :meth:`psi` and :meth:`derivative` are for tests and
    documentation.

    Examples
    --------
    >>> import torch
    >>> from sklearn_measattn.kernels import get_kernel
    >>> factorization = get_kernel("poly").factorization  # kappa(s) = 1 + s for s >= 0
    >>> s = torch.tensor([-1.0, 0.0, 3.0])
    >>> factorization.phi(s)
    tensor([1., 1., 4.])
    >>> bool(torch.allclose(torch.exp(torch.clamp(s, max=0)) * factorization.phi(s), get_kernel("poly").kappa(s)))
    True
    """

    def phi_(self, s):
        """Return ``phi(s)``, possibly overwriting ``s`` (in place, for speed).

        Parameters
        ----------
        s : torch.Tensor
            Attention scores; may be overwritten.

        Returns
        -------
        phi : torch.Tensor
            ``phi(s)``, of the shape of ``s``.
        """
        raise NotImplementedError

    def phi_psi_(self, s):
        """Return ``(phi(s), psi(s))``, possibly overwriting ``s`` (in place, for speed).

        Parameters
        ----------
        s : torch.Tensor
            Attention scores; may be overwritten.

        Returns
        -------
        phi : torch.Tensor
            ``phi(s)``.
        psi : torch.Tensor or None
            ``psi(s)``; ``None`` means ``psi == 1`` (no multiplication needed).
        """
        raise NotImplementedError

    def phi(self, s):
        """Return ``phi(s)``, leaving ``s`` unchanged.

        Parameters
        ----------
        s : torch.Tensor
            Attention scores.

        Returns
        -------
        phi : torch.Tensor
            ``phi(s) = kappa(s) / exp(min(s, 0))``.
        """
        return self.phi_(s.clone())

    def psi(self, s):
        """Return ``psi(s)``, leaving ``s`` unchanged.

        Parameters
        ----------
        s : torch.Tensor
            Attention scores.

        Returns
        -------
        psi : torch.Tensor
            ``psi(s) = kappa'(s) / exp(min(s, 0))``.
        """
        psi = self.phi_psi_(s.clone())[1]
        return torch.ones_like(s) if psi is None else psi

    def derivative(self, s):
        """Return ``g'(s) = psi(s) / phi(s)``, the slope of the log-weight.

        Parameters
        ----------
        s : torch.Tensor
            Attention scores.

        Returns
        -------
        slope : torch.Tensor
            ``g'(s)``, of the shape of ``s``.
        """
        phi, psi = self.phi_psi_(s.clone())
        return phi.reciprocal() if psi is None else psi / phi

    def __repr__(self):
        return f"{type(self).__name__}()"


class _PolyFactorization(KappaFactorization):
    """``phi = (1 + r/p)^p``, ``psi = (1 + r/p)^(p-1)``, ``r = max(s, 0)``, for an
    integer degree ``p`` in 1..4 (products only; no overflow at ``s = 1e4``)."""

    def __init__(self, degree):
        self.degree = int(degree)

    def phi_(self, s):
        base = s.relu_()
        if self.degree == 1:
            return base.add_(1.0)
        base.mul_(1.0 / self.degree).add_(1.0)
        return base.pow_(self.degree)

    def phi_psi_(self, s):
        base = s.relu_()
        if self.degree == 1:
            return base.add_(1.0), None
        base.mul_(1.0 / self.degree).add_(1.0)
        psi = base.pow(self.degree - 1) if self.degree > 2 else base.clone()
        return base.mul_(psi) if self.degree > 2 else base.square_(), psi

    def __repr__(self):
        return f"_PolyFactorization(degree={self.degree})"


class _LogFactorization(KappaFactorization):
    """``phi = 1 + log(1 + r)``, ``psi = 1 / (1 + r)``, ``r = max(s, 0)``.

    ``log(1 + r)`` rather than ``log1p``: ``phi >= 1``, so the absolute rounding of
    ``1 + r`` is a relative error of ``phi`` of the order of machine epsilon.
    """

    def phi_(self, s):
        return s.relu_().add_(1.0).log_().add_(1.0)

    def phi_psi_(self, s):
        one_plus_r = s.relu_().add_(1.0)
        psi = torch.reciprocal(one_plus_r)
        return one_plus_r.log_().add_(1.0), psi


class _SoftplusFactorization(KappaFactorization):
    """``t = exp(-|s|)``: ``phi = log1p(t) / t`` (``s < 0``) or ``s + log1p(t)``
    (``s >= 0``); ``psi = 1 / (1 + t)``. ``t`` is clamped at ``1e-20`` (where
    ``log1p(t)/t == 1`` and ``log1p(t) << s`` to working precision) so the
    unused branch of ``phi`` never divides by zero."""

    def phi_(self, s):
        return self._phi(s)[0]

    def phi_psi_(self, s):
        phi, t = self._phi(s)
        return phi, t.add_(1.0).reciprocal_()

    @staticmethod
    def _phi(s):
        negative = s < 0
        t = torch.abs(s).neg_().exp_().clamp_(min=1e-20)
        log1p_t = torch.log1p(t)
        phi = torch.where(negative, log1p_t / t, s.relu_().add_(log1p_t))
        return phi, t
