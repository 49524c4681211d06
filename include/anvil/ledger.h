// anvil/ledger.h — what data movement and host waits cost (DESIGN §4.8).
//
//   anvil::Ledger scope;                  // counts from here
//   std::cout << x_on_gpu;                // one device→host copy
//   auto r = scope.report();
//   r.copies(anvil::gpu(0), anvil::cpu()) == 1;
//   std::cout << r;                       // a table: route, copies, bytes, syncs
//   r.launches(anvil::gpu(0));            // kernels the step launched there
//
// Counters are process-wide and thread-safe; a Ledger is a snapshot taken at
// construction, and report() gives the difference since then.
//
// Note [What a launch is]
// Per device the ledger also counts the work anvil put there (issue 38:
// many tiny launches are what makes a small model slow on a GPU). A launch
// is one command that computes on the device: a kernel of src/kernels, a
// vendor-library call (CLBlast, cuBLAS, cuDNN: one each, whatever it runs
// inside) or a device-local buffer copy. On the CPU, where nothing is
// queued, a launch is one backend primitive (a parallel region, a serial
// loop or a oneDNN/OpenBLAS call), the unit a device would launch.
// Bytes read and written are the operands' own elements (numel * itemsize
// of each tensor a primitive reads and writes; a broadcast operand counts
// its distinct elements), not cache traffic; library calls count their
// operands where the arguments say what they are. Allocated bytes are
// tensor storage asked of the device's caching allocator, hits included.
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

// What anvil ran on one device (Note [What a launch is]).
struct DeviceWork {
  std::uint64_t launches = 0;
  std::uint64_t allocations = 0;      // tensor storages created
  std::uint64_t bytes_allocated = 0;  // their bytes
  std::uint64_t bytes_read = 0;       // by anvil's own kernels and library calls
  std::uint64_t bytes_written = 0;
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
  // device → launches, allocations and kernel traffic (devices with any).
  std::map<Device, DeviceWork, bool (*)(const Device&, const Device&)> work{&less_device};

  std::uint64_t copies(Device from, Device to) const;
  std::uint64_t bytes(Device from, Device to) const;
  std::uint64_t host_syncs(Device d) const;
  std::uint64_t total_copies() const;
  std::uint64_t total_bytes() const;
  std::uint64_t total_syncs() const;
  std::uint64_t collective_count(Device d) const;
  std::uint64_t collective_bytes(Device d) const;
  DeviceWork device_work(Device d) const;  // zeros for a device with none
  std::uint64_t launches(Device d) const { return device_work(d).launches; }
  std::uint64_t bytes_allocated(Device d) const { return device_work(d).bytes_allocated; }
  std::uint64_t bytes_read(Device d) const { return device_work(d).bytes_read; }
  std::uint64_t bytes_written(Device d) const { return device_work(d).bytes_written; }

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
