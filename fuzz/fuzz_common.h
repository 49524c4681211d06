// Shared by the libFuzzer targets: an input may make a parser throw its
// documented error type and nothing else. Any other exception is a bug and
// is turned into a crash so libFuzzer keeps the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>

#define ANVIL_FUZZ_ONLY_THROWS(AllowedError, ...)                                                 \
  do {                                                                                            \
    try {                                                                                         \
      __VA_ARGS__;                                                                                \
    } catch (const AllowedError&) {                                                               \
    } catch (const std::exception& e) {                                                           \
      std::fprintf(stderr, "fuzz: unexpected exception (not " #AllowedError "): %s\n", e.what()); \
      std::abort();                                                                               \
    }                                                                                             \
  } while (0)

#define ANVIL_FUZZ_REQUIRE(cond)                                                              \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "fuzz: property failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)
