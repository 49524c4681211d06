// python/src/nn.cpp — anvil.nn: the C++ modules, layers, initialisers and
// losses, and the base class a Python model derives from.
//
// Note [Python modules are C++ modules]
// anvil.nn.Module (python/anvil/nn.py) derives from _anvil.Module, which is
// nn::Module through a nanobind trampoline (PyModule): forward() and name()
// call the Python methods, so a Python model sits in a Sequential, prints
// and trains like a C++ one. Its __setattr__ registers what PyTorch's does
// in the C++ Module: a module attribute with register_module, a tensor that
// requires grad (anvil.nn.Parameter) with register_parameter. parameters(),
// to(device), state_dict() and load_state_dict() are then nn::Module's own.
// The C++ parent holds its children by shared_ptr, which nanobind ties to the
// Python object, so a child lives as long as either side needs it (and the
// collector sees that tie: Note [Modules and the garbage collector]).
#include <nanobind/trampoline.h>

#include <sstream>

#include "common.h"

namespace anvil::python {
namespace {

class PyModule : public nn::Module {
 public:
  NB_TRAMPOLINE(nn::Module, 3);
  Tensor forward(const Tensor& x) override { NB_OVERRIDE_PURE(forward, x); }
  std::string name() const override { NB_OVERRIDE_PURE(name); }
  // anvil.nn.Module._clone (python/anvil/nn.py) builds a Python module's twin.
  std::shared_ptr<nn::Module> clone_impl(std::optional<Device> device) const override {
    NB_OVERRIDE_NAME("_clone", clone_impl, device);
  }

  void add_module(const std::string& child_name, std::shared_ptr<nn::Module> child) {
    register_module(child_name, std::move(child));
  }
  Tensor add_parameter(const std::string& param_name, const Tensor& t) { return register_parameter(param_name, t); }
  Tensor add_buffer(const std::string& buffer_name, const Tensor& t) { return register_buffer(buffer_name, t); }
};

// Registration from Python is for modules written in Python.
PyModule& python_module(nn::Module& m) {
  auto* p = dynamic_cast<PyModule*>(&m);
  if (p == nullptr)
    throw ValueError(detail::cat("register: ", m.name(),
                                 " is a C++ layer; only a subclass of anvil.nn.Module registers children from Python"));
  return *p;
}

// The fused batch norm's activation by name: None or "relu".
Activation parse_activation(const char* op, const std::optional<std::string>& name) {
  if (!name) return Activation::None;
  if (*name == "relu") return Activation::ReLU;
  throw ValueError(detail::cat(op, ": unknown activation; expected None or \"relu\", got \"", *name, "\""));
}

std::string module_repr(const nn::Module& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

// Note [Modules and the garbage collector]
// A child given to a C++ module from Python (Sequential(Net()), `self.fc =
// Linear(...)`, a DDP's module) is a shared_ptr whose deleter
// (nb::detail::py_deleter) owns a reference to the child's Python object.
// The collector sees only what tp_traverse reports, and a model at a
// script's top level is always in a cycle (its class's methods' globals
// hold it), so without this slot it was never freed and nanobind reported
// it leaked at exit. module_traverse reports each such reference once per
// control block (a DDP or Sequential holds a child twice), and only for a
// Python object that owns its C++ module: a wrapper of one C++ also holds
// (a clone, a replica) reports nothing, so nothing is freed early. No
// tp_clear: the dicts and functions in the cycle break it.
int module_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));  // a heap type's instance holds its type
  const auto [ready, owned] = nb::inst_state(self);
  if (!ready || !owned) return 0;
  const auto* module = nb::inst_ptr<nn::Module>(self);
  const auto children = module->named_children();
  for (std::size_t i = 0; i < children.size(); ++i) {
    const std::shared_ptr<nn::Module>& c = children[i].second;
    const auto* held = std::get_deleter<nb::detail::py_deleter>(c);
    if (held == nullptr) continue;  // made in C++: it holds no Python object
    bool seen = false;
    for (std::size_t j = 0; j < i && !seen; ++j)
      seen = !c.owner_before(children[j].second) && !children[j].second.owner_before(c);
    if (!seen) Py_VISIT(held->o);
  }
  return 0;
}

