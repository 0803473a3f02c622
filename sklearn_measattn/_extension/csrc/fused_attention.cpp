// Fused (flash-style) kernel attention on CPU, float32.
//
// One pass over query x key tiles that stay in cache: per tile, a BLAS gemm for
// the scores, the kernel's weights computed in vectorised loops, and a gemm into
// the output; backward recomputes each tile. The row statistics are the running
// maximum of the exponent and the row sum, saved as L = m + log(l) per query, so
// P_ij = exp(x(s_ij) + log w_j - L_i) * phi(s_ij).
//
// Kernel kinds (see sklearn_measattn/kernels.py): each kernel is written as
//     kappa(s)  = exp(x(s)) * phi(s),   kappa'(s) = exp(x(s)) * psi(s),
// so P g'(s) = exp(x + log w - L) * psi(s) in backward. The elementwise cost per
// score in the forward: softmax and integer-degree poly one exp; sigmoid and
// softplus one exp (of -|s|, in the direct form below) plus a division or a
// polynomial; log and real-degree poly one exp and one log (the kernel is e^s on
// one side of 0 and a logarithm on the other, and SIMD lanes evaluate both).
//
// The loops are plain C++ with `omp simd`; the build passes -march=native and
// -mprefer-vector-width=512, so they vectorise to 16 lanes with AVX-512 and to 8
// with AVX2 (gcc's default for some Intel targets is 256-bit vectors even where
// AVX-512 exists, which cost about a third of the forward time).
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

// The Fortran BLAS entry that libtorch_cpu exports (from the MKL or OpenBLAS it
// links). ATen offers no cheaper way: at::native::cpublas::gemm is declared in
// ATen/native/CPUBlas.h but not exported (a library calling it fails to load),
// and at::cpu::addmm_out on from_blob views of the tiles made forward+backward
// 4% slower (2-10%, most at 128 points), its tensor bookkeeping at every tile.
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

// Horner's rule: horner(x, c0, c1, ..., cn) = (...(c0 x + c1) x + ...) x + cn,
// expanded at compile time (the loops over scores stay straight-line code).
inline float horner(float, float y) { return y; }
template <typename... Rest>
inline float horner(float x, float y, float next, Rest... rest) {
  return horner(x, y * x + next, rest...);
}

