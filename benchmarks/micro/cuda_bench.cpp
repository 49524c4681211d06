// anvil-cuda-bench: the CUDA speed figures (a benchmark, not a test; ./run
// gpu-check runs it). Each line prints the figure, the target and whether it
// was met. Times are medians on the GPU's own clock (anvil::Event, i.e.
// cudaEventElapsedTime) over samples of kLaunchesPerSample back-to-back
// launches, anvil and the cuBLAS/cudaMemcpy baselines alike, so the host's
// few microseconds of dispatch are hidden behind the queue as in training
// (one launch per sample put ~5 us of dispatch inside a ~40 us window);
// `launch` is host time by definition.
//   elementwise  c = a + b and c = -a on 16M and 64M f32: GB/s against the
//                GPU's theoretical bandwidth (memory clock x bus width) and a
//                device-to-device cudaMemcpy; target >= 85% of peak
//   matmul       f32, f16 and bf16, n = 1024, 2048, 4096, through anvil against
//                cublasSgemm / cublasGemmEx (f32 compute) called directly on the
//                same data; target >= 0.9x for f32, >= 0.95x for f16 and bf16
//   launch       host time to enqueue one small add; target <= 10 us
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "anvil/anvil.h"
#include "timing.h"

namespace {

using namespace anvil;
using bench::median;
using bench::median_of;

constexpr int kLaunchesPerSample = 20;

// Median device time of one call of `f` (enqueues work on d): each of
// `repeats` samples times kLaunchesPerSample calls between two events.
double device_seconds(Device d, int repeats, const std::function<void()>& f) {
  return median_of(1, repeats, [&] {
    synchronize(d);
    const Event start = Event::record(d);
    for (int i = 0; i < kLaunchesPerSample; ++i) f();
    return start.elapsed_seconds(Event::record(d)) / kLaunchesPerSample;
  });
}

// The same for work enqueued directly with the runtime on the legacy stream.
double cuda_seconds(int repeats, const std::function<void()>& f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const double s = median_of(1, repeats, [&] {
    cudaEventRecord(a);
    for (int i = 0; i < kLaunchesPerSample; ++i) f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms / 1e3 / kLaunchesPerSample;
  });
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return s;
}

const char* verdict(bool met) { return met ? "met" : "NOT met"; }

void elementwise(int gpu) {
  const Device d(DeviceType::CUDA, gpu);
  cudaSetDevice(gpu);
  int mem_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, gpu);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, gpu);
  const double peak = 2.0 * mem_khz * 1e3 * bus_bits / 8.0;  // double data rate
  for (std::int64_t n : {std::int64_t{16} << 20, std::int64_t{64} << 20}) {
    double copy_bw = 0;
    void *src = nullptr, *dst = nullptr;
    if (cudaMalloc(&src, 4 * n) == cudaSuccess && cudaMalloc(&dst, 4 * n) == cudaSuccess) {
      const double tc = cuda_seconds(20, [&] { cudaMemcpy(dst, src, 4 * n, cudaMemcpyDeviceToDevice); });
      copy_bw = 8.0 * static_cast<double>(n) / tc;  // read + write
    }
    cudaFree(src);
    cudaFree(dst);
    Tensor a = ones({n}, d), b = ones({n}, d), c = empty({n}, d);
    const struct {
      const char* what;
      double bytes_per_element;
      std::function<void()> run;
    } cases[] = {{"add", 12.0, [&] { add_out(c, a, b); }}, {"neg", 8.0, [&] { c = a.neg(); }}};
    for (const auto& k : cases) {
      const double bw = k.bytes_per_element * static_cast<double>(n) / device_seconds(d, 20, k.run);
      std::printf(
          "elementwise cuda:%d %-3s %3lldM f32: %7.1f GB/s = %5.1f%% of the %7.1f GB/s peak (cudaMemcpy d2d: %7.1f "
          "GB/s, %5.1f%%); target >= 85%% of peak: %s\n",
          gpu, k.what, static_cast<long long>(n >> 20), bw / 1e9, 100 * bw / peak, peak / 1e9, copy_bw / 1e9,
          100 * copy_bw / peak, verdict(bw >= 0.85 * peak));
    }
  }
}

