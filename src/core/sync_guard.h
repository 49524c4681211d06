// SyncGuard's rule (anvil/sync_guard.h), applied by every host wait
// (SyncSpan in observer.h) before it waits.
#pragma once

#include "anvil/device.h"
#include "core/observer.h"

namespace anvil::detail {

// Nothing when this thread's mode is Off or `site` asked for the wait by
// name; else warns (once per call site and device) or throws ImplicitSync
// naming `site` (null: a wait inside anvil that no public call asked for).
void check_sync_guard(Device d, const CallSite* site);

}  // namespace anvil::detail
