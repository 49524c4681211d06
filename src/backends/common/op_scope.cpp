#include "backends/common/op_scope.h"

namespace anvil::device_common {

namespace {
thread_local const char* t_current_op = nullptr;
}

const char* current_op_or(const char* fallback) noexcept { return t_current_op ? t_current_op : fallback; }

OpScope::OpScope(const char* op) noexcept : previous_(t_current_op) { t_current_op = op; }
OpScope::~OpScope() { t_current_op = previous_; }

}  // namespace anvil::device_common
