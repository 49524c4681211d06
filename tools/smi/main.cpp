// anvil-smi — nvidia-smi for every anvil backend (DESIGN §6).
//
//   anvil-smi                  one table: every device anvil can see
//   anvil-smi --json           the same as JSON (schema: anvil-smi.schema.json)
//   anvil-smi --watch 2        refresh every 2 seconds (--count N to stop)
//
// A missing driver, runtime or NVML is reported, never an error: the exit
// status is 0 whatever is missing. Only the public API is used.
#include <anvil/anvil.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nvml.h"
#include "pci.h"

namespace {

using anvil::Device;
using anvil::DeviceType;
using nlohmann::json;

constexpr int kSchemaVersion = 2;  // 2: "cudnn" (issue 30)

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Whether a backend is built in, asked through the public API: a backend that
// is not compiled in answers NotCompiled, one with no device DeviceError.
bool compiled_in(DeviceType type) {
  if (anvil::device_count(type) > 0) return true;
  try {
    (void)anvil::properties(Device(type, 0));
    return true;
  } catch (const anvil::NotCompiled&) {
    return false;
  } catch (const anvil::Error&) {
    return true;
  }
}

json nvml_json(const anvil::smi::NvmlReport& r) {
  json gpus = json::array();
  for (const auto& g : r.gpus) {
    json procs = json::array();
    for (const auto& p : g.processes)
      procs.push_back({{"pid", p.pid}, {"name", p.name}, {"used_memory_bytes", opt(p.used_bytes)}});
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"uuid", g.uuid},
                    {"pci_bus_id", g.pci_bus_id},
                    {"utilization_gpu_percent", opt(g.utilization_gpu)},
                    {"utilization_memory_percent", opt(g.utilization_memory)},
                    {"temperature_c", opt(g.temperature_c)},
                    {"power_w", opt(g.power_w)},
                    {"power_limit_w", opt(g.power_limit_w)},
                    {"memory_total_bytes", opt(g.memory_total)},
                    {"memory_used_bytes", opt(g.memory_used)},
                    {"processes", procs}});
  }
  return {{"available", r.available},
          {"reason", r.reason},
          {"driver_version", r.available ? json(r.driver_version) : json(nullptr)},
          {"nvml_version", r.available ? json(r.nvml_version) : json(nullptr)},
          {"gpus", gpus}};
}

// cuDNN beside the CUDA backend (anvil::backends::cudnn).
json cudnn_json() {
  const bool available = anvil::backends::cudnn::is_available();
  return {{"available", available},
          {"enabled", anvil::backends::cudnn::enabled()},
          {"version", available ? json(anvil::backends::cudnn::version()) : json(nullptr)},
          {"status", anvil::backends::cudnn::status()}};
}

