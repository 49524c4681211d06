// python/src/profiler.cpp — anvil.profiler and the sync sentinel
// (anvil/profiler.h, docs/profiling.md): the C++ Profile, Range and SyncGuard
// as Python context managers. python/anvil/profiler.py gives them
// torch.profiler's names (profile, record_function, key_averages().table()).
//
// Note [Python call sites]
// The sync sentinel names the line of user code behind each host sync through
// a defaulted SourceLocation argument. Called from a binding, that default is
// the binding's own line, which tells a Python user nothing; so the bindings
// that sync (item, tolist, numpy, printing, to, synchronize) pass
// python_call_site(): the file, function and line of the Python frame that
// called them. Its strings belong to that frame's code object, which lives
// until the call returns; the profiler and ImplicitSync copy them before then.
#include "anvil/profiler.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <thread>
#include <utility>

#include "common.h"

namespace anvil::python {

SourceLocation python_call_site() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed; null outside Python code
  if (frame == nullptr) return SourceLocation::current("", "", 0);
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  nb::object file = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_filename"));
  nb::object name = nb::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_name"));
  const int line = PyFrame_GetLineNumber(frame);
  Py_DECREF(code);  // the frame keeps the code object, and it its strings, alive
  if (!file.is_valid() || !name.is_valid()) {
    PyErr_Clear();
    return SourceLocation::current("", "", static_cast<std::uint_least32_t>(line));
  }
  const char* f = PyUnicode_AsUTF8(file.ptr());
  const char* n = PyUnicode_AsUTF8(name.ptr());
  if (f == nullptr || n == nullptr) PyErr_Clear();
  return SourceLocation::current(f != nullptr ? f : "", n != nullptr ? n : "", static_cast<std::uint_least32_t>(line));
}

namespace {

// The spans a record_function object has open, per thread, innermost last:
// one object may be entered again while open (a decorated recursive
// function) and from several threads (each Range belongs to its thread).
struct RecordFunction {
  std::string name;
  std::vector<std::pair<std::thread::id, std::shared_ptr<profiler::Range>>> open;
};

// The mode is per thread, so a guard object entered on two threads keeps
// each thread's guards apart and __exit__ ends the calling thread's own.
struct PySyncGuard {
  SyncDebugMode mode;
  std::vector<std::pair<std::thread::id, std::shared_ptr<SyncGuard>>> active;  // one per open `with`
};

SyncDebugMode sync_mode_from(const std::string& s) {
  if (s == "off" || s == "default") return SyncDebugMode::Off;
  if (s == "warn") return SyncDebugMode::Warn;
  if (s == "error") return SyncDebugMode::Error;
  throw ValueError(detail::cat("SyncGuard: unknown mode '", s, "'; expected 'off', 'warn' or 'error'"));
}

}  // namespace

