// Training curves for the examples: a CSV (header + one row per epoch),
// when gnuplot is installed a PNG of chosen columns against the first, and
// with --tensorboard DIR (d2l_flags.h) the same columns as TensorBoard
// scalars.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "anvil/tensorboard.h"
#include "d2l_flags.h"

namespace d2l {

// Each column after the first of `rows` as a TensorBoard scalar tagged with
// its header name, at the step in the first column (the epoch), in the run
// DIR/<csv name less "_curves">: `tensorboard --logdir DIR` shows one run
// per CSV.
inline void log_tensorboard(const std::string& csv, const std::string& header,
                            const std::vector<std::vector<double>>& rows) {
  std::string run = std::filesystem::path(csv).stem().string();
  for (const std::string suffix : {"_curves", "_curve"})
    if (run.size() > suffix.size() && run.ends_with(suffix)) run.resize(run.size() - suffix.size());
  std::vector<std::string> tags;
  std::stringstream names(header);
  for (std::string name; std::getline(names, name, ',');) tags.push_back(name);
  anvil::tensorboard::SummaryWriter tb((std::filesystem::path(common_flags().tensorboard) / run).string());
  for (const auto& r : rows)
    for (std::size_t i = 1; i < r.size() && i < tags.size(); ++i)
      tb.add_scalar(tags[i], r[i], static_cast<std::int64_t>(r[0]));
  tb.close();
  std::cout << "tensorboard: " << tb.file_path() << "\n";
}

// Writes `rows` under `header` (comma-separated) to `csv`, and logs them
// for TensorBoard under --tensorboard's folder when it is given.
// The folder is made when missing (--out-dir runs/x, as os.makedirs in a
// PyTorch script), and the file is written whole or not at all: a write that
// fails says so rather than leaving nothing behind silently.
inline void write_csv(const std::string& csv, const std::string& header, const std::vector<std::vector<double>>& rows) {
  const std::filesystem::path path(csv);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const std::string partial = csv + ".partial";
  {
    std::ofstream f(partial);
    f << header << "\n";
    for (const auto& r : rows) {
      for (std::size_t i = 0; i < r.size(); ++i) f << (i ? "," : "") << r[i];
      f << "\n";
    }
    if (!f.flush()) throw std::runtime_error("write_csv: could not write " + partial);
  }
  std::filesystem::rename(partial, csv);
  std::cout << "curves: " << csv << "\n";
  if (!common_flags().tensorboard.empty()) log_tensorboard(csv, header, rows);
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
