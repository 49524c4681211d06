// What a scenario produces (tables and a one-line conclusion) and the ways
// anvil-bench prints it: aligned text, CSV, JSON, and plots through gnuplot.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace anvil::bench {

using Cell = std::variant<std::string, double, std::int64_t>;

struct PlotSpec {
  int x = -1, y = -1, series = -1;  // column indices; x < 0: no plot
  bool logx = false, logy = false;
  bool boxes = false;  // a bar per row (x is a label), else lines per series
  std::string ylabel;
};

struct Table {
  std::string title;
  std::vector<std::string> columns;  // names carry the unit: time_ms, gflops
  std::vector<std::vector<Cell>> rows;
  PlotSpec plot;
};

struct ScenarioResult {
  std::string name;
  std::vector<Table> tables;
  std::string conclusion;  // one line
};

void print_text(std::ostream& os, const ScenarioResult& r);
void print_csv(std::ostream& os, const ScenarioResult& r);
nlohmann::json to_json(const ScenarioResult& r);

// Plots every scenario's plottable tables to `path` (.png or .svg); with
// several, to <stem>-<scenario>.<ext>. Returns the files written; throws
// ValueError for another extension, IOError when gnuplot fails.
std::vector<std::string> plot(const std::vector<ScenarioResult>& results, const std::string& path);
// "" when gnuplot is on PATH, else why not.
std::string gnuplot_missing();

}  // namespace anvil::bench
