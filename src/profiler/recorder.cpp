// Recording: the hooks of hooks.h, the session they write into, and
// Profile's lifetime. The reports are in report.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>
#include <utility>

#include "anvil/error.h"
#include "anvil/tensor.h"
#include "core/backend.h"
#include "core/tensor_impl.h"
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

// The recording session; null when none records. Start and stop are
// serialised by g_control; the hooks read g_session only after
// recording() said yes.
std::mutex g_control;
std::atomic<Session*> g_session{nullptr};
std::atomic<std::uint32_t> g_generation{0};

thread_local ThreadLog* t_log = nullptr;
thread_local std::uint32_t t_generation = 0;

Session* session() noexcept { return g_session.load(std::memory_order_acquire); }

// This thread's log in `s`, registered on first use.
ThreadLog* log_of(Session& s) noexcept {
  if (t_generation == s.generation && t_log != nullptr) return t_log;
  try {
    auto log = std::make_unique<ThreadLog>();
    ThreadLog* raw = log.get();
    std::lock_guard lock(s.mutex);
    raw->thread = static_cast<int>(s.threads.size());
    s.threads.push_back(std::move(log));
    t_log = raw;
    t_generation = s.generation;
    return raw;
  } catch (...) {
    return nullptr;
  }
}

void register_exit_handler();

// The clock of `d`, tied to the host's on its first profiled op: waits for
// the device (not counted by the ledger: the profile's own wait), then
// records the reference marker on the now idle queue.
const DeviceClock& clock_of(Session& s, Device d) {
  {
    std::lock_guard lock(s.mutex);
    auto it = s.clocks.find(d);
    if (it != s.clocks.end() && it->second.tried) return it->second;
  }
  DeviceClock c;
  c.tried = true;
  anvil::detail::Backend* b = anvil::detail::backend_for(d.type());
  if (b != nullptr && b->has_device_clock(d.index())) {
    b->synchronize(d.index());
    c.reference_host_ns = now_ns();
    c.reference = b->record_timestamp(d.index());
  }
  std::lock_guard lock(s.mutex);
  auto [it, inserted] = s.clocks.emplace(d, c);
  if (!inserted && c.reference != nullptr) b->release_timestamp(d.index(), c.reference);  // another thread won
  if (s.until_exit) register_exit_handler();  // after the device's runtime started: runs before its teardown
  return it->second;
}

