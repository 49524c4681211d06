// The primitive a thread is running, so errors raised deep inside a device
// backend (a failed native call, a compile error) name the user's op.
#pragma once

namespace anvil::device_common {

// The op of the innermost live OpScope on this thread, or `fallback`.
const char* current_op_or(const char* fallback) noexcept;

class OpScope {
 public:
  explicit OpScope(const char* op) noexcept;
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  const char* previous_;
};

}  // namespace anvil::device_common
