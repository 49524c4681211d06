// Recording: the profiler's observer (core/observer.h), the session it
// writes into, and Profile's lifetime. The reports are in report.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <set>
#include <utility>

#include "anvil/error.h"
#include "anvil/tensor.h"
#include "core/backend.h"
#include "profiler/session.h"

namespace anvil::profiler::detail {

std::atomic<bool> g_recording{false};

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* category_name(Kind kind) noexcept {
  switch (kind) {
    case Kind::Op:
      return "op";
    case Kind::Backward:
      return "backward";
    case Kind::Copy:
      return "copy";
    case Kind::Sync:
      return "sync";
    case Kind::Optimizer:
      return "optimizer";
    case Kind::Collective:
      return "collective";
    case Kind::User:
      return "user";
  }
  return "op";
}

namespace {

// The recording session (Note [Profile lifetime]). Start and stop are
// serialised by g_control; g_current (under g_current_mutex, held only to
// read or swap it) is the session threads join, and g_current_generation
// says without a lock which one that is (0: none).
std::mutex g_control;
std::mutex g_current_mutex;
std::shared_ptr<Session> g_current;
std::atomic<std::uint32_t> g_current_generation{0};
std::uint32_t g_generation = 0;  // under g_control

// The session this thread records into and its log there.
struct ThreadState {
  std::weak_ptr<Session> session;
  ThreadLog* log = nullptr;
  std::uint32_t generation = 0;
};
thread_local ThreadState t_state;

// A hook's hold on the recording session: null when none records (or this
// thread's log could not be made). Keeps the session alive for the call.
struct Current {
  std::shared_ptr<Session> session;
  ThreadLog* log = nullptr;
  explicit operator bool() const noexcept { return session != nullptr; }
};

Current current() noexcept {
  const std::uint32_t generation = g_current_generation.load(std::memory_order_acquire);
  if (generation == 0) return {};
  if (t_state.generation == generation) {
    if (auto s = t_state.session.lock()) return {std::move(s), t_state.log};
    return {};
  }
  // This thread's first hook in this session: join it with a log of its own.
  std::shared_ptr<Session> s;
  {
    std::lock_guard lock(g_current_mutex);
    s = g_current;
  }
  if (s == nullptr) return {};
  try {
    auto log = std::make_unique<ThreadLog>();
    ThreadLog* raw = log.get();
    std::lock_guard lock(s->mutex);
    if (s->stopped.load(std::memory_order_relaxed)) return {};
    raw->thread = static_cast<int>(s->threads.size());
    s->threads.push_back(std::move(log));
    t_state.session = s;
    t_state.log = raw;
    t_state.generation = s->generation;
    return {std::move(s), raw};
  } catch (...) {
    return {};
  }
}

void register_exit_handler();

void release_marker(Device d, void* marker) noexcept {
  if (marker == nullptr) return;
  try {
    anvil::detail::backend_for(d.type())->release_timestamp(d.index(), marker);
  } catch (...) {
  }
}

// The reference marker of `d`'s clock, tied to the host's on its first
// profiled op: waits for the device (not counted by the ledger: the
// profile's own wait), then records the reference marker on the now idle
// queue. Null: no clock, or the session has stopped.
void* clock_of(Session& s, Device d) {
  {
    std::lock_guard lock(s.mutex);
    if (s.stopped.load(std::memory_order_relaxed)) return nullptr;
    auto it = s.clocks.find(d);
    if (it != s.clocks.end() && it->second.tried) return it->second.reference;
  }
  DeviceClock c;
  c.tried = true;
  anvil::detail::Backend* b = anvil::detail::backend_for(d.type());
  if (b != nullptr && b->has_device_clock(d.index())) {
    b->synchronize(d.index());
    c.reference_host_ns = now_ns();
    c.reference = b->record_timestamp(d.index());
  }
  void* reference = nullptr;
  bool keep = false;
  {
    std::lock_guard lock(s.mutex);
    if (!s.stopped.load(std::memory_order_relaxed)) {
      auto [it, inserted] = s.clocks.emplace(d, c);
      keep = inserted;  // else another thread won
      reference = it->second.reference;
    }
  }
  if (!keep) release_marker(d, c.reference);
  if (s.until_exit.load()) register_exit_handler();  // after the device's runtime started: runs before its teardown
  return reference;
}

void* mark(Session& s, Device d) noexcept {
  if (d.is_cpu() || !s.options.device_time) return nullptr;
  try {
    if (clock_of(s, d) == nullptr) return nullptr;
    return anvil::detail::backend_for(d.type())->record_timestamp(d.index());
  } catch (...) {
    return nullptr;  // a device that cannot be marked keeps host-only spans
  }
}

void append_shapes(std::string& out, std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs) {
    if (!out.empty()) out += ", ";
    if (t == nullptr || !t->defined()) {
      out += t == nullptr ? "scalar" : "none";
      continue;
    }
    out += '[';
    const Shape& shape = t->shape();
    for (int i = 0; i < shape.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(shape[i]);
    }
    out += "] ";
    out += to_string(t->dtype());
  }
}

// Opens a record on this thread; -1 when it should not be recorded.
Slot open_record(const Current& c, Kind kind, std::string&& name, Device d, std::string&& shapes) noexcept {
  if (c.log == nullptr) return {};
  void* marker = nullptr;
  try {
    marker = kind == Kind::Sync || kind == Kind::User || kind == Kind::Optimizer ? nullptr : mark(*c.session, d);
    std::lock_guard lock(c.log->mutex);
    ThreadLog& log = *c.log;
    if (log.closed) {
      release_marker(d, std::exchange(marker, nullptr));
      return {};
    }
    Record r;
    r.kind = kind;
    r.name = std::move(name);
    r.shapes = std::move(shapes);
    r.device = d;
    r.depth = static_cast<int>(log.open.size());
    r.start_ns = now_ns();
    log.records.push_back(std::move(r));
    log.records.back().mark_start = std::exchange(marker, nullptr);
    const int index = static_cast<int>(log.records.size()) - 1;
    log.open.push_back(index);
    return {index, c.session->generation};
  } catch (...) {
    release_marker(d, marker);
    return {};
  }
}

Slot begin_named(const Current& c, Kind kind, std::string_view name, Device d) noexcept {
  if (!c) return {};
  try {
    return open_record(c, kind, std::string(name), d, {});
  } catch (...) {
    return {};
  }
}

}  // namespace

