#include "report.h"

#include <anvil/error.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

namespace anvil::bench {
namespace {

std::string format(const Cell& c) {
  if (const auto* s = std::get_if<std::string>(&c)) return *s;
  if (const auto* i = std::get_if<std::int64_t>(&c)) return std::to_string(*i);
  const double v = std::get<double>(c);
  if (!std::isfinite(v)) return "n/a";
  std::ostringstream os;
  // Three significant digits at least, no exponent for the ranges we print.
  const double a = std::fabs(v);
  os << std::fixed << std::setprecision(a >= 100 ? 1 : a >= 1 ? 3 : a >= 0.01 ? 4 : 6) << v;
  return os.str();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

bool is_number(const Cell& c) { return !std::holds_alternative<std::string>(c); }

}  // namespace

void print_text(std::ostream& os, const ScenarioResult& r) {
  os << "== " << r.name << "\n";
  for (const Table& t : r.tables) {
    os << t.title << "\n";
    std::vector<std::size_t> w(t.columns.size());
    std::vector<std::vector<std::string>> cells;
    for (std::size_t c = 0; c < w.size(); ++c) w[c] = t.columns[c].size();
    for (const auto& row : t.rows) {
      cells.emplace_back();
      for (std::size_t c = 0; c < row.size(); ++c) {
        cells.back().push_back(format(row[c]));
        w[c] = std::max(w[c], cells.back().back().size());
      }
    }
    auto line = [&](const std::vector<std::string>& v, const std::vector<Cell>* row) {
      std::ostringstream l;
      l << " ";
      for (std::size_t c = 0; c < v.size(); ++c) {
        // Numbers right-aligned, text left-aligned.
        const bool right = row != nullptr && is_number((*row)[c]);
        l << " " << (right ? std::right : std::left) << std::setw(static_cast<int>(w[c])) << v[c];
      }
      std::string text = l.str();
      text.erase(text.find_last_not_of(' ') + 1);
      os << text << "\n";
    };
    line(t.columns, nullptr);
    for (std::size_t i = 0; i < cells.size(); ++i) line(cells[i], &t.rows[i]);
  }
  os << "conclusion: " << r.conclusion << "\n\n";
}

void print_csv(std::ostream& os, const ScenarioResult& r) {
  for (const Table& t : r.tables) {
    os << "scenario,table";
    for (const auto& c : t.columns) os << "," << csv_field(c);
    os << "\n";
    for (const auto& row : t.rows) {
      os << csv_field(r.name) << "," << csv_field(t.title);
      for (const Cell& c : row) {
        if (const auto* d = std::get_if<double>(&c); d != nullptr && !std::isfinite(*d))
          os << ",";
        else
          os << "," << csv_field(format(c));
      }
      os << "\n";
    }
    os << "\n";
  }
}

nlohmann::json to_json(const ScenarioResult& r) {
  nlohmann::json tables = nlohmann::json::array();
  for (const Table& t : r.tables) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : t.rows) {
      nlohmann::json obj = nlohmann::json::object();
      for (std::size_t c = 0; c < row.size(); ++c) {
        std::visit(
            [&](const auto& v) {
              using V = std::decay_t<decltype(v)>;
              if constexpr (std::is_same_v<V, double>)
                obj[t.columns[c]] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
              else
                obj[t.columns[c]] = v;
            },
            row[c]);
      }
      rows.push_back(obj);
    }
    tables.push_back({{"title", t.title}, {"columns", t.columns}, {"rows", rows}});
  }
  return {{"name", r.name}, {"tables", tables}, {"conclusion", r.conclusion}};
}

std::string gnuplot_missing() {
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) return "";
  return "gnuplot is not on PATH (install gnuplot-nox)";
}

std::vector<std::string> plot(const std::vector<ScenarioResult>& results, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string ext = p.extension().string();
  ANVIL_CHECK(ext == ".png" || ext == ".svg", ValueError, "anvil-bench --plot: unknown image type; expected a ",
              "path ending in .png or .svg, got ", path);
  const std::string missing = gnuplot_missing();
  ANVIL_CHECK(missing.empty(), IOError, "anvil-bench --plot: cannot plot; expected gnuplot, got none; ", missing);

  std::vector<const ScenarioResult*> plottable;
  for (const auto& r : results)
    for (const auto& t : r.tables)
      if (t.plot.x >= 0 && !t.rows.empty()) {
        plottable.push_back(&r);
        break;
      }
  std::vector<std::string> written;
  const fs::path dir = fs::temp_directory_path();
  for (const ScenarioResult* r : plottable) {
    const Table* t = nullptr;
    for (const auto& table : r->tables)
      if (table.plot.x >= 0 && !table.rows.empty()) t = &table;
    fs::path out = p;
    if (plottable.size() > 1) out = p.parent_path() / (p.stem().string() + "-" + r->name + ext);

    // One data block per series, separated by two blank lines (gnuplot's index).
    std::map<std::string, std::vector<const std::vector<Cell>*>> series;
    std::vector<std::string> order;
    for (const auto& row : t->rows) {
      // Bars share one block, labelled "<series> <x>"; lines get a block per series.
      const bool own_block = t->plot.series >= 0 && !t->plot.boxes;
      const std::string key = own_block ? format(row[t->plot.series]) : t->columns[t->plot.y];
      if (!series.count(key)) order.push_back(key);
      series[key].push_back(&row);
    }
    const fs::path data = dir / ("anvil-bench-" + std::to_string(::getpid()) + "-" + r->name + ".dat");
    const fs::path script = dir / ("anvil-bench-" + std::to_string(::getpid()) + "-" + r->name + ".gp");
    {
      std::ofstream d(data);
      for (const auto& key : order) {
        for (const auto* row : series[key]) {
          std::string label = format((*row)[t->plot.x]);
          if (t->plot.boxes && t->plot.series >= 0) label = format((*row)[t->plot.series]) + " " + label;
          if (t->plot.boxes) label = '"' + label + '"';
          d << label << " " << format((*row)[t->plot.y]) << "\n";
        }
        d << "\n\n";
      }
      std::ofstream s(script);
      s << (ext == ".png" ? "set terminal pngcairo size 900,560\n" : "set terminal svg size 900,560\n");
      s << "set output '" << out.string() << "'\n";
      s << "set title '" << r->name << ": " << t->title << "' noenhanced\n";
      s << "set key outside right noenhanced\nset grid\n";
      s << "set ylabel '" << t->plot.ylabel << "'\nset xlabel '" << t->columns[t->plot.x] << "' noenhanced\n";
      if (t->plot.logx) s << "set logscale x 2\n";
      if (t->plot.logy) s << "set logscale y\n";
      if (t->plot.boxes)
        s << "set style fill solid 0.6\nset boxwidth 0.6\nset yrange [0:*]\nset xtics rotate by -30 noenhanced\n";
      s << "plot ";
      for (std::size_t i = 0; i < order.size(); ++i) {
        s << (i ? ", " : "") << "'" << data.string() << "' index " << i;
        if (t->plot.boxes)
          s << " using 0:2:xtic(1) with boxes";
        else
          s << " using 1:2 with linespoints";
        s << " title '" << order[i] << "'";
      }
      s << "\n";
    }
    const int rc = std::system(("gnuplot '" + script.string() + "' 2>&1").c_str());
    fs::remove(data);
    fs::remove(script);
    ANVIL_CHECK(rc == 0 && fs::exists(out), IOError, "anvil-bench --plot: gnuplot failed; expected ", out.string(),
                ", got exit status ", rc);
    written.push_back(out.string());
  }
  return written;
}

}  // namespace anvil::bench
