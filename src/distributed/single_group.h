// A world of one process (engine "single"); see single_group.cpp.
#pragma once

#include <memory>

#include "anvil/dist.h"

namespace anvil::dist::detail {

std::unique_ptr<ProcessGroup> make_single_group();

}  // namespace anvil::dist::detail
