// anvil-bench — the chapter's exercises as named scenarios (DESIGN §6).
//
//   anvil-bench                                   every scenario on try_all_gpus() + cpu
//   anvil-bench matmul sync-log --quick           some of them, small sizes
//   anvil-bench two-devices --devices opencl:0,opencl:1
//   anvil-bench transfer --csv > transfer.csv     or --json; --plot out.svg via gnuplot
//
// Each scenario prints its tables and a one-line conclusion. Errors are one
// line on stderr and exit status 1.
#include <anvil/anvil.h>
#include <anvil/profiler.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "report.h"
#include "scenarios.h"

namespace {

std::vector<anvil::Device> parse_devices(const std::string& list) {
  std::vector<anvil::Device> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    const anvil::Device d(item);
    (void)anvil::properties(d);  // DeviceError / NotCompiled naming it when it does not exist
    bool seen = false;
    for (anvil::Device e : out) seen = seen || e == d;
    if (!seen) out.push_back(d);
  }
  ANVIL_CHECK(!out.empty(), anvil::ValueError, "anvil-bench --devices: no device given; expected a list such as ",
              "cpu,opencl:0, got '", list, "'");
  return out;
}

// The clock anvil::Event times `d` with: "device" (its own) or "host".
std::string clock_of(anvil::Device d) { return anvil::Event::record(d).on_device_clock() ? "device" : "host"; }

}  // namespace

int main(int argc, char** argv) {
  using namespace anvil::bench;
  CLI::App app{"anvil-bench: the GPUs chapter's exercises, measured on your devices"};
  std::vector<std::string> names;
  std::string device_list, plot_path, profile_path;
  bool quick = false, csv = false, json = false, list = false;
  std::string choices;
  for (const Scenario& s : scenarios()) choices += std::string(choices.empty() ? "" : ", ") + s.name;
  app.add_option("scenario", names, "scenarios to run (default: all): " + choices);
  app.add_option("--devices", device_list,
                 "comma-separated devices, e.g. cpu,opencl:0,opencl:1 "
                 "(default: try_all_gpus() then cpu)");
  app.add_flag("--quick", quick, "small sizes and few repeats (what CI runs)");
  auto* csv_flag = app.add_flag("--csv", csv, "print CSV instead of tables");
  app.add_flag("--json", json, "print one JSON document instead of tables")->excludes(csv_flag);
  app.add_option("--plot", plot_path, "also plot to a .png or .svg file through gnuplot");
  app.add_flag("--list", list, "list the scenarios and exit");
  app.add_option("--profile", profile_path,
                 "profile the scenarios (anvil/profiler.h): a Chrome trace to this file, and the top ops printed at "
                 "the end (to stderr with --csv or --json); its markers slow small ops, so read timings without it");
  CLI11_PARSE(app, argc, argv);

  try {
    if (list) {
      for (const Scenario& s : scenarios()) std::cout << s.name << "\t" << s.summary << "\n";
      return 0;
    }
    std::vector<const Scenario*> chosen;
    for (const std::string& n : names) {
      const Scenario* found = nullptr;
      for (const Scenario& s : scenarios())
        if (n == s.name) found = &s;
      ANVIL_CHECK(found != nullptr, anvil::ValueError, "anvil-bench: unknown scenario; expected one of ", choices,
                  ", got '", n, "'");
      chosen.push_back(found);
    }
    if (chosen.empty())
      for (const Scenario& s : scenarios()) chosen.push_back(&s);
    if (!plot_path.empty()) {
      const std::string missing = gnuplot_missing();
      ANVIL_CHECK(missing.empty(), anvil::IOError, "anvil-bench --plot: cannot plot; expected gnuplot, got none; ",
                  missing);
    }

    Options options;
    options.quick = quick;
    if (device_list.empty()) {
      options.devices = anvil::try_all_gpus();
      if (!options.devices.front().is_cpu()) options.devices.push_back(anvil::cpu());
    } else {
      options.devices = parse_devices(device_list);
    }

    const bool text = !csv && !json;
    if (text) {
      std::cout << "anvil-bench " << anvil::kVersion << "  devices: " << options.devices
                << "  mode: " << (quick ? "quick" : "full") << "\ntiming: " << kTimingNote << "\nclocks:";
      for (std::size_t i = 0; i < options.devices.size(); ++i)
        std::cout << (i ? ", " : " ") << options.devices[i] << " " << clock_of(options.devices[i]);
      std::cout << "\n";
      if (anvil::gpu_count() == 0) std::cout << "no accelerator: " << anvil::try_gpu_reason(0) << "\n";
      std::cout << "\n";
    }
    std::unique_ptr<anvil::profiler::Profile> profile;
    if (!profile_path.empty()) profile = std::make_unique<anvil::profiler::Profile>();
    std::vector<ScenarioResult> results;
    for (const Scenario* s : chosen) {
      results.push_back(s->run(options));
      if (text) print_text(std::cout, results.back());
      if (csv) print_csv(std::cout, results.back());
      std::cout.flush();
    }
    if (json) {
      nlohmann::json doc = {{"anvil_version", anvil::kVersion},
                            {"mode", quick ? "quick" : "full"},
                            {"timing", kTimingNote},
                            {"devices", nlohmann::json::array()},
                            {"scenarios", nlohmann::json::array()}};
      for (anvil::Device d : options.devices)
        doc["devices"].push_back({{"device", d.str()}, {"name", anvil::properties(d).name}, {"clock", clock_of(d)}});
      for (const auto& r : results) doc["scenarios"].push_back(to_json(r));
      std::cout << doc.dump(2) << "\n";
    }
    if (profile) {
      profile->stop();
      profile->write_trace(profile_path);
      std::ostream& out = json || csv ? std::cerr : std::cout;
      out << "\nprofile: the top 15 ops by host time (anvil::profiler)\n"
          << profile->table({.sort_by = anvil::profiler::SortBy::HostTotal, .row_limit = 15});
      if (!profile->sync_sites().empty()) out << "\nhost syncs by call site\n" << profile->sync_table(15);
      out << "profile: trace written to " << profile_path << " (open it in https://ui.perfetto.dev)\n";
    }
    if (!plot_path.empty()) {
      for (const std::string& f : plot(results, plot_path))
        (json || csv ? std::cerr : std::cout) << "plot: " << f << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "anvil-bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
