// Fused (flash-style) kernel attention on CPU, float32.
//
// One pass over query x key tiles that stay in cache: per tile, a BLAS gemm for
// the scores, the kernel's weights computed in vectorisable loops (one exp per
// score for the factorised kernels), and a gemm into the output; backward
// recomputes each tile. The row statistics are the running maximum of the
// exponent and the row sum, saved as L = m + log(l) per query, so
// P_ij = exp(x(s_ij) + log w_j - L_i) * phi(s_ij).
//
// Kernel kinds (see sklearn_measattn/kernels.py): each kernel is written as
//     kappa(s)  = exp(x(s)) * phi(s),   kappa'(s) = exp(x(s)) * psi(s),
// so P g'(s) = exp(x + log w - L) * psi(s) in backward.
#include <ATen/core/Tensor.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
                       const int* k, const float* alpha, const float* a, const int* lda,
                       const float* b, const int* ldb, const float* beta, float* c,
                       const int* ldc);

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Row-major C (M x N) = alpha * op(A) op(B) + beta * C, via column-major BLAS.
inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                 int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  const char ta = trans_a ? 'T' : 'N';
  const char tb = trans_b ? 'T' : 'N';
  sgemm_(&tb, &ta, &N, &M, &K, &alpha, B, &ldb, A, &lda, &beta, C, &ldc);
}

