// Malformed copies of a call's index arguments, which a handler must reject or survive.
#pragma once

#include <string>
#include <vector>

#include "testing/case_io.h"

namespace jgo::testing {

// A corrupted copy of argument `arg`.
struct Variant {
  size_t arg;
  std::string what;
  HostBuffer buffer;
};

// For every int32/int64 argument: its middle element set to -1, to the buffer's length and to the
// type's maximum, and, if it looks like offsets (0 first, non-decreasing, 3 elements or more), an
// element raised above its successor. Copies equal to the argument are left out.
std::vector<Variant> MalformedVariants(const std::vector<HostBuffer>& args);

}  // namespace jgo::testing
