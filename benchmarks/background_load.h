// benchmarks/background_load.h — a fixed CPU load beside a benchmark: N child
// processes that each spin on one core until the load is stopped.
//
//   {
//     anvil_bench::BackgroundLoad load(2);  // two spinning processes from here...
//     ... time something ...
//   }                                        // ...until here (or load.stop())
//
// Used by `bench_train --busy` (benchmarks/train/train_compare.cpp, issue 12).
//
// Note [Spinners never outlive the benchmark]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A spinner left behind would skew every later measurement on the machine,
// so each one goes away however the benchmark ends:
//   - normally or by an exception: stop() / the destructor SIGKILLs and reaps it;
//   - Ctrl-C: the spinners are in the benchmark's process group, and SIGINT
//     reaches the whole foreground group;
//   - the benchmark killed by any signal, SIGKILL included: each spinner asked
//     the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG), and
//     checks after asking that the parent had not already gone.
// The spinners are forked, not exec'd: after fork a child of a threaded
// process may only make async-signal-safe calls, and the child here makes
// only system calls and then spins in registers. It closes every inherited
// descriptor first, so it never holds a worker's pipe open.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace anvil_bench {

class BackgroundLoad {
 public:
  // Starts `processes` spinning processes (>= 1).
  explicit BackgroundLoad(int processes) {
    if (processes < 1)
      throw std::invalid_argument("BackgroundLoad: expected at least 1 process, got " + std::to_string(processes));
    const pid_t parent = getpid();
    start_ = std::chrono::steady_clock::now();
    for (int i = 0; i < processes; ++i) {
      const pid_t pid = fork();
      if (pid == 0) spin(parent);
      if (pid < 0) {
        const int error = errno;
        stop();
        throw std::runtime_error(std::string("BackgroundLoad: fork failed: ") + std::strerror(error));
      }
      pids_.push_back(pid);
    }
  }
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;
  ~BackgroundLoad() { stop(); }

  // Kills and reaps every spinner; idempotent.
  void stop() noexcept {
    for (const pid_t pid : pids_) kill(pid, SIGKILL);
    for (const pid_t pid : pids_) {
      int status = 0;
      rusage usage{};
      while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
      }
      cpu_seconds_ += seconds(usage.ru_utime) + seconds(usage.ru_stime);
    }
    if (!pids_.empty())
      wall_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    pids_.clear();
  }

  // After stop(): the CPU seconds all spinners got, and how long they ran.
  // Their ratio is how many cores the load actually held on average.
  double cpu_seconds() const { return cpu_seconds_; }
  double wall_seconds() const { return wall_seconds_; }

 private:
  static double seconds(const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  }

  // The child: see Note [Spinners never outlive the benchmark].
  [[noreturn]] static void spin(pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    prctl(PR_SET_NAME, "bench-spinner");
    close_range(3, ~0U, 0);
    // Integer work in registers: it holds a core without touching memory, so
    // it competes for CPU time and not for caches or bandwidth.
    std::uint64_t x = static_cast<std::uint64_t>(getpid());
    for (;;) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      asm volatile("" : "+r"(x));
    }
  }

  std::vector<pid_t> pids_;
  std::chrono::steady_clock::time_point start_;
  double cpu_seconds_ = 0, wall_seconds_ = 0;
};

}  // namespace anvil_bench
