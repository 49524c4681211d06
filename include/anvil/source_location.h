// anvil::SourceLocation: where a public call was made, for the sync sentinel
// (profiler.h, Note [Sync call sites]):
//
//   float item(SourceLocation loc = SourceLocation::current()) const;
//
// Not std::source_location: clang 14 with libstdc++ 12 (our fuzz build) has no
// __builtin_source_location, so <source_location> is empty there, and a type
// that differed by compiler would give libanvil two ABIs. GCC and clang both
// evaluate these builtins at the caller when they are default arguments.
#pragma once

#include <cstdint>

namespace anvil {

class SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                          const char* function = __builtin_FUNCTION(),
                                          std::uint_least32_t line = __builtin_LINE()) noexcept {
    SourceLocation here;
    here.file_ = file;
    here.function_ = function;
    here.line_ = line;
    return here;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr std::uint_least32_t line() const noexcept { return line_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  std::uint_least32_t line_ = 0;
};

}  // namespace anvil
