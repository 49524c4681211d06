// Hooks that let tests observe the OpenCL queues directly (asynchrony is
// shown with queue state, never with timing). Available when the anvil
// target carries ANVIL_WITH_OPENCL (set by this folder's CMakeLists).
//
//   anvil::opencl::testing::QueueGate gate(0);     // opencl:0 stalls here
//   auto y = anvil::matmul(x, x);                  // returns: enqueued only
//   EXPECT_NE(last_command_status(0), CommandStatus::Complete);
//   gate.open();  y.item<float>();                 // now it runs
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace anvil::opencl::testing {

enum class CommandStatus { None, Queued, Submitted, Running, Complete, Failed };
const char* to_string(CommandStatus s) noexcept;

// The execution status of the last command enqueued on opencl:index.
CommandStatus last_command_status(int index);

// Holds opencl:index's queue: every command enqueued after it waits until
// open() (or destruction). Do not wait on the device while it is closed.
class QueueGate {
 public:
  explicit QueueGate(int index);
  ~QueueGate();
  QueueGate(const QueueGate&) = delete;
  QueueGate& operator=(const QueueGate&) = delete;
  void open();

 private:
  void* event_ = nullptr;  // the cl_event (user event)
};

// Commands (kernels, copies, markers) enqueued on opencl:index so far.
unsigned long long commands_enqueued(int index);

// Programs built so far for opencl:index (the in-process program cache).
std::size_t program_count(int index);

// The symbols of the kernels built so far for opencl:index.
std::vector<std::string> kernels_built(int index);

}  // namespace anvil::opencl::testing
