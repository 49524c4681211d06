// What a stopped profile reports: the per-op table (torch.profiler's
// key_averages().table()), the sync sites, memory totals and the Chrome trace.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "io/file_util.h"
#include "profiler/session.h"

namespace anvil::profiler {

namespace {

std::string format_time(double us) {
  char buf[32];
  if (us >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3fs", us * 1e-6);
  else if (us >= 1e3)
    std::snprintf(buf, sizeof buf, "%.3fms", us * 1e-3);
  else
    std::snprintf(buf, sizeof buf, "%.3fus", us);
  return buf;
}

std::string format_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes < 0 ? -bytes : bytes);
  char buf[32];
  const char* sign = bytes < 0 ? "-" : "";
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%s%.2f GB", sign, b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024)
    std::snprintf(buf, sizeof buf, "%s%.2f MB", sign, b / (1024.0 * 1024));
  else if (b >= 1024.0)
    std::snprintf(buf, sizeof buf, "%s%.2f KB", sign, b / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%s%lld B", sign, static_cast<long long>(b));
  return buf;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// Device time of one span: its device-clock span, or on the CPU (whose ops
// run on the calling thread) the op's own host span.
double device_us(const TraceEvent& e) {
  if (e.has_device_span) return e.device_duration_us;
  const bool runs_on_device = e.category == "op" || e.category == "backward" || e.category == "copy";
  return runs_on_device && e.device.is_cpu() ? e.duration_us : 0.0;
}

std::string fit(const std::string& s, std::size_t width) {
  if (s.size() <= width) return s;
  return s.substr(0, width - 3) + "...";
}

}  // namespace

std::vector<OpStats> Profile::key_averages(bool group_by_shape) {
  const std::vector<TraceEvent>& events = this->events();
  std::vector<OpStats> rows;
  std::vector<std::uint64_t> region_threads;  // per row, summed
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  for (const TraceEvent& e : events) {
    const std::string shapes = group_by_shape ? e.shapes : std::string();
    auto [it, inserted] = index.try_emplace({e.name, shapes}, rows.size());
    if (inserted) {
      OpStats s;
      s.name = e.name;
      s.category = e.category;
      s.shapes = shapes;
      rows.push_back(std::move(s));
      region_threads.push_back(0);
    }
    OpStats& s = rows[it->second];
    ++s.calls;
    s.host_total_us += e.duration_us;
    s.host_self_us += e.self_us;
    s.device_total_us += device_us(e);
    s.memory_bytes += e.memory_bytes;
    s.regions += e.regions;
    s.region_us += e.region_us;
    region_threads[it->second] += e.region_threads;
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    OpStats& s = rows[i];
    if (s.regions > 0) s.threads = static_cast<double>(region_threads[i]) / static_cast<double>(s.regions);
    s.serial_us = std::max(0.0, s.host_self_us - s.region_us);
  }
  return rows;
}

std::string Profile::table(const TableOptions& options) {
  std::vector<OpStats> rows = key_averages(options.group_by_shape);
  auto key = [&](const OpStats& s) -> double {
    switch (options.sort_by) {
      case SortBy::HostTotal:
        return s.host_total_us;
      case SortBy::HostSelf:
        return s.host_self_us;
      case SortBy::DeviceTotal:
        return s.device_total_us;
      case SortBy::Calls:
        return static_cast<double>(s.calls);
      case SortBy::Memory:
        return static_cast<double>(s.memory_bytes);
      case SortBy::Name:
        return 0;
    }
    return 0;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const OpStats& a, const OpStats& b) {
    if (options.sort_by == SortBy::Name) return a.name < b.name;
    return key(a) > key(b);
  });
  double self_total = 0;
  for (const OpStats& s : rows) self_total += s.host_self_us;
  const std::size_t shown =
      options.row_limit > 0 ? std::min(rows.size(), static_cast<std::size_t>(options.row_limit)) : rows.size();
  std::size_t name_w = 4, shape_w = 12;
  for (std::size_t i = 0; i < shown; ++i) {
    name_w = std::max(name_w, std::min<std::size_t>(rows[i].name.size(), 40));
    shape_w = std::max(shape_w, std::min<std::size_t>(rows[i].shapes.size(), 48));
  }
  std::ostringstream os;
  char line[512];
  auto rule = [&] {
    os << std::string(name_w, '-') << "  " << (options.group_by_shape ? std::string(shape_w, '-') + "  " : "")
       << "--------  ------------  ------------  ------------  ------------  ------------  ----------  "
          "--------  -------  ------------\n";
  };
  rule();
  std::snprintf(line, sizeof line, "%-*s  ", static_cast<int>(name_w), "Name");
  os << line;
  if (options.group_by_shape) {
    std::snprintf(line, sizeof line, "%-*s  ", static_cast<int>(shape_w), "Input shapes");
    os << line;
  }
  std::snprintf(line, sizeof line, "%8s  %12s  %12s  %12s  %12s  %12s  %10s  %8s  %7s  %12s\n", "Calls", "Host total",
                "Host self", "Host self %", "Host avg", "Device total", "Memory", "Regions", "Threads", "Serial");
  os << line;
  rule();
  for (std::size_t i = 0; i < shown; ++i) {
    const OpStats& s = rows[i];
    std::snprintf(line, sizeof line, "%-*s  ", static_cast<int>(name_w), fit(s.name, name_w).c_str());
    os << line;
    if (options.group_by_shape) {
      std::snprintf(line, sizeof line, "%-*s  ", static_cast<int>(shape_w), fit(s.shapes, shape_w).c_str());
      os << line;
    }
    char pct[16];
    std::snprintf(pct, sizeof pct, "%.2f%%", self_total > 0 ? 100.0 * s.host_self_us / self_total : 0.0);
    char threads[16] = "-";
    if (s.regions > 0) std::snprintf(threads, sizeof threads, "%.1f", s.threads);
    std::snprintf(line, sizeof line, "%8llu  %12s  %12s  %12s  %12s  %12s  %10s  %8llu  %7s  %12s\n",
                  static_cast<unsigned long long>(s.calls), format_time(s.host_total_us).c_str(),
                  format_time(s.host_self_us).c_str(), pct,
                  format_time(s.host_total_us / static_cast<double>(s.calls)).c_str(),
                  format_time(s.device_total_us).c_str(), format_bytes(s.memory_bytes).c_str(),
                  static_cast<unsigned long long>(s.regions), threads, format_time(s.serial_us).c_str());
    os << line;
  }
  rule();
  os << "Host self time total: " << format_time(self_total);
  if (shown < rows.size()) os << " (" << rows.size() - shown << " more rows)";
  os << "\n";
  return os.str();
}

std::vector<ConvAlgorithmStats> Profile::conv_algorithms() {
  std::vector<ConvAlgorithmStats> rows;
  for (const TraceEvent& e : events()) {
    for (const ConvAlgorithm& c : e.algorithms) {
      auto same = [&](const ConvAlgorithmStats& r) {
        return r.name == e.name && r.shapes == e.shapes && r.choice.direction == c.direction &&
               r.choice.algorithm == c.algorithm && r.choice.math == c.math &&
               r.choice.workspace_bytes == c.workspace_bytes;
      };
      auto it = std::find_if(rows.begin(), rows.end(), same);
      if (it == rows.end()) it = rows.insert(rows.end(), {.name = e.name, .shapes = e.shapes, .choice = c});
      ++it->calls;
    }
  }
  return rows;
}

std::string Profile::conv_table(int row_limit) {
  const std::vector<ConvAlgorithmStats> rows = conv_algorithms();
  std::ostringstream os;
  char line[1024];
  std::snprintf(line, sizeof line, "%-24s  %-16s  %-28s  %-12s  %12s  %6s  %s\n", "Name", "Direction", "Algorithm",
                "Math", "Workspace", "Calls", "Input shapes");
  os << line;
  std::size_t n = 0;
  for (const ConvAlgorithmStats& r : rows) {
    if (row_limit > 0 && n++ >= static_cast<std::size_t>(row_limit)) break;
    std::snprintf(line, sizeof line, "%-24s  %-16s  %-28s  %-12s  %12s  %6llu  %s\n", fit(r.name, 24).c_str(),
                  r.choice.direction.c_str(), fit(r.choice.algorithm, 28).c_str(), fit(r.choice.math, 12).c_str(),
                  format_bytes(static_cast<std::int64_t>(r.choice.workspace_bytes)).c_str(),
                  static_cast<unsigned long long>(r.calls), fit(r.shapes, 72).c_str());
    os << line;
  }
  return os.str();
}

std::vector<SyncSite> Profile::sync_sites() {
  stop();
  std::vector<SyncSite> out;
  for (const SyncSite& s : state_->session->sites)
    if (s.count > 0) out.push_back(s);
  std::stable_sort(out.begin(), out.end(), [](const SyncSite& a, const SyncSite& b) { return a.wait_us > b.wait_us; });
  return out;
}

std::string Profile::sync_table(int row_limit) {
  const std::vector<SyncSite> sites = sync_sites();
  std::ostringstream os;
  char line[1024];
  std::snprintf(line, sizeof line, "%-48s  %-12s  %-8s  %8s  %12s  %s\n", "Call site", "API", "Kind", "Count",
                "Wait total", "Function");
  os << line;
  std::size_t n = 0;
  for (const SyncSite& s : sites) {
    if (row_limit > 0 && n++ >= static_cast<std::size_t>(row_limit)) break;
    std::string file = s.file;
    while (file.rfind("../", 0) == 0) file.erase(0, 3);  // relative to a build folder
    std::string where = file.empty() ? std::string("(inside anvil)") : file + ":" + std::to_string(s.line);
    if (where.size() > 48) where = "..." + where.substr(where.size() - 45);
    const std::string function = s.function.size() > 72 ? s.function.substr(0, 69) + "..." : s.function;
    std::snprintf(line, sizeof line, "%-48s  %-12s  %-8s  %8llu  %12s  %s\n", where.c_str(),
                  s.api.empty() ? "-" : s.api.c_str(), s.implicit ? "implicit" : "explicit",
                  static_cast<unsigned long long>(s.count), format_time(s.wait_us).c_str(), function.c_str());
    os << line;
  }
  return os.str();
}

std::vector<MemoryTotals> Profile::memory() {
  stop();
  std::vector<MemoryTotals> out;
  for (const auto& [d, m] : state_->session->memory) out.push_back(m);
  return out;
}

std::string Profile::trace_json() {
  const std::vector<TraceEvent>& events = this->events();
  const detail::Session& s = *state_->session;
  // One pid per device queue, in order of first appearance.
  std::vector<Device> devices;
  auto pid_of = [&](Device d) {
    if (d.is_cpu()) return 0;
    for (std::size_t i = 0; i < devices.size(); ++i)
      if (devices[i] == d) return static_cast<int>(i) + 1;
    devices.push_back(d);
    return static_cast<int>(devices.size());
  };
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto begin = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  int threads = 0;
  for (const TraceEvent& e : events) threads = std::max(threads, e.thread + 1);
  for (const TraceEvent& e : events) {
    begin();
    out += "{\"ph\":\"X\",\"name\":";
    json_string(out, e.name);
    out += ",\"cat\":";
    json_string(out, e.category);
    out += ",\"pid\":0,\"tid\":" + std::to_string(e.thread) + ",\"ts\":" + number(e.start_us) +
           ",\"dur\":" + number(e.duration_us) + ",\"args\":{\"device\":";
    json_string(out, e.device.str());
    if (!e.shapes.empty()) {
      out += ",\"shapes\":";
      json_string(out, e.shapes);
    }
    out += ",\"self_us\":" + number(e.self_us) + ",\"device_us\":" + number(device_us(e));
    if (e.bytes) out += ",\"bytes\":" + std::to_string(e.bytes);
    if (e.memory_bytes) out += ",\"memory\":" + std::to_string(e.memory_bytes);
    if (!e.parallel.empty()) {
      // Note [Parallel cost report]: the regions summed, and each piece as
      // [width, us, threads, region] for scripts/predict_parallel.py.
      out += ",\"regions\":" + std::to_string(e.regions) + ",\"region_us\":" + number(e.region_us) +
             ",\"serial_us\":" + number(std::max(0.0, e.self_us - e.region_us)) + ",\"parallel\":[";
      for (std::size_t i = 0; i < e.parallel.size(); ++i) {
        const ParallelPiece& piece = e.parallel[i];
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s[%.6g,%.3f,%d,%d]", i ? "," : "", piece.width, piece.us, piece.threads,
                      piece.region ? 1 : 0);
        out += buf;
      }
      out += "]";
    }
    if (!e.algorithms.empty()) {  // Note [Convolution algorithms]
      out += ",\"algorithms\":[";
      for (std::size_t i = 0; i < e.algorithms.size(); ++i) {
        const ConvAlgorithm& c = e.algorithms[i];
        out += i ? ",{\"direction\":" : "{\"direction\":";
        json_string(out, c.direction);
        out += ",\"algorithm\":";
        json_string(out, c.algorithm);
        out += ",\"math\":";
        json_string(out, c.math);
        out += ",\"workspace_bytes\":" + std::to_string(c.workspace_bytes) + "}";
      }
      out += "]";
    }
    if (!e.site.empty()) {
      out += ",\"site\":";
      json_string(out, e.site);
    }
    out += "}}";
    if (e.has_device_span) {
      begin();
      out += "{\"ph\":\"X\",\"name\":";
      json_string(out, e.name);
      out += ",\"cat\":";
      json_string(out, e.category);
      out += ",\"pid\":" + std::to_string(pid_of(e.device)) + ",\"tid\":0,\"ts\":" + number(e.device_start_us) +
             ",\"dur\":" + number(e.device_duration_us) + ",\"args\":{\"host_thread\":" + std::to_string(e.thread);
      if (!e.shapes.empty()) {
        out += ",\"shapes\":";
        json_string(out, e.shapes);
      }
      out += "}}";
    }
  }
  for (const detail::MemorySample& m : s.samples) {
    begin();
    out += "{\"ph\":\"C\",\"name\":";
    json_string(out, "memory " + m.device.str());
    out += ",\"pid\":" + std::to_string(pid_of(m.device)) +
           ",\"ts\":" + number(static_cast<double>(m.ns - s.start_ns) * 1e-3) +
           ",\"args\":{\"live bytes\":" + std::to_string(m.live) + "}}";
  }
  begin();
  out += R"({"ph":"M","name":"process_name","pid":0,"args":{"name":"host"}})";
  for (int t = 0; t < threads; ++t) {
    begin();
    out += R"({"ph":"M","name":"thread_name","pid":0,"tid":)" + std::to_string(t) + R"(,"args":{"name":"host thread )" +
           std::to_string(t) + "\"}}";
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    begin();
    out += R"({"ph":"M","name":"process_name","pid":)" + std::to_string(i + 1) + R"(,"args":{"name":)";
    json_string(out, devices[i].str());
    out += "}}";
    begin();
    out += R"({"ph":"M","name":"thread_name","pid":)" + std::to_string(i + 1) + R"(,"tid":0,"args":{"name":"queue"}})";
  }
  out += "\n]}\n";
  return out;
}

void Profile::write_trace(const std::string& path) {
  const std::string json = trace_json();
  anvil::detail::write_file_atomic(path, "profiler",
                                   [&](anvil::detail::OutputSink& sink) { sink.write(json.data(), json.size()); });
}

}  // namespace anvil::profiler