// exp(x), Cephes polynomial (about 1 ulp), branch-free so loops over it
// vectorise. Arguments are clamped to [-88, 88.38]: below -87.68 the exponent
// n is -127, whose bias-shifted bits are 0, so the result is exactly 0 (also for
// -inf) without a compare and select; between -87.68 and -87.33 it is a normal
// float. Inputs here are <= 0 or small. This and the two below are forced inline:
// the loops that call them vectorise only if they are inlined, and gcc's limits on
// a file's inline growth can decline them (seen with ATen's tensor headers included:
// fast_exp out of line made the sigmoid and softplus backward 2.5x slower).
[[gnu::always_inline]] inline float fast_exp(float x) {
  const float lo = -88.0f, hi = 88.3762626647949f;
  float xc = std::min(std::max(x, lo), hi);
  float n = __builtin_floorf(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float z = r * r;
  float y = horner(r, 1.9875691500E-4f, 1.3981999507E-3f, 8.3334519073E-3f, 4.1665795894E-2f,
                   1.6666665459E-1f, 5.0000001201E-1f);
  y = y * z + r + 1.0f;
  float pow2n = bits_to_float((static_cast<int32_t>(n) + 127) << 23);
  return y * pow2n;
}

// log(x) for finite normal x > 0, branch-free: x = 2^e (1 + m) with m in
// [sqrt(1/2) - 1, sqrt(2) - 1), log(1 + f) = f - f^2 / 2 + f^3 R(f) with R of
// degree 6 fitted at Chebyshev nodes (absolute error 7e-8; Cephes uses degree 8
// for 1 ulp, two more FMAs per score than the tolerance here needs).
[[gnu::always_inline]] inline float fast_log(float x) {
  // Integer-only reduction (as in musl's logf): offset the bits so that the
  // exponent field rounds at sqrt(1/2), then rebuild 1 + f in [sqrt(1/2), sqrt(2)).
  // No compare: gcc if-converts a select here by evaluating the polynomial twice.
  const int32_t bits = float_to_bits(x) + (0x3f800000 - 0x3f3504f3);
  const float e = static_cast<float>((bits >> 23) - 0x7f);
  const float m = bits_to_float((bits & 0x007fffff) + 0x3f3504f3) - 1.0f;
  float z = m * m;
  float y = horner(m, 0.09272214025259018f, -0.1411842554807663f, 0.14676396548748016f,
                   -0.16592855751514435f, 0.19985127449035645f, -0.2500092089176178f, 0.3333340883255005f);
  y = y * m * z;
  y = y - 2.12194440e-4f * e;
  y = y - 0.5f * z;
  return m + y + 0.693359375f * e;
}

// log(1 + t) / t for t in [0, 1]: a degree-8 polynomial fitted at Chebyshev
// nodes, relative error 1.5e-7 in float32 (softplus's log1p(e^-|s|) without a log).
[[gnu::always_inline]] inline float log1p_over_t(float t) {
  return horner(t, 0.005253457929939032f, -0.02958850748836994f, 0.07836166769266129f, -0.13674770295619965f,
                0.19111430644989014f, -0.24844369292259216f, 0.33319270610809326f, -0.49999502301216125f, 1.0f);
}

enum Kind : int64_t {
  kSoftmax = 0, kPolyInt = 1, kPolyReal = 2, kLog = 3, kSigmoid = 4, kSoftplus = 5
};

// Each kernel, in the exponent form used for any magnitude of the scores:
//   x(s) the exponent, phi(s) the factor, psi(s) with kappa' = exp(x) psi.
// Kernels with kDirect also give kappa(s) and kappa'(s) with one exp per score
// (exp(-|s|)), used for rows whose running maximum lies in a safe range, where
// the row's weights are exp(-m) kappa(s) with one scalar exp(-m) per row.
struct Softmax {
  static constexpr bool kDirect = false, kSlopeIsWeight = true;
  float p;
  inline float x(float s) const { return s; }
  inline float phi(float) const { return 1.0f; }
  inline float psi(float) const { return 1.0f; }
};

template <int P>
struct PolyInt {  // (1 + r/p)^p for an integer degree p in 1..4
  static constexpr bool kDirect = false, kSlopeIsWeight = false;
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

// exp(p log(1 + r/p)), all in the exponent. log(1 + r/p) rounds 1 + r/p first:
// an absolute error of 2^-24 in the logarithm, p 2^-24 relative in the weight.
struct PolyReal {
  static constexpr bool kDirect = false, kSlopeIsWeight = false;
  float p;
  inline float x(float s) const {
    float r = s > 0.0f ? s : 0.0f;
    return (s - r) + p * fast_log(1.0f + r / p);
  }
  inline float phi(float) const { return 1.0f; }
  inline float psi(float s) const { return 1.0f / (1.0f + (s > 0.0f ? s : 0.0f) / p); }
};

// 1 + log(1 + r): phi >= 1, so rounding 1 + r before the log costs 2^-24 relative.
struct Log {
  static constexpr bool kDirect = false, kSlopeIsWeight = false;
  float p;
  inline float x(float s) const { return s < 0.0f ? s : 0.0f; }
  inline float phi(float s) const { return 1.0f + fast_log(1.0f + (s > 0.0f ? s : 0.0f)); }
  inline float psi(float s) const { return 1.0f / (1.0f + (s > 0.0f ? s : 0.0f)); }
};

struct Sigmoid {  // exp(min(s, 0)) / (1 + exp(-|s|))
  static constexpr bool kDirect = true, kSlopeIsWeight = false;
  float p;
  inline float x(float s) const { return s < 0.0f ? s : 0.0f; }
  inline float phi(float s) const { return 1.0f / (1.0f + fast_exp(-std::fabs(s))); }
  inline float psi(float s) const {
    float t = fast_exp(-std::fabs(s));
    float u = 1.0f + t;
    return (s < 0.0f ? 1.0f : t) / (u * u);
  }
  inline float kappa(float s) const {  // t = e^-|s|: sigmoid(s) = (s < 0 ? t : 1) / (1 + t)
    float t = fast_exp(-std::fabs(s));
    return (s < 0.0f ? t : 1.0f) / (1.0f + t);
  }
  inline void kappa_slope(float s, float& k, float& dk) const {  // kappa' = t / (1 + t)^2
    float t = fast_exp(-std::fabs(s));
    float inv = 1.0f / (1.0f + t);
    k = (s < 0.0f ? t : 1.0f) * inv;
    dk = t * inv * inv;
  }
};

struct Softplus {  // log(1 + e^s)
  static constexpr bool kDirect = true, kSlopeIsWeight = false;
  float p;
  inline float t(float s) const {
    float e = fast_exp(-std::fabs(s));
    return e < 1e-20f ? 1e-20f : e;
  }
  inline float x(float s) const { return s < 0.0f ? s : 0.0f; }
  inline float phi(float s) const {
    float tt = t(s);
    float l = tt * log1p_over_t(tt);
    return s < 0.0f ? l / tt : s + l;
  }
  inline float psi(float s) const { return 1.0f / (1.0f + t(s)); }
  inline float kappa(float s) const {  // max(s, 0) + log1p(e^-|s|)
    float e = fast_exp(-std::fabs(s));
    return (s > 0.0f ? s : 0.0f) + e * log1p_over_t(e);
  }
  inline void kappa_slope(float s, float& k, float& dk) const {  // kappa' = sigmoid(s)
    float e = fast_exp(-std::fabs(s));
    k = (s > 0.0f ? s : 0.0f) + e * log1p_over_t(e);
    dk = (s < 0.0f ? e : 1.0f) / (1.0f + e);
  }
};

// Direct weights exp(-m) kappa(s) are used while the row's exponent offset m
// (running maximum in forward, log-normaliser in backward) is within this range:
// exp(-m) stays a normal float and kappa of the largest score is >= e^-kDirectRange.
constexpr float kDirectRange = 60.0f;

struct Shape {
  int64_t heads, n_q, n_k, d, dv;
};

// Per-key weights of one measure: lw the log weights shifted so their maximum is
// 0 (-inf for absent points), ew = exp(lw) (0 below -87: such a key's share is
// under e^(kDirectRange - 87) of the row's largest when the direct path runs).
struct KeyWeights {
  const float* lw;
  const float* ew;
};

// One row of a tile's scores into weights, in place; returns their sum. The
// weights are exp(x(s) + lw - m) phi(s), or exp(-m) kappa(s) ew in direct form.
template <typename K>
inline float row_weights(const K& kern, float* s, int64_t cols, KeyWeights w, float m) {
  float sum = 0.0f;
  if constexpr (K::kDirect) {
    if (m >= -kDirectRange) {
      const float c = std::exp(-m);
      if (w.ew == nullptr) {
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < cols; ++j) {
          float v = c * kern.kappa(s[j]);
          s[j] = v;
          sum += v;
        }
      } else {
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < cols; ++j) {
          float v = (c * w.ew[j]) * kern.kappa(s[j]);
          s[j] = v;
          sum += v;
        }
      }
      return sum;
    }
  }
  if (w.lw == nullptr) {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; ++j) {
      float v = fast_exp(kern.x(s[j]) - m) * kern.phi(s[j]);
      s[j] = v;
      sum += v;
    }
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < cols; ++j) {
      float v = fast_exp(kern.x(s[j]) + w.lw[j] - m) * kern.phi(s[j]);
      s[j] = v;
      sum += v;
    }
  }
  return sum;
}