Slot begin_op(Kind kind, const char* name, const Device* device, std::initializer_list<const Tensor*> inputs) noexcept {
  const Current c = current();
  if (!c || c.log == nullptr) return {};
  Device d = cpu();
  if (device != nullptr) {
    d = *device;
  } else {
    for (const Tensor* t : inputs)
      if (t != nullptr && t->defined()) {
        d = t->device();
        break;
      }
  }
  // The same op already open on this thread (binary_op under add's span,
  // reduce_op under sum's): one span, not two.
  {
    std::lock_guard lock(c.log->mutex);
    if (c.log->closed) return {};
    if (!c.log->open.empty()) {
      const Record& top = c.log->records[c.log->open.back()];
      if (top.kind == kind && top.name == name) return {};
    }
  }
  try {
    std::string shapes;
    if (c.session->options.record_shapes) append_shapes(shapes, inputs);
    return open_record(c, kind, name, d, std::move(shapes));
  } catch (...) {
    return {};
  }
}

Slot begin_named(Kind kind, std::string_view name, Device d) noexcept { return begin_named(current(), kind, name, d); }

Slot begin_copy(Device from, Device to) noexcept {
  try {
    return begin_named(Kind::Copy, "copy " + from.str() + " -> " + to.str(), to.is_cpu() ? from : to);
  } catch (...) {
    return {};
  }
}

