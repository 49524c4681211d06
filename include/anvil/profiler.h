// anvil/profiler.h — where the time goes: per-op host and device spans, copies,
// host syncs with the user's call site, memory, collectives, backward ops and
// the optimiser step, as a Chrome trace and a torch.profiler-like table.
//
//   {
//     anvil::profiler::Profile prof({.trace_path = "trace.json"});
//     for (auto& [x, y] : loader) {
//       anvil::profiler::Range step("train_step");   // a user-named span
//       auto loss = loss_fn(net(x), y);
//       loss.backward();
//       opt.step();
//     }
//     std::cout << prof.table({.sort_by = anvil::profiler::SortBy::DeviceTotal, .row_limit = 10});
//     std::cout << prof.sync_table();               // host waits per line of user code
//   }                                               // trace.json written here
//
// Or, for any program: ANVIL_PROFILE=trace.json ./prog (written at exit), and
// every example and anvil-bench take --profile FILE (the trace, and the top
// ops printed at the end). Open the trace in https://ui.perfetto.dev or
// chrome://tracing. docs/profiling.md shows one.
//
// One profile records at a time in a process (a second Profile throws
// ValueError). Recording is thread-safe: each host thread has its own track.
// The profiler registers into the core's observer table while it records;
// off, an op pays one relaxed atomic load and a branch (Note [Observer off]
// in src/core/observer.h).
//
// The sync sentinel: every host sync (item, to_vector, printing, .to(cpu),
// synchronize) records the line of user code that asked for it, through a
// defaulted SourceLocation parameter of those functions; `SyncGuard`
// (anvil/sync_guard.h) turns an implicit one into a warning or an error.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/device.h"
#include "anvil/error.h"
#include "anvil/sync_guard.h"

namespace anvil {

namespace profiler {

struct Options {
  std::string trace_path;     // the Chrome trace, written when the profile stops ("" = none)
  bool device_time = true;    // device-clock markers around every op on a device that has a clock
  bool record_shapes = true;  // input shapes and dtypes of each op (for group_by_shape)
  bool memory = true;         // allocations and frees per device
};

// The table's columns; each can sort it (descending, Name ascending).
enum class SortBy { HostTotal, HostSelf, DeviceTotal, Calls, Memory, Name };

struct TableOptions {
  SortBy sort_by = SortBy::HostTotal;
  bool group_by_shape = false;  // one row per (name, input shapes) rather than per name
  int row_limit = 20;           // 0: every row
};

// One row of key_averages(): every span of one name (and input shapes).
struct OpStats {
  std::string name;
  std::string category;  // "op", "backward", "copy", "sync", "optimizer", "collective", "user"
  std::string shapes;    // "[2, 3] f32, [2, 3] f32" when grouped by shape, else ""
  std::uint64_t calls = 0;
  double host_total_us = 0;       // wall time on the calling thread, children included
  double host_self_us = 0;        // minus the spans nested inside
  double device_total_us = 0;     // the device's clock; on the CPU the span itself
  std::int64_t memory_bytes = 0;  // allocated minus freed inside the span (children included)
  // The CPU's parallel regions entered directly inside these spans (not in
  // nested ones): how many, the mean team size, their wall time, and the
  // self time outside any region (docs/threads.md, "Parallel cost report").
  std::uint64_t regions = 0;
  double threads = 0;  // 0 without regions
  double region_us = 0;
  double serial_us = 0;  // host_self_us - region_us
};

// One line of user code that made the host wait.
struct SyncSite {
  std::string api;  // "item", "to_vector", "print", "to", "synchronize", ... ("" when no public call was seen)
  std::string file;
  int line = 0;
  std::string function;
  bool implicit = true;
  std::uint64_t count = 0;
  double wait_us = 0;  // host time spent waiting there
};

// Per device: what the caching allocators handed out and took back.
struct MemoryTotals {
  Device device;
  std::uint64_t allocations = 0, frees = 0;
  std::uint64_t bytes_allocated = 0, bytes_freed = 0;
  std::int64_t peak_live_bytes = 0;  // high-water mark of allocated - freed during the profile
};

// A piece of CPU work the backend may split across threads, run directly
// inside a span (Note [Parallel cost report] in src/backends/cpu/threads.h).
struct ParallelPiece {
  double width = 0;     // the most threads the size rule gives it at the reference wake cost (45 µs)
  double us = 0;        // its wall time
  int threads = 1;      // the team it ran on
  bool region = false;  // a parallel region here: the size rule split it at this process's wake cost
};

// One direction of one convolution as its library ran it (Note [Convolution
// algorithms] in src/core/observer.h): cuDNN's algorithm, oneDNN's
// implementation, or anvil's own im2col path.
struct ConvAlgorithm {
  std::string direction;  // "forward", "backward_data", "backward_weight"
  std::string algorithm;  // "IMPLICIT_PRECOMP_GEMM" (cuDNN), "brgconv:avx2" (oneDNN), "im2col+gemm", ...
  std::string math;       // what it computed in: "f32", "bf16", "tf32" (tensor ops allowed), "fma" (TF32 off), ...
  std::uint64_t workspace_bytes =
      0;  // scratch it took beyond its operands (cuDNN workspace, oneDNN scratchpad, im2col's column buffer)
};

// One row of conv_algorithms(): the calls of one op with one input shape
// that ran one direction with one algorithm.
struct ConvAlgorithmStats {
  std::string name;    // the span it was reported in: conv2d, conv2d_backward, col2im, ConvolutionBackward, ...
  std::string shapes;  // its input shapes ("" without Options::record_shapes)
  ConvAlgorithm choice;
  std::uint64_t calls = 0;
};

// One recorded span (or instant), as in the trace. Times in µs from the
// profile's start, on the host's steady clock; device times aligned to it.
struct TraceEvent {
  std::string name;
  std::string category;
  std::string shapes;
  Device device;   // where the op ran (the device of a copy's queue; cpu for ranges)
  int thread = 0;  // host track: 0, 1, ... in order of first use
  int depth = 0;   // nesting on its thread (0: outermost)
  double start_us = 0, duration_us = 0;
  bool has_device_span = false;
  double device_start_us = 0, device_duration_us = 0;  // on the device track when has_device_span
  double self_us = 0;
  std::int64_t memory_bytes = 0;
  std::uint64_t bytes = 0;  // copies and collectives
  std::string site;         // syncs: "file:line (function)"
  // CPU work directly inside the span (not in nested spans): every piece,
  // and the regions among them summed (see OpStats).
  std::vector<ParallelPiece> parallel;
  std::uint64_t regions = 0, region_threads = 0;  // region_threads: the team sizes summed
  double region_us = 0;
  std::vector<ConvAlgorithm> algorithms;  // convolutions run directly inside the span, one per direction
};

void profile_until_exit(const std::string& trace_path, int table_rows);

class Profile {
 public:
  explicit Profile(Options options = {});
  // Stops if still recording (and writes options.trace_path if set: an
  // error doing so is printed to stderr, since a destructor cannot throw).
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  // Stops recording: waits for every device that ran a profiled op (without
  // counting it as a sync), reads their clocks and writes the trace if a
  // path was given. Further calls do nothing.
  void stop();
  bool recording() const noexcept;

