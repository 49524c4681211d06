// Failure scenarios for anvil::dist, run by ctest under `mpirun -np 2` with a
// short ANVIL_DIST_TIMEOUT (tests/CMakeLists.txt). Each scenario makes rank 1
// misbehave at the second collective; rank 0 must end in the documented
// error, which it prints as "caught <Type>: <message>" (the ctest entry
// matches that line), and never hang (ctest's TIMEOUT is the backstop).
//
//   dist_failure_scenarios skip      rank 1 skips allreduce #2 (sleeps instead)
//   dist_failure_scenarios kill      rank 1 dies with SIGKILL before allreduce #2
//   dist_failure_scenarios mismatch  ANVIL_DIST_DEBUG=1; rank 1 allreduces another shape
//   dist_failure_scenarios ignore    as skip, but rank 0 swallows the DistTimeout and goes
//                                    on: the library must end the process (status 1)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "anvil/anvil.h"
#include "anvil/dist.h"

using namespace anvil;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: dist_failure_scenarios skip|kill|mismatch\n");
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
    Tensor t = ones({16}, cpu());
    w.allreduce(t).wait();  // #1: everyone is here
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
    Tensor u = ones({4, scenario == "mismatch" && w.rank() == 1 ? 5 : 4}, cpu());
    w.allreduce(u).wait();  // #2
    std::printf("UNEXPECTED: rank %d completed allreduce #2 in scenario %s\n", w.rank(), scenario.c_str());
    return 3;
  } catch (const dist::DistTimeout& e) {
    std::printf("rank %d caught DistTimeout after %.1f s: %s\n", w.rank(), seconds(), e.what());
    if (scenario == "ignore") {
      std::fflush(nullptr);
      std::this_thread::sleep_for(std::chrono::seconds(60));
      std::printf("UNEXPECTED: rank %d was not ended after ignoring a DistTimeout\n", w.rank());
      return 0;
    }
  } catch (const dist::CollectiveMismatch& e) {
    std::printf("rank %d caught CollectiveMismatch after %.1f s: %s\n", w.rank(), seconds(), e.what());
  } catch (const std::exception& e) {
    std::printf("UNEXPECTED: rank %d caught another error: %s\n", w.rank(), e.what());
    return 4;
  }
  std::fflush(nullptr);
  return 1;
}