void bind_profiler(nb::module_& top) {
  nb::enum_<SyncDebugMode>(top, "SyncDebugMode", "What SyncGuard does with an implicit host sync")
      .value("off", SyncDebugMode::Off)
      .value("warn", SyncDebugMode::Warn)
      .value("error", SyncDebugMode::Error);
  nb::class_<PySyncGuard>(top, "SyncGuard",
                          "with anvil.SyncGuard('error'): an implicit host sync (item(), tolist(), printing a device "
                          "tensor) inside warns on stderr ('warn') or raises ImplicitSyncError ('error') before it "
                          "waits; .cpu(), .to(d) and synchronize(d) are explicit and allowed "
                          "(torch.cuda.set_sync_debug_mode)")
      .def(
          "__init__",
          [](PySyncGuard* self, SyncDebugMode mode) {
            new (self) PySyncGuard{mode, {}};
          },
          "mode"_a)
      .def(
          "__init__",
          [](PySyncGuard* self, const std::string& mode) {
            new (self) PySyncGuard{sync_mode_from(mode), {}};
          },
          "mode"_a)
      .def_ro("mode", &PySyncGuard::mode)
      .def("__enter__",
           [](nb::handle self) {
             PySyncGuard& g = nb::cast<PySyncGuard&>(self);
             g.active.emplace_back(std::this_thread::get_id(), std::make_shared<SyncGuard>(g.mode));
             return nb::borrow(self);
           })
      .def("__exit__", [](PySyncGuard& g, nb::args) {
        const auto mine = std::find_if(g.active.rbegin(), g.active.rend(),
                                       [](const auto& e) { return e.first == std::this_thread::get_id(); });
        if (mine != g.active.rend()) g.active.erase(std::next(mine).base());
        return false;
      });
  top.def("sync_debug_mode", &sync_debug_mode,
          "The mode on this thread: its innermost SyncGuard's, else the process-wide default");
  top.def("set_sync_debug_mode", &set_sync_debug_mode, "mode"_a,
          "The process-wide default for threads inside no SyncGuard (torch.cuda.set_sync_debug_mode)");
  top.def(
      "set_sync_debug_mode", [](const std::string& mode) { set_sync_debug_mode(sync_mode_from(mode)); }, "mode"_a,
      "The process-wide default for threads inside no SyncGuard (torch.cuda.set_sync_debug_mode)");

  nb::module_ m = top.def_submodule("profiler", "per-op host and device time, copies, syncs (anvil/profiler.h)");
  nb::enum_<profiler::SortBy>(m, "SortBy")
      .value("HOST_TOTAL", profiler::SortBy::HostTotal)
      .value("HOST_SELF", profiler::SortBy::HostSelf)
      .value("DEVICE_TOTAL", profiler::SortBy::DeviceTotal)
      .value("CALLS", profiler::SortBy::Calls)
      .value("MEMORY", profiler::SortBy::Memory)
      .value("NAME", profiler::SortBy::Name);

  nb::class_<profiler::OpStats>(m, "OpStats", "One row of key_averages(): every span of one name (and input shapes)")
      .def_ro("name", &profiler::OpStats::name)
      .def_ro("category", &profiler::OpStats::category)
      .def_ro("shapes", &profiler::OpStats::shapes)
      .def_ro("calls", &profiler::OpStats::calls)
      .def_ro("host_total_us", &profiler::OpStats::host_total_us)
      .def_ro("host_self_us", &profiler::OpStats::host_self_us)
      .def_ro("device_total_us", &profiler::OpStats::device_total_us)
      .def_ro("memory_bytes", &profiler::OpStats::memory_bytes)
      .def_ro("regions", &profiler::OpStats::regions)
      .def_ro("threads", &profiler::OpStats::threads)
      .def_ro("region_us", &profiler::OpStats::region_us)
      .def_ro("serial_us", &profiler::OpStats::serial_us)
      .def("__repr__", [](const profiler::OpStats& s) {
        return detail::cat("OpStats(name='", s.name, "', category='", s.category, "', calls=", s.calls,
                           ", host_total_us=", s.host_total_us, ")");
      });
  nb::class_<profiler::SyncSite>(m, "SyncSite", "One line of user code that made the host wait")
      .def_ro("api", &profiler::SyncSite::api)
      .def_ro("file", &profiler::SyncSite::file)
      .def_ro("line", &profiler::SyncSite::line)
      .def_ro("function", &profiler::SyncSite::function)
      .def_ro("implicit", &profiler::SyncSite::implicit)
      .def_ro("count", &profiler::SyncSite::count)
      .def_ro("wait_us", &profiler::SyncSite::wait_us);
  nb::class_<profiler::MemoryTotals>(m, "MemoryTotals", doc("profiler::MemoryTotals"))
      .def_ro("device", &profiler::MemoryTotals::device)
      .def_ro("allocations", &profiler::MemoryTotals::allocations)
      .def_ro("frees", &profiler::MemoryTotals::frees)
      .def_ro("bytes_allocated", &profiler::MemoryTotals::bytes_allocated)
      .def_ro("bytes_freed", &profiler::MemoryTotals::bytes_freed)
      .def_ro("peak_live_bytes", &profiler::MemoryTotals::peak_live_bytes);
  nb::class_<profiler::ParallelPiece>(m, "ParallelPiece",
                                      "A piece of CPU work the backend may split across threads, inside a span")
      .def_ro("width", &profiler::ParallelPiece::width)
      .def_ro("us", &profiler::ParallelPiece::us)
      .def_ro("threads", &profiler::ParallelPiece::threads)
      .def_ro("region", &profiler::ParallelPiece::region);
  nb::class_<profiler::ConvAlgorithm>(m, "ConvAlgorithm",
                                      "One direction of one convolution as its library ran it: algorithm, math, "
                                      "workspace")
      .def_ro("direction", &profiler::ConvAlgorithm::direction)
      .def_ro("algorithm", &profiler::ConvAlgorithm::algorithm)
      .def_ro("math", &profiler::ConvAlgorithm::math)
      .def_ro("workspace_bytes", &profiler::ConvAlgorithm::workspace_bytes)
      .def("__repr__", [](const profiler::ConvAlgorithm& c) {
        return detail::cat("ConvAlgorithm(direction='", c.direction, "', algorithm='", c.algorithm, "', math='", c.math,
                           "', workspace_bytes=", c.workspace_bytes, ")");
      });
  nb::class_<profiler::ConvAlgorithmStats>(m, "ConvAlgorithmStats",
                                           "One row of conv_algorithms(): the calls of one op and input shape that "
                                           "ran one direction with one algorithm")
      .def_ro("name", &profiler::ConvAlgorithmStats::name)
      .def_ro("shapes", &profiler::ConvAlgorithmStats::shapes)
      .def_ro("choice", &profiler::ConvAlgorithmStats::choice)
      .def_ro("calls", &profiler::ConvAlgorithmStats::calls);
  nb::class_<profiler::TraceEvent>(m, "TraceEvent", "One recorded span, as in the trace (µs from the start)")
      .def_ro("name", &profiler::TraceEvent::name)
      .def_ro("category", &profiler::TraceEvent::category)
      .def_ro("shapes", &profiler::TraceEvent::shapes)
      .def_ro("device", &profiler::TraceEvent::device)
      .def_ro("thread", &profiler::TraceEvent::thread)
      .def_ro("depth", &profiler::TraceEvent::depth)
      .def_ro("start_us", &profiler::TraceEvent::start_us)
      .def_ro("duration_us", &profiler::TraceEvent::duration_us)
      .def_ro("has_device_span", &profiler::TraceEvent::has_device_span)
      .def_ro("device_start_us", &profiler::TraceEvent::device_start_us)
      .def_ro("device_duration_us", &profiler::TraceEvent::device_duration_us)
      .def_ro("self_us", &profiler::TraceEvent::self_us)
      .def_ro("memory_bytes", &profiler::TraceEvent::memory_bytes)
      .def_ro("bytes", &profiler::TraceEvent::bytes)
      .def_ro("site", &profiler::TraceEvent::site)
      .def_ro("parallel", &profiler::TraceEvent::parallel)
      .def_ro("regions", &profiler::TraceEvent::regions)
      .def_ro("region_threads", &profiler::TraceEvent::region_threads)
      .def_ro("region_us", &profiler::TraceEvent::region_us)
      .def_ro("algorithms", &profiler::TraceEvent::algorithms);

  // Records from construction; anvil.profiler.profile starts one at `with`.
  nb::class_<profiler::Profile>(m, "Profile", "The C++ profile (anvil::profiler::Profile): records from construction")
      .def(
          "__init__",
          [](profiler::Profile* self, const std::string& trace_path, bool device_time, bool record_shapes,
             bool memory) {
            new (self) profiler::Profile(profiler::Options{.trace_path = trace_path,
                                                           .device_time = device_time,
                                                           .record_shapes = record_shapes,
                                                           .memory = memory});
          },
          "trace_path"_a = "", "device_time"_a = true, "record_shapes"_a = true, "memory"_a = true)
      .def("stop", &profiler::Profile::stop, ANVIL_NOGIL, doc("profiler::Profile::stop"))
      .def_prop_ro("recording", &profiler::Profile::recording)
      .def("events", &profiler::Profile::events, ANVIL_NOGIL, doc("profiler::Profile::events"))
      .def("key_averages", &profiler::Profile::key_averages, "group_by_shape"_a = false, ANVIL_NOGIL,
           doc("profiler::Profile::key_averages"))
      .def(
          "table",
          [](profiler::Profile& p, profiler::SortBy sort_by, bool group_by_shape, int row_limit) {
            return p.table({.sort_by = sort_by, .group_by_shape = group_by_shape, .row_limit = row_limit});
          },
          "sort_by"_a = profiler::SortBy::HostTotal, "group_by_shape"_a = false, "row_limit"_a = 20, ANVIL_NOGIL,
          doc("profiler::Profile::table"))
      .def("conv_algorithms", &profiler::Profile::conv_algorithms, ANVIL_NOGIL,
           doc("profiler::Profile::conv_algorithms"))
      .def("conv_table", &profiler::Profile::conv_table, "row_limit"_a = 20, ANVIL_NOGIL,
           doc("profiler::Profile::conv_table"))
      .def("sync_sites", &profiler::Profile::sync_sites, ANVIL_NOGIL, doc("profiler::Profile::sync_sites"))
      .def("sync_table", &profiler::Profile::sync_table, "row_limit"_a = 20, ANVIL_NOGIL,
           doc("profiler::Profile::sync_table"))
      .def("memory", &profiler::Profile::memory, ANVIL_NOGIL, doc("profiler::Profile::memory"))
      .def("trace_json", &profiler::Profile::trace_json, ANVIL_NOGIL, doc("profiler::Profile::trace_json"))
      .def("write_trace", &profiler::Profile::write_trace, "path"_a, ANVIL_NOGIL,
           doc("profiler::Profile::write_trace"));

  nb::class_<RecordFunction>(m, "_RecordFunction")
      .def(
          "__init__",
          [](RecordFunction* self, std::string name) {
            new (self) RecordFunction{std::move(name), {}};
          },
          "name"_a)
      .def_ro("name", &RecordFunction::name)
      .def("__enter__",
           [](nb::handle self) {
             RecordFunction& r = nb::cast<RecordFunction&>(self);
             r.open.emplace_back(std::this_thread::get_id(), std::make_shared<profiler::Range>(r.name));
             return nb::borrow(self);
           })
      .def("__exit__", [](RecordFunction& r, nb::args) {
        const auto me = std::this_thread::get_id();
        for (auto it = r.open.rbegin(); it != r.open.rend(); ++it) {
          if (it->first == me) {
            r.open.erase(std::next(it).base());
            break;
          }
        }
        return false;
      });
  m.def("enabled", &profiler::enabled, "Whether a profile is recording now");
  m.def("profile_until_exit", &profiler::profile_until_exit, "trace_path"_a, "table_rows"_a = 15,
        doc("profiler::profile_until_exit"));
}

}  // namespace anvil::python