namespace {
void end_span(const Current& c, Slot slot, std::uint64_t bytes) noexcept {
  if (!c || c.log == nullptr || slot.generation != c.session->generation) return;
  ThreadLog& log = *c.log;
  bool marked = false;
  Device device;
  {
    std::lock_guard lock(log.mutex);
    if (log.closed || slot.index >= static_cast<int>(log.records.size()) || log.records[slot.index].closed) return;
    const Record& r = log.records[slot.index];
    marked = r.mark_start != nullptr;
    device = r.device;
  }
  // The end marker is recorded outside the log's lock: clock_of takes the
  // session's (Note [Profile lifetime]).
  void* marker = marked ? mark(*c.session, device) : nullptr;
  std::lock_guard lock(log.mutex);
  if (log.closed) {  // stopped meanwhile: stop() closed the span and released its start marker
    release_marker(device, marker);
    return;
  }
  Record& r = log.records[slot.index];
  r.end_ns = now_ns();
  r.mark_end = marker;
  r.bytes += bytes;
  r.closed = true;
  auto it = std::find(log.open.begin(), log.open.end(), slot.index);
  if (it != log.open.end()) log.open.erase(it);
  if (!log.open.empty()) {
    Record& parent = log.records[log.open.back()];
    parent.child_ns += r.end_ns - r.start_ns;
    parent.memory += r.memory;
  }
}
}  // namespace

void end_span(Slot slot, std::uint64_t bytes) noexcept { end_span(current(), slot, bytes); }

// ---- syncs ---------------------------------------------------------------------------

namespace {

// A host wait, filed under the call site that asked for it.
Slot begin_sync(Device d, const anvil::detail::CallSite* site) noexcept {
  const Current c = current();
  const Slot slot = begin_named(c, Kind::Sync, "sync", d);
  if (slot.index < 0) return slot;
  int index = -1;
  try {
    SyncSite key;
    key.api = site ? site->api : "";
    key.file = site ? site->location.file_name() : "";
    key.line = site ? static_cast<int>(site->location.line()) : 0;
    key.function = site ? site->location.function_name() : "";
    key.implicit = site == nullptr || !site->is_explicit;
    std::lock_guard lock(c.session->mutex);
    if (c.session->stopped.load(std::memory_order_relaxed)) return slot;
    std::vector<SyncSite>& sites = c.session->sites;
    for (std::size_t i = 0; i < sites.size() && index < 0; ++i) {
      const SyncSite& k = sites[i];
      if (k.line == key.line && k.file == key.file && k.api == key.api && k.function == key.function)
        index = static_cast<int>(i);
    }
    if (index < 0) {
      sites.push_back(std::move(key));
      index = static_cast<int>(sites.size()) - 1;
    }
  } catch (...) {
  }
  std::lock_guard lock(c.log->mutex);
  if (!c.log->closed) c.log->records[slot.index].site = index;
  return slot;
}

// ---- memory and collectives -------------------------------------------------------

void memory_event(Device d, std::int64_t bytes) noexcept {
  const Current c = current();
  if (!c || !c.session->options.memory) return;
  Session& s = *c.session;
  const std::int64_t ns = now_ns();
  try {
    {
      std::lock_guard lock(s.mutex);
      if (s.stopped.load(std::memory_order_relaxed)) return;
      MemoryTotals& m = s.memory.try_emplace(d).first->second;
      m.device = d;
      if (bytes >= 0) {
        ++m.allocations;
        m.bytes_allocated += static_cast<std::uint64_t>(bytes);
      } else {
        ++m.frees;
        m.bytes_freed += static_cast<std::uint64_t>(-bytes);
      }
      std::int64_t& live = s.live[d];
      live += bytes;
      m.peak_live_bytes = std::max(m.peak_live_bytes, live);
      s.samples.push_back({ns, d, live});
    }
    if (c.log != nullptr) {
      std::lock_guard lock(c.log->mutex);
      if (!c.log->closed && !c.log->open.empty()) c.log->records[c.log->open.back()].memory += bytes;
    }
  } catch (...) {
  }
}

void collective_event(Device d, std::uint64_t bytes) noexcept {
  const Current c = current();
  if (!c || c.log == nullptr) return;
  // Inside an engine's collective span (a Range of category "collective"):
  // its bytes. Otherwise (the in-process groups) a span of its own.
  {
    std::lock_guard lock(c.log->mutex);
    if (c.log->closed) return;
    if (!c.log->open.empty()) {
      Record& top = c.log->records[c.log->open.back()];
      if (top.kind == Kind::Collective) {
        top.bytes += bytes;
        top.device = d;
        return;
      }
    }
  }
  const Slot slot = begin_named(c, Kind::Collective, "collective", d);
  if (slot.index >= 0) end_span(c, slot, bytes);
}

// A piece of CPU work, filed under the span open on this thread (Note
// [Parallel cost report] in src/backends/cpu/threads.h); outside any span
// it is not recorded.
void parallel_event(int threads, double width, bool region, std::int64_t ns) noexcept {
  const Current c = current();
  if (!c || c.log == nullptr) return;
  try {
    std::lock_guard lock(c.log->mutex);
    if (c.log->closed || c.log->open.empty()) return;
    c.log->records[c.log->open.back()].parallel.push_back(
        {.width = width, .us = static_cast<double>(ns) * 1e-3, .threads = threads, .region = region});
  } catch (...) {
  }
}

// A convolution's algorithm, filed under the span open on this thread (Note
// [Convolution algorithms]); outside any span it is not recorded.
void algorithm_event(const anvil::detail::ConvAlgorithm& choice) noexcept {
  const Current c = current();
  if (!c || c.log == nullptr) return;
  try {
    std::lock_guard lock(c.log->mutex);
    if (c.log->closed || c.log->open.empty()) return;
    c.log->records[c.log->open.back()].algorithms.push_back({.direction = choice.direction,
                                                             .algorithm = std::string(choice.algorithm),
                                                             .math = std::string(choice.math),
                                                             .workspace_bytes = choice.workspace_bytes});
  } catch (...) {
  }
}

}  // namespace

