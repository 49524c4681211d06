#include "anvil/ledger.h"

#include <iomanip>
#include <mutex>
#include <ostream>

#include "core/caching_allocator.h"
#include "core/ledger_counters.h"
#include "core/observer.h"

namespace anvil {

namespace {
std::mutex g_mutex;
LedgerReport& totals() {
  static LedgerReport r;
  return r;
}
}  // namespace

namespace detail {
void record_copy(Device from, Device to, std::uint64_t bytes) {
  std::lock_guard lock(g_mutex);
  Transfer& t = totals().transfers[{from, to}];
  ++t.copies;
  t.bytes += bytes;
}
void record_sync(Device d) {
  if (d.is_cpu()) return;
  std::lock_guard lock(g_mutex);
  ++totals().syncs[d];
}
namespace {
WorkCounters g_work[kNumDeviceTypes][kCountedDevices];
WorkCounters g_work_sink;
}  // namespace

WorkCounters& work_counters(Device d) noexcept {
  const int t = static_cast<int>(d.type()), i = d.index();
  if (t < 0 || t >= kNumDeviceTypes || i < 0 || i >= kCountedDevices) return g_work_sink;
  return g_work[t][i];
}

void record_collective(Device d, std::uint64_t bytes) {
  detail::observe_collective(d, bytes);
  std::lock_guard lock(g_mutex);
  Transfer& t = totals().collectives[d];
  ++t.copies;
  t.bytes += bytes;
}
}  // namespace detail

bool LedgerReport::less(const std::pair<Device, Device>& a, const std::pair<Device, Device>& b) {
  if (!(a.first == b.first)) return less_device(a.first, b.first);
  return less_device(a.second, b.second);
}
bool LedgerReport::less_device(const Device& a, const Device& b) {
  if (a.type() != b.type()) return a.type() < b.type();
  return a.index() < b.index();
}

std::uint64_t LedgerReport::copies(Device from, Device to) const {
  auto it = transfers.find({from, to});
  return it == transfers.end() ? 0 : it->second.copies;
}
std::uint64_t LedgerReport::bytes(Device from, Device to) const {
  auto it = transfers.find({from, to});
  return it == transfers.end() ? 0 : it->second.bytes;
}
std::uint64_t LedgerReport::host_syncs(Device d) const {
  auto it = syncs.find(d);
  return it == syncs.end() ? 0 : it->second;
}
std::uint64_t LedgerReport::collective_count(Device d) const {
  auto it = collectives.find(d);
  return it == collectives.end() ? 0 : it->second.copies;
}
std::uint64_t LedgerReport::collective_bytes(Device d) const {
  auto it = collectives.find(d);
  return it == collectives.end() ? 0 : it->second.bytes;
}
DeviceWork LedgerReport::device_work(Device d) const {
  auto it = work.find(d);
  return it == work.end() ? DeviceWork{} : it->second;
}
std::uint64_t LedgerReport::total_copies() const {
  std::uint64_t n = 0;
  for (auto& [k, v] : transfers) n += v.copies;
  return n;
}
std::uint64_t LedgerReport::total_bytes() const {
  std::uint64_t n = 0;
  for (auto& [k, v] : transfers) n += v.bytes;
  return n;
}
std::uint64_t LedgerReport::total_syncs() const {
  std::uint64_t n = 0;
  for (auto& [k, v] : syncs) n += v;
  return n;
}

std::ostream& operator<<(std::ostream& os, const LedgerReport& r) {
  os << std::left << std::setw(26) << "route" << std::right << std::setw(10) << "copies" << std::setw(14) << "bytes"
     << "\n";
  for (auto& [route, t] : r.transfers)
    os << std::left << std::setw(26) << (route.first.str() + " -> " + route.second.str()) << std::right << std::setw(10)
       << t.copies << std::setw(14) << detail::format_bytes(t.bytes) << "\n";
  os << std::left << std::setw(26) << "device" << std::right << std::setw(10) << "host syncs"
     << "\n";
  for (auto& [d, n] : r.syncs) os << std::left << std::setw(26) << d.str() << std::right << std::setw(10) << n << "\n";
  if (!r.collectives.empty()) {
    os << std::left << std::setw(26) << "device" << std::right << std::setw(10) << "collectives" << std::setw(14)
       << "bytes"
       << "\n";
    for (auto& [d, t] : r.collectives)
      os << std::left << std::setw(26) << d.str() << std::right << std::setw(10) << t.copies << std::setw(14)
         << detail::format_bytes(t.bytes) << "\n";
  }
  if (!r.work.empty()) {
    os << std::left << std::setw(26) << "device" << std::right << std::setw(10) << "launches" << std::setw(14)
       << "allocated" << std::setw(14) << "read" << std::setw(14) << "written"
       << "\n";
    for (auto& [d, w] : r.work)
      os << std::left << std::setw(26) << d.str() << std::right << std::setw(10) << w.launches << std::setw(14)
         << detail::format_bytes(w.bytes_allocated) << std::setw(14) << detail::format_bytes(w.bytes_read)
         << std::setw(14) << detail::format_bytes(w.bytes_written) << "\n";
  }
  return os;
}

LedgerReport ledger_totals() {
  LedgerReport r;
  {
    std::lock_guard lock(g_mutex);
    r = totals();
  }
  for (int t = 0; t < kNumDeviceTypes; ++t)
    for (int i = 0; i < detail::kCountedDevices; ++i) {
      const detail::WorkCounters& c = detail::g_work[t][i];
      const auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
      const DeviceWork w{get(c.launches), get(c.allocations), get(c.bytes_allocated), get(c.bytes_read),
                         get(c.bytes_written)};
      if (w.launches || w.allocations || w.bytes_read || w.bytes_written)
        r.work[Device(static_cast<DeviceType>(t), i)] = w;
    }
  return r;
}

Ledger::Ledger() : start_(ledger_totals()) {}
void Ledger::reset() { start_ = ledger_totals(); }

LedgerReport Ledger::report() const {
  LedgerReport now = ledger_totals();
  LedgerReport diff;
  for (auto& [route, t] : now.transfers) {
    auto it = start_.transfers.find(route);
    Transfer d = t;
    if (it != start_.transfers.end()) {
      d.copies -= it->second.copies;
      d.bytes -= it->second.bytes;
    }
    if (d.copies) diff.transfers[route] = d;
  }
  for (auto& [dev, n] : now.syncs) {
    auto it = start_.syncs.find(dev);
    const std::uint64_t d = n - (it == start_.syncs.end() ? 0 : it->second);
    if (d) diff.syncs[dev] = d;
  }
  for (auto& [dev, t] : now.collectives) {
    auto it = start_.collectives.find(dev);
    Transfer d = t;
    if (it != start_.collectives.end()) {
      d.copies -= it->second.copies;
      d.bytes -= it->second.bytes;
    }
    if (d.copies) diff.collectives[dev] = d;
  }
  for (auto& [dev, w] : now.work) {
    const DeviceWork s = start_.device_work(dev);
    const DeviceWork d{w.launches - s.launches, w.allocations - s.allocations, w.bytes_allocated - s.bytes_allocated,
                       w.bytes_read - s.bytes_read, w.bytes_written - s.bytes_written};
    if (d.launches || d.allocations || d.bytes_read || d.bytes_written) diff.work[dev] = d;
  }
  return diff;
}

}  // namespace anvil