inline float bits_to_float(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline int32_t float_to_bits(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// exp(x), Cephes polynomial (about 1 ulp); exactly 0 below -87.33 (and for -inf),
// branch-free so loops over it vectorise. Inputs here are <= 0 or small.
inline float fast_exp(float x) {
  const float lo = -87.3365447504f, hi = 88.3762626647949f;
  float xc = x < lo ? lo : (x > hi ? hi : x);
  float n = __builtin_floorf(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float z = r * r;
  float y = 1.9875691500E-4f;
  y = y * r + 1.3981999507E-3f;
  y = y * r + 8.3334519073E-3f;
  y = y * r + 4.1665795894E-2f;
  y = y * r + 1.6666665459E-1f;
  y = y * r + 5.0000001201E-1f;
  y = y * z + r + 1.0f;
  float pow2n = bits_to_float((static_cast<int32_t>(n) + 127) << 23);
  return x < lo ? 0.0f : y * pow2n;
}

// log(x) for finite normal x > 0, Cephes polynomial (about 1 ulp), branch-free.
inline float fast_log(float x) {
  int32_t bits = float_to_bits(x);
  float e = static_cast<float>(((bits >> 23) & 0xff) - 126);
  float m = bits_to_float((bits & 0x807fffff) | 0x3f000000);  // x = m 2^e, m in [0.5, 1)
  bool small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  float z = m * m;
  float y = 7.0376836292E-2f;
  y = y * m - 1.1514610310E-1f;
  y = y * m + 1.1676998740E-1f;
  y = y * m - 1.2420140846E-1f;
  y = y * m + 1.4249322787E-1f;
  y = y * m - 1.6668057665E-1f;
  y = y * m + 2.0000714765E-1f;
  y = y * m - 2.4999993993E-1f;
  y = y * m + 3.3333331174E-1f;
  y = y * m * z;
  y = y - 2.12194440e-4f * e;
  y = y - 0.5f * z;
  return m + y + 0.693359375f * e;
}

// log(1 + t) for t >= 0, accurate for small t.
inline float fast_log1p(float t) {
  float u = 1.0f + t;
  float d = u - 1.0f;
  return d == 0.0f ? t : fast_log(u) * (t / d);
}

enum Kind : int64_t {
  kSoftmax = 0, kPolyInt = 1, kPolyReal = 2, kLog = 3, kSigmoid = 4, kSoftplus = 5
};

// Each kernel: exponent x(s), factor phi(s), and psi(s) with kappa' = exp(x) psi.
struct Softmax {
  float p;
  inline float x(float s) const { return s; }
  inline float phi(float) const { return 1.0f; }
  inline float psi(float) const { return 1.0f; }
};

template <int P>
struct PolyInt {  // (1 + r/p)^p for an integer degree p in 1..4
  float p;
  inline float base(float s) const { return 1.0f + (s > 0.0f ? s : 0.0f) * (1.0f / P); }
  inline float x(float s) const { return s < 0.0f ? s : 0.0f; }
  inline float psi(float s) const {
    if constexpr (P == 1) return 1.0f;
    float b = base(s);
    if constexpr (P == 2) return b;
    if constexpr (P == 3) return b * b;
    return b * b * b;
  }
  inline float phi(float s) const {
    if constexpr (P == 1) return base(s);
    return psi(s) * base(s);
  }
};

struct PolyReal {  // exp(p log1p(r/p)), all in the exponent
  float p;
  inline float x(float s) const {
    float r = s > 0.0f ? s : 0.0f;
    return (s - r) + p * fast_log1p(r / p);
  }
  inline float phi(float) const { return 1.0f; }
  inline float psi(float s) const { return 1.0f / (1.0f + (s > 0.0f ? s : 0.0f) / p); }
};

struct Log {  // 1 + log(1 + r)
  float p;
  inline float x(float s) const { return s < 0.0f ? s : 0.0f; }
  inline float phi(float s) const { return 1.0f + fast_log(1.0f + (s > 0.0f ? s : 0.0f)); }
  inline float psi(float s) const { return 1.0f / (1.0f + (s > 0.0f ? s : 0.0f)); }
};

struct Sigmoid {  // exp(min(s, 0)) / (1 + exp(-|s|))
  float p;
  inline float x(float s) const { return s < 0.0f ? s : 0.0f; }
  inline float phi(float s) const { return 1.0f / (1.0f + fast_exp(-std::fabs(s))); }
  inline float psi(float s) const {
    float t = fast_exp(-std::fabs(s));
    float u = 1.0f + t;
    return (s < 0.0f ? 1.0f : t) / (u * u);
  }
};

struct Softplus {  // log(1 + e^s)
  float p;
  inline float t(float s) const {
    float e = fast_exp(-std::fabs(s));
    return e < 1e-20f ? 1e-20f : e;
  }
  inline float x(float s) const { return s < 0.0f ? s : 0.0f; }
  inline float phi(float s) const {
    float tt = t(s);
    float l = fast_log1p(tt);
    return s < 0.0f ? l / tt : s + l;
  }
  inline float psi(float s) const { return 1.0f / (1.0f + t(s)); }
};

struct Shape {
  int64_t heads, n_q, n_k, d, dv;
};

template <typename K>
void forward_impl(const K& kern, const float* q, const float* k, const float* v, const float* lw,
                  float* out, float* lse, const Shape& sh, int64_t bh_count, float scale,
                  int64_t q_block, int64_t k_block) {
  const int64_t n_q_blocks = (sh.n_q + q_block - 1) / q_block;
  at::parallel_for(0, bh_count * n_q_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> score(q_block * k_block), acc(q_block * sh.dv), row_max(q_block),
        row_sum(q_block);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bh = task / n_q_blocks, qb = task % n_q_blocks;
      const int64_t q0 = qb * q_block, rows = std::min(q_block, sh.n_q - q0);
      const float* qp = q + (bh * sh.n_q + q0) * sh.d;
      const float* kp = k + bh * sh.n_k * sh.d;
      const float* vp = v + bh * sh.n_k * sh.dv;
      const float* lwp = lw == nullptr ? nullptr : lw + (bh / sh.heads) * sh.n_k;
      std::fill(acc.begin(), acc.begin() + rows * sh.dv, 0.0f);
      std::fill(row_max.begin(), row_max.end(), kNegInf);
      std::fill(row_sum.begin(), row_sum.end(), 0.0f);
      for (int64_t k0 = 0; k0 < sh.n_k; k0 += k_block) {
        const int64_t cols = std::min(k_block, sh.n_k - k0);
        float* S = score.data();
        gemm(false, true, rows, cols, sh.d, scale, qp, sh.d, kp + k0 * sh.d, sh.d, 0.0f, S,
             cols);
        for (int64_t i = 0; i < rows; ++i) {
          float* s = S + i * cols;
          float m = kNegInf;
          if (lwp == nullptr) {
#pragma omp simd reduction(max : m)
            for (int64_t j = 0; j < cols; ++j) m = std::max(m, kern.x(s[j]));
          } else {
            const float* lwj = lwp + k0;
#pragma omp simd reduction(max : m)
            for (int64_t j = 0; j < cols; ++j) m = std::max(m, kern.x(s[j]) + lwj[j]);
          }
          const float m_new = std::max(row_max[i], m);
          const float m_use = m_new == kNegInf ? 0.0f : m_new;
          float sum = 0.0f;
          if (lwp == nullptr) {
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < cols; ++j) {
              float w = fast_exp(kern.x(s[j]) - m_use) * kern.phi(s[j]);
              s[j] = w;
              sum += w;
            }
          } else {
            const float* lwj = lwp + k0;
#pragma omp simd reduction(+ : sum)
            for (int64_t j = 0; j < cols; ++j) {
              float w = fast_exp(kern.x(s[j]) + lwj[j] - m_use) * kern.phi(s[j]);
              s[j] = w;
              sum += w;
            }
          }
          const float alpha = fast_exp(row_max[i] - m_use);
          row_sum[i] = row_sum[i] * alpha + sum;
          row_max[i] = m_new;
          if (alpha != 1.0f) {
            float* a = acc.data() + i * sh.dv;
            for (int64_t c = 0; c < sh.dv; ++c) a[c] *= alpha;
          }
        }
        gemm(false, false, rows, sh.dv, cols, 1.0f, S, cols, vp + k0 * sh.dv, sh.dv, 1.0f,
             acc.data(), sh.dv);
      }
      float* op = out + (bh * sh.n_q + q0) * sh.dv;
      float* lp = lse + bh * sh.n_q + q0;
      for (int64_t i = 0; i < rows; ++i) {
        const float inv = 1.0f / row_sum[i];
        for (int64_t c = 0; c < sh.dv; ++c) op[i * sh.dv + c] = acc[i * sh.dv + c] * inv;
        lp[i] = row_max[i] + std::log(row_sum[i]);
      }
    }
  });
}