// What the profiler receives from the core while it records (Note [Observer off]).
constinit const anvil::detail::Observer kObserver{
    .begin_op = begin_op,
    .begin_named = begin_named,
    .begin_copy = begin_copy,
    .begin_sync = begin_sync,
    .end_span = end_span,
    .memory = memory_event,
    .collective = collective_event,
    .parallel = parallel_event,
    .algorithm = algorithm_event,
};

// ---- stopping ------------------------------------------------------------------------

namespace {

// Reads the logs without their locks: stop_session closed them first, and no
// thread writes a closed log (Note [Profile lifetime]).
void resolve_device_spans(Session& s) {
  for (auto& [device, clock] : s.clocks) {
    if (clock.reference == nullptr) continue;
    anvil::detail::Backend* b = anvil::detail::backend_for(device.type());
    const int index = device.index();
    try {
      b->synchronize(index);  // the profile's own wait: not a sync of the program
    } catch (...) {
    }
    for (auto& log : s.threads) {
      for (Record& r : log->records) {
        if (!(r.device == device)) continue;
        try {
          if (r.mark_start != nullptr && r.mark_end != nullptr) {
            const double a = b->timestamp_elapsed(index, clock.reference, r.mark_start);
            const double e = b->timestamp_elapsed(index, clock.reference, r.mark_end);
            r.device_start_ns = clock.reference_host_ns + static_cast<std::int64_t>(a * 1e9);
            r.device_end_ns = clock.reference_host_ns + static_cast<std::int64_t>(e * 1e9);
            r.has_device_span = true;
          }
        } catch (...) {
          r.has_device_span = false;
        }
        release_marker(device, r.mark_start);
        release_marker(device, r.mark_end);
        r.mark_start = r.mark_end = nullptr;
      }
    }
    release_marker(device, clock.reference);
    clock.reference = nullptr;
  }
}

}  // namespace

