#include "distributed/watchdog.h"

#include <vector>

#include "anvil/error.h"

namespace anvil::dist::detail {

using anvil::detail::cat;

namespace {

// What ANVIL_DIST_DEBUG=1 compares across ranks (Note [Who did not arrive]).
struct Fingerprint {
  std::int64_t seq = 0;
  std::int32_t kind = 0, op = 0, root = 0, dtype = 0, ndim = 0, device_type = 0;
  std::int64_t dims[kMaxDims] = {};
};

Fingerprint fingerprint_of(const CollectiveInfo& info) {
  Fingerprint f;
  f.seq = static_cast<std::int64_t>(info.seq);
  f.kind = static_cast<std::int32_t>(info.kind);
  const bool reduces = info.kind == CollectiveKind::Allreduce || info.kind == CollectiveKind::ReduceScatter;
  f.op = reduces ? static_cast<std::int32_t>(info.op) : 0;
  f.root = info.kind == CollectiveKind::Broadcast ? info.root : 0;
  if (info.kind != CollectiveKind::Barrier) {
    f.dtype = static_cast<std::int32_t>(info.dtype);
    // The type, not the index: rank r works on its own cuda:r or opencl:r.
    f.device_type = static_cast<std::int32_t>(info.device.type());
    f.ndim = info.shape.size();
    for (int i = 0; i < f.ndim; ++i) f.dims[i] = info.shape[i];
  }
  return f;
}

Shape shape_of(const Fingerprint& f) {
  Shape s;
  for (int i = 0; i < f.ndim; ++i) s.push_back(f.dims[i]);
  return s;
}

// The first field in which `b` (rank rb) differs from `a` (rank ra), as a
// message; "" when they agree.
std::string fingerprint_difference(const Fingerprint& a, int ra, const Fingerprint& b, int rb) {
  auto both = [&](const std::string& field, const std::string& va, const std::string& vb) {
    return cat("ranks disagree on the ", field, "; rank ", ra, " has ", va, ", rank ", rb, " has ", vb);
  };
  if (a.kind != b.kind)
    return both("collective", name(static_cast<CollectiveKind>(a.kind)), name(static_cast<CollectiveKind>(b.kind)));
  if (a.seq != b.seq) return both("sequence number", cat("#", a.seq), cat("#", b.seq));
  if (a.op != b.op)
    return both("reduce op", to_string(static_cast<ReduceOp>(a.op)), to_string(static_cast<ReduceOp>(b.op)));
  if (a.root != b.root) return both("root", cat(a.root), cat(b.root));
  if (a.dtype != b.dtype)
    return both("dtype", std::string(to_string(static_cast<DType>(a.dtype))),
                std::string(to_string(static_cast<DType>(b.dtype))));
  bool same_shape = a.ndim == b.ndim;
  for (int i = 0; same_shape && i < a.ndim; ++i) same_shape = a.dims[i] == b.dims[i];
  if (!same_shape) return both("shape", shape_of(a).str(), shape_of(b).str());
  if (a.device_type != b.device_type)
    return both("device type", std::string(to_string(static_cast<DeviceType>(a.device_type))),
                std::string(to_string(static_cast<DeviceType>(b.device_type))));
  return "";
}

}  // namespace

void Watchdog::timed_out(const char* waiting_for) {
  const std::vector<std::uint64_t>& heard = world_.heard();
  std::string missing, last;
  for (int r = 0; r < world_.size(); ++r) {
    if (heard[r] >= info_.seq) continue;
    missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    last += cat(last.empty() ? "" : ", ", "rank ", r, " at ", heard[r] == 0 ? std::string("none") : cat("#", heard[r]));
  }
  const std::string who = missing.empty()
                              ? std::string(
                                    "every rank arrived, so they disagree on the collective (run with "
                                    "ANVIL_DIST_DEBUG=1 to find the difference)")
                              : cat("ranks that did not arrive: [", missing, "] (last collective heard from: ", last,
                                    "); a rank died, hung, or skipped this collective");
  throw DistTimeout(cat("dist: ", info_.str(), " did not complete within ", timeout_s_,
                        " s (ANVIL_DIST_TIMEOUT) on rank ", world_.rank(),
                        waiting_for != nullptr ? cat(" (waiting in ", waiting_for, ")") : std::string(), "; ", who,
                        "; the group is unusable and this process exits with status 1"));
}

void check_fingerprints(WorldEngine& world, Watchdog& watch) {
  const Fingerprint mine = fingerprint_of(watch.info());
  std::vector<Fingerprint> all(static_cast<std::size_t>(world.size()));
  world.exchange(&mine, sizeof(Fingerprint), all.data(), watch);
  for (int r = 0; r < world.size(); ++r) {
    const std::string diff = fingerprint_difference(mine, world.rank(), all[r], r);
    if (!diff.empty())
      throw CollectiveMismatch(cat("dist: ", watch.info().str(), ": ", diff, " (ANVIL_DIST_DEBUG=1 check, on rank ",
                                   world.rank(), "); every rank must issue the same collectives in the same order"));
  }
}

}  // namespace anvil::dist::detail