struct BackwardScratch {
  std::vector<float> prob, slope, grad_score, delta;
  BackwardScratch(int64_t q_block, int64_t k_block)
      : prob(q_block * k_block), slope(q_block * k_block), grad_score(q_block * k_block),
        delta(q_block) {}
};

// Gradients from one tile of queries (rows q0 .. q0 + rows of one batch x head):
// its own dQ rows, and its contributions to dK, dV of every key, added to dkh, dvh.
template <typename K>
void backward_query_block(const K& kern, const float* qh, const float* kh, const float* vh,
                          const float* lwp, const float* oh, const float* lh, const float* doh,
                          float* dqh, float* dkh, float* dvh, const Shape& sh, float scale,
                          int64_t q0, int64_t rows, int64_t k_block, BackwardScratch& scratch) {
  float* delta = scratch.delta.data();
  for (int64_t i = 0; i < rows; ++i) {  // delta_i = <dO_i, O_i>, the softmax backward's row term
    float d = 0.0f;
    for (int64_t c = 0; c < sh.dv; ++c) d += doh[(q0 + i) * sh.dv + c] * oh[(q0 + i) * sh.dv + c];
    delta[i] = d;
  }
  for (int64_t k0 = 0; k0 < sh.n_k; k0 += k_block) {
    const int64_t cols = std::min(k_block, sh.n_k - k0);
    float* P = scratch.prob.data();
    float* G = scratch.slope.data();
    float* dS = scratch.grad_score.data();
    gemm(false, true, rows, cols, sh.d, scale, qh + q0 * sh.d, sh.d, kh + k0 * sh.d, sh.d, 0.0f,
         P, cols);
    for (int64_t i = 0; i < rows; ++i) {  // P = exp(x + log w - L) phi, G = P g'
      float* s = P + i * cols;
      float* g = G + i * cols;
      const float l = lh[q0 + i];
      if (lwp == nullptr) {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) {
          const float sj = s[j];
          const float e = fast_exp(kern.x(sj) - l);
          s[j] = e * kern.phi(sj);
          g[j] = e * kern.psi(sj);
        }
      } else {
        const float* lwj = lwp + k0;
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) {
          const float sj = s[j];
          const float e = fast_exp(kern.x(sj) + lwj[j] - l);
          s[j] = e * kern.phi(sj);
          g[j] = e * kern.psi(sj);
        }
      }
    }
    // dV += P^T dO
    gemm(true, false, cols, sh.dv, rows, 1.0f, P, cols, doh + q0 * sh.dv, sh.dv, 1.0f,
         dvh + k0 * sh.dv, sh.dv);
    // dP = dO V^T, then dS = (dP - delta) P g'
    gemm(false, true, rows, cols, sh.dv, 1.0f, doh + q0 * sh.dv, sh.dv, vh + k0 * sh.dv, sh.dv,
         0.0f, dS, cols);
    for (int64_t i = 0; i < rows; ++i) {
      float* ds = dS + i * cols;
      const float* g = G + i * cols;
      const float di = delta[i];
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) ds[j] = (ds[j] - di) * g[j];
    }
    // dQ += scale dS K ; dK += scale dS^T Q
    gemm(false, false, rows, sh.d, cols, scale, dS, cols, kh + k0 * sh.d, sh.d, 1.0f,
         dqh + q0 * sh.d, sh.d);
    gemm(true, false, cols, sh.d, rows, scale, dS, cols, qh + q0 * sh.d, sh.d, 1.0f,
         dkh + k0 * sh.d, sh.d);
  }
}