template <typename K>
inline float row_max_exponent(const K& kern, const float* s, int64_t cols, const float* lw) {
  float m = kNegInf;
  if (lw == nullptr) {
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < cols; ++j) m = std::max(m, kern.x(s[j]));
  } else {
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < cols; ++j) m = std::max(m, kern.x(s[j]) + lw[j]);
  }
  return m;
}

template <typename K>
void forward_impl(const K& kern, const float* q, const float* k, const float* v, KeyWeights weights,
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
      const int64_t w0 = (bh / sh.heads) * sh.n_k;
      std::fill(acc.begin(), acc.begin() + rows * sh.dv, 0.0f);
      std::fill(row_max.begin(), row_max.end(), kNegInf);
      std::fill(row_sum.begin(), row_sum.end(), 0.0f);
      for (int64_t k0 = 0; k0 < sh.n_k; k0 += k_block) {
        const int64_t cols = std::min(k_block, sh.n_k - k0);
        const KeyWeights w{weights.lw == nullptr ? nullptr : weights.lw + w0 + k0,
                           weights.ew == nullptr ? nullptr : weights.ew + w0 + k0};
        float* S = score.data();
        gemm(false, true, rows, cols, sh.d, scale, qp, sh.d, kp + k0 * sh.d, sh.d, 0.0f, S,
             cols);
        for (int64_t i = 0; i < rows; ++i) {
          float* s = S + i * cols;
          const float m_new = std::max(row_max[i], row_max_exponent(kern, s, cols, w.lw));
          const float m_use = m_new == kNegInf ? 0.0f : m_new;
          const float sum = row_weights(kern, s, cols, w, m_use);
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

// One row of recomputed scores s into P = exp(x + lw - l) phi (in place) and the
// slope G = P g' = exp(x + lw - l) psi, or their direct forms exp(-l) ew kappa, kappa'.
template <typename K>
inline void row_prob_slope(const K& kern, float* s, float* g, int64_t cols, KeyWeights w, float l) {
  if constexpr (K::kDirect) {
    if (l >= -kDirectRange && l <= kDirectRange) {
      const float c = std::exp(-l);
      if (w.ew == nullptr) {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) {
          float kap, slope;
          kern.kappa_slope(s[j], kap, slope);
          s[j] = c * kap;
          g[j] = c * slope;
        }
      } else {
#pragma omp simd
        for (int64_t j = 0; j < cols; ++j) {
          float kap, slope;
          kern.kappa_slope(s[j], kap, slope);
          const float cw = c * w.ew[j];
          s[j] = cw * kap;
          g[j] = cw * slope;
        }
      }
      return;
    }
  }
  if (w.lw == nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const float sj = s[j];
      const float e = fast_exp(kern.x(sj) - l);
      s[j] = e * kern.phi(sj);
      if constexpr (!K::kSlopeIsWeight) g[j] = e * kern.psi(sj);
    }
  } else {
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const float sj = s[j];
      const float e = fast_exp(kern.x(sj) + w.lw[j] - l);
      s[j] = e * kern.phi(sj);
      if constexpr (!K::kSlopeIsWeight) g[j] = e * kern.psi(sj);
    }
  }
}

