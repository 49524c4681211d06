// Each scenario measures with the same rule: warm up, then time whole
// operations and keep the median of the repeats. Work on one device is timed
// with anvil::Event, on the device's own clock where it has one (OpenCL queue
// profiling) and otherwise on the host's steady clock around synchronize();
// work spread over several devices is timed on the host clock, since two
// devices' clocks cannot be compared. Every row says which clock it used.
#include "scenarios.h"

#include <anvil/anvil.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "timing.h"

namespace anvil::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void sync_all(const std::vector<Device>& ds) {
  for (Device d : ds) synchronize(d);
}

// A time and the clock it was read from.
struct Timed {
  double seconds = 0;
  bool device_clock = false;
};
std::string clock_name(bool device_clock) { return device_clock ? "device" : "host"; }

// `fn` between two anvil::Events on `d`.
template <typename Fn>
Timed time_events(Device d, Fn&& fn) {
  const Event start = Event::record(d);
  fn();
  const Event end = Event::record(d);
  return {start.elapsed_seconds(end), start.on_device_clock()};
}

// `fn` on the host clock, followed by a wait on every device in `sync`.
template <typename Fn>
double time_host(const std::vector<Device>& sync, Fn&& fn) {
  const auto t0 = Clock::now();
  fn();
  sync_all(sync);
  return seconds(t0);
}

// Median time of `fn` on `devices`: one warm-up run, then as many repeats as
// fit in `budget` seconds, at least 3 and at most `max_repeats`. On one
// device with events (its own clock where it has one), on several with the
// host clock.
template <typename Fn>
Timed time_median(const std::vector<Device>& devices, double budget, int max_repeats, Fn&& fn) {
  auto once = [&]() -> Timed {
    if (devices.size() == 1) return time_events(devices.front(), fn);
    return {time_host(devices, fn), false};
  };
  const Timed first = once();  // the warm-up, which also sizes the repeats
  const int repeats =
      std::clamp(first.seconds > 0 ? static_cast<int>(budget / first.seconds) : max_repeats, 3, max_repeats);
  return {median_of(0, repeats, [&] { return once().seconds; }), first.device_clock};
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(digits);
  os << v;
  return os.str();
}

std::string bytes_label(std::int64_t b) {
  if (b >= (1 << 30)) return std::to_string(b >> 30) + " GiB";
  if (b >= (1 << 20)) return std::to_string(b >> 20) + " MiB";
  return std::to_string(b >> 10) + " KiB";
}

bool is_cpu_kind(Device d) { return d.is_cpu() || properties(d).kind == "cpu"; }

