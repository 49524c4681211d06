// The "GPUs" chapter of Dive into Deep Learning, in order, in C++ (DESIGN §1).
// Every line of the chapter appears here with what anvil prints for it. It runs
// on a machine with no accelerator (every try_gpu() falls back to the CPU and
// says why), with one, or with two:
//
//   POCL_DEVICES="pthread pthread" ANVIL_OPENCL_CPU=1 build/release/examples/use_gpu
//
// The chapter's `!nvidia-smi` is `anvil-smi`; its exercises are `anvil-bench`
// scenarios (matmul, sync-log, two-devices) and, for reading and writing model
// parameters on the device, the end of this file.
#include <anvil/anvil.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "d2l_flags.h"

namespace {

void section(const char* title) { std::cout << "\n## " << title << "\n"; }

// Prints `code` and then what it evaluates to, like a notebook cell.
template <typename T>
void show(const char* code, const T& value) {
  std::cout << code << "\n  -> " << value << "\n";
}

std::string fallback_note(int i) {
  const std::string why = anvil::try_gpu_reason(i);
  return why.empty() ? "" : "   (falls back to cpu: " + why + ")";
}

}  // namespace

int main(int argc, char** argv) try {
  using namespace anvil;
  d2l::parse_profile_flag(argc, argv, "use_gpu");
  std::cout << std::boolalpha;
  std::cout << "anvil " << kVersion << " — the GPUs chapter\n";
  std::cout << "(the chapter's `!nvidia-smi` is `anvil-smi`: every device anvil can see)\n";

  section("Computing devices");
  // torch.device('cpu'), torch.device('cuda'), torch.device('cuda:1'): values,
  // not checks — constructing one does not ask whether it exists.
  show("Device(\"cpu\"), Device(\"cuda\"), Device(\"cuda:1\")",
       cpu().str() + ", " + Device("cuda").str() + ", " + Device("cuda:1").str());
  show("all_devices()", all_devices());
  for (DeviceType type : {DeviceType::CUDA, DeviceType::OpenCL}) {
    const std::string why = device_unavailable_reason(type);
    std::cout << "device_count(" << to_string(type) << ") -> " << device_count(type);
    if (!why.empty()) std::cout << "   (" << why << ")";
    std::cout << "\n";
  }
  show("gpu_count()", gpu_count());

  // try_gpu(i) / try_all_gpus(): the chapter's two helpers, with the same
  // fallbacks; anvil also says why it fell back.
  std::cout << "try_gpu() -> " << try_gpu() << fallback_note(0) << "\n";
  std::cout << "try_gpu(10) -> " << try_gpu(10) << fallback_note(10) << "\n";
  show("try_all_gpus()", try_all_gpus());

  section("Tensors and GPUs");
  Tensor x = tensor(std::vector<float>{1, 2, 3});
  show("x = tensor({1, 2, 3}); x.device()", x.device());

  // Storage on the device.
  Tensor X = ones({2, 3}, try_gpu());
  show("X = ones({2, 3}, try_gpu())", X);
  manual_seed(0);
  Tensor Y = rand({2, 3}, try_gpu(1));
  std::cout << "Y = rand({2, 3}, try_gpu(1))" << fallback_note(1) << "\n  -> " << Y << "\n";

  // Copying: X + Y with X and Y on different devices is an error, raised
  // before any work is queued, and the message says how to fix it.
  std::cout << "X + Y   (X on " << X.device() << ", Y on " << Y.device() << ")\n";
  if (X.device() != Y.device()) {
    try {
      Tensor bad = X + Y;
      std::cout << "  -> no error: " << bad << "\n";
      return 1;  // a mixed-device add must never succeed
    } catch (const DeviceMismatch& e) {
      std::cout << "  -> DeviceMismatch: " << e.what() << "\n";
    }
  } else {
    std::cout << "  -> " << X + Y << "\n"
              << "  (one device only, so X and Y share it and no mismatch can arise here;"
              << " with two devices this line throws DeviceMismatch)\n";
  }

  // Z = X.cuda(1): move X to where Y lives, then add there.
  Tensor Z = X.to(Y.device());
  show("Z = X.to(try_gpu(1)); X", X);
  show("Z", Z);
  show("Y + Z", Y + Z);
  show("Z.to(try_gpu(1)).is_same(Z)", Z.to(try_gpu(1)).is_same(Z));

  // MXNet's as_in_context vs copyto: to() returns the tensor itself when it
  // is already there; copy_to() always allocates and copies.
  const Device d0 = try_gpu();
  Tensor y = x.copy_to(d0);
  Tensor z = x.to(d0);
  show("y = x.copy_to(try_gpu())", y);
  show("z = x.to(try_gpu())", z);
  show("y.to(try_gpu()).is_same(y)", y.to(d0).is_same(y));
  show("y.copy_to(try_gpu()).is_same(y)", y.copy_to(d0).is_same(y));

  // Computing on the device: the result lives where the operands are.
  Tensor r = (z + 2).exp() * y;
  show("(z + 2).exp() * y", r);

  // The side note: copies and host waits are what cost. The ledger counts
  // them; printing a device tensor is one device→host copy and one wait.
  Ledger printed;
  std::cout << "printing r again: " << r << "\n";
  std::cout << "what that print cost (ledger):\n" << printed.report();

  section("Neural networks and GPUs");
  manual_seed(0);
  nn::Sequential net{nn::Linear(3, 1)};
  net.to(try_gpu());
  std::cout << "nn::Sequential net{nn::Linear(3, 1)}; net.to(try_gpu());\n";
  Tensor out = net(X);
  show("net(X)", out);
  show("net(X).grad_fn_name()", out.grad_fn_name());
  show("net[0].weight().device()", net[0].weight().device());

  section("Exercise: reading and writing model parameters on the device");
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("anvil_use_gpu_" + std::to_string(::getpid()) + ".safetensors");
  net.save(path.string());
  nn::Sequential restored{nn::Linear(3, 1)};
  restored.load(path.string(), try_gpu());
  std::filesystem::remove(path);
  show("net.save(path); restored.load(path, try_gpu()); restored[0].weight().device()", restored[0].weight().device());
  show("restored(X) equals net(X)", (restored(X) == out).sum().item<std::int64_t>() == out.numel());

  std::cout << "\nThe other exercises: anvil-bench matmul | sync-log | two-devices\n";
  return 0;
} catch (const anvil::Error& e) {
  std::cerr << "use_gpu: " << e.what() << "\n";
  return 1;
}