void* mark(Session& s, Device d) noexcept {
  if (d.is_cpu() || !s.options.device_time) return nullptr;
  try {
    if (clock_of(s, d).reference == nullptr) return nullptr;
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
Slot open_record(Session& s, Kind kind, std::string&& name, Device d, std::string&& shapes) noexcept {
  ThreadLog* log = log_of(s);
  if (log == nullptr) return {};
  try {
    void* marker = kind == Kind::Sync || kind == Kind::User || kind == Kind::Optimizer ? nullptr : mark(s, d);
    std::lock_guard lock(log->mutex);
    Record r;
    r.kind = kind;
    r.name = std::move(name);
    r.shapes = std::move(shapes);
    r.device = d;
    r.depth = static_cast<int>(log->open.size());
    r.mark_start = marker;
    r.start_ns = now_ns();
    log->records.push_back(std::move(r));
    const int index = static_cast<int>(log->records.size()) - 1;
    log->open.push_back(index);
    return {index, s.generation};
  } catch (...) {
    return {};
  }
}

}  // namespace

Slot begin_op(Kind kind, const char* name, const Device* device, std::initializer_list<const Tensor*> inputs) noexcept {
  Session* s = session();
  if (s == nullptr) return {};
  Device d = cpu();
  if (device != nullptr) {
    d = *device;
  } else {
    for (const Tensor* t : inputs)
      if (t != nullptr && t->defined()) {
        d = t->impl()->storage()->device();
        break;
      }
  }
  // The same op already open on this thread (binary_op under add's span,
  // reduce_op under sum's): one span, not two.
  if (ThreadLog* log = t_generation == s->generation ? t_log : nullptr; log != nullptr && !log->open.empty()) {
    const Record& top = log->records[log->open.back()];
    if (top.kind == kind && top.name == name) return {};
  }
  try {
    std::string shapes;
    if (s->options.record_shapes) append_shapes(shapes, inputs);
    return open_record(*s, kind, name, d, std::move(shapes));
  } catch (...) {
    return {};
  }
}

Slot begin_named(Kind kind, std::string_view name, Device d) noexcept {
  Session* s = session();
  if (s == nullptr) return {};
  try {
    return open_record(*s, kind, std::string(name), d, {});
  } catch (...) {
    return {};
  }
}

Slot CopySpan::begin_copy(Device from, Device to) noexcept {
  try {
    return begin_named(Kind::Copy, "copy " + from.str() + " -> " + to.str(), to.is_cpu() ? from : to);
  } catch (...) {
    return {};
  }
}

void end_span(Slot slot, std::uint64_t bytes) noexcept {
  Session* s = session();
  if (s == nullptr || slot.generation != s->generation || t_generation != s->generation || t_log == nullptr) return;
  ThreadLog& log = *t_log;
  void* marker = nullptr;
  {
    std::lock_guard lock(log.mutex);
    if (slot.index >= static_cast<int>(log.records.size()) || log.records[slot.index].closed) return;
    const Record& r = log.records[slot.index];
    if (r.mark_start != nullptr) marker = mark(*s, r.device);
  }
  std::lock_guard lock(log.mutex);
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

// ---- call sites and the sync guard ---------------------------------------------

namespace {
thread_local const CallSite* t_site = nullptr;
// The process-wide default (set_sync_debug_mode) and this thread's
// SyncGuard, which wins while one is alive (-1: none).
std::atomic<SyncDebugMode> g_sync_mode{SyncDebugMode::Off};
thread_local int t_sync_override = -1;

std::string site_text(const CallSite& site) {
  return anvil::detail::cat(site.location.file_name(), ":", site.location.line(), " (", site.location.function_name(),
                            ")");
}

void check_guard(Device d) {
  const SyncDebugMode mode = anvil::sync_debug_mode();
  if (mode == SyncDebugMode::Off) return;
  const CallSite* site = t_site;
  if (site != nullptr && site->is_explicit) return;
  const std::string api = site ? site->api : "an internal wait";
  const std::string where = site ? site_text(*site) : "inside anvil (no public call on this thread)";
  if (mode == SyncDebugMode::Warn) {
    static std::mutex warned_mutex;
    static std::set<std::string> warned;
    std::lock_guard lock(warned_mutex);
    if (!warned.insert(where + " " + d.str()).second) return;
    std::cerr << "anvil: warning: implicit host sync on " << d << " by " << api << " at " << where
              << " (SyncGuard); move it out of the loop, or keep the value on the device\n";
    return;
  }
  throw ImplicitSync(
      anvil::detail::cat(api, ": implicit host sync on ", d, " inside SyncGuard(SyncDebugMode::Error) at ", where,
                         "; expected no host waits here; keep the value on the device, or ",
                         "copy it explicitly with .to(cpu()) if the wait is meant"),
      api, site ? site->location.file_name() : "", site ? static_cast<int>(site->location.line()) : 0,
      site ? site->location.function_name() : "");
}
}  // namespace

const CallSite* current_call_site() noexcept { return t_site; }

SiteScope::SiteScope(const char* api, const SourceLocation& location, bool is_explicit) noexcept
    : site_{api, location, is_explicit}, owner_(t_site == nullptr) {
  if (owner_) t_site = &site_;
}
SiteScope::~SiteScope() {
  if (owner_) t_site = nullptr;
}

SyncSpan::SyncSpan(Device d) : device_(d) {
  if (d.is_cpu()) return;
  check_guard(d);
  if (!recording()) return;
  Session* s = session();
  if (s == nullptr) return;
  slot_ = begin_named(Kind::Sync, "sync", d);
  if (slot_.index < 0) return;
  const CallSite* site = t_site;
  SyncSite key;
  key.api = site ? site->api : "";
  key.file = site ? site->location.file_name() : "";
  key.line = site ? static_cast<int>(site->location.line()) : 0;
  key.function = site ? site->location.function_name() : "";
  key.implicit = site == nullptr || !site->is_explicit;
  int index = -1;
  try {
    std::lock_guard lock(s->mutex);
    for (std::size_t i = 0; i < s->sites.size() && index < 0; ++i) {
      const SyncSite& k = s->sites[i];
      if (k.line == key.line && k.file == key.file && k.api == key.api && k.function == key.function)
        index = static_cast<int>(i);
    }
    if (index < 0) {
      s->sites.push_back(std::move(key));
      index = static_cast<int>(s->sites.size()) - 1;
    }
  } catch (...) {
  }
  std::lock_guard lock(t_log->mutex);
  t_log->records[slot_.index].site = index;
}

SyncSpan::~SyncSpan() {
  if (slot_.index >= 0) end_span(slot_);
}

// ---- memory and collectives -------------------------------------------------------

void memory_event(Device d, std::int64_t bytes) noexcept {
  Session* s = session();
  if (s == nullptr || !s->options.memory) return;
  const std::int64_t ns = now_ns();
  try {
    {
      std::lock_guard lock(s->mutex);
      MemoryTotals& m = s->memory.try_emplace(d).first->second;
      m.device = d;
      if (bytes >= 0) {
        ++m.allocations;
        m.bytes_allocated += static_cast<std::uint64_t>(bytes);
      } else {
        ++m.frees;
        m.bytes_freed += static_cast<std::uint64_t>(-bytes);
      }
      std::int64_t& live = s->live[d];
      live += bytes;
      m.peak_live_bytes = std::max(m.peak_live_bytes, live);
      s->samples.push_back({ns, d, live});
    }
    if (t_generation == s->generation && t_log != nullptr) {
      std::lock_guard lock(t_log->mutex);
      if (!t_log->open.empty()) t_log->records[t_log->open.back()].memory += bytes;
    }
  } catch (...) {
  }
}

void collective_event(Device d, std::uint64_t bytes) noexcept {
  if (!recording()) return;
  // Inside an engine's collective span (a Range of category "collective"):
  // its bytes. Otherwise (the in-process groups) a span of its own.
  if (Session* s = session(); s != nullptr && t_generation == s->generation && t_log != nullptr) {
    std::lock_guard lock(t_log->mutex);
    if (!t_log->open.empty()) {
      Record& top = t_log->records[t_log->open.back()];
      if (top.kind == Kind::Collective) {
        top.bytes += bytes;
        top.device = d;
        return;
      }
    }
  }
  const Slot slot = begin_named(Kind::Collective, "collective", d);
  if (slot.index >= 0) end_span(slot, bytes);
}

// ---- stopping ------------------------------------------------------------------------

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
        if (r.mark_start != nullptr) b->release_timestamp(index, r.mark_start);
        if (r.mark_end != nullptr) b->release_timestamp(index, r.mark_end);
        r.mark_start = r.mark_end = nullptr;
      }
    }
    b->release_timestamp(index, clock.reference);
    clock.reference = nullptr;
  }
}