// ---- matmul ----------------------------------------------------------------------
ScenarioResult run_matmul(const Options& o) {
  ScenarioResult r{"matmul", {}, ""};
  std::vector<std::int64_t> sizes;
  for (std::int64_t n = 16; n <= (o.quick ? 512 : 4096); n *= o.quick ? 4 : 2) sizes.push_back(n);
  if (o.quick && sizes.back() != 512) sizes.push_back(512);
  Table t{"f32 square matmul C = A @ B, one op from launch to completion",
          {"device", "n", "time_ms", "gflops", "clock"},
          {},
          {1, 3, 0, true, false, false, "GFLOP/s"}};
  // time[device][size], and whether the device's own clock measured it
  std::vector<std::vector<double>> time(o.devices.size());
  std::vector<bool> device_clock(o.devices.size(), false);
  for (std::size_t di = 0; di < o.devices.size(); ++di) {
    const Device d = o.devices[di];
    for (std::int64_t n : sizes) {
      manual_seed(1);
      Tensor a = randn({n, n}, d), b = randn({n, n}, d);
      const Timed m = time_median({d}, o.quick ? 0.05 : 0.5, 30, [&] { (void)matmul(a, b); });
      const double s = m.seconds;
      time[di].push_back(s);
      device_clock[di] = m.device_clock;
      t.rows.push_back({d.str(), n, s * 1e3, 2.0 * n * n * n / s / 1e9, clock_name(m.device_clock)});
    }
  }
  r.tables.push_back(std::move(t));

  // Where does each accelerator start to beat the CPU?
  std::ptrdiff_t cpu_i = -1;
  for (std::size_t i = 0; i < o.devices.size(); ++i)
    if (o.devices[i].is_cpu()) cpu_i = static_cast<std::ptrdiff_t>(i);
  std::ostringstream c;
  if (cpu_i < 0 || o.devices.size() < 2) {
    std::size_t best = 0;
    for (std::size_t i = 0; i < o.devices.size(); ++i)
      if (time[i].back() < time[best].back()) best = i;
    c << "fastest at n=" << sizes.back() << ": " << o.devices[best] << " ("
      << fixed(2.0 * std::pow(sizes.back(), 3) / time[best].back() / 1e9, 1) << " GFLOP/s); add cpu to --devices to"
      << " see where an accelerator starts to win";
  } else {
    const auto& tc = time[static_cast<std::size_t>(cpu_i)];
    bool first = true;
    for (std::size_t i = 0; i < o.devices.size(); ++i) {
      if (static_cast<std::ptrdiff_t>(i) == cpu_i) continue;
      const Device d = o.devices[i];
      c << (first ? "" : "; ");
      first = false;
      // The smallest size from which it is faster at every larger size too.
      std::size_t win = sizes.size();
      for (std::size_t k = sizes.size(); k-- > 0 && time[i][k] < tc[k];) win = k;
      if (win < sizes.size())
        c << d << " beats cpu from n=" << sizes[win] << " on (" << fixed(tc.back() / time[i].back(), 2)
          << "x faster at n=" << sizes.back() << ")";
      else
        c << d << " does not beat cpu at n=" << sizes.back() << " (cpu " << fixed(time[i].back() / tc.back(), 2)
          << "x faster" << (is_cpu_kind(d) ? "; it runs on the same CPU cores" : "") << ")";
      if (time[i].front() > tc.front())
        c << ", and at n=" << sizes.front() << " cpu is " << fixed(time[i].front() / tc.front(), 1) << "x faster ("
          << (device_clock[i] ? "the launch costs" : "launch and wait cost") << " more than the work)";
      else
        c << ", and it is faster even at n=" << sizes.front();
    }
  }
  r.conclusion = c.str();
  return r;
}

