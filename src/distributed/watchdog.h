// One collective's deadline, the watchdog its engine's calls poll
// (engine.h), and with ANVIL_DIST_DEBUG=1 the fingerprint check across ranks:
// what names the ranks that are missing or disagree.
//
// Note [Who did not arrive]
// Before each collective every rank tells every other rank "arrived at #N"
// on a channel of its own (WorldEngine::announce: small nonblocking MPI
// messages, one receive kept posted from each peer). When a collective
// passes its deadline, the ranks not heard from at #N are the ranks that
// did not arrive: a rank that died, hung, or skipped the collective. MPI
// cannot recover from that, so the group is then broken: the collective's
// wait() throws DistTimeout, every later collective fails at once with it,
// and the process leaves with status 1 — at exit, or after
// kExitGraceSeconds if it is still running then (the message is printed to
// stderr first).
#pragma once

#include <chrono>
#include <string>

#include "distributed/engine.h"

namespace anvil::dist::detail {

// One collective's deadline and the watchdog that its engine's calls poll
// (engine.h).
class Watchdog final : public Watch {
 public:
  Watchdog(WorldEngine& world, const CollectiveInfo& info, double timeout_s)
      : world_(world),
        info_(info),
        timeout_s_(timeout_s),
        deadline_(std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                         std::chrono::duration<double>(timeout_s))) {}

  const CollectiveInfo& info() const override { return info_; }

  bool peers_arrived() override {
    const std::vector<std::uint64_t>& heard = world_.heard();
    for (int r = 0; r < world_.size(); ++r)
      if (r != world_.rank() && heard[r] < info_.seq) return false;
    return true;
  }

  bool expired() override {
    world_.heard();  // take in the arrivals, for timed_out's message
    return std::chrono::steady_clock::now() > deadline_;
  }

  [[noreturn]] void timed_out(const char* waiting_for) override;

 private:
  WorldEngine& world_;
  const CollectiveInfo& info_;
  double timeout_s_;
  std::chrono::steady_clock::time_point deadline_;
};

// ANVIL_DIST_DEBUG=1: exchanges this collective's fingerprint (kind, number,
// op, root, dtype, shape, device type) with every rank and throws
// CollectiveMismatch naming the first field where a rank differs.
void check_fingerprints(WorldEngine& world, Watchdog& watch);

}  // namespace anvil::dist::detail
