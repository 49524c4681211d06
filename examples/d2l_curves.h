// Training curves for the examples: a CSV (header + one row per epoch) and,
// when gnuplot is installed, a PNG of chosen columns against the first.
#pragma once

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace d2l {

// Writes `rows` under `header` (comma-separated) to `csv`.
inline void write_csv(const std::string& csv, const std::string& header, const std::vector<std::vector<double>>& rows) {
  std::ofstream f(csv);
  f << header << "\n";
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < r.size(); ++i) f << (i ? "," : "") << r[i];
    f << "\n";
  }
  std::cout << "curves: " << csv << "\n";
}

// Plots columns (1-based index, title) of `csv` against column 1.
inline void plot(const std::string& csv, const std::string& png, const std::string& title, const std::string& xlabel,
                 const std::vector<std::pair<int, std::string>>& columns) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    std::cout << "(gnuplot not found: skipping " << png << ")\n";
    return;
  }
  std::string lines;
  for (const auto& [col, name] : columns)
    lines += (lines.empty() ? "'" + csv + "'" : std::string(", ''")) + " using 1:" + std::to_string(col) +
             " with linespoints title '" + name + "'";
  const std::string script = "set terminal pngcairo size 800,500; set output '" + png +
                             "'; set datafile separator ','; set key autotitle columnhead; set xlabel '" + xlabel +
                             "'; set title '" + title + "'; plot " + lines;
  const std::string cmd = "gnuplot -e \"" + script + "\" 2>/dev/null";
  if (std::system(cmd.c_str()) == 0)
    std::cout << "plot: " << png << "\n";
  else
    std::cout << "(gnuplot failed: no plot written)\n";
}

}  // namespace d2l