// ---- sync-log --------------------------------------------------------------------
ScenarioResult run_sync_log(const Options& o) {
  ScenarioResult r{"sync-log", {}, ""};
  const int steps = o.quick ? 100 : 1000;
  constexpr std::int64_t n = 100;
  Table t{"log ||A_i @ B||_F for " + std::to_string(steps) + " matmuls of 100x100",
          {"device", "mode", "steps", "time_ms", "us_per_step", "host_syncs", "d2h_copies", "clock"},
          {},
          {1, 3, 0, false, false, true, "ms"}};
  std::ostringstream c;
  for (std::size_t di = 0; di < o.devices.size(); ++di) {
    const Device d = o.devices[di];
    manual_seed(7);
    Tensor b = randn({n, n}, d) * 0.1;
    std::vector<double> host_log, dev_log;
    // host read every step: item() copies one float and waits for the device.
    auto host_mode = [&](int count) {
      host_log.clear();
      manual_seed(11);
      for (int i = 0; i < count; ++i) host_log.push_back(matmul(rand({n, n}, d), b).norm().item<float>());
    };
    // device log: norms stay on the device; one read at the end.
    auto device_mode = [&](int count) {
      manual_seed(11);
      DeviceLog log(count, d);
      for (int i = 0; i < count; ++i) log.append(matmul(rand({n, n}, d), b).norm());
      dev_log = log.read();
    };
    host_mode(5);
    device_mode(5);
    synchronize(d);
    // One mode between two events; the ledger counts what the mode did, not
    // the events' own waits.
    bool device_clock = false;
    auto timed = [&](auto&& mode, LedgerReport& counted) {
      const Event start = Event::record(d);
      Ledger l;
      mode(steps);
      counted = l.report();
      const Event end = Event::record(d);
      device_clock = start.on_device_clock();
      return start.elapsed_seconds(end);
    };
    // The two modes alternate so that a change in the machine's load hits both.
    const int repeats = o.quick ? 3 : 5;
    std::vector<double> ts_host, ts_dev;
    LedgerReport lh, ld;
    for (int k = 0; k < repeats; ++k) {
      ts_host.push_back(timed(host_mode, lh));
      ts_dev.push_back(timed(device_mode, ld));
    }
    const double th = median(ts_host), td = median(ts_dev);
    const auto syncs = [&](const LedgerReport& rep) { return static_cast<std::int64_t>(rep.host_syncs(d)); };
    t.rows.push_back({d.str(), std::string("host read each step"), std::int64_t{steps}, th * 1e3, th / steps * 1e6,
                      syncs(lh), static_cast<std::int64_t>(lh.copies(d, cpu())), clock_name(device_clock)});
    t.rows.push_back({d.str(), std::string("DeviceLog, one read"), std::int64_t{steps}, td * 1e3, td / steps * 1e6,
                      syncs(ld), static_cast<std::int64_t>(ld.copies(d, cpu())), clock_name(device_clock)});
    double diff = 0;
    for (std::size_t i = 0; i < host_log.size() && i < dev_log.size(); ++i)
      diff = std::max(diff, std::fabs(host_log[i] - dev_log[i]) / std::max(1e-12, std::fabs(host_log[i])));
    ANVIL_CHECK(host_log.size() == dev_log.size() && diff < 1e-5, Error, "sync-log: the two logs disagree on ", d,
                "; expected equal norms, got a relative difference of ", diff);
    c << (di ? "; " : "") << d << ": keeping the log on the device is " << fixed(th / td, 2) << "x "
      << (th >= td ? "faster" : "slower") << " (";
    if (syncs(lh) == 0)
      c << "no host syncs either way: the CPU runs each op as it is called)";
    else
      c << syncs(ld) << " host sync instead of " << syncs(lh) << ")";
  }
  c << "; both logs agree";
  r.tables.push_back(std::move(t));
  r.conclusion = c.str();
  return r;
}

// ---- two-devices -----------------------------------------------------------------
// The pair's times, each read once and compared only with times of the same
// clock: one matmul per device (its own clock where it has one), and the two
// matmuls one after the other on d0 and at once on d0 + d1 (host clock).
struct PairTimes {
  Timed one0, one1;
  double sequential = 0, at_once = 0;
};

PairTimes time_pair(Device d0, Device d1, std::int64_t n, bool quick) {
  manual_seed(3);
  Tensor a0 = randn({n, n}, d0), b0 = randn({n, n}, d0);
  Tensor a1 = randn({n, n}, d1), b1 = randn({n, n}, d1);
  Tensor a1_on0 = a1.to(d0), b1_on0 = b1.to(d0);
  const double budget = quick ? 0.1 : 1.0;
  PairTimes p;
  p.one0 = time_median({d0}, budget, 10, [&] { (void)matmul(a0, b0); });
  p.one1 = time_median({d1}, budget, 10, [&] { (void)matmul(a1, b1); });
  auto sequential = [&] {
    (void)matmul(a0, b0);
    (void)matmul(a1_on0, b1_on0);
    synchronize(d0);
  };
  // One host thread per device, so that a device whose ops run on the calling
  // thread (the CPU) and an asynchronous queue both get to run at once.
  auto at_once = [&] {
    std::thread other([&] {
      (void)matmul(a1, b1);
      synchronize(d1);
    });
    (void)matmul(a0, b0);
    synchronize(d0);
    other.join();
  };
  // Both ways on the host clock, so that they compare: one of them spans two
  // devices, whose clocks cannot be compared. Alternate the two so that a
  // change in the machine's load hits both.
  sequential();
  at_once();
  std::vector<double> seq_times, par_times;
  for (int k = 0; k < (quick ? 5 : 7); ++k) {
    auto t0 = Clock::now();
    sequential();
    seq_times.push_back(seconds(t0));
    t0 = Clock::now();
    at_once();
    par_times.push_back(seconds(t0));
  }
  p.sequential = median(seq_times);
  p.at_once = median(par_times);
  return p;
}

