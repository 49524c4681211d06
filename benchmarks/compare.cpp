// benchmarks/compare.cpp — anvil side by side with its peers, in one run.
//
//   bench_compare                     # every case, table on stdout
//   bench_compare --filter matmul --repeats 9 --markdown
//
// Starts one worker process per library (worker.h; why processes: Note [One
// process per BLAS] in CMakeLists.txt) and, for each case, measures every
// implementation alternately: a warm-up that also picks how many iterations
// make one sample last about --sample-ms, then --repeats rounds in which each
// implementation takes one sample, the starting one rotating each round. The
// figure is the median sample. Ratios compare figures from the same run only;
// on a shared 2-core machine figures from different runs are not comparable.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "timing.h"
#include "worker_process.h"

namespace {

using anvil_bench::WorkerProcess;

struct Worker {
  std::string key;      // `anvil`, `anvil-t1`, `anvil-base`, `openblas`, `torch`, `torch-t1`, `torch-t2`
  std::string program;  // executable next to bench_compare
  std::vector<std::string> args;
  bool pthread_blas = false;  // its BLAS threads spin after a call; see pause_after
  std::unique_ptr<WorkerProcess> process;
  std::string info;  // its `info` reply, or why it is unavailable
};

// --- what is measured -----------------------------------------------------------------

enum class Unit { GflopPerS, GBPerS, Microseconds, Milliseconds };

struct Impl {
  std::string worker;   // Worker::key
  std::string case_id;  // worker.h's CaseId
  std::string variant;
  std::string name;             // as printed in the peer column
  std::vector<double> samples;  // seconds per op
  std::string failure;
  double work = 0;  // flops or bytes per op when not the group's (a 16-bit case moves half the bytes)
  std::optional<double> median() const {
    if (samples.empty()) return std::nullopt;
    return anvil::bench::median(samples);
  }
};

enum class TargetKind { None, RatioAtLeast, RatioAtMost, AnvilAtMost };
struct Target {
  TargetKind kind = TargetKind::None;
  double value = 0;
};

// What a row's ratio divides: the two figures in the row's unit, or the
// two times (`time / time`: the 16-bit rows' traffic ratio, where the two
// sides move different numbers of bytes).
enum class RatioOf { Figures, Times };

struct Row {
  std::string label;
  std::size_t anvil;  // index into Group::impls
  std::size_t peer;
  Target target;
  RatioOf ratio_of = RatioOf::Figures;
};

struct Group {
  std::string title;
  Unit unit;
  double work = 1;    // flops or bytes per op, for throughput units
  bool blas = false;  // the peers call BLAS (see pause_after)
  int max_repeats = 1 << 30;
  std::vector<Impl> impls;
  std::vector<Row> rows;

