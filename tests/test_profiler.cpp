// The profiler (anvil/profiler.h) on every device: the Chrome trace of a
// known program (valid JSON, the ops, their counts and nesting, device spans
// in queue order), the table against the trace, copies, memory, the sync
// sentinel's call sites and SyncGuard.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include "anvil/anvil.h"
#include "anvil/dist.h"
#include "anvil/profiler.h"
#include "device_test.h"
#include "env_guard.h"

using anvil::Device;
using anvil::Tensor;
using nlohmann::json;
namespace prof = anvil::profiler;

namespace {

class Profiler : public anvil::testing::DeviceTest {};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("anvil_profiler_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());  // throws on invalid JSON
}

// The host spans ("X" on pid 0) of a trace.
std::vector<json> host_spans(const json& trace) {
  std::vector<json> out;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("pid") == 0) out.push_back(e);
  return out;
}

int count_named(const std::vector<json>& spans, const std::string& name) {
  return static_cast<int>(
      std::count_if(spans.begin(), spans.end(), [&](const json& e) { return e.at("name") == name; }));
}

bool inside(const json& inner, const json& outer) {
  const double a = inner.at("ts"), b = a + inner.at("dur").get<double>();
  const double lo = outer.at("ts"), hi = lo + outer.at("dur").get<double>();
  return inner.at("tid") == outer.at("tid") && a >= lo - 0.002 && b <= hi + 0.002;
}

// The known program: three adds and two exps inside a user range.
void known_program(Device d, const prof::Options& options, std::vector<prof::TraceEvent>* events = nullptr) {
  const Tensor a = anvil::ones({2, 3}, d), b = anvil::full({2, 3}, 2.0, d);
  prof::Profile p(options);
  {
    prof::Range step("step");
    Tensor c = a + b;
    c = c + b;
    c = c.exp();
    c = c + a;
    c = c.exp();
  }
  anvil::synchronize(d);
  p.stop();
  if (events) *events = p.events();
}

TEST_P(Profiler, TraceHoldsTheOpsTheirCountsAndNesting) {
  const Device d = device();
  const std::string path = temp_path("known.json");
  known_program(d, {.trace_path = path});
  const json trace = read_json(path);
  std::remove(path.c_str());
  const std::vector<json> spans = host_spans(trace);
  EXPECT_EQ(count_named(spans, "add"), 3);
  EXPECT_EQ(count_named(spans, "exp"), 2);
  ASSERT_EQ(count_named(spans, "step"), 1);
  const json step = *std::find_if(spans.begin(), spans.end(), [](const json& e) { return e.at("name") == "step"; });
  EXPECT_EQ(step.at("cat"), "user");
  for (const json& e : spans) {
    if (e.at("name") != "add" && e.at("name") != "exp") continue;
    EXPECT_EQ(e.at("cat"), "op");
    EXPECT_EQ(e.at("args").at("device"), d.str());
    EXPECT_TRUE(inside(e, step)) << e.dump();
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
  }
  const json first_add = *std::find_if(spans.begin(), spans.end(), [](const json& e) { return e.at("name") == "add"; });
  EXPECT_EQ(first_add.at("args").at("shapes"), "[2, 3] f32, [2, 3] f32");
  // Metadata names the host thread and each device queue.
  bool host_named = false;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name" && e.at("pid") == 0)
      host_named = e.at("args").at("name") == "host";
  EXPECT_TRUE(host_named);
}

