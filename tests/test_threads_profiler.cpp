// The profiler from any thread (issue 42): profiles of 0-5 ms started and
// ended over and over, on one thread or handed to another, while 8 threads
// run ops on the device (queued kernels, allocations, host syncs, copies,
// user ranges that outlive the profile that saw them open). No crash, no hang
// (a watchdog ends a stuck run with a message), every trace parses, and a
// profile afterwards still counts exactly. Under ThreadSanitizer (the tsan
// preset) the same runs prove the recording free of races.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "anvil/anvil.h"
#include "anvil/profiler.h"
#include "device_test.h"

using anvil::Device;
using anvil::Tensor;
using nlohmann::json;
namespace prof = anvil::profiler;

namespace {

constexpr int kWorkers = 8;

// ANVIL_TEST_PROFILES overrides the 1,000 profiles per device (the tsan
// preset runs fewer: each op costs ~10x there).
int profile_count() {
  const char* n = std::getenv("ANVIL_TEST_PROFILES");
  return n != nullptr && *n != '\0' ? std::atoi(n) : 1000;
}

// Ends the process with a message when the run has not finished in time: a
// hung worker cannot be unwound, and ctest's timeout says only "Timeout".
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, const std::atomic<int>& progress)
      : thread_([this, limit, &progress] {
          std::unique_lock lock(mutex_);
          if (done_cv_.wait_for(lock, limit, [this] { return done_; })) return;
          std::fprintf(stderr,
                       "test_threads_profiler: watchdog: no finish after %lld s (%d profiles done): a hang; "
                       "failing the run\n",
                       static_cast<long long>(limit.count()), progress.load());
          std::fflush(stderr);
          std::_Exit(3);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

// What the workers do until told to stop: every kind of hook the profiler
// has, in a user range that a profile may see open and never see closed.
void run_ops(Device d, int id, const std::atomic<bool>& stop, std::atomic<long>& ops) {
  const Tensor a = anvil::full({16, 16}, 0.01 * (id + 1), d), b = anvil::ones({16, 16}, d);
  for (long i = 0; !stop.load(std::memory_order_relaxed); ++i) {
    prof::Range range("worker");
    Tensor c = (a + b).exp() * a;               // queued kernels, new storage
    const Tensor m = c.matmul(b);               // another op family
    const Tensor s = m.sum();                   // a reduction
    if (i % 8 == 0) (void)s.item<float>();      // a host sync (on a device)
    if (i % 16 == 5) (void)c.to(anvil::cpu());  // a copy
    if (i % 32 == 9) anvil::synchronize(d);     // an explicit wait
    ops.fetch_add(1, std::memory_order_relaxed);
    // Paced, so that 8 workers leave the 2-core CI machine to the thread
    // that starts and stops the profiles (they still overlap every one).
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
}

struct TraceSummary {
  int host_spans = 0;
  int worker_tracks = 0;  // host threads that recorded a "worker" range
};

// Parses a trace and checks what any profile's trace must hold; ADD_FAILURE
// (not a throw) so that the run goes on and the profile is still ended.
TraceSummary check_trace(const std::string& text, int round) {
  TraceSummary out;
  json trace;
  try {
    trace = json::parse(text);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "profile " << round << ": the trace does not parse: " << e.what();
    return out;
  }
  std::set<int> named_threads, worker_threads;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("pid") == 0)
      named_threads.insert(e.at("tid").get<int>());
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("pid") != 0) continue;
    ++out.host_spans;
    const double ts = e.at("ts"), dur = e.at("dur");
    // A span begins inside its profile: nothing opened before the start,
    // or recorded into an earlier session, reaches this one.
    EXPECT_GE(ts, 0.0) << "profile " << round << ": " << e.dump();
    EXPECT_GE(dur, 0.0) << "profile " << round << ": " << e.dump();
    EXPECT_TRUE(named_threads.count(e.at("tid").get<int>()))
        << "profile " << round << ": an unnamed track: " << e.dump();
    if (e.at("name") == "worker") worker_threads.insert(e.at("tid").get<int>());
  }
  out.worker_tracks = static_cast<int>(worker_threads.size());
  return out;
}