  // After stop() (they stop first if needed):
  const std::vector<TraceEvent>& events();
  std::vector<OpStats> key_averages(bool group_by_shape = false);
  // torch.profiler's key_averages().table(): name, calls, host total/self,
  // device total, memory, the CPU's parallel regions, their mean team and the
  // self time outside them (serial), sorted and limited as asked.
  std::string table(const TableOptions& options = {});
  // Each convolution's algorithm, math and workspace per direction (Note
  // [Convolution algorithms] in src/core/observer.h), in order of first use.
  std::vector<ConvAlgorithmStats> conv_algorithms();
  // conv_algorithms() as a table: name, direction, algorithm, math,
  // workspace, calls, input shapes.
  std::string conv_table(int row_limit = 20);
  std::vector<SyncSite> sync_sites();  // sorted by waiting time
  std::string sync_table(int row_limit = 20);
  std::vector<MemoryTotals> memory();
  // Trace Event Format (chrome://tracing, Perfetto): "X" spans with ts/dur
  // in µs; pid 0 the host (one tid per thread), one pid per device with its
  // queue as tid 0; "C" counters of live memory per device.
  std::string trace_json();
  void write_trace(const std::string& path);  // atomic (temp file + rename); IOError on failure

 private:
  friend void profile_until_exit(const std::string& trace_path, int table_rows);
  struct State;
  std::unique_ptr<State> state_;
};

// A user-named span (torch's record_function): nested inside whatever is
// open on this thread, with the ops it runs nested inside it. Costs nothing
// beyond a branch when no profile records. `category` is "user" unless the
// library marks its own (the optimisers use "optimizer", the process groups'
// collectives "collective").
class Range {
 public:
  explicit Range(std::string_view name, const char* category = "user");
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  int slot_ = -1;
  std::uint32_t generation_ = 0;
};

// Whether a profile is recording now.
bool enabled() noexcept;

// Profiles the rest of the process: at exit the trace goes to `trace_path`
// and, if table_rows > 0, the top ops and the sync sites are printed to
// stdout. What ANVIL_PROFILE=FILE and the examples' --profile FILE do.
// A second call while one runs throws ValueError.
void profile_until_exit(const std::string& trace_path, int table_rows = 15);

}  // namespace profiler
}  // namespace anvil
