// Failure scenarios for anvil::dist, run by ctest under `mpirun -np 2` with a
// short ANVIL_DIST_TIMEOUT (tests/CMakeLists.txt). Each scenario makes rank 1
// misbehave at the second collective; rank 0 must end in the documented
// error, which it prints as "caught <Type> after <seconds> s: <message>" (the
// ctest entry matches that line), within the timeout (it prints an
// UNEXPECTED line, which fails the ctest entry, when the error took longer
// than ANVIL_DIST_TIMEOUT + kMarginSeconds), and never hang (ctest's TIMEOUT
// is the backstop).
//
//   dist_failure_scenarios skip             rank 1 skips allreduce #2 (sleeps instead)
//   dist_failure_scenarios kill             rank 1 dies with SIGKILL before allreduce #2
//   dist_failure_scenarios mismatch         ANVIL_DIST_DEBUG=1; rank 1 allreduces another shape
//   dist_failure_scenarios device_mismatch  ANVIL_DIST_DEBUG=1; rank 0 allreduces on its
//                                           accelerator (try_gpu(0)), rank 1 on the CPU;
//                                           prints "SKIPPED" when rank 0 has none
//   dist_failure_scenarios ignore           as skip, but rank 0 swallows the DistTimeout and
//                                           goes on: the library must end the process with
//                                           status 1 (tests/report_exit_status.sh reports it)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "anvil/anvil.h"
#include "anvil/dist.h"

using namespace anvil;

namespace {

// How much longer than ANVIL_DIST_TIMEOUT an error may take to arrive (a
// loaded CI machine; the watchdog checks its deadline every few milliseconds).
constexpr double kMarginSeconds = 10;

// The error arrived within the timeout (+ margin), or an UNEXPECTED line says it did not.
void check_elapsed(int rank, double seconds) {
  const char* v = std::getenv("ANVIL_DIST_TIMEOUT");
  const double timeout = v != nullptr ? std::atof(v) : 300;
  if (seconds > timeout + kMarginSeconds)
    std::printf(
        "UNEXPECTED: rank %d got the error after %.1f s; expected within ANVIL_DIST_TIMEOUT (%.0f s) + %.0f s\n", rank,
        seconds, timeout, kMarginSeconds);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: dist_failure_scenarios skip|kill|mismatch|device_mismatch|ignore\n");
    return 2;
  }
  const std::string scenario = argv[1];
  auto& w = dist::init();
  if (w.size() != 2) {
    std::fprintf(stderr, "UNEXPECTED: run under mpirun -np 2 (world size %d)\n", w.size());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  try {
    const bool device_mismatch = scenario == "device_mismatch";
    const Device where = device_mismatch && w.rank() == 0 ? try_gpu(0) : cpu();
    Tensor t = ones({16}, cpu());
    // Rank 0 without an accelerator tells rank 1 to skip device_mismatch too.
    if (device_mismatch && w.rank() == 0 && where.is_cpu()) t.fill_(0);
    w.allreduce(t).wait();  // #1: everyone is here
    if (device_mismatch && t.sum().item<float>() < 32) {
      std::printf("SKIPPED: rank %d: device_mismatch needs a device other than the CPU on rank 0; it has none\n",
                  w.rank());
      return 0;
    }
    if (w.rank() == 1) {
      if (scenario == "skip" || scenario == "ignore") {
        std::this_thread::sleep_for(std::chrono::seconds(60));
        return 0;
      }
      if (scenario == "kill") {
        std::fflush(nullptr);
        kill(getpid(), SIGKILL);
      }
    }
    Tensor u = ones({4, scenario == "mismatch" && w.rank() == 1 ? 5 : 4}, where);
    w.allreduce(u).wait();  // #2
    std::printf("UNEXPECTED: rank %d completed allreduce #2 in scenario %s\n", w.rank(), scenario.c_str());
    return 3;
  } catch (const dist::DistTimeout& e) {
    const double s = seconds();
    std::printf("rank %d caught DistTimeout after %.1f s: %s\n", w.rank(), s, e.what());
    check_elapsed(w.rank(), s);
    if (scenario == "ignore") {
      std::fflush(nullptr);
      std::this_thread::sleep_for(std::chrono::seconds(60));
      std::printf("UNEXPECTED: rank %d was not ended after ignoring a DistTimeout\n", w.rank());
      return 0;
    }
  } catch (const dist::CollectiveMismatch& e) {
    const double s = seconds();
    std::printf("rank %d caught CollectiveMismatch after %.1f s: %s\n", w.rank(), s, e.what());
    check_elapsed(w.rank(), s);
  } catch (const std::exception& e) {
    std::printf("UNEXPECTED: rank %d caught another error: %s\n", w.rank(), e.what());
    return 4;
  }
  std::fflush(nullptr);
  return 1;
}
