// Boolean settings from the environment (ANVIL_SYNC, ANVIL_OPENCL_CPU,
// ANVIL_OPENCL_CLBLAST, ANVIL_NO_FUSED, …), read the same way everywhere in
// anvil: the core, the op frontend and every backend.
//
//   if (env_flag("ANVIL_SYNC")) …              // off unless set to 1/true/yes/on
//   if (!env_flag_off("ANVIL_OPENCL_PROFILE")) // on unless set to 0/false/no/off
//
// Values are read at each call (cache the result where it is hot).
#pragma once

#include <cstdlib>
#include <string_view>

namespace anvil::detail {

// True when the variable is set to 1 (or true/yes/on).
inline bool env_flag(const char* name) noexcept {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string_view s(v);
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

// True when it is set to 0 (or false/no/off): a default that is on, turned off.
inline bool env_flag_off(const char* name) noexcept {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string_view s(v);
  return s == "0" || s == "false" || s == "no" || s == "off";
}

}  // namespace anvil::detail
