#include "distributed/collective.h"

#include <cstring>
#include <type_traits>

namespace anvil::dist {

const char* to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Prod:
      return "prod";
  }
  return "?";
}

void WorkState::finish(std::exception_ptr e) {
  {
    std::lock_guard lock(mutex);
    error = std::move(e);
    done = true;
  }
  cv.notify_all();
}

void WorkState::wait() {
  if (run_here) {
    bool finished;
    {
      std::lock_guard lock(mutex);
      finished = done;
    }
    if (!finished) run_here();
  }
  std::unique_lock lock(mutex);
  if (!done && wake_engine) {
    lock.unlock();
    wake_engine();
    lock.lock();
  }
  cv.wait(lock, [&] { return done; });
  if (error) std::rethrow_exception(error);
}

void Work::wait() {
  if (state_) state_->wait();
}

bool Work::is_completed() const {
  if (!state_) return true;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->done) return true;
  }
  if (state_->wake_engine) state_->wake_engine();
  return false;
}

void Work::wait_quietly() noexcept {
  try {
    wait();
  } catch (...) {
    // Documented: an unwaited Work swallows its error (the group's later
    // collectives report a broken group; wait() is where errors are seen).
  }
}

Work::~Work() { wait_quietly(); }

Work& Work::operator=(const Work& other) {
  if (this != &other) {
    wait_quietly();
    state_ = other.state_;
  }
  return *this;
}

Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    wait_quietly();
    state_ = std::move(other.state_);
  }
  return *this;
}

namespace detail {

const char* name(CollectiveKind kind) noexcept {
  switch (kind) {
    case CollectiveKind::Allreduce:
      return "allreduce";
    case CollectiveKind::Broadcast:
      return "broadcast";
    case CollectiveKind::Allgather:
      return "allgather";
    case CollectiveKind::ReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::Barrier:
      return "barrier";
  }
  return "?";
}

std::string CollectiveInfo::str() const {
  std::string s = anvil::detail::cat(name(kind), " #", seq);
  if (kind == CollectiveKind::Barrier) return s;
  s += " (";
  if (kind == CollectiveKind::Allreduce || kind == CollectiveKind::ReduceScatter)
    s += std::string(to_string(op)) + ", ";
  if (kind == CollectiveKind::Broadcast) s += anvil::detail::cat("root ", root, ", ");
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  s += anvil::detail::cat(to_string(dtype), " ", shape.str(), " = ", n * static_cast<std::int64_t>(element_size(dtype)),
                          " bytes on ", device.str(), ")");
  return s;
}

void check_tensor(const char* op, const Tensor& t, const char* what) {
  ANVIL_CHECK(t.defined(), ValueError, op, ": ", what,
              " is an undefined tensor; expected a tensor created by a factory or an op, got Tensor()");
}

void check_dtype(const char* op, DType t, bool reduces, ReduceOp rop) {
  ANVIL_CHECK(
      t == DType::F32 || t == DType::F64 || t == DType::I32 || t == DType::I64 || t == DType::U8 || t == DType::Bool,
      DTypeError, op, ": unsupported dtype; expected one of f32, f64, i32, i64, u8, bool, got ", to_string(t));
  ANVIL_CHECK(!(reduces && t == DType::Bool && rop != ReduceOp::Max && rop != ReduceOp::Min), DTypeError, op,
              ": bool tensors reduce only with max (any) or min (all); expected max or min, got ", to_string(rop),
              "; convert with .to(u8) or .to(i64) first");
}

void check_like(const char* op, const std::vector<Tensor>& ts, const char* what, DType dtype, const Shape& shape,
                Device device, std::size_t expected_count) {
  ANVIL_CHECK(ts.size() == expected_count, ValueError, op, ": wrong number of ", what, " tensors; expected ",
              expected_count, " (one per member of the group), got ", ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const std::string arg = anvil::detail::cat(what, "[", i, "]");
    check_tensor(op, ts[i], arg.c_str());
    ANVIL_CHECK(ts[i].device() == device, DeviceMismatch, op, ": all tensors must be on one device; ", arg, " is on ",
                ts[i].device().str(), ", expected ", device.str(), "; move it with .to(", device.str(), ")");
    ANVIL_CHECK(ts[i].dtype() == dtype, DTypeError, op, ": ", arg, " has the wrong dtype; expected ", to_string(dtype),
                ", got ", to_string(ts[i].dtype()));
    ANVIL_CHECK(ts[i].shape() == shape, ShapeError, op, ": ", arg, " has the wrong shape; expected ", shape.str(),
                ", got ", ts[i].shape().str());
  }
}

void check_root(const char* op, int root, int size) {
  ANVIL_CHECK(root >= 0 && root < size, IndexError, op, ": root out of range; expected a rank in [0, ", size, "), got ",
              root);
}

namespace {
template <typename T>
void reduce_typed(T* d, const T* s, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] + s[i]);
      break;
    case ReduceOp::Prod:
      for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] * s[i]);
      break;
    case ReduceOp::Max:
      for (std::size_t i = 0; i < n; ++i) d[i] = s[i] > d[i] || s[i] != s[i] ? s[i] : d[i];  // NaN wins
      break;
    case ReduceOp::Min:
      for (std::size_t i = 0; i < n; ++i) d[i] = s[i] < d[i] || s[i] != s[i] ? s[i] : d[i];
      break;
  }
}
}  // namespace

void reduce_host(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::F32:
      reduce_typed(static_cast<float*>(dst), static_cast<const float*>(src), count, op);
      break;
    case DType::F64:
      reduce_typed(static_cast<double*>(dst), static_cast<const double*>(src), count, op);
      break;
    case DType::I32:
      reduce_typed(static_cast<std::int32_t*>(dst), static_cast<const std::int32_t*>(src), count, op);
      break;
    case DType::I64:
      reduce_typed(static_cast<std::int64_t*>(dst), static_cast<const std::int64_t*>(src), count, op);
      break;
    case DType::U8:
    case DType::Bool:
      reduce_typed(static_cast<std::uint8_t*>(dst), static_cast<const std::uint8_t*>(src), count, op);
      break;
    case DType::F16:
    case DType::BF16:  // check_dtype turns them away: collectives have no 16-bit floats yet
      ANVIL_ASSERT(false, "reduce_host: ", to_string(dtype));
  }
}

namespace {
template <typename T>
void divide_typed(T* d, std::size_t n, std::int64_t divisor) {
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] / static_cast<T>(divisor));
}
}  // namespace

void divide_host(void* data, std::size_t count, DType dtype, std::int64_t divisor) {
  switch (dtype) {
    case DType::F32:
      divide_typed(static_cast<float*>(data), count, divisor);
      break;
    case DType::F64:
      divide_typed(static_cast<double*>(data), count, divisor);
      break;
    case DType::I32:
      divide_typed(static_cast<std::int32_t*>(data), count, divisor);
      break;
    case DType::I64:
      divide_typed(static_cast<std::int64_t*>(data), count, divisor);
      break;
    case DType::U8:
    case DType::Bool:
      divide_typed(static_cast<std::uint8_t*>(data), count, divisor);
      break;
    case DType::F16:
    case DType::BF16:
      ANVIL_ASSERT(false, "divide_host: ", to_string(dtype));
  }
}

Work failed_work(std::exception_ptr e) {
  auto s = std::make_shared<WorkState>();
  s->finish(std::move(e));
  return Work(std::move(s));
}

Work done_work() { return Work(); }

}  // namespace detail
}  // namespace anvil::dist
