// CPU handler of jgo_rows_dot, the reductions over rows behind the weight gradients that JAX
// computes outside the graph kernels (the attention weights, DimeNet++'s first projection):
//
//   out[g, k, m] = sum_r x[r, g, k] y[r, g, m]      (y absent: y = 1, M = 1)
//
// XLA's own dots and reductions split such a sum by the number of threads of its pool (the
// partial sums change bits with the thread count); here the rows are cut into chunks that depend
// on the problem size only (ReductionChunks), each chunk sums its rows in order and the chunks'
// partials are added in chunk order: bitwise the same result on any number of threads.
// There is no CUDA twin: on a GPU the op is XLA's.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/handler.h"
#include "cpu/row_parallel.h"
#include "jgo/args.h"
#include "xla/ffi/api/ffi.h"

namespace jgo {
namespace {

// acc[g, k, m] += sum_{r0 <= r < r1} x[r, g, k] y[r, g, m], rows in order.
template <typename T>
void RowsDotChunk(const T* __restrict x, const T* __restrict y, int64_t G, int64_t K, int64_t M, int64_t r0,
                  int64_t r1, T* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t g = 0; g < G; ++g) {
      const T* xr = x + (r * G + g) * K;
      T* a = acc + g * K * M;
      if (M == 1) {
        const T yv = y ? y[r * G + g] : T(1);
        for (int64_t k = 0; k < K; ++k) a[k] += xr[k] * yv;
      } else {
        const T* yr = y + (r * G + g) * M;
        for (int64_t k = 0; k < K; ++k) {
          const T xv = xr[k];
          T* ak = a + k * M;
          for (int64_t m = 0; m < M; ++m) ak[m] += xv * yr[m];
        }
      }
    }
  }
}

template <typename T>
ffi::Error RowsDotTyped(ffi::ThreadPool& pool, const T* x, const T* y, int64_t R, int64_t G, int64_t K, int64_t M,
                        T* out) {
  const int64_t len = G * K * M;
  const int64_t chunks = ReductionChunks(R, len, len);
  std::vector<T> partial(chunks * len, T(0));
  ParallelFor(pool, chunks, [&](int64_t t) {
    RowsDotChunk(x, y, G, K, M, R * t / chunks, R * (t + 1) / chunks, partial.data() + t * len);
  });
  std::copy_n(partial.data(), len, out);
  for (int64_t t = 1; t < chunks; ++t) {
    const T* p = partial.data() + t * len;
    for (int64_t i = 0; i < len; ++i) out[i] += p[i];
  }
  return ffi::Error::Success();
}

std::string Shape(const ffi::AnyBuffer& b) {
  std::string s = "[";
  for (size_t i = 0; i < b.dimensions().size(); ++i) s += (i ? ", " : "") + std::to_string(b.dimensions()[i]);
  return s + "]";
}

ffi::Error RowsDotCpu(ffi::ThreadPool pool, ffi::AnyBuffer x, ffi::AnyBuffer y, ffi::Result<ffi::AnyBuffer> out) {
  const auto xd = x.dimensions();
  if (!IsFloatType(x.element_type()) || xd.size() != 3)
    return InvalidArgument("jgo_rows_dot: x must be a float32/float64 [rows, groups, K] array; got " + Shape(x));
  const int64_t R = xd[0], G = xd[1], K = xd[2];
  const bool has_y = !(y.dimensions().size() == 1 && y.element_count() == 0);
  int64_t M = 1;
  if (has_y) {
    const auto yd = y.dimensions();
    if (y.element_type() != x.element_type() || yd.size() != 3 || yd[0] != R || yd[1] != G)
      return InvalidArgument("jgo_rows_dot: y must be [rows, groups, M] = [" + std::to_string(R) + ", " +
                             std::to_string(G) + ", M] of x's dtype (or an empty [0] array); got " + Shape(y));
    M = yd[2];
  }
  const auto od = out->dimensions();
  if (out->element_type() != x.element_type() || od.size() != 3 || od[0] != G || od[1] != K || od[2] != M)
    return InvalidArgument("jgo_rows_dot: the result must be [groups, K, M] = [" + std::to_string(G) + ", " +
                           std::to_string(K) + ", " + std::to_string(M) + "] of x's dtype; got " + Shape(*out));
  if (x.element_type() == ffi::DataType::F64)
    return RowsDotTyped<double>(pool, x.typed_data<double>(), has_y ? y.typed_data<double>() : nullptr, R, G, K, M,
                                out->typed_data<double>());
  return RowsDotTyped<float>(pool, x.typed_data<float>(), has_y ? y.typed_data<float>() : nullptr, R, G, K, M,
                             out->typed_data<float>());
}

}  // namespace
}  // namespace jgo

JGO_CPU_HANDLER(RowsDot, jgo::RowsDotCpu,
                jgo::BindWith<xla::ffi::ThreadPool>()
                    .Arg<xla::ffi::AnyBuffer>()   // x [rows, groups, K]
                    .Arg<xla::ffi::AnyBuffer>()   // y [rows, groups, M] or [0]
                    .Ret<xla::ffi::AnyBuffer>());  // out [groups, K, M]