// Everything anvil-smi shows, as one JSON document; the text view is
// rendered from it, so the two never disagree.
json snapshot() {
  const anvil::smi::NvmlReport nvml = anvil::smi::query_nvml();
  const json nvml_doc = nvml_json(nvml);

  json backends = json::array();
  std::vector<std::string> compiled;
  for (DeviceType type : {DeviceType::CPU, DeviceType::CUDA, DeviceType::OpenCL}) {
    const bool built = compiled_in(type);
    if (built) compiled.emplace_back(anvil::to_string(type));
    backends.push_back({{"type", std::string(anvil::to_string(type))},
                        {"compiled", built},
                        {"device_count", anvil::device_count(type)},
                        {"reason", anvil::device_unavailable_reason(type)}});
  }

  std::vector<Device> accelerators;
  if (anvil::gpu_count() > 0) accelerators = anvil::try_all_gpus();

  std::vector<std::string> nvml_bus_ids;
  for (const auto& g : nvml.gpus) nvml_bus_ids.push_back(g.pci_bus_id);

  json devices = json::array();
  for (Device d : anvil::all_devices()) {
    json row = {{"device", d.str()}, {"type", std::string(anvil::to_string(d.type()))}, {"index", d.index()}};
    json gpu_index = nullptr;
    for (std::size_t i = 0; i < accelerators.size(); ++i)
      if (accelerators[i] == d) gpu_index = static_cast<int>(i);
    row["gpu_index"] = gpu_index;
    std::string error;
    std::string bus_id;
    try {
      const anvil::DeviceProperties p = anvil::properties(d);
      bus_id = p.pci_bus_id;
      const bool free_known = p.memory_free > 0;
      row.update({{"name", p.name},
                  {"vendor", p.vendor},
                  {"kind", p.kind},
                  {"memory",
                   {{"total_bytes", p.memory_total},
                    {"free_bytes", free_known ? json(p.memory_free) : json(nullptr)},
                    {"used_bytes", free_known ? json(p.memory_total - p.memory_free) : json(nullptr)}}},
                  {"compute_units", p.compute_units},
                  {"clock_mhz", p.clock_mhz},
                  {"driver_version", p.driver_version},
                  {"runtime_version", p.runtime_version},
                  {"fp64", p.fp64},
                  {"fp16", p.fp16},
                  {"compute_capability", p.compute_capability.empty() ? json(nullptr) : json(p.compute_capability)},
                  {"l2_cache_bytes", p.l2_cache_bytes == 0 ? json(nullptr) : json(p.l2_cache_bytes)},
                  {"pci_bus_id", p.pci_bus_id.empty() ? json(nullptr) : json(p.pci_bus_id)}});
      const anvil::MemoryStats s = anvil::memory_stats(d);
      row["anvil_memory"] = {{"allocated_bytes", s.allocated},
                             {"reserved_bytes", s.reserved},
                             {"peak_allocated_bytes", s.peak_allocated},
                             {"limit_bytes", s.limit == 0 ? json(nullptr) : json(s.limit)}};
    } catch (const std::exception& e) {
      error = e.what();
    }
    row["error"] = error.empty() ? json(nullptr) : json(error);
    // NVML's row for cuda:N is the one on the same PCI bus: the indices
    // differ under CUDA_VISIBLE_DEVICES and CUDA's default (fastest first) order.
    json gpu_nvml = nullptr;
    if (d.type() == DeviceType::CUDA)
      if (const int r = anvil::smi::nvml_row_for({bus_id}, nvml_bus_ids).front(); r >= 0)
        gpu_nvml = nvml_doc["gpus"][r];
    row["nvml"] = gpu_nvml;
    devices.push_back(row);
  }

  return {{"schema_version", kSchemaVersion},
          {"anvil_version", anvil::kVersion},
          {"timestamp", utc_now()},
          {"backends_compiled", compiled},
          {"backends", backends},
          {"devices", devices},
          {"nvml", nvml_doc},
          {"cudnn", cudnn_json()}};
}

// ---- text view --------------------------------------------------------------

std::string mib(const json& bytes) {
  if (bytes.is_null()) return "n/a";
  return std::to_string(bytes.get<std::uint64_t>() >> 20) + "MiB";
}

std::string or_na(const json& v, const std::string& unit = "") {
  if (v.is_null()) return "n/a";
  std::ostringstream os;
  if (v.is_number_float())
    os << std::fixed << std::setprecision(0) << v.get<double>();
  else
    os << v;
  return os.str() + unit;
}

std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

void print_table(std::ostream& os, const std::vector<std::string>& head,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& r : rows) w[c] = std::max(w[c], r[c].size());
  }
  auto rule = [&] {
    os << "+";
    for (std::size_t c : w) os << std::string(c + 2, '-') << "+";
    os << "\n";
  };
  auto line = [&](const std::vector<std::string>& r) {
    os << "|";
    for (std::size_t c = 0; c < r.size(); ++c)
      os << " " << std::left << std::setw(static_cast<int>(w[c])) << r[c] << " |";
    os << "\n";
  };
  rule();
  line(head);
  rule();
  for (const auto& r : rows) line(r);
  rule();
}