TEST_P(Profiler, DeviceSpansAreNonEmptyAndInQueueOrder) {
  const Device d = device();
  const std::string path = temp_path("device.json");
  known_program(d, {.trace_path = path});
  const json trace = read_json(path);
  std::remove(path.c_str());
  std::vector<json> device_spans;
  int device_pid = -1;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "process_name" && e.at("args").at("name") == d.str())
      device_pid = e.at("pid");
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("pid") == device_pid && device_pid > 0) device_spans.push_back(e);
  const bool has_clock = anvil::Event::record(d).on_device_clock();
  if (d.is_cpu() || !has_clock) {
    // No queue: the CPU's ops run on the calling thread, and their device
    // time is their own span.
    EXPECT_TRUE(device_spans.empty());
    for (const json& e : host_spans(trace))
      if (e.at("cat") == "op") {
        EXPECT_DOUBLE_EQ(e.at("args").at("device_us").get<double>(), e.at("dur").get<double>());
      }
    return;
  }
  ASSERT_EQ(device_spans.size(), 5u);  // add, add, exp, add, exp
  const std::vector<std::string> order{"add", "add", "exp", "add", "exp"};
  for (std::size_t i = 0; i < device_spans.size(); ++i) {
    EXPECT_EQ(device_spans[i].at("name"), order[i]);
    EXPECT_GT(device_spans[i].at("dur").get<double>(), 0.0) << device_spans[i].dump();
    if (i > 0) {
      const double prev_end = device_spans[i - 1].at("ts").get<double>() + device_spans[i - 1].at("dur").get<double>();
      EXPECT_GE(device_spans[i].at("ts").get<double>(), prev_end - 0.002) << "span " << i << " overlaps the one before";
    }
  }
}

TEST_P(Profiler, TableTotalsAgreeWithTheTrace) {
  const Device d = device();
  const std::string path = temp_path("table.json");
  const Tensor a = anvil::ones({2, 3}, d), v = anvil::ones({4}, d);
  prof::Profile p({.trace_path = path});
  for (int i = 0; i < 4; ++i) (void)(a + a);
  (void)(v + v);
  (void)a.sum();
  p.stop();
  const json trace = read_json(path);
  std::remove(path.c_str());
  std::map<std::string, std::pair<int, double>> from_trace;
  for (const json& e : host_spans(trace)) {
    auto& [n, total] = from_trace[e.at("name")];
    ++n;
    total += e.at("dur").get<double>();
  }
  const std::vector<prof::OpStats> rows = p.key_averages();
  ASSERT_FALSE(rows.empty());
  for (const prof::OpStats& r : rows) {
    ASSERT_TRUE(from_trace.count(r.name)) << r.name;
    EXPECT_EQ(static_cast<int>(r.calls), from_trace[r.name].first) << r.name;
    EXPECT_NEAR(r.host_total_us, from_trace[r.name].second, 0.001 * static_cast<double>(r.calls) + 1e-6) << r.name;
    EXPECT_LE(r.host_self_us, r.host_total_us + 1e-9);
  }
  const auto add = std::find_if(rows.begin(), rows.end(), [](const prof::OpStats& r) { return r.name == "add"; });
  ASSERT_NE(add, rows.end());
  EXPECT_EQ(add->calls, 5u);
  // Grouped by shape, the adds on [2, 3] and on [4] are two rows.
  const std::vector<prof::OpStats> by_shape = p.key_averages(true);
  int add_rows = 0;
  for (const prof::OpStats& r : by_shape)
    if (r.name == "add") {
      ++add_rows;
      EXPECT_EQ(r.calls, r.shapes == "[2, 3] f32, [2, 3] f32" ? 4u : 1u) << r.shapes;
    }
  EXPECT_EQ(add_rows, 2);
  // Sorted by calls, add comes first; the table prints each row's name.
  const std::string table = p.table({.sort_by = prof::SortBy::Calls, .row_limit = 1});
  EXPECT_NE(table.find("add"), std::string::npos) << table;
  EXPECT_EQ(table.find("sum"), std::string::npos) << table;
  EXPECT_NE(p.table({.group_by_shape = true}).find("[4] f32"), std::string::npos);
}

