// Malformed index arguments (malformed.h).
#include "testing/malformed.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

namespace jgo::testing {
namespace {

template <typename I>
I Get(const HostBuffer& b, int64_t i) {
  I v;
  std::memcpy(&v, b.bytes.data() + i * sizeof(I), sizeof(I));
  return v;
}

template <typename I>
void Corrupt(size_t arg, const HostBuffer& b, std::vector<Variant>& out) {
  const int64_t n = b.elements();
  if (n == 0) return;
  auto add = [&](int64_t i, I value, const std::string& what) {
    if (Get<I>(b, i) == value) return;
    Variant v{arg, "arg " + std::to_string(arg) + " element " + std::to_string(i) + " " + what, b};
    std::memcpy(v.buffer.bytes.data() + i * sizeof(I), &value, sizeof(I));
    out.push_back(std::move(v));
  };
  const int64_t mid = n / 2;
  add(mid, I(-1), "= -1");
  add(mid, static_cast<I>(n), "= length");
  add(mid, std::numeric_limits<I>::max(), "= max");
  bool offsets = n >= 3 && Get<I>(b, 0) == 0;
  for (int64_t i = 1; offsets && i < n; ++i) offsets = Get<I>(b, i - 1) <= Get<I>(b, i);
  if (offsets) {
    const int64_t k = std::min<int64_t>(std::max<int64_t>(mid, 1), n - 2);
    const I next = Get<I>(b, k + 1);
    if (next < std::numeric_limits<I>::max()) add(k, next + 1, "> its successor");
  }
}

}  // namespace

std::vector<Variant> MalformedVariants(const std::vector<HostBuffer>& args) {
  std::vector<Variant> out;
  for (size_t a = 0; a < args.size(); ++a) {
    if (args[a].dtype == XLA_FFI_DataType_S32) Corrupt<int32_t>(a, args[a], out);
    if (args[a].dtype == XLA_FFI_DataType_S64) Corrupt<int64_t>(a, args[a], out);
  }
  return out;
}

}  // namespace jgo::testing
