// anvil-opencl-bench: the OpenCL speed figures of issue 4 (a benchmark, not a
// test). Run on PoCL as
//   POCL_DEVICES=pthread ANVIL_OPENCL_SUBDEVICES=1 anvil-opencl-bench
// (two one-core sub-devices) or with POCL_DEVICES="pthread pthread".
//   add16m   elementwise add of 16M f32: opencl:0 vs the CPU backend, GB/s
//   launch   enqueue-to-return of one small op on opencl:0, microseconds
//   two      two matmuls on opencl:0 and opencl:1 at once vs one after the
//            other on opencl:0
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "anvil/anvil.h"
#include "timing.h"

namespace {

using namespace anvil;
using bench::host_seconds;

// Median host time of `f` over `repeats`, after one warm-up (kernel builds,
// allocator, caches).
double median_of(int repeats, const std::function<void()>& f) {
  return bench::median_of(1, repeats, [&] { return host_seconds(f); });
}

void add16m() {
  const std::int64_t n = 16 * 1024 * 1024;
  const double bytes = 3.0 * 4.0 * static_cast<double>(n);
  for (Device d : {cpu(), Device(DeviceType::OpenCL, 0)}) {
    Tensor a = ones({n}, d), b = ones({n}, d), out = empty({n}, d);
    synchronize(d);
    const double t = median_of(9, [&] {
      add_out(out, a, b);
      synchronize(d);
    });
    std::printf("add16m   %-9s %8.2f ms  %6.2f GB/s\n", d.str().c_str(), t * 1e3, bytes / t / 1e9);
  }
}

void launch() {
  const Device d(DeviceType::OpenCL, 0);
  Tensor a = ones({16}, d), b = ones({16}, d), out = empty({16}, d);
  synchronize(d);
  constexpr int kCalls = 2000;
  std::vector<double> per_call;
  for (int r = 0; r < 15; ++r) {
    const double t = host_seconds([&] {
      for (int i = 0; i < kCalls; ++i) add_out(out, a, b);
    });
    synchronize(d);
    per_call.push_back(t / kCalls);
  }
  std::sort(per_call.begin(), per_call.end());
  std::printf(
      "launch   opencl:0  %8.2f us per add_out of 16 elements, enqueue to return (min of 15x%d; median %.2f us)\n",
      per_call.front() * 1e6, kCalls, per_call[per_call.size() / 2] * 1e6);
}

void two() {
  if (device_count(DeviceType::OpenCL) < 2) {
    std::printf("two      skipped: needs two OpenCL devices\n");
    return;
  }
  const Device d0(DeviceType::OpenCL, 0), d1(DeviceType::OpenCL, 1);
  const std::int64_t n = std::getenv("ANVIL_BENCH_N") ? std::atoll(std::getenv("ANVIL_BENCH_N")) : 1024;
  Tensor a0 = rand({n, n}, d0), a1 = rand({n, n}, d1);
  Tensor c0 = empty({n, n}, d0), c1 = empty({n, n}, d0), c2 = empty({n, n}, d1);
  synchronize(d0);
  synchronize(d1);
  const double serial = median_of(5, [&] {
    mm_out(c0, a0, a0);
    mm_out(c1, a0, a0);
    synchronize(d0);
  });
  const double parallel = median_of(5, [&] {
    mm_out(c0, a0, a0);
    mm_out(c2, a1, a1);
    synchronize(d0);
    synchronize(d1);
  });
  std::printf(
      "two      %lldx%lld f32 matmul x2: one after the other on opencl:0 %8.2f ms, at once on opencl:0 + "
      "opencl:1 %8.2f ms, ratio %.2f\n",
      static_cast<long long>(n), static_cast<long long>(n), serial * 1e3, parallel * 1e3, parallel / serial);
  for (Device d : {d0, d1}) std::printf("         %s: %s\n", d.str().c_str(), properties(d).name.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string which = argc > 1 ? argv[1] : "all";
    if (device_count(DeviceType::OpenCL) == 0) {
      std::printf("no OpenCL device: %s\n", device_unavailable_reason(DeviceType::OpenCL).c_str());
      return 1;
    }
    if (which == "all" || which == "add16m") add16m();
    if (which == "all" || which == "launch") launch();
    if (which == "all" || which == "two") two();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "anvil-opencl-bench: %s\n", e.what());
    return 1;
  }
}
