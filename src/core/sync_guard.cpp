// SyncGuard (anvil/sync_guard.h): per thread, with a process-wide default
// (docs/threads.md); the worker threads anvil starts take their caller's
// mode (Note [Thread-local state] in thread_state.h).
#include "core/sync_guard.h"

#include <atomic>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "anvil/sync_guard.h"

namespace anvil {
namespace {
// The process-wide default (set_sync_debug_mode) and this thread's
// SyncGuard, which wins while one is alive (-1: none).
std::atomic<SyncDebugMode> g_sync_mode{SyncDebugMode::Off};
thread_local int t_sync_override = -1;
}  // namespace

SyncGuard::SyncGuard(SyncDebugMode mode) noexcept : previous_(std::exchange(t_sync_override, static_cast<int>(mode))) {}
SyncGuard::~SyncGuard() { t_sync_override = previous_; }
SyncDebugMode sync_debug_mode() noexcept {
  const int mine = t_sync_override;
  return mine >= 0 ? static_cast<SyncDebugMode>(mine) : g_sync_mode.load(std::memory_order_relaxed);
}
void set_sync_debug_mode(SyncDebugMode mode) noexcept { g_sync_mode.store(mode, std::memory_order_relaxed); }
SyncDebugMode default_sync_debug_mode() noexcept { return g_sync_mode.load(std::memory_order_relaxed); }

namespace detail {

namespace {
std::string site_text(const CallSite& site) {
  return cat(site.location.file_name(), ":", site.location.line(), " (", site.location.function_name(), ")");
}
}  // namespace

void check_sync_guard(Device d, const CallSite* site) {
  const SyncDebugMode mode = sync_debug_mode();
  if (mode == SyncDebugMode::Off) return;
  if (site != nullptr && site->is_explicit) return;
  const std::string api = site ? site->api : "an internal wait";
  const std::string where = site ? site_text(*site) : "inside anvil (no public call on this thread)";
  if (mode == SyncDebugMode::Warn) {
    static std::mutex warned_mutex;
    static std::set<std::string> warned;
    std::lock_guard lock(warned_mutex);
    if (!warned.insert(where + " " + d.str()).second) return;
    std::cerr << "anvil: warning: implicit host sync on " << d << " by " << api << " at " << where
              << " (SyncGuard); move it out of the loop, or keep the value on the device\n";
    return;
  }
  throw ImplicitSync(cat(api, ": implicit host sync on ", d, " inside SyncGuard(SyncDebugMode::Error) at ", where,
                         "; expected no host waits here; keep the value on the device, or ",
                         "copy it explicitly with .to(cpu()) if the wait is meant"),
                     api, site ? site->location.file_name() : "", site ? static_cast<int>(site->location.line()) : 0,
                     site ? site->location.function_name() : "");
}

}  // namespace detail
}  // namespace anvil
