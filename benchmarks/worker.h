// benchmarks/worker.h — the loop every benchmark worker runs.
//
//   int main(int argc, char** argv) {
//     return anvil_bench::serve("anvil", info_line, [](const CaseId& id, const std::string& variant) {
//       ... return Body{...};  // or an empty Body: "this worker does not do that"
//     });
//   }
//
// A worker is a process that times one library. `bench_compare` starts one
// worker per peer and talks to each over its stdin/stdout, one request and one
// reply per line:
//
//   info                          -> ok <one line about the library and its threads>
//   run <case-id> <variant> <n>   -> ok <seconds for n iterations> | skip <why> | error <what>
//   quit
//
// Why separate processes: see Note [One process per BLAS] in CMakeLists.txt.
//
// A Body runs the measured operation `n` times in a loop of its own, so the
// clock brackets only the library's work. Inputs are prepared once per
// (case, variant) and dropped when the driver moves on, so a worker holds one
// case's memory at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "timing.h"

namespace anvil_bench {

// A case id, the same string as the test and bench case names (STYLE.md):
// `matmul(shape=[256,256],dtype=f32)`, `matmul_norm_item(shape=[100,100],count=1000,dtype=f32)`,
// `add(shape=[16777216],dtype=bf16)`.
struct CaseId {
  std::string text;  // the whole id
  std::string op;    // `matmul`
  std::vector<std::int64_t> shape;
  std::int64_t count = 1;     // `count=` when given
  std::string dtype = "f32";  // `dtype=`: f32, f16 or bf16

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

inline CaseId parse_case_id(const std::string& text) {
  CaseId id;
  id.text = text;
  const auto open = text.find('(');
  id.op = text.substr(0, open);
  if (open == std::string::npos) return id;
  const auto shape_at = text.find("shape=[", open);
  if (shape_at != std::string::npos) {
    std::istringstream in(text.substr(shape_at + 7, text.find(']', shape_at) - shape_at - 7));
    std::string dim;
    while (std::getline(in, dim, ',')) id.shape.push_back(std::stoll(dim));
  }
  const auto count_at = text.find("count=", open);
  if (count_at != std::string::npos) id.count = std::stoll(text.substr(count_at + 6));
  const auto dtype_at = text.find("dtype=", open);
  if (dtype_at != std::string::npos) {
    const auto end = text.find_first_of(",)", dtype_at);
    id.dtype = text.substr(dtype_at + 6, end - dtype_at - 6);
  }
  return id;
}

// Runs the operation `iterations` times.
using Body = std::function<void(std::int64_t iterations)>;
// Prepares inputs for (case, variant); an empty Body when unsupported.
using Prepare = std::function<Body(const CaseId&, const std::string& variant)>;

// Keeps a result alive in the optimiser's eyes without reading it.
template <typename T>
inline void keep(T const& value) {
  asm volatile("" : : "m"(value) : "memory");
}

inline int serve(const std::string& info, const Prepare& prepare) {
  std::ios::sync_with_stdio(false);
  std::string line;
  std::string current_key;
  Body body;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string command;
    in >> command;
    if (command == "quit") break;
    if (command == "info") {
      std::cout << "ok " << info << std::endl;
      continue;
    }
    if (command != "run") {
      std::cout << "error unknown command '" << command << "'" << std::endl;
      continue;
    }
    std::string case_text;
    std::string variant;
    std::int64_t iterations = 0;
    in >> case_text >> variant >> iterations;
    try {
      const std::string key = case_text + " " + variant;
      if (key != current_key) {
        body = nullptr;  // free the previous case's inputs before preparing
        current_key.clear();
        body = prepare(parse_case_id(case_text), variant);
        if (!body) {
          std::cout << "skip no variant '" << variant << "' for " << case_text << std::endl;
          continue;
        }
        current_key = key;
      }
      // Timed before anything is written: a body that throws must answer
      // `error ...`, not a half-written `ok `.
      const double seconds = anvil::bench::host_seconds([&] { body(iterations); });
      std::cout << "ok " << seconds << std::endl;
    } catch (const std::exception& e) {
      std::string what = e.what();
      for (auto& c : what)
        if (c == '\n') c = ' ';
      body = nullptr;
      current_key.clear();
      std::cout << "error " << what << std::endl;
    }
  }
  return 0;
}

}  // namespace anvil_bench
