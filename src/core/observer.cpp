// See Note [Observer off] in observer.h.
#include "core/observer.h"

#include "core/sync_guard.h"

namespace anvil::detail {

std::atomic<const Observer*> g_observer{nullptr};

void set_observer(const Observer* observer) noexcept { g_observer.store(observer, std::memory_order_relaxed); }

namespace {
thread_local const CallSite* t_site = nullptr;
}  // namespace

const CallSite* current_call_site() noexcept { return t_site; }

SiteScope::SiteScope(const char* api, const SourceLocation& location, bool is_explicit) noexcept
    : site_{api, location, is_explicit}, owner_(t_site == nullptr) {
  if (owner_) t_site = &site_;
}
SiteScope::~SiteScope() {
  if (owner_) t_site = nullptr;
}

SyncSpan::SyncSpan(Device d) {
  if (d.is_cpu()) return;
  check_sync_guard(d, t_site);
  if (const Observer* o = observer()) [[unlikely]] {
    span_ = o->begin_sync(d, t_site);
    if (span_.index >= 0) observer_ = o;
  }
}

}  // namespace anvil::detail