void stop_session(Session& s) {
  std::lock_guard control(g_control);
  if (s.stopped.load()) return;
  {
    std::lock_guard lock(g_current_mutex);
    if (g_current.get() == &s) {
      anvil::detail::set_observer(nullptr);
      g_recording.store(false, std::memory_order_relaxed);
      g_current_generation.store(0, std::memory_order_release);
      g_current.reset();
    }
  }
  {  // from here no thread joins the session, and its clocks, sites and memory stay as they are
    std::lock_guard lock(s.mutex);
    s.stopped.store(true);
    s.stop_ns = now_ns();
  }
  for (auto& log : s.threads) {  // spans still open end now, without a device span
    std::vector<std::pair<Device, void*>> markers;
    {
      std::lock_guard lock(log->mutex);
      log->closed = true;
      // Now, not stop_ns: a span may have opened on this thread since.
      const std::int64_t end_ns = now_ns();
      for (int i : log->open) {
        Record& r = log->records[i];
        r.end_ns = end_ns;
        r.closed = true;
        markers.emplace_back(r.device, std::exchange(r.mark_start, nullptr));
      }
      log->open.clear();
    }
    for (auto [d, marker] : markers) release_marker(d, marker);
  }
  resolve_device_spans(s);
  // Host tracks 0, 1, ... for the threads that recorded a span (a thread that
  // only allocated has a log but no track).
  int track = 0;
  for (auto& log : s.threads) log->thread = log->records.empty() ? -1 : track++;
  s.events.clear();
  for (auto& log : s.threads) {
    for (const Record& r : log->records) {
      TraceEvent e;
      e.name = r.name;
      e.category = category_name(r.kind);
      e.shapes = r.shapes;
      e.device = r.device;
      e.thread = log->thread;
      e.depth = r.depth;
      e.start_us = static_cast<double>(r.start_ns - s.start_ns) * 1e-3;
      e.duration_us = static_cast<double>(r.end_ns - r.start_ns) * 1e-3;
      e.self_us = static_cast<double>(r.end_ns - r.start_ns - r.child_ns) * 1e-3;
      e.memory_bytes = r.memory;
      e.bytes = r.bytes;
      for (const ParallelPiece& piece : r.parallel) {
        if (!piece.region) continue;
        ++e.regions;
        e.region_threads += static_cast<std::uint64_t>(piece.threads);
        e.region_us += piece.us;
      }
      e.parallel = r.parallel;
      e.algorithms = r.algorithms;
      if (r.has_device_span) {
        e.has_device_span = true;
        e.device_start_us = static_cast<double>(r.device_start_ns - s.start_ns) * 1e-3;
        e.device_duration_us = static_cast<double>(r.device_end_ns - r.device_start_ns) * 1e-3;
      }
      if (r.site >= 0 && r.site < static_cast<int>(s.sites.size())) {
        SyncSite& site = s.sites[r.site];
        ++site.count;
        site.wait_us += e.duration_us;
        e.site = site.file.empty() ? std::string("(inside anvil)")
                                   : anvil::detail::cat(site.file, ":", site.line, " (", site.function, ")");
      }
      s.events.push_back(std::move(e));
    }
    log->records = {};  // the events hold them now
  }
  std::stable_sort(s.events.begin(), s.events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    return a.start_us < b.start_us;
  });
}

