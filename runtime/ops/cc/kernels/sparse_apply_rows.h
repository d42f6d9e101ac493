/* One row of the fused sparse Adagrad, AdagradDecay and FTRL updates, rounded as TensorFlow's kernels round. */

#ifndef RETF_OPS_CC_KERNELS_SPARSE_APPLY_ROWS_H_
#define RETF_OPS_CC_KERNELS_SPARSE_APPLY_ROWS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "group_rows.h"
#include "index_groups.h"

// glibc 2.27 and 2.29 gave powf and pow new symbol versions: the same functions without the SVID
// error handling. A library compiled against a newer glibc would need them and not load on the glibc
// (2.17 to 2.27) users have: bind the calls to the functions' first versions, which every glibc has.
#if defined(__GLIBC__) && defined(__x86_64__)
__asm__(".symver pow,pow@GLIBC_2.2.5");
__asm__(".symver powf,powf@GLIBC_2.2.5");
#elif defined(__GLIBC__) && defined(__aarch64__)
__asm__(".symver pow,pow@GLIBC_2.17");
__asm__(".symver powf,powf@GLIBC_2.17");
#endif

namespace retf {
namespace functor {

// TensorFlow's SparseApplyAdagrad (kEpsilon false) and SparseApplyAdagradV2 (true) on one row of
// n elements, with each product, sum, quotient and square root rounded as TensorFlow's kernel
// rounds it: accum += g * g (when update_slots), then var -= (lr * g) * rsqrt(accum), rsqrt being
// 1 / sqrt, or var -= (lr * g) / (sqrt(accum) + epsilon). TensorFlow takes a scalar path for rows
// of one element, where the first form is var -= (lr * g) / sqrt(accum); one_element picks it.
template <typename T, bool kEpsilon>
struct AdagradRow {
  T lr;
  T epsilon;
  bool update_slots;

  void operator()(T* var, T* accum, const T* g, int64_t n) const {
    const bool one_element = n == 1;
    for (int64_t j = 0; j < n; ++j) {
      const T a = update_slots ? accum[j] + g[j] * g[j] : accum[j];
      accum[j] = a;
      const T step = lr * g[j];
      if (kEpsilon) {
        var[j] -= step / (std::sqrt(a) + epsilon);
      } else if (one_element) {
        var[j] -= step / std::sqrt(a);
      } else {
        var[j] -= step * (T(1) / std::sqrt(a));
      }
    }
  }
};

// DeepRec's AdagradDecay on one row: when the row's decay count is behind global_step /
// decay_step, accum = max(accum * decay_rate, baseline) and the count goes up by one; then
// Adagrad's accum += g * g and var -= (lr * g) * rsqrt(accum) (var -= (lr * g) / sqrt(accum) for
// rows of one element).
template <typename T>
struct AdagradDecayRow {
  T lr;
  T decay_rate;
  T baseline;

  void operator()(T* var, T* accum, const T* g, int64_t n, bool decay) const {
    if (decay) {
      for (int64_t j = 0; j < n; ++j) accum[j] = std::max(accum[j] * decay_rate, baseline);
    }
    AdagradRow<T, false>{lr, T(0), true}(var, accum, g, n);
  }
};

// TensorFlow's SparseApplyFtrl (kShrinkage false) and SparseApplyFtrlV2 (true), as
// tf.compat.v1.train.FtrlOptimizer runs them (multiply_linear_by_lr false), on one row. Rows of
// several elements take TensorFlow's tensor form:
//   g' = g + (2 * l2_shrinkage) * var;  a' = accum + g * g
//   sigma = (sqrt(a') - sqrt(accum)) / lr        (pow(., -lr_power) unless lr_power is -0.5)
//   linear = linear + (g' - sigma * var)
//   var = (clamp(linear, -l1, l1) - linear) / (sqrt(a') / lr + 2 * l2);  accum = a'
// rows of one element its scalar form: sigma always from pow, and linear = (linear + g') - sigma * var.
template <typename T, bool kShrinkage>
struct FtrlRow {
  T lr;
  T l1;
  T l2;
  T l2_shrinkage;
  T lr_power;

  void operator()(T* var, T* accum, T* linear, const T* g, int64_t n) const {
    const T two_l2 = T(2) * l2;
    const T two_shrinkage = T(2) * l2_shrinkage;
    const T power = -lr_power;
    if (n == 1) {
      const T g_s = kShrinkage ? g[0] + two_shrinkage * var[0] : g[0];
      const T a = accum[0] + g[0] * g[0];
      T sigma = std::pow(a, power) - std::pow(accum[0], power);
      sigma /= lr;
      const T l = linear[0] + g_s - sigma * var[0];
      const T quadratic = (lr_power == T(-0.5) ? std::sqrt(a) : std::pow(a, power)) / lr + two_l2;
      var[0] = (std::max(std::min(l, l1), -l1) - l) / quadratic;
      accum[0] = a;
      linear[0] = l;
      return;
    }
    if (lr_power == T(-0.5)) {
      for (int64_t j = 0; j < n; ++j) {
        const T g_s = kShrinkage ? g[j] + two_shrinkage * var[j] : g[j];
        const T a = accum[j] + g[j] * g[j];
        const T root = std::sqrt(a);
        const T l = linear[j] + (g_s - (root - std::sqrt(accum[j])) / lr * var[j]);
        var[j] = (std::max(std::min(l, l1), -l1) - l) / (root / lr + two_l2);
        accum[j] = a;
        linear[j] = l;
      }
    } else {
      for (int64_t j = 0; j < n; ++j) {
        const T g_s = kShrinkage ? g[j] + two_shrinkage * var[j] : g[j];
        const T a = accum[j] + g[j] * g[j];
        const T p = std::pow(a, power);
        const T l = linear[j] + (g_s - (p - std::pow(accum[j], power)) / lr * var[j]);
        var[j] = (std::max(std::min(l, l1), -l1) - l) / (p / lr + two_l2);
        accum[j] = a;
        linear[j] = l;
      }
    }
  }
};

}  // namespace functor
}  // namespace retf

#endif  // RETF_OPS_CC_KERNELS_SPARSE_APPLY_ROWS_H_
