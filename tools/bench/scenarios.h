// The chapter's exercises as named anvil-bench scenarios (DESIGN §1, §6).
#pragma once

#include <anvil/device.h>

#include <string>
#include <vector>

#include "report.h"

namespace anvil::bench {

struct Options {
  std::vector<Device> devices;  // in the order given
  bool quick = false;           // small sizes and few repeats (CI)
};

struct Scenario {
  const char* name;
  const char* summary;
  ScenarioResult (*run)(const Options&);
};

// matmul, sync-log, two-devices, transfer, roofline — in that order.
const std::vector<Scenario>& scenarios();

// How times are taken, for the report header.
inline constexpr const char* kTimingNote =
    "median of repeats after warm-up; anvil::Event on the device's own clock (queue profiling) where it has one, "
    "else the host steady clock around synchronize(device); work spanning two devices on the host clock; "
    "the clock column says which";

}  // namespace anvil::bench