// Per-thread dK, dV copies are used only while they stay below this many floats
// in all (256 MiB); above it the backward is parallel over batch x heads alone.
constexpr int64_t kMaxPartialFloats = int64_t{64} << 20;

template <typename K>
void backward_impl(const K& kern, const float* q, const float* k, const float* v,
                   const float* lw, const float* out, const float* lse, const float* grad_out,
                   float* grad_q, float* grad_k, float* grad_v, const Shape& sh,
                   int64_t bh_count, float scale, int64_t q_block, int64_t k_block) {
  auto run_block = [&](int64_t bh, int64_t q0, float* dk_base, float* dv_base,
                       BackwardScratch& scratch) {
    backward_query_block(kern, q + bh * sh.n_q * sh.d, k + bh * sh.n_k * sh.d,
                         v + bh * sh.n_k * sh.dv,
                         lw == nullptr ? nullptr : lw + (bh / sh.heads) * sh.n_k,
                         out + bh * sh.n_q * sh.dv, lse + bh * sh.n_q,
                         grad_out + bh * sh.n_q * sh.dv, grad_q + bh * sh.n_q * sh.d,
                         dk_base + bh * sh.n_k * sh.d, dv_base + bh * sh.n_k * sh.dv, sh, scale, q0,
                         std::min(q_block, sh.n_q - q0), k_block, scratch);
  };
  const int64_t n_q_blocks = (sh.n_q + q_block - 1) / q_block;
  const int64_t threads = at::get_num_threads();
  const int64_t grad_kv_floats = bh_count * sh.n_k * (sh.d + sh.dv);
  if (bh_count >= threads || n_q_blocks < 2 || threads * grad_kv_floats > kMaxPartialFloats) {
    // Each batch x head in one thread: dK and dV rows have a single writer.
    at::parallel_for(0, bh_count, 1, [&](int64_t begin, int64_t end) {
      BackwardScratch scratch(q_block, k_block);
      for (int64_t bh = begin; bh < end; ++bh)
        for (int64_t q0 = 0; q0 < sh.n_q; q0 += q_block) run_block(bh, q0, grad_k, grad_v, scratch);
    });
    return;
  }
  // Fewer batch x heads than threads: split the query tiles between threads, each
  // adding into its own dK, dV copy, then sum the copies (in a fixed order).
  std::vector<float> partial(threads * grad_kv_floats, 0.0f);
  const int64_t dk_floats = bh_count * sh.n_k * sh.d;
  at::parallel_for(0, bh_count * n_q_blocks, 1, [&](int64_t begin, int64_t end) {
    BackwardScratch scratch(q_block, k_block);
    float* mine = partial.data() + at::get_thread_num() * grad_kv_floats;
    for (int64_t task = begin; task < end; ++task)
      run_block(task / n_q_blocks, (task % n_q_blocks) * q_block, mine, mine + dk_floats, scratch);
  });
  at::parallel_for(0, grad_kv_floats, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t t = 0; t < threads; ++t) {
      const float* src = partial.data() + t * grad_kv_floats;
      for (int64_t i = begin; i < end; ++i) {
        float* dst = i < dk_floats ? grad_k + i : grad_v + (i - dk_floats);
        *dst += src[i];
      }
    }
  });
}

