// Pairwise distance moments of point clouds on CPU, for the energy distance.
//
// For a batch of clouds x (B, N, d), y (B, M, d) and weights w (B, M), one pass
// over the pairs computes, per point x_i,
//     row_i  = sum_j w_j |x_i - y_j|^beta
//     grad_i = sum_j w_j beta |x_i - y_j|^(beta - 2) (x_i - y_j)   (= d row_i / d x_i)
// without ever holding an N x M array: y is read in tiles of kTile points laid
// out feature by feature (y transposed to (B, d, M)), so the loops over a tile
// vectorise across points. Coincident points add 0 to both (the gradient of
// |x - y|^beta at 0 is taken as 0, its subgradient). A NaN or infinite
// coordinate reaches the row sum (as in the dense formula); it adds nothing to
// the gradient.
//
// beta = 1 (the usual energy distance) costs one square root and one division
// per pair; other exponents one power per pair and are slower.
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

constexpr int64_t kTile = 256;

template <typename T, bool UnitBeta>
void moment_rows(const T* x, const T* y_t, const T* w, T* rows, T* grad, int64_t n, int64_t m,
                 int64_t d, T beta, int64_t batch) {
  const bool want_grad = grad != nullptr;
  const T half_beta = beta / T(2);
  at::parallel_for(0, batch * n, 16, [&](int64_t begin, int64_t end) {
    alignas(64) T sq[kTile];
    alignas(64) T coef[kTile];
    std::vector<double> grad_acc(d);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / n;
      const T* xi = x + row * d;
      const T* yb = y_t + b * d * m;
      const T* wb = w + b * m;
      double total = 0.0;
      std::fill(grad_acc.begin(), grad_acc.end(), 0.0);
      for (int64_t j0 = 0; j0 < m; j0 += kTile) {
        const int64_t len = std::min(kTile, m - j0);
        const T* wt = wb + j0;
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) sq[j] = T(0);
        for (int64_t k = 0; k < d; ++k) {
          const T xk = xi[k];
          const T* yk = yb + k * m + j0;
#pragma omp simd
          for (int64_t j = 0; j < len; ++j) {
            const T diff = xk - yk[j];
            sq[j] += diff * diff;
          }
        }
        T tile_sum = T(0);
        if constexpr (UnitBeta) {
#pragma omp simd reduction(+ : tile_sum)
          for (int64_t j = 0; j < len; ++j) {
            const T r = std::sqrt(sq[j]);
            tile_sum += wt[j] * r;
            coef[j] = sq[j] > T(0) ? wt[j] / r : T(0);
          }
        } else {
          for (int64_t j = 0; j < len; ++j) {
            const T power = std::pow(sq[j], half_beta);  // pow(0, beta / 2) = 0, NaN stays NaN
            tile_sum += wt[j] * power;
            coef[j] = sq[j] > T(0) && std::isfinite(sq[j]) ? wt[j] * beta * power / sq[j] : T(0);
          }
        }
        total += static_cast<double>(tile_sum);
        if (!want_grad) continue;
        for (int64_t k = 0; k < d; ++k) {
          const T xk = xi[k];
          const T* yk = yb + k * m + j0;
          T acc = T(0);
#pragma omp simd reduction(+ : acc)
          for (int64_t j = 0; j < len; ++j) acc += coef[j] * (xk - yk[j]);
          grad_acc[k] += static_cast<double>(acc);
        }
      }
      rows[row] = static_cast<T>(total);
      if (want_grad) {
        for (int64_t k = 0; k < d; ++k) grad[row * d + k] = static_cast<T>(grad_acc[k]);
      }
    }
  });
}

void check_moment_inputs(const at::Tensor& x, const at::Tensor& y_t, const at::Tensor& w) {
  TORCH_CHECK(x.dim() == 3 && y_t.dim() == 3 && w.dim() == 2,
              "measattn energy moment: x (B, N, d), y_t (B, d, M) and w (B, M) expected");
  TORCH_CHECK(x.scalar_type() == y_t.scalar_type() && x.scalar_type() == w.scalar_type(),
              "measattn energy moment: x, y_t and w must share a dtype");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "measattn energy moment: float32 or float64 expected");
  TORCH_CHECK(x.is_contiguous() && y_t.is_contiguous() && w.is_contiguous(),
              "measattn energy moment: contiguous tensors expected");
  TORCH_CHECK(y_t.size(0) == x.size(0) && w.size(0) == x.size(0) && y_t.size(1) == x.size(2) &&
                  w.size(1) == y_t.size(2),
              "measattn energy moment: shapes do not match");
}

template <typename T>
void run_moment(const at::Tensor& x, const at::Tensor& y_t, const at::Tensor& w, at::Tensor& rows,
                at::Tensor& grad, double beta, bool want_grad) {
  const int64_t batch = x.size(0), n = x.size(1), d = x.size(2), m = y_t.size(2);
  T* grad_ptr = want_grad ? grad.data_ptr<T>() : nullptr;
  if (beta == 1.0) {
    moment_rows<T, true>(x.data_ptr<T>(), y_t.data_ptr<T>(), w.data_ptr<T>(), rows.data_ptr<T>(),
                         grad_ptr, n, m, d, T(1), batch);
  } else {
    moment_rows<T, false>(x.data_ptr<T>(), y_t.data_ptr<T>(), w.data_ptr<T>(), rows.data_ptr<T>(),
                          grad_ptr, n, m, d, static_cast<T>(beta), batch);
  }
}

std::tuple<at::Tensor, at::Tensor> energy_moment(const at::Tensor& x, const at::Tensor& y_t,
                                                 const at::Tensor& w, double beta,
                                                 bool want_grad) {
  check_moment_inputs(x, y_t, w);
  const int64_t batch = x.size(0), n = x.size(1), d = x.size(2);
  at::Tensor rows = at::empty({batch, n}, x.options());
  at::Tensor grad = want_grad ? at::empty({batch, n, d}, x.options()) : at::empty({0}, x.options());
  if (x.scalar_type() == at::kDouble) {
    run_moment<double>(x, y_t, w, rows, grad, beta, want_grad);
  } else {
    run_moment<float>(x, y_t, w, rows, grad, beta, want_grad);
  }
  return {rows, grad};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(measattn_fused, m) {
  m.def("energy_moment(Tensor x, Tensor y_t, Tensor w, float beta, bool want_grad) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(measattn_fused, CPU, m) { m.impl("energy_moment", &energy_moment); }