  std::size_t add(std::string worker, std::string case_id, std::string variant, std::string name, double work = 0) {
    impls.push_back(Impl{std::move(worker), std::move(case_id), std::move(variant), std::move(name), {}, {}, work});
    return impls.size() - 1;
  }
};

std::string shape_id(const std::string& op, const std::vector<std::int64_t>& shape, const std::string& extra = "",
                     const std::string& dtype = "f32") {
  std::string s = op + "(shape=[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]" + extra + ",dtype=" + dtype + ")";
}

constexpr std::int64_t kBig = 16 * 1024 * 1024;  // 16M f32 = 64 MiB per array
constexpr double kBigBytes = 3.0 * kBig * 4;     // two reads and one write per op

// 16-bit matmul sizes: one where the conversions are a visible share, one
// where the product dominates.
const std::vector<std::int64_t> kHalfMatmulSizes{256, 1024};

// f16 and bf16 beside f32 (issue 14): anvil's 16-bit against its own f32 and
// against LibTorch in the same dtype. Elementwise: the bytes an op must move
// are elements x (inputs + output) x dtype size, so a memory-bound op in 16
// bits should take about half f32's time; the `time / f32 time` rows are that
// effective traffic ratio, target <= 0.55x for the memory-bound add.
void add_half_groups(std::vector<Group>& groups) {
  const std::vector<std::string> halves{"bf16", "f16"};
  for (const auto n : kHalfMatmulSizes) {
    Group g{"16-bit matmul n=" + std::to_string(n),
            Unit::GflopPerS,
            2.0 * n * n * n,
            true,
            n >= 2048 ? 5 : 1 << 30,
            {},
            {}};
    const auto id = [&](const std::string& dt) { return shape_id("matmul", {n, n}, "", dt); };
    const auto anvil32 = g.add("anvil", id("f32"), "alloc", "anvil f32 matmul");
    const auto torch32 = g.add("torch", id("f32"), "alloc", "LibTorch f32 matmul");
    for (const auto& dt : halves) {
      const auto anvil = g.add("anvil", id(dt), "alloc", "anvil " + dt + " matmul");
      const auto torch = g.add("torch", id(dt), "alloc", "LibTorch " + dt + " matmul");
      const auto torch2 = g.add("torch-t2", id(dt), "alloc", "LibTorch " + dt + ", 2 thr");
      g.rows.push_back({"matmul n=" + std::to_string(n) + " " + dt + " vs f32 (anvil)", anvil, anvil32, {}});
      g.rows.push_back({"  vs LibTorch " + dt, anvil, torch, {}});
      g.rows.push_back({"  vs LibTorch " + dt + " set_num_threads(2)", anvil, torch2, {}});
      g.rows.push_back({"  LibTorch's own " + dt + " vs its f32", torch, torch32, {}});
    }
    groups.push_back(std::move(g));
  }
  // The traffic target applies where the op is memory-bound: `add`. exp's
  // polynomial makes `exp(a) * b` compute-bound on a 2-core machine (f32 at
  // well under add's GB/s), so there the 16-bit time ratio is reported only.
  struct Elementwise {
    std::string title, op, what;
    Target traffic;
  };
  for (const Elementwise& e : {Elementwise{"16-bit add 16M", "add", "c = a + b", {TargetKind::RatioAtMost, 0.55}},
                               Elementwise{"16-bit exp(a) * b 16M", "exp_mul", "c = exp(a) * b", {}}}) {
    Group g{e.title, Unit::GBPerS, kBigBytes, false, 1 << 30, {}, {}};
    const auto id = [&](const std::string& dt) { return shape_id(e.op, {kBig}, "", dt); };
    const double bytes16 = kBigBytes / 2;
    const auto anvil32 = g.add("anvil", id("f32"), "alloc", "anvil f32 " + e.what);
    const auto torch32 = g.add("torch", id("f32"), "alloc", "LibTorch f32 " + e.what);
    for (const auto& dt : halves) {
      const auto anvil = g.add("anvil", id(dt), "alloc", "anvil " + dt + " " + e.what, bytes16);
      const auto torch = g.add("torch", id(dt), "alloc", "LibTorch " + dt + " " + e.what, bytes16);
      const auto torch2 = g.add("torch-t2", id(dt), "alloc", "LibTorch " + dt + ", 2 thr", bytes16);
      g.rows.push_back(
          {e.what + ", 16M " + dt + ": time / f32 time (anvil)", anvil, anvil32, e.traffic, RatioOf::Times});
      g.rows.push_back({"  vs LibTorch " + dt, anvil, torch, {}});
      g.rows.push_back({"  vs LibTorch " + dt + " set_num_threads(2)", anvil, torch2, {}});
      g.rows.push_back({"  LibTorch's own " + dt + " time / its f32 time", torch, torch32, {}, RatioOf::Times});
    }
    groups.push_back(std::move(g));
  }
}

std::vector<Group> make_groups(const std::vector<std::int64_t>& sizes) {
  std::vector<Group> groups;
  for (const auto n : sizes) {
    Group g{"matmul n=" + std::to_string(n), Unit::GflopPerS, 2.0 * n * n * n, true, n >= 2048 ? 5 : 1 << 30, {}, {}};
    const auto id = shape_id("matmul", {n, n});
    const auto anvil = g.add("anvil", id, "alloc", "anvil matmul");
    const auto anvil_out = g.add("anvil", id, "out", "anvil mm_out");
    const auto blas = g.add("openblas", id, "sgemm", "OpenBLAS cblas_sgemm");
    const auto torch = g.add("torch", id, "alloc", "LibTorch matmul");
    const auto torch2 = g.add("torch-t2", id, "alloc", "LibTorch matmul, 2 thr");
    // Issue 12, for every n from 64 to 4096.
    const Target vs_blas{TargetKind::RatioAtLeast, 0.95};
    const Target vs_torch{TargetKind::RatioAtLeast, 1.0};
    g.rows = {{"matmul n=" + std::to_string(n), anvil, blas, vs_blas},
              {"  mm_out (preallocated)", anvil_out, blas, {}},
              {"  vs LibTorch", anvil, torch, vs_torch},
              {"  vs LibTorch set_num_threads(2)", anvil, torch2, vs_torch}};
    if (n <= 128) {
      // Small products: also both libraries on one thread (BLAS included).
      const auto anvil1 = g.add("anvil-t1", id, "alloc", "anvil, 1 thr");
      const auto torch1 = g.add("torch-t1", id, "alloc", "LibTorch, 1 thr, BLAS 1");
      g.rows.push_back({"  equal threads: both on 1", anvil1, torch1, vs_torch});
    }
    groups.push_back(std::move(g));
  }
  {
    Group g{"add 16M", Unit::GBPerS, kBigBytes, false, 1 << 30, {}, {}};
    const auto id = shape_id("add", {kBig});
    const auto anvil = g.add("anvil", id, "alloc", "anvil a + b");
    const auto anvil_out = g.add("anvil", id, "out", "anvil add_out");
    const auto torch = g.add("torch", id, "alloc", "LibTorch a + b");
    const auto torch2 = g.add("torch-t2", id, "alloc", "LibTorch a + b, 2 thr");
    const auto torch_out = g.add("torch", id, "out", "LibTorch add_out");
    const auto torch2_out = g.add("torch-t2", id, "out", "LibTorch add_out, 2 thr");
    const auto triad = g.add("openblas", shape_id("stream_triad", {kBig}), "triad", "STREAM triad (OpenMP)");
    g.rows = {{"c = a + b, 16M f32, allocating", anvil, torch, {TargetKind::RatioAtLeast, 4.0}},
              {"  vs LibTorch set_num_threads(2)", anvil, torch2, {TargetKind::RatioAtLeast, 4.0}},
              {"  vs STREAM triad", anvil, triad, {TargetKind::RatioAtLeast, 0.8}},
              {"  add_out (preallocated) vs LibTorch add_out", anvil_out, torch_out, {}},
              {"  add_out vs LibTorch add_out, 2 thr", anvil_out, torch2_out, {}},
              {"  add_out vs STREAM triad", anvil_out, triad, {}}};
    groups.push_back(std::move(g));
  }
  {
    Group g{"exp(a) * b 16M", Unit::GBPerS, kBigBytes, false, 1 << 30, {}, {}};
    const auto id = shape_id("exp_mul", {kBig});
    const auto anvil = g.add("anvil", id, "alloc", "anvil exp(a) * b");
    const auto torch = g.add("torch", id, "alloc", "LibTorch exp(a) * b");
    const auto torch2 = g.add("torch-t2", id, "alloc", "LibTorch, 2 thr");
    const auto torch_out = g.add("torch", id, "out", "LibTorch exp_out+mul_out");
    const auto torch2_out = g.add("torch-t2", id, "out", "LibTorch out=, 2 thr");
    const auto fused = g.add("anvil", id, "fused", "anvil lazy(a).exp() * b");
    g.rows = {{"c = exp(a) * b, 16M f32, allocating", anvil, torch, {TargetKind::RatioAtLeast, 3.0}},
              {"  vs LibTorch set_num_threads(2)", anvil, torch2, {TargetKind::RatioAtLeast, 3.0}},
              {"  vs LibTorch preallocated (out=)", anvil, torch_out, {}},
              {"  vs LibTorch preallocated, 2 thr", anvil, torch2_out, {}},
              {"c = lazy(a).exp() * b (fused), allocating", fused, torch, {TargetKind::RatioAtLeast, 5.0}},
              {"  vs LibTorch set_num_threads(2)", fused, torch2, {}},
              {"  vs anvil op by op", fused, anvil, {}}};
    groups.push_back(std::move(g));
  }
  {
    Group g{"add 2x3 overhead", Unit::Microseconds, 1, false, 1 << 30, {}, {}};
    const auto id = shape_id("add", {2, 3});
    const auto anvil = g.add("anvil", id, "alloc", "anvil a + b");
    const auto torch = g.add("torch", id, "alloc", "LibTorch a + b");
    const auto torch2 = g.add("torch-t2", id, "alloc", "LibTorch a + b, 2 thr");
    const auto torch_inf = g.add("torch", id, "inference", "LibTorch, InferenceMode");
    g.rows = {{"a + b on 2x3, per op", anvil, torch, {TargetKind::AnvilAtMost, 0.4}},
              {"  vs LibTorch set_num_threads(2)", anvil, torch2, {TargetKind::AnvilAtMost, 0.4}},
              {"  vs LibTorch under InferenceMode", anvil, torch_inf, {}}};
    groups.push_back(std::move(g));
  }
  {
    Group g{"chapter exercise", Unit::Milliseconds, 1, true, 1 << 30, {}, {}};
    const auto id = shape_id("matmul_norm_item", {100, 100}, ",count=1000");
    const auto anvil = g.add("anvil", id, "alloc", "anvil");
    const auto torch = g.add("torch", id, "alloc", "LibTorch");
    const auto torch2 = g.add("torch-t2", id, "alloc", "LibTorch, 2 thr");
    const auto anvil1 = g.add("anvil-t1", id, "alloc", "anvil, 1 thr");
    const auto torch1 = g.add("torch-t1", id, "alloc", "LibTorch, 1 thr, BLAS 1");
    // Issue 12: 1.25x LibTorch at its defaults, at least even at equal threads.
    g.rows = {{"1000 x matmul(100x100).norm().item()", anvil, torch, {TargetKind::RatioAtMost, 0.8}},
              {"  vs LibTorch set_num_threads(2)", anvil, torch2, {TargetKind::RatioAtMost, 1.0}},
              {"  equal threads: both on 1", anvil1, torch1, {TargetKind::RatioAtMost, 1.0}}};
    groups.push_back(std::move(g));
  }
  add_half_groups(groups);
  return groups;
}

// With --baseline: each group's top-level (unindented) rows again with the
// baseline build's anvil in place of this one, against the same peer
// (before/after, one run).
void add_baseline_rows(std::vector<Group>& groups) {
  for (auto& g : groups) {
    for (std::size_t r = 0; r < g.rows.size(); ++r) {
      const Row top = g.rows[r];
      if (top.label.starts_with(" ")) continue;
      const Impl a = g.impls[top.anvil];
      const std::string label = "  baseline build vs " + g.impls[top.peer].name;
      const auto base = g.add("anvil-base", a.case_id, a.variant, "baseline " + a.name, a.work);
      g.rows.insert(g.rows.begin() + static_cast<std::ptrdiff_t>(r) + 1, Row{label, base, top.peer, {}, top.ratio_of});
      ++r;
    }
  }
}

// --- measuring ------------------------------------------------------------------------

struct Options {
  int repeats = 7;
  double sample_s = 0.2;
  std::string filter;
  std::vector<std::int64_t> sizes{64, 128, 256, 512, 1024, 2048, 4096};
  bool markdown = false;
  bool verbose = false;
  std::string baseline;  // another build's anvil worker, for before/after rows
};

// One timed request; seconds per op, or nullopt with impl.failure set.
std::optional<double> sample(Worker& w, Impl& impl, std::int64_t iterations) {
  if (!w.process) {
    impl.failure = w.info;
    return std::nullopt;
  }
  std::string reply;
  try {
    reply = w.process->request("run " + impl.case_id + " " + impl.variant + " " + std::to_string(iterations));
  } catch (const std::exception& e) {
    w.process.reset();
    w.info = std::string("unavailable: ") + e.what();
    impl.failure = w.info;
    return std::nullopt;
  }
  if (reply.rfind("ok ", 0) == 0) return std::stod(reply.substr(3)) / static_cast<double>(iterations);
  impl.failure = reply;
  return std::nullopt;
}

// Other processes' threads must not still be spinning while the next sample
// runs: libgomp threads spin for some milliseconds after a parallel region,
// and the pthread OpenBLAS under LibTorch busy-waits for up to ~0.1 s after
// each call (its THREAD_TIMEOUT) before sleeping.
void pause_after(const Worker& w, const Group& g) {
  std::this_thread::sleep_for(std::chrono::milliseconds(w.pthread_blas && g.blas ? 250 : 30));
}

void measure(Group& g, std::map<std::string, Worker*>& workers, const Options& o) {
  std::vector<std::int64_t> iterations(g.impls.size(), 0);
  for (std::size_t i = 0; i < g.impls.size(); ++i) {
    auto& impl = g.impls[i];
    auto& w = *workers.at(impl.worker);
    // Warm up, growing the iteration count until a run takes a quarter of a sample.
    std::int64_t n = 1;
    auto t = sample(w, impl, n);
    while (t && *t * static_cast<double>(n) < o.sample_s / 4) {
      const double factor = std::clamp(o.sample_s / 2 / std::max(*t * static_cast<double>(n), 1e-7), 2.0, 1000.0);
      n = static_cast<std::int64_t>(std::ceil(static_cast<double>(n) * factor));
      t = sample(w, impl, n);
    }
    pause_after(w, g);
    if (t) iterations[i] = std::max<std::int64_t>(1, std::llround(o.sample_s / *t));
  }
  const int repeats = std::min(o.repeats, g.max_repeats);
  for (int round = 0; round < repeats; ++round) {
    for (std::size_t k = 0; k < g.impls.size(); ++k) {
      const auto i = (k + static_cast<std::size_t>(round)) % g.impls.size();
      if (iterations[i] == 0) continue;
      auto& impl = g.impls[i];
      auto& w = *workers.at(impl.worker);
      if (auto t = sample(w, impl, iterations[i])) impl.samples.push_back(*t);
      pause_after(w, g);
    }
  }
  if (o.verbose) {
    for (const auto& impl : g.impls) {
      std::cerr << "  " << impl.name << ":";
      for (auto s : impl.samples) std::cerr << " " << s;
      std::cerr << "\n";
    }
  }
}

// --- reporting ------------------------------------------------------------------------

double value_of(const Group& g, const Impl& impl, double seconds) {
  switch (g.unit) {
    case Unit::GflopPerS:
    case Unit::GBPerS:
      return (impl.work > 0 ? impl.work : g.work) / seconds / 1e9;
    case Unit::Microseconds:
      return seconds * 1e6;
    case Unit::Milliseconds:
      return seconds * 1e3;
  }
  return 0;
}

const char* unit_name(Unit u) {
  switch (u) {
    case Unit::GflopPerS:
      return "GFLOP/s";
    case Unit::GBPerS:
      return "GB/s";
    case Unit::Microseconds:
      return "us";
    case Unit::Milliseconds:
      return "ms";
  }
  return "";
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

// A missing figure says why, briefly (the full reason is printed below the table).
std::string with_unit(const Group& g, const Impl& impl) {
  const auto seconds = impl.median();
  if (!seconds) {
    if (impl.failure.empty() || impl.failure.rfind("unavailable", 0) == 0) return "n/a";
    std::string why = impl.failure.rfind("error ", 0) == 0 ? impl.failure.substr(6) : impl.failure;
    if (why.size() > 48) why = why.substr(0, 45) + "...";
    return "n/a (" + why + ")";
  }
  const double v = value_of(g, impl, *seconds);
  return fixed(v, v < 10 ? 2 : 1) + " " + unit_name(g.unit);
}

std::string target_text(const Group& g, const Target& t) {
  switch (t.kind) {
    case TargetKind::None:
      return "";
    case TargetKind::RatioAtLeast:
      return ">= " + fixed(t.value, 2) + "x";
    case TargetKind::RatioAtMost:
      return "<= " + fixed(t.value, 2) + "x";
    case TargetKind::AnvilAtMost:
      return "anvil <= " + fixed(t.value, 2) + " " + unit_name(g.unit);
  }
  return "";
}

struct Line {
  std::array<std::string, 7> cells;
};

std::vector<Line> table(const std::vector<Group>& groups) {
  std::vector<Line> lines;
  lines.push_back({{"case", "anvil", "peer", "peer value", "ratio", "target", "met?"}});
  for (const auto& g : groups) {
    for (const auto& row : g.rows) {
      const auto& a = g.impls[row.anvil];
      const auto& p = g.impls[row.peer];
      const auto ta = a.median();
      const auto tp = p.median();
      std::string ratio;
      std::string met;
      if (ta && tp) {
        const double r = row.ratio_of == RatioOf::Times ? *ta / *tp : value_of(g, a, *ta) / value_of(g, p, *tp);
        ratio = fixed(r, 2) + "x";
        bool ok = true;
        switch (row.target.kind) {
          case TargetKind::None:
            break;
          case TargetKind::RatioAtLeast:
            ok = r >= row.target.value;
            break;
          case TargetKind::RatioAtMost:
            ok = r <= row.target.value;
            break;
          case TargetKind::AnvilAtMost:
            ok = value_of(g, a, *ta) <= row.target.value;
            break;
        }
        if (row.target.kind != TargetKind::None) met = ok ? "yes" : "NO";
      } else if (row.target.kind != TargetKind::None) {
        met = "n/a";
      }
      lines.push_back({{row.label, with_unit(g, a), p.name, with_unit(g, p), ratio, target_text(g, row.target), met}});
    }
  }
  return lines;
}

void print_table(const std::vector<Line>& lines, bool markdown) {
  std::array<std::size_t, 7> width{};
  for (const auto& l : lines)
    for (std::size_t c = 0; c < 7; ++c) width[c] = std::max(width[c], l.cells[c].size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto& l = lines[i];
    for (std::size_t c = 0; c < 7; ++c) {
      const bool right = c == 1 || c == 3 || c == 4;
      std::cout << (markdown ? "| " : (c ? "  " : ""));
      std::cout << (right ? std::right : std::left) << std::setw(static_cast<int>(width[c])) << l.cells[c];
      if (markdown) std::cout << " ";
    }
    std::cout << (markdown ? "|\n" : "\n");
    if (markdown && i == 0) {
      for (std::size_t c = 0; c < 7; ++c) {
        const bool right = c == 1 || c == 3 || c == 4;
        std::cout << "|" << std::string(width[c] + 1, '-') << (right ? ":" : "-");
      }
      std::cout << "|\n";
    }
  }
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string here() {
  std::array<char, 4096> buffer{};
  const auto n = readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0) return ".";
  std::string path(buffer.data(), static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}

void usage() {
  std::cout << "usage: bench_compare [--repeats N] [--sample-ms MS] [--filter TEXT] [--sizes 64,256,...]\n"
               "                     [--markdown] [--verbose] [--baseline PROGRAM]\n"
               "  --repeats    samples per implementation, median reported (default 7)\n"
               "  --sample-ms  length of one sample (default 200)\n"
               "  --filter     only cases whose title contains TEXT (e.g. matmul, add, exp, overhead, exercise,\n"
               "               16-bit: f16/bf16 matmul n=256,1024, add and exp(a) * b beside f32)\n"
               "  --sizes      matmul sizes (default 64,128,256,512,1024,2048,4096)\n"
               "  --markdown   print the table as Markdown\n"
               "  --verbose    print every sample to stderr\n"
               "  --baseline   another build's bench_worker_anvil (or a script that runs it): each\n"
               "               group's first row is measured with it too, as a \"before\" row\n";
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--repeats")
      o.repeats = std::max(1, std::stoi(next()));
    else if (a == "--sample-ms")
      o.sample_s = std::stod(next()) / 1e3;
    else if (a == "--filter")
      o.filter = next();
    else if (a == "--markdown")
      o.markdown = true;
    else if (a == "--verbose")
      o.verbose = true;
    else if (a == "--baseline")
      o.baseline = next();
    else if (a == "--sizes") {
      o.sizes.clear();
      std::istringstream in(next());
      std::string s;
      while (std::getline(in, s, ',')) o.sizes.push_back(std::stoll(s));
    } else if (a == "--help" || a == "-h") {
      usage();
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown option " + a + " (try --help)");
    }
  }
  return o;
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const std::string dir = here();
  std::vector<Worker> workers;
  workers.push_back({"anvil", dir + "/bench_worker_anvil", {}, false, nullptr, {}});
  workers.push_back({"anvil-t1", dir + "/bench_worker_anvil", {"--threads", "1"}, false, nullptr, {}});
  if (!o.baseline.empty()) workers.push_back({"anvil-base", o.baseline, {}, false, nullptr, {}});
  workers.push_back({"openblas", dir + "/bench_worker_openblas", {}, false, nullptr, {}});
  workers.push_back({"torch", dir + "/bench_worker_torch", {}, true, nullptr, {}});
  workers.push_back(
      {"torch-t1", dir + "/bench_worker_torch", {"--threads", "1", "--blas-threads", "1"}, true, nullptr, {}});
  workers.push_back({"torch-t2", dir + "/bench_worker_torch", {"--threads", "2"}, true, nullptr, {}});
  std::map<std::string, Worker*> by_key;
  for (auto& w : workers) {
    by_key[w.key] = &w;
    if (access(w.program.c_str(), X_OK) != 0) {
      w.info = "unavailable: " + w.program + " was not built";
      continue;
    }
    try {
      w.process = std::make_unique<WorkerProcess>(w.program, w.args);
      auto reply = w.process->request("info");
      w.info = reply.rfind("ok ", 0) == 0 ? reply.substr(3) : reply;
    } catch (const std::exception& e) {
      w.process.reset();
      w.info = std::string("unavailable: ") + e.what();
    }
  }

  auto groups = make_groups(o.sizes);
  std::erase_if(groups, [&](const Group& g) { return g.title.find(o.filter) == std::string::npos; });
  if (!o.baseline.empty()) add_baseline_rows(groups);

  std::cout << "anvil vs peers: median of " << o.repeats << " samples of ~" << o.sample_s * 1e3
            << " ms each, implementations alternating, one process per library\n";
  for (const auto& w : workers) std::cout << "  " << std::left << std::setw(10) << w.key << " " << w.info << "\n";
  std::cout << "  load average at start: " << loadavg() << "\n" << std::flush;

  const auto start = std::chrono::steady_clock::now();
  for (auto& g : groups) {
    std::cerr << "measuring " << g.title << " ...\n";
    measure(g, by_key, o);
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::cout << "\nratio = anvil / peer in the row's unit: higher is better for GFLOP/s and GB/s, lower for us and ms;\n"
            << "rows saying `time / ... time` divide the times instead (lower is better).\n"
            << "GB/s counts elements x 3 x dtype size per op (two inputs read, one output written): 3 x 64 MiB in\n"
            << "f32, 3 x 32 MiB in f16/bf16.\n\n";
  print_table(table(groups), o.markdown);
  std::cout << "\n  load average at end: " << loadavg() << "; measured in " << fixed(elapsed, 0) << " s\n";
  // Why figures are missing, once per worker and reason.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> failures;
  for (const auto& g : groups)
    for (const auto& impl : g.impls)
      if (!impl.failure.empty()) failures[{impl.worker, impl.failure}].push_back(impl.case_id + " " + impl.variant);
  for (const auto& [key, cases] : failures) {
    std::cout << "  n/a " << key.first << ": " << key.second << "\n";
    if (key.second.rfind("unavailable", 0) != 0)
      for (const auto& c : cases) std::cout << "      " << c << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "bench_compare: " << e.what() << "\n";
    return 1;
  }
}
