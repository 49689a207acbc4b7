// The forward walk shared by the CPU attention kernels (GAT, GATv2, mha_simple): the online
// softmax of one destination row over H heads of C features, in scratch owned by one task.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu/vector_math.h"
#include "jgo/attention.h"

namespace jgo {

// The dropout factors of edge e for every head into f [H]; nullptr without dropout.
template <typename T>
inline const T* EdgeDropout(const Dropout& d, int64_t e, int64_t H, T* f) {
  if (d.key == nullptr) return nullptr;
  for (int64_t h = 0; h < H; ++h) f[h] = DropoutFactor<T>(d, e, h);
  return f;
}

// Begin() starts a row; Add(z, msg, factor) takes one in-edge with per-head logits z [H], its
// message row msg [H*C] and, with dropout, the per-head factors [H] its weights are multiplied by
// after normalisation (nullptr: none; the normaliser always takes the undropped weights);
// End(out_row, lse_row) writes the softmax-weighted sum [H*C] and the log-sum-exp
// [H] (0 and 0 for a row without edges).
template <typename T>
class OnlineSoftmaxRow {
 public:
  OnlineSoftmaxRow(int64_t heads, int64_t dim) : H_(heads), C_(dim), buf_(heads * dim + 4 * heads) {
    acc_ = buf_.data();
    m_ = acc_ + H_ * C_;
    l_ = m_ + H_;
    scale_ = l_ + H_;
    wt_ = scale_ + H_;
  }

  void Begin() {
    std::fill(acc_, acc_ + H_ * C_, T(0));
    std::fill(m_, m_ + H_, -Infinity<T>());
    std::fill(l_, l_ + H_, T(0));
  }

  void Add(const T* z, const T* msg, const T* factor = nullptr) {
    for (int64_t h = 0; h < H_; ++h) OnlineSoftmaxStep(m_[h], l_[h], z[h], scale_[h], wt_[h], CpuExpFn{});
    for (int64_t h = 0; h < H_; ++h) {
      T* ah = acc_ + h * C_;
      const T* mh = msg + h * C_;
      const T sh = scale_[h], wh = factor ? wt_[h] * factor[h] : wt_[h];
      for (int64_t c = 0; c < C_; ++c) ah[c] = ah[c] * sh + wh * mh[c];
    }
  }

  void End(T* out_row, T* lse_row) const {
    for (int64_t h = 0; h < H_; ++h) {
      const T inv = SoftmaxInverse(l_[h]);
      for (int64_t c = 0; c < C_; ++c) out_row[h * C_ + c] = acc_[h * C_ + c] * inv;
      lse_row[h] = SoftmaxLse(m_[h], l_[h]);
    }
  }

 private:
  int64_t H_, C_;
  std::vector<T> buf_;
  T *acc_, *m_, *l_, *scale_, *wt_;
};

}  // namespace jgo
