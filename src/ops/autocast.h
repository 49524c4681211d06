// The autocast policy (anvil/autocast.h): the one place that decides how an op's
// inputs are cast while an AutocastGuard is active. An op on one of the two
// lists starts with
//
//   if (auto c = detail::autocast_inputs(detail::AutocastList::LowerPrecision, {&a, &b}))
//     return matmul((*c)[0], (*c)[1]);
//
// and so runs again, once, on the cast inputs (whose dtypes are then the
// target's, so the second call finds nothing to cast).
#pragma once

#include <initializer_list>
#include <optional>
#include <vector>

#include "anvil/tensor.h"

namespace anvil::detail {

enum class AutocastList {
  LowerPrecision,  // run in the guard's dtype
  Fp32,            // run in f32
};

// The inputs cast for `list` (differentiably, with to(dtype); undefined ones
// stay undefined; f64 and non-floating ones are left alone), or nothing when
// autocast is off for their device type or none would change.
std::optional<std::vector<Tensor>> autocast_inputs(AutocastList list, std::initializer_list<const Tensor*> inputs);

// Autocast off on this thread for the guard's lifetime, whatever the types:
// backward passes run under it.
class AutocastSuspend {
 public:
  AutocastSuspend() noexcept;
  ~AutocastSuspend();
  AutocastSuspend(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(const AutocastSuspend&) = delete;

 private:
  bool prev_;
};

}  // namespace anvil::detail