std::string temp_trace(int round) {
  return (std::filesystem::temp_directory_path() /
          ("anvil_threads_profiler_" + std::to_string(::getpid()) + "_" + std::to_string(round) + ".json"))
      .string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ThreadsProfiler : public anvil::testing::DeviceTest {};

TEST_P(ThreadsProfiler, StartAndStopFromAnyThreadWhileEightThreadsRunOps) {
  const Device d = device();
  const int profiles = profile_count();
  std::atomic<int> done{0};
  const Watchdog watchdog(std::chrono::seconds(240), done);

  std::atomic<bool> stop{false};
  std::atomic<long> ops{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < kWorkers; ++i) workers.emplace_back(run_ops, d, i, std::cref(stop), std::ref(ops));
  while (ops.load() < kWorkers) std::this_thread::yield();  // every worker has started

  std::mt19937 rng(42);
  long spans = 0;
  int concurrent = 0;  // profiles that saw at least two workers' ranges
  for (int round = 0; round < profiles; ++round) {
    // 0-5 ms, one in six with no wait at all.
    const auto length = std::chrono::microseconds(round % 6 == 0 ? 0 : rng() % 5001);
    const std::string path = temp_trace(round);
    std::unique_ptr<prof::Profile> p;
    const prof::Options options{.trace_path = round % 4 == 2 ? path : ""};
    if (round % 4 == 3)  // started on a thread that ends before the profile does
      std::thread([&] { p = std::make_unique<prof::Profile>(options); }).join();
    else
      p = std::make_unique<prof::Profile>(options);
    std::this_thread::sleep_for(length);
    TraceSummary summary;
    switch (round % 4) {
      case 0:  // stopped and read where it started
        p->stop();
        summary = check_trace(p->trace_json(), round);
        break;
      case 1:  // stopped, read and destroyed by another thread
        std::thread([&] {
          summary = check_trace(p->trace_json(), round);
          p.reset();
        }).join();
        break;
      case 2:  // destroyed while recording: the destructor stops it and writes the trace
        p.reset();
        summary = check_trace(read_file(path), round);
        std::remove(path.c_str());
        break;
      case 3:  // a second profile meanwhile is refused; stopped on a third thread, read here
        EXPECT_THROW(prof::Profile second, anvil::ValueError);
        std::thread([&] { p->stop(); }).join();
        summary = check_trace(p->trace_json(), round);
        break;
    }
    p.reset();
    spans += summary.host_spans;
    if (summary.worker_tracks >= 2) ++concurrent;
    done.fetch_add(1);
  }
  stop = true;
  for (std::thread& t : workers) t.join();

  // The workers ran inside the profiles, several at a time: not a test of
  // idle threads.
  EXPECT_GT(spans, profiles);
  EXPECT_GT(concurrent, profiles / 20) << "profiles with two or more workers' ranges";

  // A profile afterwards records as on a fresh process: exact counts, on
  // one track.
  const Tensor a = anvil::ones({2, 3}, d);
  prof::Profile p;
  for (int i = 0; i < 3; ++i) (void)(a + a);
  {
    const prof::Range r("after");
    (void)a.exp();
  }
  p.stop();
  int adds = 0, exps = 0, afters = 0;
  for (const prof::TraceEvent& e : p.events()) {
    EXPECT_EQ(e.thread, 0) << e.name;
    adds += e.name == "add";
    exps += e.name == "exp";
    afters += e.name == "after";
  }
  EXPECT_EQ(adds, 3);
  EXPECT_EQ(exps, 1);
  EXPECT_EQ(afters, 1);
}

ANVIL_INSTANTIATE_DEVICE_TEST(ThreadsProfiler);

}  // namespace