// anvil's matmul against cuBLAS called directly: cublasSgemm for f32 and
// cublasGemmEx with f32 compute for f16 and bf16 (what anvil's CUDA backend
// itself calls, src/backends/cuda/cublas.cpp), on the same data.
void matmul_vs_cublas(int gpu) {
  const Device d(DeviceType::CUDA, gpu);
  cudaSetDevice(gpu);
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    std::printf("matmul      cuda:%d: cublasCreate failed\n", gpu);
    return;
  }
  for (DType t : {f32, f16, bf16})
    for (std::int64_t n : {1024, 2048, 4096}) {
      // The same kind of data for both: zeros would draw less power and
      // flatter cuBLAS on a power-limited GPU.
      const Tensor host = rand({n, n}).to(t);
      Tensor a = host.to(d), b = host.to(d), c = empty({n, n}, d, t);
      const double ta = device_seconds(d, 10, [&] { mm_out(c, a, b); });
      void *pa = nullptr, *pb = nullptr, *pc = nullptr;
      const std::size_t bytes = host.nbytes();
      cudaMalloc(&pa, bytes);
      cudaMalloc(&pb, bytes);
      cudaMalloc(&pc, bytes);
      cudaMemcpy(pa, host.raw_data_ptr(), bytes, cudaMemcpyHostToDevice);
      cudaMemcpy(pb, host.raw_data_ptr(), bytes, cudaMemcpyHostToDevice);
      const float one = 1, zero = 0;
      const int ni = static_cast<int>(n);
      const cudaDataType_t type = t == f16 ? CUDA_R_16F : CUDA_R_16BF;
      const double tb = cuda_seconds(10, [&] {
        if (t == f32)
          cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, static_cast<const float*>(pb), ni,
                      static_cast<const float*>(pa), ni, &zero, static_cast<float*>(pc), ni);
        else
          cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, pb, type, ni, pa, type, ni, &zero, pc, type, ni,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      });
      cudaFree(pa);
      cudaFree(pb);
      cudaFree(pc);
      const double flop = 2.0 * static_cast<double>(n) * n * n;
      const double target = t == f32 ? 0.9 : 0.95;
      std::printf(
          "matmul      cuda:%d %-4s n=%4lld: anvil %8.1f GFLOP/s, %s %8.1f GFLOP/s, ratio %.3f; target >= %.2f: %s\n",
          gpu, std::string(to_string(t)).c_str(), static_cast<long long>(n), flop / ta / 1e9,
          t == f32 ? "cublasSgemm " : "cublasGemmEx", flop / tb / 1e9, tb / ta, target, verdict(tb / ta >= target));
    }
  cublasDestroy(h);
}

void launch(int gpu) {
  const Device d(DeviceType::CUDA, gpu);
  Tensor a = ones({16}, d), b = ones({16}, d), c = empty({16}, d);
  synchronize(d);
  constexpr int kCalls = 2000;
  const double m = median_of(1, 15, [&] {
    const double t = bench::host_seconds([&] {
      for (int i = 0; i < kCalls; ++i) add_out(c, a, b);
    });
    synchronize(d);
    return t / kCalls;
  });
  std::printf(
      "launch      cuda:%d: %.2f us host time per add_out of 16 elements (median of 15x%d); target <= 10 us: %s\n", gpu,
      m * 1e6, kCalls, verdict(m <= 10e-6));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string which = argc > 1 ? argv[1] : "all";
    const int n = device_count(DeviceType::CUDA);
    if (n == 0) {
      std::printf("anvil-cuda-bench: no CUDA device: %s\n", device_unavailable_reason(DeviceType::CUDA).c_str());
      return 1;
    }
    for (int gpu = 0; gpu < n; ++gpu) {
      std::printf("cuda:%d: %s (sm %s)\n", gpu, properties(Device(DeviceType::CUDA, gpu)).name.c_str(),
                  properties(Device(DeviceType::CUDA, gpu)).compute_capability.c_str());
      if (which == "all" || which == "elementwise") elementwise(gpu);
      if (which == "all" || which == "matmul") matmul_vs_cublas(gpu);
      if (which == "all" || which == "launch") launch(gpu);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "anvil-cuda-bench: %s\n", e.what());
    return 1;
  }
}