// Gradients from one tile of queries (rows q0 .. q0 + rows of one batch x head):
// its own dQ rows, and its contributions to dK, dV of every key, added to dkh, dvh.
template <typename K>
void backward_query_block(const K& kern, const float* qh, const float* kh, const float* vh,
                          KeyWeights weights, const float* oh, const float* lh, const float* doh,
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
    const KeyWeights w{weights.lw == nullptr ? nullptr : weights.lw + k0,
                       weights.ew == nullptr ? nullptr : weights.ew + k0};
    float* P = scratch.prob.data();
    float* G = K::kSlopeIsWeight ? P : scratch.slope.data();
    float* dS = scratch.grad_score.data();
    gemm(false, true, rows, cols, sh.d, scale, qh + q0 * sh.d, sh.d, kh + k0 * sh.d, sh.d, 0.0f,
         P, cols);
    for (int64_t i = 0; i < rows; ++i)
      row_prob_slope(kern, P + i * cols, G + i * cols, cols, w, lh[q0 + i]);
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

inline KeyWeights key_weights_of(KeyWeights w, int64_t offset) {
  return {w.lw == nullptr ? nullptr : w.lw + offset, w.ew == nullptr ? nullptr : w.ew + offset};
}

template <typename K>
void backward_impl(const K& kern, const float* q, const float* k, const float* v,
                   KeyWeights weights, const float* out, const float* lse, const float* grad_out,
                   float* grad_q, float* grad_k, float* grad_v, const Shape& sh,
                   int64_t bh_count, float scale, int64_t q_block, int64_t k_block) {
  auto run_block = [&](int64_t bh, int64_t q0, float* dk_base, float* dv_base,
                       BackwardScratch& scratch) {
    backward_query_block(kern, q + bh * sh.n_q * sh.d, k + bh * sh.n_k * sh.d,
                         v + bh * sh.n_k * sh.dv,
                         key_weights_of(weights, (bh / sh.heads) * sh.n_k),
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

// Log weights (batch, n_k) shifted so each measure's largest is 0 (the attention
// is unchanged; forward and backward shift alike, so the saved log-normaliser
// matches), and their exponentials for the direct weights, into `storage`.
KeyWeights prepare_weights(const std::optional<at::Tensor>& log_weights, int64_t batch,
                           int64_t n_k, std::vector<float>& storage) {
  if (!log_weights.has_value()) return {nullptr, nullptr};
  TORCH_CHECK(log_weights->scalar_type() == at::kFloat && log_weights->is_contiguous() &&
                  log_weights->numel() == batch * n_k,
              "measattn fused attention: log_weights must be contiguous float32 (batch, n_keys)");
  const float* src = log_weights->data_ptr<float>();
  storage.resize(2 * batch * n_k);
  float* lw = storage.data();
  float* ew = lw + batch * n_k;
  for (int64_t b = 0; b < batch; ++b) {
    const float* row = src + b * n_k;
    float top = kNegInf;
    for (int64_t j = 0; j < n_k; ++j) top = std::max(top, row[j]);
    if (!std::isfinite(top)) top = 0.0f;
    for (int64_t j = 0; j < n_k; ++j) {
      const float shifted = row[j] - top;
      lw[b * n_k + j] = shifted;
      ew[b * n_k + j] = shifted < -87.0f ? 0.0f : std::exp(shifted);
    }
  }
  return {lw, ew};
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
  std::vector<float> shifted;
  const KeyWeights w = prepare_weights(log_weights, batch, sh.n_k, shifted);
  dispatch_kind(kind, param, [&](const auto& kern) {
    forward_impl(kern, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), w,
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
  std::vector<float> shifted;
  const KeyWeights w = prepare_weights(log_weights, batch, sh.n_k, shifted);
  dispatch_kind(kind, param, [&](const auto& kern) {
    backward_impl(kern, q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), w,
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