namespace {

std::shared_ptr<Session> start_session(const Options& options) {
  std::lock_guard control(g_control);
  auto s = std::make_shared<Session>();
  s->options = options;
  if (++g_generation == 0) ++g_generation;  // 0 means none
  s->generation = g_generation;
  s->start_ns = now_ns();
  std::lock_guard lock(g_current_mutex);
  ANVIL_CHECK(g_current == nullptr, ValueError,
              "profiler: a profile is already recording; expected one profile at a time, got a second "
              "(ANVIL_PROFILE or --profile may have started one for the whole program)");
  g_current = s;
  g_current_generation.store(s->generation, std::memory_order_release);
  g_recording.store(true, std::memory_order_relaxed);
  anvil::detail::set_observer(&kObserver);
  return s;
}

// ---- the whole-program profile: ANVIL_PROFILE=FILE and --profile FILE ----------------

struct ExitProfile {
  std::unique_ptr<Profile> profile;
  std::string path;
  int rows = 0;
  bool done = false;
};
ExitProfile* g_exit = nullptr;  // leaked: read by the exit handler

void finish_exit_profile() {
  if (g_exit == nullptr || g_exit->done) return;
  g_exit->done = true;
  try {
    Profile& p = *g_exit->profile;
    p.stop();
    if (g_exit->rows > 0) {
      std::cout << "\nprofile: the top " << g_exit->rows << " ops by host time (anvil::profiler)\n"
                << p.table({.sort_by = SortBy::HostTotal, .row_limit = g_exit->rows});
      if (!p.conv_algorithms().empty()) std::cout << "\nconvolution algorithms\n" << p.conv_table(g_exit->rows);
      if (!p.sync_sites().empty()) std::cout << "\nhost syncs by call site\n" << p.sync_table(g_exit->rows);
      std::cout << std::flush;
    }
    if (!g_exit->path.empty()) {
      p.write_trace(g_exit->path);
      std::cerr << "anvil: profile trace written to " << g_exit->path << " (open it in https://ui.perfetto.dev)\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "anvil: the profile could not be written: " << e.what() << "\n";
  }
}

// Registered again whenever a device runtime may have started since: the
// last registration runs first, before that runtime's own exit handlers.
void register_exit_handler() { std::atexit(finish_exit_profile); }

// ANVIL_PROFILE=FILE profiles any program.
[[maybe_unused]] const bool g_env_profile = [] {
  const char* path = std::getenv("ANVIL_PROFILE");
  if (path == nullptr || *path == '\0') return false;
  try {
    profile_until_exit(path, 0);
  } catch (const std::exception& e) {
    std::cerr << "anvil: ANVIL_PROFILE: " << e.what() << "\n";
  }
  return true;
}();

}  // namespace
}  // namespace anvil::profiler::detail

namespace anvil {

namespace profiler {

Profile::Profile(Options options) : state_(std::make_unique<State>()) {
  state_->session = detail::start_session(options);
}

Profile::~Profile() {
  if (!state_ || !state_->session) return;
  try {
    stop();
  } catch (const std::exception& e) {
    std::cerr << "anvil: profiler: " << e.what() << "\n";
  }
}

void Profile::stop() {
  detail::Session& s = *state_->session;
  if (s.stopped) return;
  detail::stop_session(s);
  if (!s.options.trace_path.empty() && !s.until_exit.load()) write_trace(s.options.trace_path);
}

bool Profile::recording() const noexcept { return state_ && state_->session && !state_->session->stopped; }

const std::vector<TraceEvent>& Profile::events() {
  stop();
  return state_->session->events;
}

Range::Range(std::string_view name, const char* category) {
  if (!detail::recording()) return;
  detail::Kind kind = detail::Kind::User;
  if (std::strcmp(category, "optimizer") == 0) kind = detail::Kind::Optimizer;
  if (std::strcmp(category, "collective") == 0) kind = detail::Kind::Collective;
  const detail::Slot slot = detail::begin_named(kind, name, cpu());
  slot_ = slot.index;
  generation_ = slot.generation;
}

Range::~Range() {
  if (slot_ >= 0) detail::end_span({slot_, generation_}, 0);
}

bool enabled() noexcept { return detail::recording(); }

void profile_until_exit(const std::string& trace_path, int table_rows) {
  Options options;
  options.trace_path = trace_path;
  auto profile = std::make_unique<Profile>(options);
  profile->state_->session->until_exit.store(true);
  if (detail::g_exit == nullptr) detail::g_exit = new detail::ExitProfile;
  detail::g_exit->profile = std::move(profile);
  detail::g_exit->path = trace_path;
  detail::g_exit->rows = table_rows;
  detail::g_exit->done = false;
  detail::register_exit_handler();
}

}  // namespace profiler
}  // namespace anvil
