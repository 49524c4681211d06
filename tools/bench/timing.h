// The one timing rule of anvil-bench and of every benchmark program (the
// anvil_bench_timing target): warm up, time whole samples, report the median.
//
//   const double s = anvil::bench::median_of(/*warmup=*/1, /*repeats=*/9, [&] {
//     return anvil::bench::host_seconds([&] { add_out(out, a, b); synchronize(d); });
//   });
//
// A sample is whatever the caller's clock says (host wall clock here, or an
// anvil::Event / cudaEvent on the device's own clock): the sample function
// returns its seconds. Header-only and free of anvil, so the workers that
// must not link anvil (bench_worker_openblas) share it too.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>
#include <vector>

namespace anvil::bench {

// The median (the mean of the middle two for an even count); NaN when empty.
inline double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

// Seconds `fn` takes on the host's steady clock.
template <typename Fn>
double host_seconds(Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  std::forward<Fn>(fn)();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of every thread of this process so far: over a wall-clock
// interval, the cores the process used.
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// `warmup` untimed samples (kernel builds, allocator, caches), then the
// median of `repeats` samples; `sample()` returns the seconds of one.
template <typename Sample>
double median_of(int warmup, int repeats, Sample&& sample) {
  for (int i = 0; i < warmup; ++i) (void)sample();
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(std::max(repeats, 0)));
  for (int i = 0; i < repeats; ++i) times.push_back(sample());
  return median(std::move(times));
}

}  // namespace anvil::bench
