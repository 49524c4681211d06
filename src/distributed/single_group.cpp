// A world of one (engine "single"): the program was not started by a
// launcher. Every collective validates its arguments exactly as the MPI
// engine does, so a program that is wrong under mpirun is wrong alone too;
// then it is a no-op (allreduce, broadcast, barrier) or a copy (allgather,
// reduce_scatter), done by the time the call returns.
#include "distributed/single_group.h"

#include <climits>

#include "core/ledger_counters.h"
#include "distributed/collective.h"

namespace anvil::dist::detail {

namespace {

class SingleGroup final : public ProcessGroup {
 public:
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  std::string engine() const override { return "single"; }

  Work allreduce(Tensor& t, ReduceOp op) override {
    check_tensor("allreduce", t, "the tensor");
    check_dtype("allreduce", t.dtype(), true, op);
    anvil::detail::record_collective(t.device(), t.nbytes());
    return done_work();  // op over one rank: t itself (Avg divides by 1)
  }

  Work broadcast(Tensor& t, int root) override {
    check_tensor("broadcast", t, "the tensor");
    check_dtype("broadcast", t.dtype(), false, ReduceOp::Sum);
    check_root("broadcast", root, 1);
    anvil::detail::record_collective(t.device(), t.nbytes());
    return done_work();
  }

  Work allgather(std::vector<Tensor>& out, const Tensor& in) override {
    check_tensor("allgather", in, "in");
    check_dtype("allgather", in.dtype(), false, ReduceOp::Sum);
    check_like("allgather", out, "out", in.dtype(), in.shape(), in.device(), 1);
    if (!out[0].is_same(in)) out[0].copy_(in);
    anvil::detail::record_collective(in.device(), in.nbytes());
    return done_work();
  }

  Work reduce_scatter(Tensor& out, const std::vector<Tensor>& in, ReduceOp op) override {
    check_tensor("reduce_scatter", out, "out");
    check_dtype("reduce_scatter", out.dtype(), true, op);
    check_like("reduce_scatter", in, "in", out.dtype(), out.shape(), out.device(), 1);
    if (!out.is_same(in[0])) out.copy_(in[0]);
    anvil::detail::record_collective(out.device(), out.nbytes());
    return done_work();
  }

  Work barrier() override { return done_work(); }
};

}  // namespace

std::unique_ptr<ProcessGroup> make_single_group() { return std::make_unique<SingleGroup>(); }

}  // namespace anvil::dist::detail
