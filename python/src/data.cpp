// python/src/data.cpp — anvil.data: Fashion-MNIST and the DataLoader
// (anvil/data.h); a loader iterates as PyTorch's, yielding (inputs, targets).
#include "common.h"

namespace anvil::python {
namespace {

// One epoch's pass: holds the loader alive and steps the C++ iterator
// (which prefetches the next batch on its own thread) without the GIL.
struct EpochIterator {
  nb::object owner;
  DataLoader::Iterator it;
};

DataLoaderOptions loader_options(std::int64_t batch_size, bool shuffle, std::uint64_t seed, bool drop_last,
                                 std::optional<Device> device, bool prefetch) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.seed = seed;
  o.drop_last = drop_last;
  o.device = device.value_or(cpu());
  o.prefetch = prefetch;
  return o;
}

}  // namespace

void bind_data(nb::module_& top) {
  nb::module_ m = top.def_submodule("data", "data sets and loaders (anvil/data.h)");
  nb::class_<FashionMNIST>(m, "FashionMNIST", doc("FashionMNIST"))
      .def(
          "__init__",
          [](FashionMNIST* self, bool train, std::optional<std::string> root, bool flatten) {
            new (self) FashionMNIST(train ? FashionMNIST::Split::Train : FashionMNIST::Split::Test,
                                    root.value_or(FashionMNIST::default_root()), flatten);
          },
          nb::kw_only(), "train"_a = true, "root"_a = nb::none(), "flatten"_a = false, ANVIL_NOGIL)
      .def_prop_ro("images", &FashionMNIST::images)
      .def_prop_ro("labels", &FashionMNIST::labels)
      .def("__len__", &FashionMNIST::size, doc("FashionMNIST::size"))
      .def("__getitem__",
           [](const FashionMNIST& d, std::int64_t i) { return nb::make_tuple(d.images()[i], d.labels()[i]); })
      .def_static("default_root", &FashionMNIST::default_root)
      .def_prop_ro_static("classes", [](nb::handle) {
        std::vector<std::string> names;
        for (auto n : FashionMNIST::kClassNames) names.emplace_back(n);
        return names;
      });
  m.def("read_idx", &read_idx, "path"_a, ANVIL_NOGIL, doc("read_idx"));

  nb::class_<EpochIterator>(m, "_EpochIterator")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", [](EpochIterator& e) {
        if (e.it == std::default_sentinel) throw nb::stop_iteration();
        Batch b = *e.it;
        {
          nb::gil_scoped_release release;
          ++e.it;
        }
        return nb::make_tuple(b.inputs, b.targets);
      });

  nb::class_<DataLoader>(m, "DataLoader", doc("DataLoader"))
      .def(
          "__init__",
          [](DataLoader* self, const Tensor& inputs, const Tensor& targets, std::int64_t batch_size, bool shuffle,
             std::uint64_t seed, bool drop_last, std::optional<Device> device, bool prefetch) {
            new (self)
                DataLoader(inputs, targets, loader_options(batch_size, shuffle, seed, drop_last, device, prefetch));
          },
          "inputs"_a, "targets"_a, "batch_size"_a = 1, "shuffle"_a = false, "seed"_a = 0, "drop_last"_a = false,
          "device"_a = nb::none(), "prefetch"_a = true)
      .def(
          "__init__",
          [](DataLoader* self, const FashionMNIST& dataset, std::int64_t batch_size, bool shuffle, std::uint64_t seed,
             bool drop_last, std::optional<Device> device, bool prefetch) {
            new (self) DataLoader(dataset.images(), dataset.labels(),
                                  loader_options(batch_size, shuffle, seed, drop_last, device, prefetch));
          },
          "dataset"_a, "batch_size"_a = 1, "shuffle"_a = false, "seed"_a = 0, "drop_last"_a = false,
          "device"_a = nb::none(), "prefetch"_a = true)
      .def("__iter__",
           [](nb::handle self) {
             DataLoader& loader = nb::cast<DataLoader&>(self);
             EpochIterator e{nb::borrow(self), {}};
             {
               nb::gil_scoped_release release;
               e.it = loader.begin();
             }
             return e;
           })
      .def("__len__", &DataLoader::size, doc("DataLoader::size"))
      .def_prop_ro("num_samples", &DataLoader::num_samples)
      .def_prop_ro("epoch", &DataLoader::epoch)
      .def("set_epoch", &DataLoader::set_epoch, "epoch"_a, doc("DataLoader::set_epoch"));
}

}  // namespace anvil::python
