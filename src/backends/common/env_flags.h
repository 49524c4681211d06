// The backends' names for the one env_flag helper (src/core/env_flag.h).
#pragma once

#include "core/env_flag.h"

namespace anvil::device_common {
using detail::env_flag;
using detail::env_flag_off;
}  // namespace anvil::device_common
