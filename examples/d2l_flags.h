// The command line of the book's examples, one line per flag:
//
//   Args a;                               // the defaults
//   d2l::Flags flags("resnet");
//   flags.add("--epochs", a.epochs);
//   flags.add("--device", a.device, "cpu|opencl:0|cuda:0");
//   flags.add("--random-iter", a.random_iter);     // a bool is a switch
//   flags.parse(argc, argv);              // --help prints the usage and exits 0
//
// The usage shows each flag with its default (or the placeholder given),
// then the text given to details(). Benchmarks and tools use it too:
// d2l::Flags::plain("bench_compare") takes no --tensorboard/--profile.
// An unknown flag, a missing value or a malformed number is an
// anvil::ValueError naming the flag, what it expected and what came (the
// examples' main() puts the program's name in front).
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "anvil/error.h"
#include "anvil/profiler.h"

namespace d2l {

// Flags every example takes, read where they act.
struct CommonFlags {
  std::string tensorboard;  // --tensorboard DIR: write_csv (d2l_curves.h) logs the curves there too
  std::string profile;      // --profile FILE: the whole run profiled (anvil/profiler.h), written at exit
};

inline CommonFlags& common_flags() {
  static CommonFlags flags;
  return flags;
}

// --profile FILE: from here to exit, the Chrome trace to FILE and the top
// ops and sync sites printed at the end (anvil::profiler::profile_until_exit).
inline void start_profile(const std::string& file) {
  common_flags().profile = file;
  anvil::profiler::profile_until_exit(file, 15);
}

// For an example with no other flags: --profile FILE, --help, or an error.
inline void parse_profile_flag(int argc, char** argv, const std::string& program) {
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "-h" || s == "--help") {
      std::cout << "usage: " << program << " [--profile FILE]\n";
      std::exit(0);
    }
    if (s != "--profile") throw anvil::ValueError("unknown flag '" + s + "'; expected --profile");
    if (i + 1 >= argc) throw anvil::ValueError("--profile needs a value; expected --profile FILE, got nothing");
    start_profile(argv[++i]);
  }
}

class Flags {
 public:
  explicit Flags(std::string program) : program_(std::move(program)) {
    add("--tensorboard", common_flags().tensorboard, "DIR");
    add("--profile", "FILE", start_profile);
  }
  // Without the examples' common flags.
  static Flags plain(std::string program) { return Flags(std::move(program), Plain{}); }

  // What --help prints after the usage line (one line per flag, say).
  Flags& details(std::string text) {
    details_ = std::move(text);
    return *this;
  }

  // `target` keeps its value unless the flag is given; `placeholder` is what
  // the usage shows after the flag (default: the current value).
  template <typename T>
  Flags& add(const std::string& name, T& target, std::string placeholder = "") {
    if constexpr (std::is_same_v<T, bool>) {
      flags_.push_back({name, "", false, [&target](const std::string&) { target = true; }});
    } else {
      if (placeholder.empty()) {
        std::ostringstream os;
        os << target;
        placeholder = os.str();
      }
      flags_.push_back(
          {name, placeholder, true, [this, name, &target](const std::string& v) { target = value_of<T>(name, v); }});
    }
    return *this;
  }
  // A flag whose value `set` interprets itself (lists, enumerations).
  Flags& add(const std::string& name, const std::string& placeholder, std::function<void(const std::string&)> set) {
    flags_.push_back({name, placeholder, true, std::move(set)});
    return *this;
  }

  void parse(int argc, char** argv) const {
    for (int i = 1; i < argc; ++i) {
      const std::string s = argv[i];
      if (s == "-h" || s == "--help") {
        std::cout << usage();
        std::exit(0);
      }
      const Flag* flag = find(s);
      if (flag == nullptr) throw anvil::ValueError("unknown flag '" + s + "'; expected " + names());
      if (!flag->takes_value) {
        flag->set("");
        continue;
      }
      if (i + 1 >= argc)
        throw anvil::ValueError(s + " needs a value; expected " + s + " " + flag->placeholder + ", got nothing");
      flag->set(argv[++i]);
    }
  }

  std::string usage() const {
    const std::string lead = "usage: " + program_;
    std::string out = lead, line = lead;
    for (const Flag& f : flags_) {
      const std::string item = " [" + f.name + (f.takes_value ? " " + f.placeholder : "") + "]";
      if (line.size() + item.size() > 100) {
        out += "\n" + std::string(lead.size(), ' ');
        line = std::string(lead.size(), ' ');
      }
      out += item;
      line += item;
    }
    return out + "\n" + details_;
  }

 private:
  struct Plain {};
  Flags(std::string program, Plain) : program_(std::move(program)) {}

  struct Flag {
    std::string name, placeholder;
    bool takes_value;
    std::function<void(const std::string&)> set;
  };

  const Flag* find(const std::string& name) const {
    for (const Flag& f : flags_)
      if (f.name == name) return &f;
    return nullptr;
  }

  std::string names() const {
    std::string out;
    for (std::size_t i = 0; i < flags_.size(); ++i)
      out += (i == 0 ? "" : i + 1 == flags_.size() ? " or " : ", ") + flags_[i].name;
    return out;
  }

  // The whole of `v` as a T, or a ValueError.
  template <typename T>
  T value_of(const std::string& name, const std::string& v) const {
    if constexpr (std::is_same_v<T, std::string>) {
      return v;
    } else {
      T out{};
      const char* end = v.data() + v.size();
      const auto [at, ec] = std::from_chars(v.data(), end, out);
      if (ec != std::errc() || at != end || v.empty())
        throw anvil::ValueError(name + " takes " +
                                (std::is_floating_point_v<T> ? "a number"
                                 : std::is_signed_v<T>       ? "an integer"
                                                             : "a whole number") +
                                "; got '" + v + "'");
      return out;
    }
  }

  std::string program_;
  std::string details_;
  std::vector<Flag> flags_;
};

}  // namespace d2l
