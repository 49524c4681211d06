// The per-thread modes a thread that anvil starts for user work takes from
// the thread that asked for the work (DESIGN §4.13).
//
//   const detail::ThreadLocalState caller;           // on the calling thread
//   std::thread worker([&] {
//     const detail::ThreadLocalStateGuard as_caller(caller);
//     run_user_work();                               // the caller's modes here
//   });
//
// Note [Thread-local state]
// Grad mode, autocast, SyncGuard's mode and the default device (DeviceScope)
// are per thread, as in PyTorch, so a new std::thread starts from the
// defaults, not from its creator's scopes: DataParallel's replicas computed
// in f32 under a bf16 AutocastGuard. Every place that runs user code on a
// thread of its own captures the caller's state and applies it for the work
// (PyTorch's at::ThreadLocalState). anvil's collective worker runs no user
// code (only the copies and transfers of a collective) and takes none.
#pragma once

#include <array>
#include <optional>

#include "anvil/autocast.h"
#include "anvil/device.h"
#include "anvil/dtype.h"
#include "anvil/sync_guard.h"

namespace anvil::detail {

// A snapshot of the calling thread's modes.
class ThreadLocalState {
 public:
  ThreadLocalState() noexcept;

 private:
  friend class ThreadLocalStateGuard;
  static constexpr std::array<DeviceType, 3> kTypes = {DeviceType::CPU, DeviceType::CUDA, DeviceType::OpenCL};
  bool grad_enabled_;
  std::array<bool, kTypes.size()> autocast_enabled_{};
  std::array<DType, kTypes.size()> autocast_dtype_{};
  SyncDebugMode sync_mode_;
  Device device_;
};

// Applies a snapshot to this thread for its lifetime and restores what the
// thread had after (guards nest, like the scopes they stand for).
class ThreadLocalStateGuard {
 public:
  explicit ThreadLocalStateGuard(const ThreadLocalState& state);
  ~ThreadLocalStateGuard();
  ThreadLocalStateGuard(const ThreadLocalStateGuard&) = delete;
  ThreadLocalStateGuard& operator=(const ThreadLocalStateGuard&) = delete;

 private:
  bool previous_grad_;
  SyncGuard sync_;
  DeviceScope device_;
  std::array<std::optional<amp::AutocastGuard>, ThreadLocalState::kTypes.size()> autocast_;
};

}  // namespace anvil::detail
