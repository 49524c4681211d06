#pragma once
namespace anvil {
inline constexpr const char* kVersion = "0.1.0";
}
