// anvil/ledger.h — what data movement and host waits cost (DESIGN §4.8).
//
//   anvil::Ledger scope;                  // counts from here
//   std::cout << x_on_gpu;                // one device→host copy
//   auto r = scope.report();
//   r.copies(anvil::gpu(0), anvil::cpu()) == 1;
//   std::cout << r;                       // a table: route, copies, bytes, syncs
//
// Counters are process-wide and thread-safe; a Ledger is a snapshot taken at
// construction, and report() gives the difference since then.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <utility>

#include "anvil/device.h"

namespace anvil {

struct Transfer {
  std::uint64_t copies = 0;
  std::uint64_t bytes = 0;
};

struct LedgerReport {
  // (source, destination) → copies and bytes. Same-device copies (clone,
  // copy_to on the same device) are counted too, as (d, d).
  std::map<std::pair<Device, Device>, Transfer,
           bool (*)(const std::pair<Device, Device>&, const std::pair<Device, Device>&)>
      transfers{&less};
  // device → times the host waited for it (synchronize, host reads).
  std::map<Device, std::uint64_t, bool (*)(const Device&, const Device&)> syncs{&less_device};

  // device → collectives (anvil::dist) run on its tensors and their bytes
  // (this rank's buffer: the tensor reduced or broadcast, all gathered parts).
  // Host staging copies of device tensors show up in `transfers`.
  std::map<Device, Transfer, bool (*)(const Device&, const Device&)> collectives{&less_device};

  std::uint64_t copies(Device from, Device to) const;
  std::uint64_t bytes(Device from, Device to) const;
  std::uint64_t host_syncs(Device d) const;
  std::uint64_t total_copies() const;
  std::uint64_t total_bytes() const;
  std::uint64_t total_syncs() const;
  std::uint64_t collective_count(Device d) const;
  std::uint64_t collective_bytes(Device d) const;

  static bool less(const std::pair<Device, Device>& a, const std::pair<Device, Device>& b);
  static bool less_device(const Device& a, const Device& b);
};
std::ostream& operator<<(std::ostream& os, const LedgerReport& r);

class Ledger {
 public:
  Ledger();                     // snapshot now
  LedgerReport report() const;  // counts since construction
  void reset();                 // snapshot again

 private:
  LedgerReport start_;
};

// Process-wide totals since start.
LedgerReport ledger_totals();

}  // namespace anvil