void print_text(std::ostream& os, const json& doc) {
  std::string compiled;
  for (const auto& b : doc["backends_compiled"]) compiled += (compiled.empty() ? "" : ", ") + b.get<std::string>();
  os << "anvil-smi " << text_of(doc["anvil_version"]) << "   " << text_of(doc["timestamp"])
     << "   backends compiled in: " << compiled << "\n";
  const json& nvml = doc["nvml"];
  os << "NVML: "
     << (nvml["available"].get<bool>() ? "driver " + text_of(nvml["driver_version"])
                                       : "n/a (" + text_of(nvml["reason"]) + ")")
     << "\n";
  const json& cudnn = doc["cudnn"];
  os << "cuDNN: "
     << (cudnn["available"].get<bool>() && cudnn["enabled"].get<bool>() ? text_of(cudnn["status"])
                                                                        : "n/a (" + text_of(cudnn["status"]) + ")")
     << "\n";

  std::vector<std::vector<std::string>> rows;
  for (const json& d : doc["devices"]) {
    const std::string gpu = d["gpu_index"].is_null() ? "-" : "gpu(" + d["gpu_index"].dump() + ")";
    if (!d["error"].is_null()) {
      rows.push_back({text_of(d["device"]), "error: " + text_of(d["error"]), "", gpu, "", "", "", "", "", "", "", ""});
      continue;
    }
    const json& m = d["memory"];
    const json& am = d["anvil_memory"];
    const json& n = d["nvml"];
    const auto nv = [&](const char* key, const std::string& unit) { return n.is_null() ? "n/a" : or_na(n[key], unit); };
    const std::string cc = d["compute_capability"].is_null() ? "" : " (sm " + text_of(d["compute_capability"]) + ")";
    rows.push_back({text_of(d["device"]), text_of(d["name"]) + cc, text_of(d["kind"]), gpu,
                    mib(m["used_bytes"]) + " / " + mib(m["total_bytes"]),
                    mib(am["reserved_bytes"]) + " / " + mib(am["allocated_bytes"]), d["compute_units"].dump(),
                    d["clock_mhz"].get<int>() > 0 ? d["clock_mhz"].dump() + "MHz" : "n/a",
                    nv("utilization_gpu_percent", "%"), nv("temperature_c", "C"), nv("power_w", "W"),
                    text_of(d["driver_version"]) + " / " + text_of(d["runtime_version"])});
  }
  print_table(os,
              {"device", "name", "kind", "as", "memory used / total", "anvil reserved / allocated", "CUs", "clock",
               "util", "temp", "power", "driver / runtime"},
              rows);

  for (const json& b : doc["backends"]) {
    if (b["device_count"].get<int>() > 0) continue;
    os << text_of(b["type"]) << ": no devices — "
       << (b["compiled"].get<bool>() ? text_of(b["reason"]) : "not compiled in (" + text_of(b["reason"]) + ")") << "\n";
  }

  // The driver's view of NVIDIA GPUs (also when anvil has no CUDA backend).
  if (nvml["available"].get<bool>() && !nvml["gpus"].empty()) {
    std::vector<std::vector<std::string>> gpus, procs;
    for (const json& g : nvml["gpus"]) {
      gpus.push_back({g["index"].dump(), text_of(g["name"]), or_na(g["utilization_gpu_percent"], "%"),
                      or_na(g["temperature_c"], "C"), or_na(g["power_w"], "W") + " / " + or_na(g["power_limit_w"], "W"),
                      mib(g["memory_used_bytes"]) + " / " + mib(g["memory_total_bytes"])});
      for (const json& p : g["processes"])
        procs.push_back({g["index"].dump(), p["pid"].dump(), text_of(p["name"]), mib(p["used_memory_bytes"])});
    }
    os << "NVIDIA GPUs (NVML)\n";
    print_table(os, {"GPU", "name", "util", "temp", "power / cap", "memory used / total"}, gpus);
    os << "Processes\n";
    if (procs.empty()) procs.push_back({"-", "-", "no running processes found", "-"});
    print_table(os, {"GPU", "PID", "process name", "GPU memory"}, procs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"anvil-smi: every device anvil can see, with memory, compute units and driver versions"};
  bool as_json = false, list = false;
  double watch = 0;
  int count = 0;
  app.add_flag("--json", as_json,
               "print JSON (schema: tools/smi/anvil-smi.schema.json; one document per line with --watch)");
  app.add_option("--watch", watch, "refresh every SECONDS")->check(CLI::Range(0.1, 86400.0));
  app.add_option("--count", count, "with --watch: stop after N reports (0: run until interrupted)")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("-L,--list", list, "one line per device: \"cuda:0: <name>\" (like nvidia-smi -L)");
  CLI11_PARSE(app, argc, argv);

  try {
    if (list) {
      for (const Device d : anvil::all_devices()) std::cout << d << ": " << anvil::properties(d).name << "\n";
      return 0;
    }
    for (int n = 1;; ++n) {
      const json doc = snapshot();
      if (as_json)
        std::cout << doc.dump(watch > 0 ? -1 : 2) << "\n";
      else
        print_text(std::cout, doc);
      std::cout.flush();
      if (watch <= 0 || (count > 0 && n >= count)) break;
      if (!as_json) std::cout << "\n";
      std::this_thread::sleep_for(std::chrono::duration<double>(watch));
    }
  } catch (const std::exception& e) {
    // Enumeration never throws; this is a bug or an unwritable stdout.
    std::cerr << "anvil-smi: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