TEST_P(Profiler, BackwardOpsAreTaggedAndNested) {
  const Device d = device();
  const Tensor x = anvil::ones({2, 3}, d);
  Tensor w = anvil::full({2, 3}, 0.5, d);
  w.requires_grad_();
  anvil::optim::SGD opt({w}, {.lr = 0.1});
  prof::Profile p;
  const Tensor loss = (x * w).sum();
  loss.backward();
  opt.step();
  p.stop();
  const std::vector<prof::TraceEvent>& events = p.events();
  const auto whole =
      std::find_if(events.begin(), events.end(), [](const prof::TraceEvent& e) { return e.name == "backward"; });
  ASSERT_NE(whole, events.end());
  EXPECT_EQ(whole->category, "backward");
  int nodes = 0, ops_inside = 0;
  for (const prof::TraceEvent& e : events) {
    const bool within = e.thread == whole->thread && e.start_us >= whole->start_us &&
                        e.start_us + e.duration_us <= whole->start_us + whole->duration_us + 0.001;
    if (e.category == "backward" && e.name != "backward") {
      ++nodes;
      EXPECT_TRUE(within) << e.name;
      EXPECT_GT(e.depth, whole->depth);
    }
    if (e.category == "op" && within) ++ops_inside;
  }
  EXPECT_GE(nodes, 2);  // SumBackward and MulBackward at least
  EXPECT_GE(ops_inside, 1);
  const auto step =
      std::find_if(events.begin(), events.end(), [](const prof::TraceEvent& e) { return e.name == "SGD.step"; });
  ASSERT_NE(step, events.end());
  EXPECT_EQ(step->category, "optimizer");
}

// Note [Convolution algorithms]: one training step of a convolution with
// both gradients, and the records it leaves per direction.
struct ConvStep {
  std::vector<prof::ConvAlgorithmStats> rows;
  json trace;
};
ConvStep conv_step(Device d) {
  anvil::manual_seed(0);
  const Tensor x = anvil::randn({2, 8, 6, 6}, d).requires_grad_();
  const Tensor w = anvil::randn({8, 8, 3, 3}, d).requires_grad_();
  const Tensor b = anvil::randn({8}, d).requires_grad_();
  const std::string path = temp_path("conv.json");
  {
    prof::Profile p({.trace_path = path});
    anvil::conv2d(x, w, b, {1, 1}, {1, 1}).sum().backward();
    anvil::synchronize(d);
    p.stop();
    ConvStep out{p.conv_algorithms(), {}};
    const std::string table = p.conv_table();
    EXPECT_NE(table.find("Direction"), std::string::npos) << table;
    for (const prof::ConvAlgorithmStats& r : out.rows)
      EXPECT_NE(table.find(r.choice.algorithm), std::string::npos) << table;
    p.write_trace(path);
    out.trace = read_json(path);
    std::filesystem::remove(path);
    return out;
  }
}
const prof::ConvAlgorithmStats* find_direction(const ConvStep& s, const std::string& direction) {
  const prof::ConvAlgorithmStats* found = nullptr;
  for (const prof::ConvAlgorithmStats& r : s.rows)
    if (r.choice.direction == direction) {
      EXPECT_EQ(found, nullptr) << "two records for " << direction;
      found = &r;
    }
  return found;
}
// The trace's args carry the same records as conv_algorithms().
void expect_in_trace(const ConvStep& s) {
  std::size_t n = 0;
  for (const json& e : host_spans(s.trace)) {
    if (!e.at("args").contains("algorithms")) continue;
    for (const json& a : e.at("args").at("algorithms")) {
      ++n;
      const auto same = std::find_if(s.rows.begin(), s.rows.end(), [&](const prof::ConvAlgorithmStats& r) {
        return r.name == e.at("name") && r.choice.direction == a.at("direction") &&
               r.choice.algorithm == a.at("algorithm") && r.choice.math == a.at("math") &&
               r.choice.workspace_bytes == a.at("workspace_bytes").get<std::uint64_t>();
      });
      EXPECT_NE(same, s.rows.end()) << a.dump();
    }
  }
  EXPECT_EQ(n, s.rows.size());
}

// im2col's column matrix: N * C*KH*KW * OH*OW f32 elements.
constexpr std::uint64_t kColumnBytes = 2ull * 8 * 3 * 3 * 6 * 6 * 4;