template <typename F>
void dispatch_kind(int64_t kind, double param, F&& f) {
  const float p = static_cast<float>(param);
  switch (kind) {
    case kSoftmax: f(Softmax{p}); break;
    case kPolyInt:
      TORCH_CHECK(p == 1.0f || p == 2.0f || p == 3.0f || p == 4.0f,
                  "measattn fused attention: integer poly degree must be 1..4, got ", p);
      if (p == 1.0f) f(PolyInt<1>{p});
      else if (p == 2.0f) f(PolyInt<2>{p});
      else if (p == 3.0f) f(PolyInt<3>{p});
      else f(PolyInt<4>{p});
      break;
    case kPolyReal: f(PolyReal{p}); break;
    case kLog: f(Log{p}); break;
    case kSigmoid: f(Sigmoid{p}); break;
    case kSoftplus: f(Softplus{p}); break;
    default: TORCH_CHECK(false, "measattn fused attention: unknown kernel kind ", kind);
  }
}

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  for (const at::Tensor* t : {&q, &k, &v}) {
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kFloat && t->dim() == 4 &&
                    t->is_contiguous(),
                "measattn fused attention takes contiguous 4-D float32 CPU tensors");
  }
}

std::tuple<at::Tensor, at::Tensor> fused_forward(const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& v,
                                                 const std::optional<at::Tensor>& log_weights,
                                                 int64_t kind, double param, double scale,
                                                 int64_t q_block, int64_t k_block) {
  check_inputs(q, k, v);
  const int64_t batch = q.size(0), heads = q.size(1);
  const Shape sh{heads, q.size(2), k.size(2), q.size(3), v.size(3)};
  at::Tensor out = at::empty({batch, heads, sh.n_q, sh.dv}, q.options());
  at::Tensor lse = at::empty({batch, heads, sh.n_q}, q.options());
  const float* lw = log_weights.has_value() ? log_weights->data_ptr<float>() : nullptr;
  dispatch_kind(kind, param, [&](const auto& kern) {
    forward_impl(kern, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), lw,
                 out.data_ptr<float>(), lse.data_ptr<float>(), sh, batch * heads,
                 static_cast<float>(scale), q_block, k_block);
  });
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_backward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const std::optional<at::Tensor>& log_weights, const at::Tensor& out, const at::Tensor& lse,
    const at::Tensor& grad_out, int64_t kind, double param, double scale, int64_t q_block,
    int64_t k_block) {
  check_inputs(q, k, v);
  check_inputs(out, grad_out, grad_out);
  const int64_t batch = q.size(0), heads = q.size(1);
  const Shape sh{heads, q.size(2), k.size(2), q.size(3), v.size(3)};
  at::Tensor grad_q = at::zeros_like(q), grad_k = at::zeros_like(k), grad_v = at::zeros_like(v);
  const float* lw = log_weights.has_value() ? log_weights->data_ptr<float>() : nullptr;
  dispatch_kind(kind, param, [&](const auto& kern) {
    backward_impl(kern, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), lw,
                  out.data_ptr<float>(), lse.data_ptr<float>(), grad_out.data_ptr<float>(),
                  grad_q.data_ptr<float>(), grad_k.data_ptr<float>(), grad_v.data_ptr<float>(),
                  sh, batch * heads, static_cast<float>(scale), q_block, k_block);
  });
  return {grad_q, grad_k, grad_v};
}

}  // namespace

// Schemas here, the CPU kernels below: registered for the CPU dispatch key (not as
// a catch-all), so Python can add shape-only "fake" kernels for torch.compile.
TORCH_LIBRARY(measattn_fused, m) {
  m.def(
      "forward(Tensor q, Tensor k, Tensor v, Tensor? log_weights, int kind, float param, "
      "float scale, int q_block, int k_block) -> (Tensor, Tensor)");
  m.def(
      "backward(Tensor q, Tensor k, Tensor v, Tensor? log_weights, Tensor out, Tensor lse, "
      "Tensor grad_out, int kind, float param, float scale, int q_block, int k_block) "
      "-> (Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(measattn_fused, CPU, m) {
  m.impl("forward", &fused_forward);
  m.impl("backward", &fused_backward);
}