void stop_session(Session& s) {
  std::lock_guard control(g_control);
  if (s.stopped) return;
  if (g_session.load() == &s) {
    g_recording.store(false, std::memory_order_relaxed);
    g_session.store(nullptr, std::memory_order_release);
  }
  s.stopped = true;
  s.stop_ns = now_ns();
  for (auto& log : s.threads) {  // spans still open end now, without a device span
    std::lock_guard lock(log->mutex);
    for (int i : log->open) {
      Record& r = log->records[i];
      r.end_ns = s.stop_ns;
      r.closed = true;
      if (r.mark_start != nullptr && !r.device.is_cpu())
        anvil::detail::backend_for(r.device.type())->release_timestamp(r.device.index(), r.mark_start);
      r.mark_start = nullptr;
    }
    log->open.clear();
  }
  resolve_device_spans(s);
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
  }
  std::stable_sort(s.events.begin(), s.events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    return a.start_us < b.start_us;
  });
}

namespace {

std::unique_ptr<Session> start_session(const Options& options, bool until_exit) {
  std::lock_guard control(g_control);
  ANVIL_CHECK(g_session.load() == nullptr, ValueError,
              "profiler: a profile is already recording; expected one profile at a time, got a second "
              "(ANVIL_PROFILE or --profile may have started one for the whole program)");
  auto s = std::make_unique<Session>();
  s->options = options;
  s->until_exit = until_exit;
  s->generation = g_generation.fetch_add(1) + 1;
  s->start_ns = now_ns();
  g_session.store(s.get(), std::memory_order_release);
  g_recording.store(true, std::memory_order_relaxed);
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

SyncGuard::SyncGuard(SyncDebugMode mode) noexcept
    : previous_(std::exchange(profiler::detail::t_sync_override, static_cast<int>(mode))) {}
SyncGuard::~SyncGuard() { profiler::detail::t_sync_override = previous_; }
SyncDebugMode sync_debug_mode() noexcept {
  const int mine = profiler::detail::t_sync_override;
  return mine >= 0 ? static_cast<SyncDebugMode>(mine) : profiler::detail::g_sync_mode.load(std::memory_order_relaxed);
}
void set_sync_debug_mode(SyncDebugMode mode) noexcept {
  profiler::detail::g_sync_mode.store(mode, std::memory_order_relaxed);
}
SyncDebugMode default_sync_debug_mode() noexcept {
  return profiler::detail::g_sync_mode.load(std::memory_order_relaxed);
}

namespace profiler {

Profile::Profile(Options options) : state_(std::make_unique<State>()) {
  state_->session = detail::start_session(options, false);
}

Profile::~Profile() {
  if (!state_ || !state_->session) return;
  try {
    const bool was_recording = !state_->session->stopped;
    stop();
    (void)was_recording;
  } catch (const std::exception& e) {
    std::cerr << "anvil: profiler: " << e.what() << "\n";
  }
}

void Profile::stop() {
  detail::Session& s = *state_->session;
  if (s.stopped) return;
  detail::stop_session(s);
  if (!s.options.trace_path.empty() && !s.until_exit) write_trace(s.options.trace_path);
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
  if (slot_ >= 0) detail::end_span({slot_, generation_});
}

bool enabled() noexcept { return detail::recording(); }

void profile_until_exit(const std::string& trace_path, int table_rows) {
  Options options;
  options.trace_path = trace_path;
  auto profile = std::make_unique<Profile>(options);
  profile->state_->session->until_exit = true;
  if (detail::g_exit == nullptr) detail::g_exit = new detail::ExitProfile;
  detail::g_exit->profile = std::move(profile);
  detail::g_exit->path = trace_path;
  detail::g_exit->rows = table_rows;
  detail::g_exit->done = false;
  detail::register_exit_handler();
}

}  // namespace profiler
}  // namespace anvil
