// See Note [Thread-local state] in thread_state.h; built on the public
// scopes, so applying a state is what a user's own guards would do.
#include "core/thread_state.h"

#include "anvil/autograd.h"

namespace anvil::detail {

ThreadLocalState::ThreadLocalState() noexcept
    : grad_enabled_(is_grad_enabled()), sync_mode_(sync_debug_mode()), device_(default_device()) {
  for (std::size_t i = 0; i < kTypes.size(); ++i) {
    autocast_enabled_[i] = amp::is_autocast_enabled(kTypes[i]);
    autocast_dtype_[i] = amp::autocast_dtype(kTypes[i]);
  }
}

ThreadLocalStateGuard::ThreadLocalStateGuard(const ThreadLocalState& state)
    : previous_grad_(is_grad_enabled()), sync_(state.sync_mode_), device_(state.device_) {
  set_grad_enabled(state.grad_enabled_);
  for (std::size_t i = 0; i < autocast_.size(); ++i)
    autocast_[i].emplace(ThreadLocalState::kTypes[i], state.autocast_dtype_[i], state.autocast_enabled_[i]);
}

ThreadLocalStateGuard::~ThreadLocalStateGuard() {
  for (std::size_t i = autocast_.size(); i-- > 0;) autocast_[i].reset();
  set_grad_enabled(previous_grad_);
}

}  // namespace anvil::detail
