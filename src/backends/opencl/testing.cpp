#include "backends/opencl/testing.h"

#include "backends/opencl/runtime.h"

namespace anvil::opencl::testing {

const char* to_string(CommandStatus s) noexcept {
  switch (s) {
    case CommandStatus::None:
      return "none";
    case CommandStatus::Queued:
      return "queued";
    case CommandStatus::Submitted:
      return "submitted";
    case CommandStatus::Running:
      return "running";
    case CommandStatus::Complete:
      return "complete";
    case CommandStatus::Failed:
      return "failed";
  }
  return "?";
}

CommandStatus last_command_status(int index) {
  auto& s = backend().slot(index);
  std::lock_guard lock(s.mutex);
  cl_event ev = s.queue.last_event();
  if (ev == nullptr) return CommandStatus::None;
  cl_int status = CL_COMPLETE;
  const cl_int err = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  clReleaseEvent(ev);
  ANVIL_CL_CHECK(s.label(), err);
  switch (status) {
    case CL_QUEUED:
      return CommandStatus::Queued;
    case CL_SUBMITTED:
      return CommandStatus::Submitted;
    case CL_RUNNING:
      return CommandStatus::Running;
    case CL_COMPLETE:
      return CommandStatus::Complete;
    default:
      return CommandStatus::Failed;
  }
}

QueueGate::QueueGate(int index) {
  auto& s = backend().slot(index);
  std::lock_guard lock(s.mutex);
  cl_int err = CL_SUCCESS;
  cl_event user = nullptr;
  ANVIL_CL_CHECK(s.label(), (user = clCreateUserEvent(s.queue.context(), &err), err));
  cl_event barrier = nullptr;
  const cl_int st = clEnqueueBarrierWithWaitList(s.queue.handle, 1, &user, &barrier);
  if (st != CL_SUCCESS) clReleaseEvent(user);
  ANVIL_CL_CHECK(s.label(), st);
  s.queue.track(barrier, "queue_gate");
  event_ = user;
}

void QueueGate::open() {
  if (event_ == nullptr) return;
  cl_event user = static_cast<cl_event>(event_);
  event_ = nullptr;
  clSetUserEventStatus(user, CL_COMPLETE);
  clReleaseEvent(user);
}

QueueGate::~QueueGate() { open(); }

unsigned long long commands_enqueued(int index) {
  auto& s = backend().slot(index);
  std::lock_guard lock(s.mutex);
  return s.queue.enqueued();
}

std::size_t program_count(int index) {
  auto& s = backend().slot(index);
  std::lock_guard lock(s.mutex);
  return s.queue.programs.program_count();
}

std::vector<std::string> kernels_built(int index) {
  auto& s = backend().slot(index);
  std::lock_guard lock(s.mutex);
  return s.queue.programs.kernel_names();
}

}  // namespace anvil::opencl::testing
