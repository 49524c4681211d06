// save_checkpoint / load_checkpoint: model, optimiser state and position in
// one safetensors file; rank 0 writes in a distributed run.
#include <charconv>

#include "anvil/dist.h"
#include "anvil/io.h"
#include "anvil/nn/parallel.h"

namespace anvil::nn {

namespace {

std::int64_t parse_meta(const std::string& path, const std::map<std::string, std::string>& meta,
                        const std::string& key) {
  const auto it = meta.find(key);
  ANVIL_CHECK(it != meta.end(), IOError, "load_checkpoint: '", path, "' has no '", key,
              "' in its metadata; expected a file written by save_checkpoint");
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  ANVIL_CHECK(ec == std::errc() && end == it->second.data() + it->second.size() && v >= 0, IOError,
              "load_checkpoint: '", path, "': metadata '", key, "' must be a non-negative integer; got \"", it->second,
              "\"");
  return v;
}

}  // namespace

void save_checkpoint(const std::string& path, const Module& model, const optim::Optimizer& optimizer,
                     TrainingPosition position, dist::ProcessGroup* group) {
  ANVIL_CHECK(position.epoch >= 0 && position.step >= 0, ValueError,
              "save_checkpoint: expected a non-negative epoch and step, got ", position.epoch, " and ", position.step);
  const bool distributed = group != nullptr && group->size() > 1;
  // Only rank 0 writes: every replica holds the same state. The io layer
  // writes atomically (temporary file, fsync, rename), so a reader never
  // sees half a checkpoint even if rank 0 dies while writing.
  std::string failure;  // rank 0's error, in a distributed run
  if (group == nullptr || group->rank() == 0) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [n, t] : model.state_dict()) tensors.emplace_back("model." + n, t);
    for (const auto& [n, t] : optimizer.state_dict()) tensors.emplace_back("optim." + n, t);
    try {
      save_safetensors(path, tensors,
                       {{"format", "anvil-checkpoint-1"},
                        {"epoch", std::to_string(position.epoch)},
                        {"step", std::to_string(position.step)}});
    } catch (const std::exception& e) {
      if (!distributed) throw;
      failure = *e.what() != '\0' ? e.what() : "unknown error";
    }
  }
  if (!distributed) return;
  // The others return only once the file is complete, and learn whether it
  // was written: rank 0 sends the length of its error message (0: written),
  // then the message, so every rank raises the same IOError at once instead
  // of waiting for a collective rank 0 will never join.
  Tensor length = full({1}, static_cast<std::int64_t>(failure.size()), cpu(), i64);
  group->broadcast(length, 0).wait();
  const std::int64_t n = length.item<std::int64_t>();
  if (n == 0) return;
  Tensor message = zeros({n}, u8, cpu());
  if (group->rank() == 0) message = from_host(failure.data(), {n}, u8, cpu());
  group->broadcast(message, 0).wait();
  const auto bytes = message.to_vector<std::uint8_t>();
  throw IOError(
      detail::cat("save_checkpoint: rank 0 could not write '", path, "': ", std::string(bytes.begin(), bytes.end())));
}

TrainingPosition load_checkpoint(const std::string& path, Module& model, optim::Optimizer& optimizer) {
  const SafetensorsHeader header = read_safetensors_header(path);
  const auto format = header.metadata.find("format");
  ANVIL_CHECK(format != header.metadata.end() && format->second == "anvil-checkpoint-1", IOError, "load_checkpoint: '",
              path, "' is not an anvil checkpoint; expected metadata format \"anvil-checkpoint-1\", got ",
              format == header.metadata.end() ? std::string("none") : "\"" + format->second + "\"");
  TrainingPosition position{parse_meta(path, header.metadata, "epoch"), parse_meta(path, header.metadata, "step")};
  // Each rank reads onto its own device: the model's.
  const std::vector<Device> devices = model.devices();
  const Device device = devices.empty() ? cpu() : devices.front();
  StateDict model_state;
  std::map<std::string, Tensor> optim_state;
  for (auto& [key, t] : load_safetensors(path, device)) {
    if (key.rfind("model.", 0) == 0) {
      model_state[key.substr(6)] = t;
    } else if (key.rfind("optim.", 0) == 0) {
      optim_state[key.substr(6)] = t;
    } else {
      throw IOError(detail::cat("load_checkpoint: '", path, "' holds an unexpected tensor '", key,
                                "'; expected names starting with model. or optim."));
    }
  }
  model.load_state_dict(model_state, true);
  optimizer.load_state_dict(optim_state);
  return position;
}

}  // namespace anvil::nn
