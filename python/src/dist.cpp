// python/src/dist.cpp — anvil.dist: the process group under mpirun, its
// collectives (in place, without the GIL) and DistributedDataParallel
// (anvil/dist.h, anvil/nn/parallel.h).
#include "anvil/dist.h"

#include "common.h"

namespace anvil::python {

void bind_dist(nb::module_& top) {
  nb::module_ m = top.def_submodule("dist", "processes and collectives (anvil/dist.h)");
  nb::enum_<dist::ReduceOp>(m, "ReduceOp")
      .value("SUM", dist::ReduceOp::Sum)
      .value("AVG", dist::ReduceOp::Avg)
      .value("MAX", dist::ReduceOp::Max)
      .value("MIN", dist::ReduceOp::Min)
      .value("PRODUCT", dist::ReduceOp::Prod);
  nb::class_<dist::Work>(m, "Work")
      .def("wait", &dist::Work::wait, ANVIL_NOGIL)
      .def("is_completed", &dist::Work::is_completed);
  nb::class_<dist::ProcessGroup>(m, "ProcessGroup")
      .def("rank", &dist::ProcessGroup::rank)
      .def("size", &dist::ProcessGroup::size)
      .def("engine", &dist::ProcessGroup::engine)
      .def(
          "allreduce", [](dist::ProcessGroup& g, Tensor t, dist::ReduceOp op) { return g.allreduce(t, op); },
          "tensor"_a, "op"_a = dist::ReduceOp::Sum, ANVIL_NOGIL)
      .def(
          "broadcast", [](dist::ProcessGroup& g, Tensor t, int root) { return g.broadcast(t, root); }, "tensor"_a,
          "src"_a = 0, ANVIL_NOGIL)
      .def(
          "allgather",
          [](dist::ProcessGroup& g, const Tensor& in) {
            std::vector<Tensor> out;
            g.allgather(out, in).wait();
            return out;
          },
          "tensor"_a, ANVIL_NOGIL)
      .def("barrier", &dist::ProcessGroup::barrier, ANVIL_NOGIL);
  m.def(
      "init",
      [] {
        nb::gil_scoped_release release;
        return &dist::init();
      },
      nb::rv_policy::reference, "Joins the processes mpirun started (a group of one without mpirun)");
  m.def("is_initialized", [] { return dist::is_initialized(); });
  m.def(
      "world", [] { return &dist::world(); }, nb::rv_policy::reference);
  m.def("rank", [] { return dist::rank(); });
  m.def("world_size", [] { return dist::world_size(); });
  m.def("local_rank", [] { return dist::local_rank(); });
  m.def("device", [] { return dist::device(); });
  // torch.distributed's free functions, on the world group, waiting.
  m.def(
      "all_reduce", [](Tensor t, dist::ReduceOp op) { dist::world().allreduce(t, op).wait(); }, "tensor"_a,
      "op"_a = dist::ReduceOp::Sum, ANVIL_NOGIL);
  m.def(
      "broadcast", [](Tensor t, int src) { dist::world().broadcast(t, src).wait(); }, "tensor"_a, "src"_a = 0,
      ANVIL_NOGIL);
  m.def(
      "barrier", [] { dist::world().barrier().wait(); }, ANVIL_NOGIL);

  nb::module_ nn = top.attr("nn");
  nb::class_<nn::DistributedDataParallel, nn::Module>(nn, "DistributedDataParallel")
      .def(
          "__init__",
          [](nn::DistributedDataParallel* self, std::shared_ptr<nn::Module> module, dist::ProcessGroup* group) {
            new (self) nn::DistributedDataParallel(std::move(module), group != nullptr ? *group : dist::world());
          },
          "module"_a, "process_group"_a = nb::none(), nb::keep_alive<1, 2>())
      .def_prop_ro(
          "module", [](const nn::DistributedDataParallel& d) -> nn::Module& { return d.module(); },
          nb::rv_policy::reference_internal);
}

}  // namespace anvil::python