TEST_P(Profiler, ConvolutionsNameTheirAlgorithmMathAndWorkspace) {
  const Device d = device();
  const ConvStep s = conv_step(d);
  expect_in_trace(s);
  const prof::ConvAlgorithmStats* fwd = find_direction(s, "forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->name, "conv2d");
  EXPECT_EQ(fwd->calls, 1u);
  EXPECT_EQ(fwd->choice.math, "f32");
  const prof::ConvAlgorithmStats* data = find_direction(s, "backward_data");
  ASSERT_NE(data, nullptr);
  if (d.is_cpu()) {
    // oneDNN's own convolution, all three directions, named by oneDNN.
    EXPECT_EQ(fwd->choice.algorithm.find("im2col"), std::string::npos) << fwd->choice.algorithm;
    EXPECT_FALSE(fwd->choice.algorithm.empty());
    const prof::ConvAlgorithmStats* weight = find_direction(s, "backward_weight");
    ASSERT_NE(weight, nullptr);
    EXPECT_EQ(data->name, "conv2d_backward");
    EXPECT_EQ(weight->name, "conv2d_backward");
    EXPECT_FALSE(data->choice.algorithm.empty());
    EXPECT_FALSE(weight->choice.algorithm.empty());
    EXPECT_EQ(weight->choice.math, "f32");
    EXPECT_EQ(s.rows.size(), 3u);
  } else if (d.type() == anvil::DeviceType::OpenCL) {
    // The shared im2col kernel, a GEMM, and col2im for the input gradient;
    // the weight gradient is matmul's own backward.
    EXPECT_EQ(fwd->choice.algorithm, "im2col+gemm");
    EXPECT_EQ(fwd->choice.workspace_bytes, kColumnBytes);
    EXPECT_EQ(data->name, "col2im");
    EXPECT_EQ(data->choice.algorithm, "gemm+col2im");
    EXPECT_EQ(data->choice.workspace_bytes, kColumnBytes);
    EXPECT_EQ(s.rows.size(), 2u);
  }
}

TEST_P(Profiler, Im2colConvolutionsReportTheirColumnBuffer) {
  anvil::testing::EnvGuard im2col("ANVIL_CONV_IM2COL", "1");
  const ConvStep s = conv_step(device());
  expect_in_trace(s);
  const prof::ConvAlgorithmStats* fwd = find_direction(s, "forward");
  const prof::ConvAlgorithmStats* data = find_direction(s, "backward_data");
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(fwd->name, "conv2d");
  EXPECT_EQ(fwd->choice.algorithm, "im2col+gemm");
  EXPECT_EQ(fwd->choice.math, "f32");
  EXPECT_EQ(fwd->choice.workspace_bytes, kColumnBytes);
  EXPECT_EQ(data->name, "col2im");
  EXPECT_EQ(data->choice.algorithm, "gemm+col2im");
  EXPECT_EQ(data->choice.workspace_bytes, kColumnBytes);
  EXPECT_EQ(find_direction(s, "backward_weight"), nullptr);  // matmul's own backward
}

TEST_P(Profiler, CompositeConvolutionsReportTheirColumnMatrix) {
  anvil::testing::EnvGuard composite("ANVIL_NO_FUSED", "1");
  const ConvStep s = conv_step(device());
  expect_in_trace(s);
  const prof::ConvAlgorithmStats* fwd = find_direction(s, "forward");
  const prof::ConvAlgorithmStats* data = find_direction(s, "backward_data");
  const prof::ConvAlgorithmStats* weight = find_direction(s, "backward_weight");
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(data, nullptr);
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(fwd->name, "conv2d");
  EXPECT_EQ(fwd->choice.algorithm, "strided-im2col+gemm");
  EXPECT_EQ(fwd->choice.workspace_bytes, kColumnBytes);
  EXPECT_EQ(data->name, "ConvolutionBackward");
  EXPECT_EQ(data->choice.algorithm, "gemm+strided-col2im");
  EXPECT_EQ(data->choice.workspace_bytes, kColumnBytes);
  EXPECT_EQ(weight->name, "ConvolutionBackward");
  EXPECT_EQ(weight->choice.algorithm, "strided-gemm");
  EXPECT_EQ(weight->choice.workspace_bytes, 0u);
}

TEST_P(Profiler, CopiesAndMemoryAreRecorded) {
  const Device d = device();
  const Tensor h = anvil::ones({2, 3});
  prof::Profile p;
  const Tensor t = h.to(d);
  const Tensor e = anvil::empty({256}, d);
  p.stop();
  const std::vector<prof::MemoryTotals> memory = p.memory();
  const auto m = std::find_if(memory.begin(), memory.end(), [&](const prof::MemoryTotals& m) { return m.device == d; });
  ASSERT_NE(m, memory.end());
  EXPECT_GE(m->bytes_allocated, 256u * 4u);
  EXPECT_GE(m->peak_live_bytes, 256 * 4);
  if (d.is_cpu()) return;  // to(cpu) of a CPU tensor is the tensor itself: no copy
  const std::vector<prof::TraceEvent>& events = p.events();
  const auto copy =
      std::find_if(events.begin(), events.end(), [](const prof::TraceEvent& e) { return e.category == "copy"; });
  ASSERT_NE(copy, events.end());
  EXPECT_EQ(copy->name, "copy cpu -> " + d.str());
  EXPECT_EQ(copy->bytes, 24u);
  EXPECT_EQ(copy->device, d);
}

TEST_P(Profiler, SyncSentinelNamesTheCallSite) {
  const Device d = device();
  const Tensor x = anvil::ones({2, 3}, d);
  const Tensor s = x.sum();
  prof::Profile p;
  const int item_line = __LINE__ + 1;
  const float v = s.item<float>();
  std::ostringstream os;
  const int print_line = __LINE__ + 1;
  os << x;
  const int cpu_line = __LINE__ + 1;
  const Tensor h = x.cpu();
  p.stop();
  EXPECT_EQ(v, 6.0f);
  const std::vector<prof::SyncSite> sites = p.sync_sites();
  if (d.is_cpu()) {
    EXPECT_TRUE(sites.empty()) << "the CPU never waits";
    return;
  }
  auto find = [&](int line) {
    return std::find_if(sites.begin(), sites.end(), [&](const prof::SyncSite& s) { return s.line == line; });
  };
  for (const auto& [line, api, is_implicit] :
       {std::tuple{item_line, "item", true}, {print_line, "print", true}, {cpu_line, "to", false}}) {
    const auto site = find(line);
    ASSERT_NE(site, sites.end()) << api << " at line " << line << "\n" << p.sync_table();
    EXPECT_EQ(site->api, api);
    EXPECT_EQ(site->file, __FILE__);
    // The function as __builtin_FUNCTION names it (anvil::SourceLocation): the
    // unqualified name, here gtest's TestBody.
    EXPECT_EQ(site->function, "TestBody");
    EXPECT_EQ(site->count, 1u);
    EXPECT_EQ(site->implicit, is_implicit);
    EXPECT_GE(site->wait_us, 0.0);
  }
  std::string file = __FILE__;  // the table shows it without a build folder's ../
  while (file.rfind("../", 0) == 0) file.erase(0, 3);
  const std::string table = p.sync_table();
  EXPECT_NE(table.find(file + ":" + std::to_string(item_line)), std::string::npos) << table;
}

TEST_P(Profiler, SyncGuardThrowsOnItemOnly) {
  const Device d = device();
  const Tensor x = anvil::ones({2, 3}, d);
  anvil::SyncGuard guard(anvil::SyncDebugMode::Error);
  // Queued ops, explicit copies and synchronize are not implicit syncs.
  Tensor y;
  EXPECT_NO_THROW(y = (x + x).exp());
  EXPECT_NO_THROW((void)y.to(anvil::cpu()));
  EXPECT_NO_THROW((void)y.cpu());
  EXPECT_NO_THROW((void)y.copy_to(anvil::cpu()));
  EXPECT_NO_THROW((void)anvil::ones({2}).to(d));
  EXPECT_NO_THROW(anvil::synchronize(d));
  for (const Device& other : anvil::all_devices())
    if (!(other == d) && !other.is_cpu()) {
      EXPECT_NO_THROW((void)y.to(other));
    }
  if (d.is_cpu()) {
    EXPECT_NO_THROW((void)y.sum().item<float>());  // nothing to wait for
    return;
  }
  const Tensor s = y.sum();
  int line = 0;
  try {
    line = __LINE__ + 1;
    (void)s.item<float>();
    FAIL() << "item() inside SyncGuard(Error) did not throw";
  } catch (const anvil::ImplicitSync& e) {
    EXPECT_EQ(e.line(), line);
    EXPECT_EQ(e.file(), __FILE__);
    EXPECT_EQ(e.api(), "item");
    EXPECT_NE(std::string(e.what()).find(std::string(__FILE__) + ":" + std::to_string(line)), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)s.to_vector<float>(), anvil::ImplicitSync);
  EXPECT_THROW((void)anvil::to_string(s), anvil::ImplicitSync);
  {
    anvil::SyncGuard off(anvil::SyncDebugMode::Off);  // nested guards restore the mode they found
    EXPECT_NO_THROW((void)s.item<float>());
  }
  EXPECT_EQ(anvil::sync_debug_mode(), anvil::SyncDebugMode::Error);
}

TEST_P(Profiler, SyncGuardWarnsOncePerSite) {
  const Device d = device();
  if (d.is_cpu()) GTEST_SKIP() << "the CPU never waits";
  const Tensor s = anvil::ones({3}, d).sum();
  anvil::SyncGuard guard(anvil::SyncDebugMode::Warn);
  ::testing::internal::CaptureStderr();
  float total = 0;
  for (int i = 0; i < 3; ++i) total += s.item<float>();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(total, 9.0f);
  std::size_t n = 0;
  for (std::size_t at = err.find("implicit host sync"); at != std::string::npos;
       at = err.find("implicit host sync", at + 1))
    ++n;
  EXPECT_EQ(n, 1u) << err;
  EXPECT_NE(err.find(__FILE__), std::string::npos) << err;
}

TEST_P(Profiler, OffAddsNoEvents) {
  const Device d = device();
  const Tensor a = anvil::ones({2, 3}, d);
  EXPECT_FALSE(prof::enabled());
  for (int i = 0; i < 3; ++i) (void)(a + a);  // before any profile: recorded nowhere
  prof::Profile p;
  EXPECT_TRUE(prof::enabled());
  p.stop();
  EXPECT_FALSE(prof::enabled());
  (void)(a + a);  // after it stopped
  EXPECT_TRUE(p.events().empty());
  EXPECT_TRUE(p.key_averages().empty());
}

ANVIL_INSTANTIATE_DEVICE_TEST(Profiler);

TEST(ProfilerSession, OneAtATime) {
  prof::Profile p;
  EXPECT_THROW(prof::Profile second, anvil::ValueError);
  p.stop();
  EXPECT_NO_THROW(prof::Profile third);
}

TEST(ProfilerSession, ThreadsGetTracksOfTheirOwn) {
  prof::Profile p;
  const Tensor a = anvil::ones({4});
  (void)(a + a);
  std::thread t([&] { (void)(a * a); });
  t.join();
  p.stop();
  const std::vector<prof::TraceEvent>& events = p.events();
  const auto add =
      std::find_if(events.begin(), events.end(), [](const prof::TraceEvent& e) { return e.name == "add"; });
  const auto mul =
      std::find_if(events.begin(), events.end(), [](const prof::TraceEvent& e) { return e.name == "mul"; });
  ASSERT_NE(add, events.end());
  ASSERT_NE(mul, events.end());
  EXPECT_NE(add->thread, mul->thread);
}

TEST(ProfilerSession, CollectivesAreRecordedWithTheirBytes) {
  const std::vector<Device> devices = anvil::all_devices();
  if (devices.size() < 2) GTEST_SKIP() << "an in-process group needs two devices";
  anvil::dist::LocalGroup group({devices[0], devices[1]});
  std::vector<Tensor> per_device{anvil::ones({8}, devices[0]), anvil::ones({8}, devices[1])};
  prof::Profile p;
  group.allreduce(per_device).wait();
  p.stop();
  int collectives = 0;
  for (const prof::TraceEvent& e : p.events())
    if (e.category == "collective") {
      ++collectives;
      EXPECT_EQ(e.bytes, 32u);
    }
  EXPECT_EQ(collectives, 2);  // one per device, as the ledger counts them
  EXPECT_EQ(per_device[1].to_vector<float>()[0], 2.0f);
}

TEST(ProfilerSession, UntilExitWritesTheTraceAtExit) {
  const std::string path = temp_path("exit.json");
  std::remove(path.c_str());
  EXPECT_EXIT(
      {
        prof::profile_until_exit(path, 0);
        const Tensor a = anvil::ones({2, 2});
        (void)(a + a);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  const json trace = read_json(path);
  std::remove(path.c_str());
  EXPECT_EQ(count_named(host_spans(trace), "add"), 1);
}

}  // namespace
