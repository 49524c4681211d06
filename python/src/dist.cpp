// python/src/dist.cpp — anvil.dist: the process group under mpirun, its
// collectives (in place, without the GIL), DistributedDataParallel and
// DataParallel (anvil/dist.h, anvil/nn/parallel.h).
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
  nb::class_<dist::Work>(m, "Work", doc("dist::Work"))
      .def("wait", &dist::Work::wait, ANVIL_NOGIL, doc("dist::Work::wait"))
      .def("is_completed", &dist::Work::is_completed, doc("dist::Work::is_completed"));
  nb::class_<dist::ProcessGroup>(m, "ProcessGroup", doc("dist::ProcessGroup"))
      .def("rank", &dist::ProcessGroup::rank, doc("dist::ProcessGroup::rank"))
      .def("size", &dist::ProcessGroup::size, doc("dist::ProcessGroup::size"))
      .def("engine", &dist::ProcessGroup::engine, doc("dist::ProcessGroup::engine"))
      .def(
          "allreduce", [](dist::ProcessGroup& g, Tensor t, dist::ReduceOp op) { return g.allreduce(t, op); },
          "tensor"_a, "op"_a = dist::ReduceOp::Sum, ANVIL_NOGIL, doc("dist::ProcessGroup::allreduce"))
      .def(
          "broadcast", [](dist::ProcessGroup& g, Tensor t, int root) { return g.broadcast(t, root); }, "tensor"_a,
          "src"_a = 0, ANVIL_NOGIL, doc("dist::ProcessGroup::broadcast"))
      .def(
          "allgather",
          [](dist::ProcessGroup& g, const Tensor& in) {
            std::vector<Tensor> out;
            for (int r = 0; r < g.size(); ++r) out.push_back(empty_like(in));
            g.allgather(out, in).wait();
            return out;
          },
          "tensor"_a, ANVIL_NOGIL, doc("dist::ProcessGroup::allgather"))
      .def("barrier", &dist::ProcessGroup::barrier, ANVIL_NOGIL, doc("dist::ProcessGroup::barrier"));
  m.def(
      "init",
      [] {
        nb::gil_scoped_release release;
        return &dist::init();
      },
      nb::rv_policy::reference, "Joins the processes mpirun started (a group of one without mpirun)");
  m.def(
      "is_initialized", [] { return dist::is_initialized(); }, doc("dist::is_initialized"));
  m.def(
      "world", [] { return &dist::world(); }, nb::rv_policy::reference, doc("dist::world"));
  m.def(
      "rank", [] { return dist::rank(); }, doc("dist::rank"));
  m.def(
      "world_size", [] { return dist::world_size(); }, doc("dist::world_size"));
  m.def(
      "local_rank", [] { return dist::local_rank(); }, doc("dist::local_rank"));
  m.def(
      "device", [] { return dist::device(); }, doc("dist::device"));
  // torch.distributed's free functions, on the world group, waiting.
  m.def(
      "all_reduce", [](Tensor t, dist::ReduceOp op) { dist::world().allreduce(t, op).wait(); }, "tensor"_a,
      "op"_a = dist::ReduceOp::Sum, ANVIL_NOGIL);
  m.def(
      "broadcast", [](Tensor t, int src) { dist::world().broadcast(t, src).wait(); }, "tensor"_a, "src"_a = 0,
      ANVIL_NOGIL);
  m.def(
      "all_gather",
      [](std::vector<Tensor> tensor_list, const Tensor& t) { dist::world().allgather(tensor_list, t).wait(); },
      "tensor_list"_a, "tensor"_a, ANVIL_NOGIL);
  m.def(
      "barrier", [] { dist::world().barrier().wait(); }, ANVIL_NOGIL);

  nb::module_ nn = top.attr("nn");
  // One process, several devices. The replicas are the module's clones (a
  // module written in Python clones through anvil.nn.Module._clone), or come
  // from `factory` (one call per device), which anvil.nn.DataParallel
  // (python/anvil/nn.py) makes from a module and a function that builds
  // another. The module overload comes first: a Python module is callable,
  // so it would pass for a factory. The replicas' forward and the loss may be
  // Python: the device threads take the GIL to run them, and the rest of the
  // step runs without it (forward is Module.__call__, without the GIL).
  nb::class_<nn::DataParallel::StepResult>(nn, "DataParallelStep", "train_step's result: the batch's loss and output")
      .def_ro("loss", &nn::DataParallel::StepResult::loss)
      .def_ro("output", &nn::DataParallel::StepResult::output)
      .def("__iter__",
           [](const nn::DataParallel::StepResult& r) { return nb::iter(nb::make_tuple(r.loss, r.output)); });
  nb::class_<nn::DataParallel, nn::Module>(nn, "_DataParallel", doc("nn::DataParallel"))
      .def(nb::init<std::shared_ptr<nn::Module>, std::vector<Device>>(), "module"_a, "devices"_a)
      .def(nb::init<nn::ModuleFactory, std::vector<Device>>(), "factory"_a, "devices"_a)
      .def("train_step", &nn::DataParallel::train_step, "input"_a, "target"_a, "loss"_a, ANVIL_NOGIL,
           doc("nn::DataParallel::train_step"))
      .def_prop_ro("device_ids", &nn::DataParallel::devices_used)
      .def_prop_ro(
          "module", [](const nn::DataParallel& d) -> nn::Module& { return d.module(); },
          nb::rv_policy::reference_internal)
      .def("replica", &nn::DataParallel::replica, "index"_a, nb::rv_policy::reference_internal,
           doc("nn::DataParallel::replica"))
      .def("__len__", &nn::DataParallel::num_replicas, doc("nn::DataParallel::num_replicas"))
      .def("sync_replicas", &nn::DataParallel::sync_replicas, ANVIL_NOGIL, doc("nn::DataParallel::sync_replicas"));
  nb::class_<nn::DistributedDataParallel, nn::Module>(nn, "DistributedDataParallel", doc("nn::DistributedDataParallel"))
      .def(
          "__init__",
          [](nn::DistributedDataParallel* self, std::shared_ptr<nn::Module> module, dist::ProcessGroup* group) {
            new (self) nn::DistributedDataParallel(std::move(module), group != nullptr ? *group : dist::world());
          },
          // No keep_alive: the module's shared_ptr owns a reference to it,
          // which the collector sees (Note [Modules and the garbage
          // collector] in nn.cpp); a keep_alive would be a second one it
          // cannot see, so a DDP at a script's top level would never be freed.
          "module"_a, "process_group"_a = nb::none())
      .def_prop_ro(
          "module", [](const nn::DistributedDataParallel& d) -> nn::Module& { return d.module(); },
          nb::rv_policy::reference_internal);
}

}  // namespace anvil::python