void pair_rows(Table& t, const PairTimes& p, const std::string& n0, const std::string& n1, double flop) {
  t.rows.push_back({std::string("one matmul"), n0, p.one0.seconds * 1e3, flop / p.one0.seconds / 1e9,
                    clock_name(p.one0.device_clock)});
  t.rows.push_back({std::string("one matmul"), n1, p.one1.seconds * 1e3, flop / p.one1.seconds / 1e9,
                    clock_name(p.one1.device_clock)});
  t.rows.push_back({std::string("two, one after the other"), n0, p.sequential * 1e3, 2 * flop / p.sequential / 1e9,
                    clock_name(false)});
  t.rows.push_back(
      {std::string("two at once"), n0 + " + " + n1, p.at_once * 1e3, 2 * flop / p.at_once / 1e9, clock_name(false)});
}

// "speedup 1.91x (ideal 2x), overlap 91%": overlap is how much of the ideal
// halving was reached (100% = at once took half of one after the other).
std::string speedup_text(double sequential, double at_once) {
  const double overlap = std::clamp(2.0 * (1.0 - at_once / sequential), 0.0, 1.0);
  return "speedup " + fixed(sequential / at_once, 2) + "x (ideal 2x), overlap " + fixed(100 * overlap, 0) + "%";
}

// Two different devices (by name), one of them slower by this factor on one
// matmul: too unalike for "ideal 2x" (run_two_devices). Two devices of one
// model stay alike whatever one timing says (PoCL's vary by 2x run to run).
constexpr double kUnalikeDevices = 3;

bool is_subdevice(Device d) { return properties(d).name.find("(sub-device ") != std::string::npos; }

// Two whole CPU-type OpenCL devices (PoCL's POCL_DEVICES="pthread pthread",
// ./run's default) share one pool of worker threads on the same cores: one
// matmul already keeps every core busy, so a second one at once cannot
// overlap with it. One-core sub-devices (ANVIL_OPENCL_SUBDEVICES=1) can.
bool whole_cpu_devices(Device d0, Device d1) {
  auto whole_cpu = [](Device d) { return d.type() == DeviceType::OpenCL && is_cpu_kind(d) && !is_subdevice(d); };
  return whole_cpu(d0) && whole_cpu(d1);
}

// Set in the child that measures the pair on sub-devices (below).
constexpr const char* kSubdeviceChild = "ANVIL_BENCH_SUBDEVICE_CHILD";

// OpenCL devices are discovered once per process, so the pair on one-core
// sub-devices is measured by this program run again with
// ANVIL_OPENCL_SUBDEVICES=1 POCL_DEVICES=pthread (one PoCL device split into
// one sub-device per core: opencl:0 and opencl:1 are two cores). Returns the
// child's two-devices table, or what went wrong.
struct SubdeviceRun {
  std::optional<PairTimes> times;
  std::string error;
};