PyType_Slot module_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(&module_traverse)}, {0, nullptr}};

std::vector<nb::object> children(const nn::Module& m) {
  std::vector<nb::object> out;
  for (auto& [n, c] : m.named_children()) out.push_back(nb::cast(c));
  return out;
}

}  // namespace

void bind_nn(nb::module_& top) {
  nb::module_ m = top.def_submodule("nn", "modules, layers and losses (anvil/nn.h)");
  nb::class_<nn::Module, PyModule>(m, "Module", "A module (anvil::nn::Module); subclass anvil.nn.Module in Python",
                                   nb::type_slots(module_slots))
      .def(nb::init<>())
      .def("forward", &nn::Module::forward, "x"_a, ANVIL_NOGIL, doc("nn::Module::forward"))
      .def("__call__", &nn::Module::forward, "x"_a, ANVIL_NOGIL, doc("nn::Module::forward"))
      .def("name", &nn::Module::name, doc("nn::Module::name"))
      .def("__repr__", &module_repr)
      .def("parameters", &nn::Module::parameters, "recurse"_a = true, doc("nn::Module::parameters"))
      .def("named_parameters", &nn::Module::named_parameters, "recurse"_a = true, doc("nn::Module::named_parameters"))
      .def("buffers", &nn::Module::buffers, "recurse"_a = true, doc("nn::Module::buffers"))
      .def("named_buffers", &nn::Module::named_buffers, "recurse"_a = true, doc("nn::Module::named_buffers"))
      .def("named_children", &nn::Module::named_children, doc("nn::Module::named_children"))
      .def("children", &children)
      .def("param", &nn::Module::param, "name"_a, doc("nn::Module::param"))
      .def_prop_ro("weight", &nn::Module::weight)
      .def_prop_ro("bias", &nn::Module::bias)
      .def(
          "to",
          [](nb::handle self, std::optional<Device> d, std::optional<MemoryFormat> format) {
            nn::Module& mod = nb::cast<nn::Module&>(self);
            {
              nb::gil_scoped_release release;
              if (d) mod.to(*d);
              if (format) mod.to(*format);
            }
            return nb::borrow(self);
          },
          "device"_a = nb::none(), nb::kw_only(), "memory_format"_a = nb::none(), doc("nn::Module::to"))
      .def("devices", &nn::Module::devices, doc("nn::Module::devices"))
      .def("state_dict", &nn::Module::state_dict, doc("nn::Module::state_dict"))
      .def("load_state_dict", &nn::Module::load_state_dict, "state_dict"_a, "strict"_a = true, ANVIL_NOGIL,
           doc("nn::Module::load_state_dict"))
      .def("save", &nn::Module::save, "path"_a, ANVIL_NOGIL, doc("nn::Module::save"))
      .def("load", &nn::Module::load, "path"_a, "device"_a = anvil::cpu(), ANVIL_NOGIL, doc("nn::Module::load"))
      .def(
          "train",
          [](nb::handle self, bool on) {
            nb::cast<nn::Module&>(self).train(on);
            return nb::borrow(self);
          },
          "mode"_a = true, doc("nn::Module::train"))
      .def(
          "eval",
          [](nb::handle self) {
            nb::cast<nn::Module&>(self).eval();
            return nb::borrow(self);
          },
          doc("nn::Module::eval"))
      .def_prop_ro("training", &nn::Module::is_training)
      .def("zero_grad", &nn::Module::zero_grad, doc("nn::Module::zero_grad"))
      .def("clone", &nn::Module::clone, "device"_a = nb::none(), ANVIL_NOGIL, doc("nn::Module::clone"))
      .def(
          "apply",
          [](nb::handle self, nb::callable fn) {
            nb::cast<nn::Module&>(self).apply(
                [&](nn::Module& child) { fn(nb::cast(&child, nb::rv_policy::reference)); });
            return nb::borrow(self);
          },
          "fn"_a, doc("nn::Module::apply"))
      .def(
          "_add_module",
          [](nn::Module& self, const std::string& name, std::shared_ptr<nn::Module> child) {
            python_module(self).add_module(name, std::move(child));
          },
          "name"_a, "module"_a)
      .def(
          "_add_parameter",
          [](nn::Module& self, const std::string& name, const Tensor& t) {
            return python_module(self).add_parameter(name, t);
          },
          "name"_a, "tensor"_a)
      .def(
          "_add_buffer",
          [](nn::Module& self, const std::string& name, const Tensor& t) {
            return python_module(self).add_buffer(name, t);
          },
          "name"_a, "tensor"_a);

  nb::class_<nn::Sequential, nn::Module>(m, "Sequential", doc("nn::Sequential"))
      .def("__init__",
           [](nn::Sequential* self, nb::args layers) {
             new (self) nn::Sequential();
             for (nb::handle l : layers) self->push_back(nb::cast<std::shared_ptr<nn::Module>>(l));
           })
      .def("append",
           [](nb::handle self, std::shared_ptr<nn::Module> layer) {
             nb::cast<nn::Sequential&>(self).push_back(std::move(layer));
             return nb::borrow(self);
           })
      .def("add_module",
           [](nb::handle self, const std::string& name, std::shared_ptr<nn::Module> layer) {
             nb::cast<nn::Sequential&>(self).add(name, std::move(layer));
             return nb::borrow(self);
           })
      .def("__len__", &nn::Sequential::size, doc("nn::Sequential::size"))
      .def("__getitem__",
           [](const nn::Sequential& s, std::int64_t i) {
             const auto n = static_cast<std::int64_t>(s.size());
             if (i < 0) i += n;
             if (i < 0 || i >= n)
               throw anvil::IndexError(detail::cat("Sequential: index ", i, " is out of range for ", n, " layers"));
             return s.named_children()[static_cast<std::size_t>(i)].second;
           })
      .def("__iter__", [](const nn::Sequential& s) { return nb::iter(nb::cast(children(s))); });

  nb::class_<nn::Linear, nn::Module>(m, "Linear", doc("nn::Linear"))
      .def(nb::init<std::int64_t, std::int64_t, bool>(), "in_features"_a, "out_features"_a, "bias"_a = true);
  nb::class_<nn::ReLU, nn::Module>(m, "ReLU", doc("nn::ReLU")).def(nb::init<>());
  nb::class_<nn::Sigmoid, nn::Module>(m, "Sigmoid", doc("nn::Sigmoid")).def(nb::init<>());
  nb::class_<nn::Tanh, nn::Module>(m, "Tanh", doc("nn::Tanh")).def(nb::init<>());
  nb::class_<nn::Softmax, nn::Module>(m, "Softmax", doc("nn::Softmax")).def(nb::init<int>(), "dim"_a);
  nb::class_<nn::Flatten, nn::Module>(m, "Flatten", doc("nn::Flatten"))
      .def(nb::init<int, int>(), "start_dim"_a = 1, "end_dim"_a = -1);
  nb::class_<nn::Dropout, nn::Module>(m, "Dropout", doc("nn::Dropout")).def(nb::init<double>(), "p"_a = 0.5);
  nb::class_<nn::Conv2d, nn::Module>(m, "Conv2d", doc("nn::Conv2d"))
      .def(nb::init<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                    bool>(),
           "in_channels"_a, "out_channels"_a, "kernel_size"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
           "groups"_a = 1, "bias"_a = true);
  nb::class_<nn::Conv1d, nn::Module>(m, "Conv1d", doc("nn::Conv1d"))
      .def(nb::init<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                    bool>(),
           "in_channels"_a, "out_channels"_a, "kernel_size"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
           "groups"_a = 1, "bias"_a = true);
  // stride=None is the kernel size, as in PyTorch (0 in C++).
  nb::class_<nn::MaxPool2d, nn::Module>(m, "MaxPool2d", doc("nn::MaxPool2d"))
      .def(nb::init<std::int64_t, std::int64_t, std::int64_t>(), "kernel_size"_a, "stride"_a = 0, "padding"_a = 0);
  nb::class_<nn::AvgPool2d, nn::Module>(m, "AvgPool2d", doc("nn::AvgPool2d"))
      .def(nb::init<std::int64_t, std::int64_t, std::int64_t>(), "kernel_size"_a, "stride"_a = 0, "padding"_a = 0);
  nb::class_<nn::AdaptiveAvgPool2d, nn::Module>(m, "AdaptiveAvgPool2d", doc("nn::AdaptiveAvgPool2d"))
      .def(nb::init<std::array<std::int64_t, 2>>(), "output_size"_a)
      .def(nb::init<std::int64_t>(), "output_size"_a);
  nb::class_<nn::AdaptiveMaxPool2d, nn::Module>(m, "AdaptiveMaxPool2d", doc("nn::AdaptiveMaxPool2d"))
      .def(nb::init<std::array<std::int64_t, 2>>(), "output_size"_a)
      .def(nb::init<std::int64_t>(), "output_size"_a);
  nb::class_<nn::BatchNorm, nn::Module>(m, "_BatchNorm", doc("nn::BatchNorm"));
  nb::class_<nn::BatchNorm1d, nn::BatchNorm>(m, "BatchNorm1d", doc("nn::BatchNorm1d"))
      .def(nb::init<std::int64_t, double, double>(), "num_features"_a, "eps"_a = 1e-5, "momentum"_a = 0.1);
  // activation="relu" and forward(x, residual): anvil's fused epilogue (torch has neither).
  const auto bn_call = [](nn::BatchNorm& l, const Tensor& x, std::optional<Tensor> residual) {
    return l.forward(x, residual.value_or(Tensor()));
  };
  nb::class_<nn::BatchNorm2d, nn::BatchNorm>(m, "BatchNorm2d", doc("nn::BatchNorm2d"))
      .def(
          "__init__",
          [](nn::BatchNorm2d* self, std::int64_t features, double eps, double momentum,
             std::optional<std::string> activation) {
            new (self) nn::BatchNorm2d(features, eps, momentum, parse_activation("BatchNorm2d", activation));
          },
          "num_features"_a, "eps"_a = 1e-5, "momentum"_a = 0.1, "activation"_a = nb::none())
      .def("forward", bn_call, "input"_a, "residual"_a = nb::none(), ANVIL_NOGIL, doc("nn::BatchNorm::forward"))
      .def("__call__", bn_call, "input"_a, "residual"_a = nb::none(), ANVIL_NOGIL);
  nb::class_<nn::Embedding, nn::Module>(m, "Embedding", doc("nn::Embedding"))
      .def(nb::init<std::int64_t, std::int64_t>(), "num_embeddings"_a, "embedding_dim"_a);
  nb::class_<nn::LayerNorm, nn::Module>(m, "LayerNorm", doc("nn::LayerNorm"))
      .def(nb::init<std::int64_t, double, bool>(), "normalized_shape"_a, "eps"_a = 1e-5, "elementwise_affine"_a = true)
      .def(nb::init<Shape, double, bool>(), "normalized_shape"_a, "eps"_a = 1e-5, "elementwise_affine"_a = true);

  // Recurrent layers return (output, h_n) or (output, (h_n, c_n)), as PyTorch.
  nb::class_<nn::RecurrentBase, nn::Module>(m, "_RecurrentBase", doc("nn::RecurrentBase"))
      .def_prop_ro("input_size", &nn::RecurrentBase::input_size)
      .def_prop_ro("hidden_size", &nn::RecurrentBase::hidden_size)
      .def_prop_ro("num_layers", &nn::RecurrentBase::num_layers)
      .def_prop_ro("batch_first", &nn::RecurrentBase::batch_first);
  auto rnn_call = [](auto& layer, const Tensor& x, std::optional<Tensor> h0) {
    nn::RNNOutput r;
    {
      nb::gil_scoped_release release;
      r = layer.forward(x, h0 ? *h0 : Tensor());
    }
    return nb::make_tuple(r.output, r.h_n);
  };
  nb::class_<nn::RNN, nn::RecurrentBase>(m, "RNN", doc("nn::RNN"))
      .def(nb::init<std::int64_t, std::int64_t, std::int64_t, const std::string&, bool, bool, double>(), "input_size"_a,
           "hidden_size"_a, "num_layers"_a = 1, "nonlinearity"_a = "tanh", "bias"_a = true, "batch_first"_a = false,
           "dropout"_a = 0.0)
      .def(
          "forward", [rnn_call](nn::RNN& l, const Tensor& x, std::optional<Tensor> h0) { return rnn_call(l, x, h0); },
          "input"_a, "hx"_a = nb::none(), doc("nn::RNN::forward"))
      .def(
          "__call__", [rnn_call](nn::RNN& l, const Tensor& x, std::optional<Tensor> h0) { return rnn_call(l, x, h0); },
          "input"_a, "hx"_a = nb::none());
  nb::class_<nn::GRU, nn::RecurrentBase>(m, "GRU", doc("nn::GRU"))
      .def(nb::init<std::int64_t, std::int64_t, std::int64_t, bool, bool, double>(), "input_size"_a, "hidden_size"_a,
           "num_layers"_a = 1, "bias"_a = true, "batch_first"_a = false, "dropout"_a = 0.0)
      .def(
          "forward", [rnn_call](nn::GRU& l, const Tensor& x, std::optional<Tensor> h0) { return rnn_call(l, x, h0); },
          "input"_a, "hx"_a = nb::none(), doc("nn::GRU::forward"))
      .def(
          "__call__", [rnn_call](nn::GRU& l, const Tensor& x, std::optional<Tensor> h0) { return rnn_call(l, x, h0); },
          "input"_a, "hx"_a = nb::none());
  auto lstm_call = [](nn::LSTM& l, const Tensor& x, std::optional<std::pair<Tensor, Tensor>> hc) {
    nn::LSTMOutput r;
    {
      nb::gil_scoped_release release;
      r = hc ? l.forward(x, hc->first, hc->second) : l.forward(x, Tensor(), Tensor());
    }
    return nb::make_tuple(r.output, nb::make_tuple(r.h_n, r.c_n));
  };
  nb::class_<nn::LSTM, nn::RecurrentBase>(m, "LSTM", doc("nn::LSTM"))
      .def(nb::init<std::int64_t, std::int64_t, std::int64_t, bool, bool, double>(), "input_size"_a, "hidden_size"_a,
           "num_layers"_a = 1, "bias"_a = true, "batch_first"_a = false, "dropout"_a = 0.0)
      .def("forward", lstm_call, "input"_a, "hx"_a = nb::none(), doc("nn::LSTM::forward"))
      .def("__call__", lstm_call, "input"_a, "hx"_a = nb::none());
  auto mha_call = [](nn::MultiheadAttention& l, const Tensor& q, const Tensor& k, const Tensor& v,
                     std::optional<Tensor> key_padding_mask, bool need_weights, std::optional<Tensor> attn_mask,
                     bool average_attn_weights) {
    nn::AttentionOutput r;
    {
      nb::gil_scoped_release release;
      r = l.forward(q, k, v, key_padding_mask.value_or(Tensor()), need_weights, attn_mask.value_or(Tensor()),
                    average_attn_weights);
    }
    return nb::make_tuple(r.output, r.weights.defined() ? nb::cast(r.weights) : nb::none());
  };
  nb::class_<nn::MultiheadAttention, nn::Module>(m, "MultiheadAttention", doc("nn::MultiheadAttention"))
      .def(nb::init<std::int64_t, std::int64_t, double, bool, bool>(), "embed_dim"_a, "num_heads"_a, "dropout"_a = 0.0,
           "bias"_a = true, "batch_first"_a = false)
      .def("forward", mha_call, "query"_a, "key"_a, "value"_a, "key_padding_mask"_a = nb::none(),
           "need_weights"_a = true, "attn_mask"_a = nb::none(), "average_attn_weights"_a = true,
           doc("nn::MultiheadAttention::forward"))
      .def("__call__", mha_call, "query"_a, "key"_a, "value"_a, "key_padding_mask"_a = nb::none(),
           "need_weights"_a = true, "attn_mask"_a = nb::none(), "average_attn_weights"_a = true);
  auto encoder_call = [](nn::TransformerEncoderLayer& l, const Tensor& src, std::optional<Tensor> mask,
                         std::optional<Tensor> padding) {
    nb::gil_scoped_release release;
    return l.forward(src, mask.value_or(Tensor()), padding.value_or(Tensor()));
  };
  nb::class_<nn::TransformerEncoderLayer, nn::Module>(m, "TransformerEncoderLayer", doc("nn::TransformerEncoderLayer"))
      .def(nb::init<std::int64_t, std::int64_t, std::int64_t, double, const std::string&, double, bool, bool>(),
           "d_model"_a, "nhead"_a, "dim_feedforward"_a = 2048, "dropout"_a = 0.1, "activation"_a = "relu",
           "layer_norm_eps"_a = 1e-5, "batch_first"_a = false, "norm_first"_a = false)
      .def("forward", encoder_call, "src"_a, "src_mask"_a = nb::none(), "src_key_padding_mask"_a = nb::none(),
           doc("nn::TransformerEncoderLayer::forward"))
      .def("__call__", encoder_call, "src"_a, "src_mask"_a = nb::none(), "src_key_padding_mask"_a = nb::none());

  // Losses and functional ops (torch.nn.functional).
  nb::module_ f = m.def_submodule("functional", "functional forms of the layers (torch.nn.functional)");
  for (nb::module_ mod : {m, f}) {
    mod.def("mse_loss", &anvil::mse_loss, "input"_a, "target"_a, ANVIL_NOGIL, doc("mse_loss"));
    mod.def("cross_entropy", &anvil::cross_entropy, "input"_a, "target"_a, ANVIL_NOGIL, doc("cross_entropy"));
  }
  f.def("relu", &anvil::relu, "input"_a, ANVIL_NOGIL, doc("relu"));
  f.def("gelu", &anvil::gelu, "input"_a, ANVIL_NOGIL, doc("gelu"));
  f.def("softplus", &anvil::softplus, "input"_a, ANVIL_NOGIL, doc("softplus"));
  f.def("sigmoid", &anvil::sigmoid, "input"_a, ANVIL_NOGIL, doc("sigmoid"));
  f.def("tanh", &anvil::tanh, "input"_a, ANVIL_NOGIL, doc("tanh"));
  f.def("softmax", &anvil::softmax, "input"_a, "dim"_a, ANVIL_NOGIL, doc("softmax"));
  f.def("log_softmax", &anvil::log_softmax, "input"_a, "dim"_a, ANVIL_NOGIL, doc("log_softmax"));
  f.def(
      "linear",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b) { return linear(x, w, b.value_or(Tensor())); },
      "input"_a, "weight"_a, "bias"_a = nb::none(), ANVIL_NOGIL, doc("linear"));
  f.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, std::array<std::int64_t, 2> stride,
         std::array<std::int64_t, 2> padding, std::array<std::int64_t, 2> dilation,
         std::int64_t groups) { return conv2d(x, w, b.value_or(Tensor()), stride, padding, dilation, groups); },
      "input"_a, "weight"_a, "bias"_a = nb::none(), "stride"_a = std::array<std::int64_t, 2>{1, 1},
      "padding"_a = std::array<std::int64_t, 2>{0, 0}, "dilation"_a = std::array<std::int64_t, 2>{1, 1}, "groups"_a = 1,
      ANVIL_NOGIL, doc("conv2d"));
  f.def("max_pool2d", &anvil::max_pool2d, "input"_a, "kernel_size"_a, "stride"_a,
        "padding"_a = std::array<std::int64_t, 2>{0, 0}, ANVIL_NOGIL, doc("max_pool2d"));
  f.def("avg_pool2d", &anvil::avg_pool2d, "input"_a, "kernel_size"_a, "stride"_a,
        "padding"_a = std::array<std::int64_t, 2>{0, 0}, ANVIL_NOGIL, doc("avg_pool2d"));
  f.def("adaptive_avg_pool2d", &anvil::adaptive_avg_pool2d, "input"_a, "output_size"_a, ANVIL_NOGIL,
        doc("adaptive_avg_pool2d"));
  f.def("adaptive_max_pool2d", &anvil::adaptive_max_pool2d, "input"_a, "output_size"_a, ANVIL_NOGIL,
        doc("adaptive_max_pool2d"));
  f.def("embedding", &anvil::embedding, "input"_a, "weight"_a, ANVIL_NOGIL, doc("embedding"));
  f.def(
      "layer_norm",
      [](const Tensor& x, const Shape& shape, std::optional<Tensor> w, std::optional<Tensor> b, double eps) {
        return layer_norm(x, shape, w.value_or(Tensor()), b.value_or(Tensor()), eps);
      },
      "input"_a, "normalized_shape"_a, "weight"_a = nb::none(), "bias"_a = nb::none(), "eps"_a = 1e-5, ANVIL_NOGIL,
      doc("layer_norm"));
  f.def(
      "batch_norm",
      [](const Tensor& x, std::optional<Tensor> rm, std::optional<Tensor> rv, std::optional<Tensor> w,
         std::optional<Tensor> b, bool training, double momentum, double eps, std::optional<Tensor> residual,
         std::optional<std::string> activation) {
        return batch_norm(x, rm.value_or(Tensor()), rv.value_or(Tensor()), w.value_or(Tensor()), b.value_or(Tensor()),
                          training, momentum, eps, residual.value_or(Tensor()),
                          parse_activation("batch_norm", activation));
      },
      "input"_a, "running_mean"_a, "running_var"_a, "weight"_a = nb::none(), "bias"_a = nb::none(),
      "training"_a = false, "momentum"_a = 0.1, "eps"_a = 1e-5, "residual"_a = nb::none(), "activation"_a = nb::none(),
      ANVIL_NOGIL, doc("batch_norm"));
  f.def(
      "scaled_dot_product_attention",
      [](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<Tensor> mask, bool is_causal) {
        return scaled_dot_product_attention(q, k, v, mask.value_or(Tensor()), is_causal);
      },
      "query"_a, "key"_a, "value"_a, "attn_mask"_a = nb::none(), "is_causal"_a = false, ANVIL_NOGIL,
      doc("scaled_dot_product_attention"));
  f.def("dropout", &anvil::dropout, "input"_a, "p"_a = 0.5, "training"_a = true, ANVIL_NOGIL, doc("dropout"));

  // Initialisers: in place, the same tensor back.
  nb::module_ init = m.def_submodule("init", "initialisers, in place (torch.nn.init)");
  init.def(
      "normal_",
      [](nb::handle t, double mean, double std) {
        nn::init::normal_(nb::cast<Tensor&>(t), mean, std);
        return nb::borrow(t);
      },
      "tensor"_a, "mean"_a = 0.0, "std"_a = 1.0, doc("nn::init::normal_"));
  init.def(
      "uniform_",
      [](nb::handle t, double a, double b) {
        nn::init::uniform_(nb::cast<Tensor&>(t), a, b);
        return nb::borrow(t);
      },
      "tensor"_a, "a"_a = 0.0, "b"_a = 1.0, doc("nn::init::uniform_"));
  init.def(
      "constant_",
      [](nb::handle t, double v) {
        nn::init::constant_(nb::cast<Tensor&>(t), v);
        return nb::borrow(t);
      },
      "tensor"_a, "val"_a, doc("nn::init::constant_"));
  init.def(
      "zeros_",
      [](nb::handle t) {
        nn::init::zeros_(nb::cast<Tensor&>(t));
        return nb::borrow(t);
      },
      "tensor"_a, doc("nn::init::zeros_"));
  init.def(
      "ones_",
      [](nb::handle t) {
        nn::init::ones_(nb::cast<Tensor&>(t));
        return nb::borrow(t);
      },
      "tensor"_a, doc("nn::init::ones_"));
  init.def(
      "xavier_uniform_",
      [](nb::handle t, double gain) {
        nn::init::xavier_uniform_(nb::cast<Tensor&>(t), gain);
        return nb::borrow(t);
      },
      "tensor"_a, "gain"_a = 1.0, doc("nn::init::xavier_uniform_"));
  init.def(
      "xavier_normal_",
      [](nb::handle t, double gain) {
        nn::init::xavier_normal_(nb::cast<Tensor&>(t), gain);
        return nb::borrow(t);
      },
      "tensor"_a, "gain"_a = 1.0, doc("nn::init::xavier_normal_"));
  init.def(
      "kaiming_uniform_",
      [](nb::handle t, double a) {
        nn::init::kaiming_uniform_(nb::cast<Tensor&>(t), a);
        return nb::borrow(t);
      },
      "tensor"_a, "a"_a = 0.0, doc("nn::init::kaiming_uniform_"));
  init.def(
      "kaiming_normal_",
      [](nb::handle t, double a) {
        nn::init::kaiming_normal_(nb::cast<Tensor&>(t), a);
        return nb::borrow(t);
      },
      "tensor"_a, "a"_a = 0.0, doc("nn::init::kaiming_normal_"));
}

}  // namespace anvil::python
