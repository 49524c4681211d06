// anvil/sync_guard.h — a host sync that the program did not ask for, made
// a warning or an error (torch.cuda.set_sync_debug_mode). Every host sync
// (item, to_vector, printing, .to(cpu), synchronize) knows the line of user
// code that asked for it, through a defaulted SourceLocation parameter:
//
//   anvil::SyncGuard guard(anvil::SyncDebugMode::Error);
//   float l = loss.item<float>();   // on a device: throws anvil::ImplicitSync naming this line
//   auto h = loss.cpu();            // an explicit copy: allowed (still in the profiler's sync report)
#pragma once

#include <string>
#include <utility>

#include "anvil/error.h"

namespace anvil {

// What SyncGuard does with an implicit host sync (like
// torch.cuda.set_sync_debug_mode).
enum class SyncDebugMode { Off, Warn, Error };

// Thrown by an implicit host sync inside SyncGuard(SyncDebugMode::Error): the
// message and the fields name the API and the user's call site.
class ImplicitSync : public Error {
 public:
  ImplicitSync(std::string message, std::string api, std::string file, int line, std::string function)
      : Error(std::move(message)),
        api_(std::move(api)),
        file_(std::move(file)),
        function_(std::move(function)),
        line_(line) {}
  const std::string& api() const noexcept { return api_; }  // "item", "to_vector", "print", ...
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }
  const std::string& function() const noexcept { return function_; }

 private:
  std::string api_, file_, function_;
  int line_;
};

// While alive, a host sync on a device that the program did not ask for
// explicitly warns (stderr, once per call site and device) or throws ImplicitSync before
// waiting. Implicit: item(), to_vector(), printing (operator<<, to_string),
// and waits inside the library that no public call asked for. Explicit, never
// flagged (but still recorded by the profiler): synchronize(d), .to(device),
// .cpu(), .copy_to(device) and Event::elapsed_seconds — like PyTorch, where
// `.cpu()` is a copy you wrote, while `.item()` in a loop is the wait users
// regret. Queued ops never sync. CPU tensors never sync, so item() on a CPU
// tensor is not flagged. A guard sets the mode for its own thread (like
// NoGradGuard; anvil's worker threads, DataParallel's replicas, inherit the
// mode of the thread that started them); guards nest, and each restores the
// mode it found. A thread inside no guard follows the process-wide default,
// set_sync_debug_mode (torch.cuda.set_sync_debug_mode), Off at start.
class SyncGuard {
 public:
  explicit SyncGuard(SyncDebugMode mode) noexcept;
  ~SyncGuard();
  SyncGuard(const SyncGuard&) = delete;
  SyncGuard& operator=(const SyncGuard&) = delete;

 private:
  int previous_;  // this thread's mode before the guard; -1: none, the default applied
};
// The mode on this thread: its innermost SyncGuard's, else the default.
SyncDebugMode sync_debug_mode() noexcept;
// The process-wide default, for every thread inside no SyncGuard.
void set_sync_debug_mode(SyncDebugMode mode) noexcept;
SyncDebugMode default_sync_debug_mode() noexcept;

}  // namespace anvil