SubdeviceRun run_on_subdevices(bool quick) {
  SubdeviceRun out;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {std::nullopt, "cannot find this program to run it again (" + ec.message() + ")"};
  char err_path[] = "/tmp/anvil-bench-subdevices-XXXXXX";
  const int fd = mkstemp(err_path);
  if (fd < 0) return {std::nullopt, std::string("cannot create a temporary file: ") + std::strerror(errno)};
  close(fd);
  const std::string cmd =
      std::string("env ") + kSubdeviceChild + "=1 ANVIL_OPENCL_SUBDEVICES=1 POCL_DEVICES=pthread '" + self.string() +
      "' two-devices --json --devices opencl:0,opencl:1" + (quick ? " --quick" : "") + " 2>'" + err_path + "'";
  std::string text;
  int status = -1;
  if (FILE* p = popen(cmd.c_str(), "r"); p != nullptr) {
    char buf[4096];
    for (std::size_t k; (k = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, k);
    const int w = pclose(p);
    status = WIFEXITED(w) ? WEXITSTATUS(w) : -1;
  }
  std::string err;
  if (std::FILE* f = std::fopen(err_path, "r"); f != nullptr) {
    char buf[4096];
    for (std::size_t k; (k = std::fread(buf, 1, sizeof buf, f)) > 0;) err.append(buf, k);
    std::fclose(f);
  }
  std::remove(err_path);
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
  if (const auto nl = err.rfind('\n'); nl != std::string::npos) err = err.substr(nl + 1);  // the error line
  if (status != 0) return {std::nullopt, err.empty() ? "the run exited with status " + std::to_string(status) : err};
  try {
    const nlohmann::json doc = nlohmann::json::parse(text);
    PairTimes p;
    int seen = 0;
    for (const nlohmann::json& row : doc.at("scenarios").at(0).at("tables").at(0).at("rows")) {
      const std::string c = row.at("case"), devices = row.at("devices");
      const double s = row.at("time_ms").get<double>() / 1e3;
      const bool device_clock = row.at("clock") == "device";
      if (c == "one matmul" && devices == "opencl:0") p.one0 = {s, device_clock}, seen |= 1;
      if (c == "one matmul" && devices == "opencl:1") p.one1 = {s, device_clock}, seen |= 2;
      if (c == "two, one after the other") p.sequential = s, seen |= 4;
      if (c == "two at once") p.at_once = s, seen |= 8;
    }
    if (seen != 15)
      return {std::nullopt, "its table lacks a row: " + doc.at("scenarios").at(0).value("conclusion", "")};
    out.times = p;
  } catch (const std::exception& e) {
    return {std::nullopt, std::string("cannot read its output: ") + e.what()};
  }
  return out;
}

ScenarioResult run_two_devices(const Options& o) {
  ScenarioResult r{"two-devices", {}, ""};
  const std::int64_t n = o.quick ? 512 : 2048;
  const double flop = 2.0 * n * n * n;
  Table t{"two f32 matmuls of " + std::to_string(n) + "x" + std::to_string(n),
          {"case", "devices", "time_ms", "gflops", "clock"},
          {},
          {0, 2, -1, false, false, true, "ms"}};
  if (o.devices.size() < 2) {
    const std::string why = try_gpu_reason(1);
    r.tables.push_back(std::move(t));
    r.conclusion = "needs two devices; got only " + o.devices.front().str() +
                   (why.empty() ? "" : " (try_gpu(1) falls back: " + why + ")") +
                   "; try POCL_DEVICES=\"pthread pthread\" ANVIL_OPENCL_CPU=1";
    return r;
  }
  const Device d0 = o.devices[0], d1 = o.devices[1];
  if (const char* child = std::getenv(kSubdeviceChild); child != nullptr && *child == '1')
    ANVIL_CHECK(is_subdevice(d0) && is_subdevice(d1), DeviceError,
                "two-devices: ANVIL_OPENCL_SUBDEVICES=1 gave no one-core sub-devices; expected opencl:0 and opencl:1 "
                "to be sub-devices, got '",
                properties(d0).name, "' and '", properties(d1).name, "'");
  const PairTimes p = time_pair(d0, d1, n, o.quick);
  pair_rows(t, p, d0.str(), d1.str(), flop);
  r.tables.push_back(std::move(t));
  std::ostringstream c;
  c << "two at once on " << d0 << " + " << d1 << " take " << fixed(p.at_once * 1e3, 1) << " ms vs "
    << fixed(p.sequential * 1e3, 1) << " ms one after the other on " << d0 << ": ";
  // Devices far apart in speed (a GPU and the CPU, on a machine with one
  // GPU): the pair at once ends no sooner than the slower device's matmul,
  // so halving the time is not the ideal there.
  const bool slow1 = p.one1.seconds > p.one0.seconds;
  const double slower = std::max(p.one0.seconds, p.one1.seconds), faster = std::min(p.one0.seconds, p.one1.seconds);
  if (properties(d0).name != properties(d1).name && slower > kUnalikeDevices * faster) {
    c << "speedup " << fixed(p.sequential / p.at_once, 2) << "x (ideal " << fixed(2 * p.one0.seconds / slower, 2)
      << "x); " << (slow1 ? d1 : d0) << " takes one matmul in " << fixed(slower * 1e3, 2) << " ms, "
      << fixed(slower / faster, 1) << "x " << (slow1 ? d0 : d1) << "'s " << fixed(faster * 1e3, 2)
      << " ms: the pair at once ends no sooner than that, and both on " << (slow1 ? d0 : d1) << " take about "
      << fixed(2 * faster * 1e3, 2) << " ms, so two devices pay off when they are alike, as the book's GPUs";
  } else {
    c << speedup_text(p.sequential, p.at_once);
  }
  if (whole_cpu_devices(d0, d1)) {
    // The exercise is about overlap, which two whole PoCL devices on the same
    // cores cannot show: measure it where it exists, on one-core sub-devices.
    const int cores = std::max(properties(d0).compute_units, properties(d1).compute_units);
    c << "; " << d0 << " and " << d1 << " are whole CPU devices on the same " << cores
      << " cores (one matmul can already use them all), so two at once have no spare core to overlap on";
    const SubdeviceRun sub = run_on_subdevices(o.quick);
    if (sub.times) {
      const PairTimes& q = *sub.times;
      Table ts{
          "the same on two one-core sub-devices of the CPU (ANVIL_OPENCL_SUBDEVICES=1 POCL_DEVICES=pthread, "
          "measured in a second run of anvil-bench)",
          r.tables.front().columns,
          {},
          r.tables.front().plot};
      pair_rows(ts, q, "sub-device 0", "sub-device 1", flop);
      r.tables.push_back(std::move(ts));
      c << "; on two one-core sub-devices of that CPU (ANVIL_OPENCL_SUBDEVICES=1 POCL_DEVICES=pthread, second "
           "table) two at once take "
        << fixed(q.at_once * 1e3, 1) << " ms vs " << fixed(q.sequential * 1e3, 1)
        << " ms one after the other: " << speedup_text(q.sequential, q.at_once) << ", on the same " << cores
        << " cores in all (" << fixed(p.sequential * 1e3, 1) << " ms for the pair one after the other on whole " << d0
        << ")";
    } else {
      c << "; two at once on one-core sub-devices (ANVIL_OPENCL_SUBDEVICES=1 POCL_DEVICES=pthread) could not be "
           "measured: "
        << sub.error;
    }
  } else if (is_subdevice(d0) && is_subdevice(d1)) {
    c << " (one-core sub-devices of the same CPU)";
  } else if (is_cpu_kind(d0) && is_cpu_kind(d1)) {
    c << " (both run on the same CPU cores)";
  }
  r.conclusion = c.str();
  return r;
}

// ---- transfer --------------------------------------------------------------------
ScenarioResult run_transfer(const Options& o) {
  ScenarioResult r{"transfer", {}, ""};
  std::vector<std::int64_t> sizes = {4 << 10, 64 << 10, 1 << 20, 4 << 20};
  if (!o.quick) sizes = {4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20};
  Table t{"copy bandwidth (f32 tensors)",
          {"route", "bytes", "size", "time_us", "gb_per_s", "clock"},
          {},
          {1, 4, 0, true, false, false, "GB/s"}};
  std::vector<Device> targets;
  for (Device d : o.devices)
    if (!d.is_cpu()) targets.push_back(d);
  const bool cpu_only = targets.empty();
  if (cpu_only) targets.push_back(cpu());
  const double budget = o.quick ? 0.02 : 0.2;
  std::ostringstream c;
  double small = kNaN;  // seconds for the smallest host->device copy (cpu: on-device copy)
  for (std::size_t di = 0; di < targets.size(); ++di) {
    const Device d = targets[di];
    // Another device of the same backend in the list, for device→device.
    std::optional<Device> peer;
    for (Device e : targets)
      if (e != d && e.type() == d.type() && !peer) peer = e;
    double h2d = kNaN, d2h = kNaN, d2d = kNaN;
    for (std::int64_t bytes : sizes) {
      const std::int64_t n = bytes / 4;
      Tensor host = full({n}, 1.5, cpu());
      Tensor dev = host.copy_to(d);
      synchronize(d);
      auto row = [&](const std::string& route, Timed m) {
        const double s = m.seconds;
        t.rows.push_back({route, bytes, bytes_label(bytes), s * 1e6, bytes / s / 1e9, clock_name(m.device_clock)});
        return s;
      };
      if (!cpu_only) {
        const double s1 = row("host->" + d.str(), time_median({d}, budget, 50, [&] { (void)host.copy_to(d); }));
        const double s2 = row(d.str() + "->host", time_median({d}, budget, 50, [&] { (void)dev.copy_to(cpu()); }));
        if (bytes == sizes.back()) h2d = bytes / s1 / 1e9, d2h = bytes / s2 / 1e9;
        if (bytes == sizes.front()) small = s1;
      }
      const double s3 = row(d.str() + "->" + d.str(), time_median({d}, budget, 50, [&] { (void)dev.copy_to(d); }));
      if (bytes == sizes.back()) d2d = bytes / s3 / 1e9;
      if (cpu_only && bytes == sizes.front()) small = s3;
      if (peer)
        row(d.str() + "->" + peer->str(), time_median({d, *peer}, budget, 50, [&] { (void)dev.copy_to(*peer); }));
    }
    c << (di ? "; " : "") << "at " << bytes_label(sizes.back()) << " ";
    if (!cpu_only)
      c << "host->" << d << " " << fixed(h2d, 2) << " GB/s, " << d << "->host " << fixed(d2h, 2) << " GB/s, ";
    c << "within " << d << " " << fixed(d2d, 2) << " GB/s";
  }
  // The smallest copy shows the fixed cost of a copy, whatever its size.
  c << "; a " << bytes_label(sizes.front()) << " copy takes " << fixed(small * 1e6, 1) << " us ("
    << fixed(static_cast<double>(sizes.front()) / small / 1e9, 3) << " GB/s): latency dominates small copies";
  r.conclusion = c.str() + (cpu_only ? " (no accelerator in --devices: cpu copies only)" : "");
  r.tables.push_back(std::move(t));
  return r;
}

// ---- roofline --------------------------------------------------------------------

// How each backend runs 16-bit work (DESIGN §4.2: f16/bf16 are stored in 16
// bits everywhere and accumulate in f32), for the roofline's 16-bit rows:
// CUDA hands 16-bit operands to cuBLAS (cublasGemmEx, f32 compute), the CPU
// widens them to f32 for OpenBLAS's sgemm, OpenCL runs its tiled kernel (no
// CLBlast HGEMM without cl_khr_fp16, no bf16 in CLBlast). Elementwise ops load
// 16 bits, compute in f32 and round once on the store on every device.
std::string matmul_16bit_path(Device d) {
  if (d.type() == DeviceType::CUDA) return "native: cuBLAS 16-bit in, f32 accumulate";
  if (d.is_cpu()) return "through f32: widen + OpenBLAS sgemm";
  return "through f32: tiled kernel, f32 accumulate";
}

ScenarioResult run_roofline(const Options& o) {
  ScenarioResult r{"roofline", {}, ""};
  Table t{"what the buying guide says matters: compute, memory size, bandwidth",
          {"device", "name", "memory_gib", "f32_gflops", "f64_gflops", "bandwidth_gb_per_s", "ridge_flop_per_byte",
           "clock"},
          {},
          {0, 3, -1, false, false, true, "GFLOP/s (f32)"}};
  Table halves{
      "16-bit beside f32: matmul GFLOP/s (best of the sizes above) and c = a + b into a preallocated c "
      "(GB/s of elements x 3 x dtype size)",
      {"device", "dtype", "matmul_gflops", "add_gb_per_s", "add_time_vs_f32", "device_fp16", "matmul_path",
       "elementwise_path", "clock"},
      {},
      {}};
  const std::vector<std::int64_t> sizes =
      o.quick ? std::vector<std::int64_t>{256, 512} : std::vector<std::int64_t>{1024, 2048};
  const std::int64_t elems = (o.quick ? 16 : 128) << 18;  // 16 or 128 MiB of f32
  const double budget = o.quick ? 0.05 : 0.5;
  std::ostringstream c;
  for (std::size_t di = 0; di < o.devices.size(); ++di) {
    const Device d = o.devices[di];
    const DeviceProperties p = properties(d);
    auto peak = [&](DType dt) {
      double best = 0;
      for (std::int64_t n : sizes) {
        manual_seed(5);
        Tensor a = randn({n, n}, d, dt), b = randn({n, n}, d, dt);
        const double s = time_median({d}, budget, 10, [&] { (void)matmul(a, b); }).seconds;
        best = std::max(best, 2.0 * n * n * n / s / 1e9);
      }
      return best;
    };
    const double f32_gflops = peak(anvil::f32);
    double f64_gflops = kNaN;
    if (p.fp64) {
      try {
        f64_gflops = peak(anvil::f64);
      } catch (const NotSupported&) {
        // the device has no f64 GEMM: reported as n/a
      }
    }
    // Bandwidth: y.copy_(x) reads and writes every byte once.
    Tensor x = full({elems}, 2.0, d), y = empty({elems}, d);
    const Timed m = time_median({d}, budget, 20, [&] { y.copy_(x); });
    const double bw = 2.0 * static_cast<double>(x.nbytes()) / m.seconds / 1e9;
    // One device, so every figure of the row was read from the same clock.
    t.rows.push_back({d.str(), p.name, static_cast<double>(p.memory_total) / (1 << 30), f32_gflops, f64_gflops, bw,
                      f32_gflops / bw, clock_name(m.device_clock)});
    c << (di ? "; " : "") << d << ": " << fixed(f32_gflops, 1) << " GFLOP/s f32, "
      << (std::isfinite(f64_gflops) ? fixed(f64_gflops, 1) : std::string("n/a")) << " f64, " << fixed(bw, 1)
      << " GB/s, so ops below " << fixed(f32_gflops / bw, 1) << " flop/byte are memory-bound";

    // 16-bit rows: the same matmul sizes, and an add that moves elements x 3
    // x dtype size bytes; its time beside f32's is the traffic ratio (0.5
    // when the conversions cost nothing).
    double add_f32_seconds = kNaN;
    std::string add_clock;
    for (DType dt : {anvil::f32, anvil::f16, anvil::bf16}) {
      const bool is_f32 = dt == anvil::f32;
      double gflops = f32_gflops;
      if (!is_f32) {
        try {
          gflops = peak(dt);
        } catch (const NotSupported&) {
          gflops = kNaN;
        }
      }
      Tensor a = full({elems}, 1.5, d, dt), b = full({elems}, 0.25, d, dt), sum = empty({elems}, d, dt);
      const Timed add = time_median({d}, budget, 20, [&] { add_out(sum, a, b); });
      if (is_f32) add_f32_seconds = add.seconds;
      const double add_gb = 3.0 * static_cast<double>(a.nbytes()) / add.seconds / 1e9;
      halves.rows.push_back({d.str(), std::string(to_string(dt)), gflops, add_gb, add.seconds / add_f32_seconds,
                             std::string(p.fp16 ? "yes" : "no"),
                             is_f32 ? std::string("f32") : (std::isfinite(gflops) ? matmul_16bit_path(d) : "n/a"),
                             std::string(is_f32 ? "f32" : "16-bit in/out, f32 math"), clock_name(add.device_clock)});
      if (!is_f32)
        c << ", " << to_string(dt) << " " << (std::isfinite(gflops) ? fixed(gflops, 1) : std::string("n/a"))
          << " GFLOP/s and add at " << fixed(add.seconds / add_f32_seconds, 2) << "x f32's time";
    }
  }
  r.tables.push_back(std::move(t));
  r.tables.push_back(std::move(halves));
  r.conclusion = c.str();
  return r;
}

}  // namespace

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = {
      {"matmul", "square f32 matmul from n=16 to 4096 per device: time and GFLOP/s", &run_matmul},
      {"sync-log", "1000 matmuls of 100x100: read the norm every step vs anvil::DeviceLog", &run_sync_log},
      {"two-devices", "two large matmuls on two devices at once vs one after the other", &run_two_devices},
      {"transfer", "host->device, device->host, device->device bandwidth, 4 KiB to 256 MiB", &run_transfer},
      {"roofline", "measured peak f32/f64 FLOP/s and memory bandwidth per device; f16/bf16 beside f32", &run_roofline},
  };
  return all;
}

}  // namespace anvil::bench
