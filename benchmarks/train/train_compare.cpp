// benchmarks/train/train_compare.cpp — training speed and accuracy, anvil side
// by side with LibTorch, in one run.
//
//   bench_train                                  # MLP and LeNet, 10 epochs each
//   bench_train --models mlp --epochs 5 --markdown
//   bench_train --anvil-env GOMP_SPINCOUNT=300000   # plus anvil spinning as libgomp does by default
//   bench_train --models resnet18,gru,lstm,vit --epochs 6   # ResNet-18, GRU, LSTM, ViT: s/step
//   bench_train --models gru --threads 1          # only the 1-thread row
//   bench_train --busy                            # each library alone and beside 2 spinning processes
//
// Both libraries train the same model with the same hyperparameters (D2L's
// MLP 784-256-10 and the modern LeNet of examples/train_fashion_mnist.cpp;
// batch 256, SGD lr 0.1, reshuffled every epoch), each in its own worker
// process (train_worker.h; Note [One process per BLAS] in
// benchmarks/CMakeLists.txt). Epochs alternate between the workers, the first
// one rotating each epoch, so a burst of load elsewhere on the machine hits
// all of them. s/epoch is the median over epochs 2..N (epoch 1 is the
// warm-up: allocator caches, page faults, BLAS buffers); test accuracy is read
// after the last epoch. For resnet18, vit, gru and lstm an "epoch" is
// kStepsPerRound training steps on a fixed batch (train_worker.h), and their
// rows are seconds per step.
//
// Every model is timed at three thread settings (`--threads`), one row each:
// both libraries in their defaults; both at 1 thread; both at 2 threads
// (anvil::set_num_threads(n); LibTorch's at::set_num_threads(n) and its
// pthread OpenBLAS held to n through openblas_set_num_threads, which
// set_num_threads leaves alone), so a win is never just "we used more cores".
//
// Note [Busy machine]
// ~~~~~~~~~~~~~~~~~~~
// `--busy` (issue 12) asks how much each library slows down when the machine
// is not its own: every worker trains alone, then beside `--spinners N`
// processes spinning on integer work (background_load.h), phases alternating
// alone, busy, ..., alone with every worker one turn per phase in a rotating
// order, so drift in the machine's load falls on both conditions alike. A
// turn is epochs back to back for at least `--phase-seconds` (1 s), timed as
// their mean: a single short epoch measured the scheduler and the hypervisor
// more than the library. alone and busy are the medians of their phases;
// slowdown = busy / alone, the target anvil's <= LibTorch's. Each reply also
// carries the worker's CPU seconds, splitting a slowdown into "used more cores
// alone" and "got less of the machine". Why each choice, and the bounds on the
// `defaults` row: benchmarks/README.md, "Measurements behind the benchmarks' Notes".
//
// Note [Same tensors]
// ~~~~~~~~~~~~~~~~~~~
// LibTorch's worker cannot link anvil (their OpenBLAS builds clash), so this
// driver reads Fashion-MNIST once with anvil's reader (anvil/data.h) and dumps
// the four tensors as raw native-endian bytes (`<name>.bin`, C order, sizes in
// `<name>.shape`) into a temporary directory that both workers load: the
// images are bit for bit the same f32 values in each library.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../../examples/d2l_flags.h"
#include "../../examples/d2l_rnn.h"
#include "../background_load.h"
#include "../worker_process.h"
#include "anvil/anvil.h"
#include "anvil/data.h"
#include "timing.h"
#include "train_worker.h"

namespace {

using anvil_bench::WorkerProcess;
namespace fs = std::filesystem;
namespace tb = anvil_train_bench;

struct Options {
  std::vector<std::string> models{"mlp", "lenet"};
  std::vector<std::string> threads{"defaults", "1", "2"};  // one row per model each
  int epochs = 10;
  std::int64_t train_images = 0;  // the first N training images only; 0: all
  std::uint64_t seed = 0;
  bool markdown = false;
  std::vector<std::string> anvil_env;  // VAR=VALUE: one more anvil worker each, as context
  bool busy = false;                   // Note [Busy machine]
  int spinners = 0;                    // background processes in --busy mode; 0: one per core
  double phase_seconds = 0;            // --busy: each worker's least time per phase (Note [Busy machine])
};

// A positive integer argument, or a typed error naming the flag.
int positive(const std::string& flag, const std::string& v) {
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos || std::stoi(v) < 1)
    throw std::runtime_error(flag + ": expected a positive integer, got '" + v + "'");
  return std::stoi(v);
}

Options parse(int argc, char** argv) {
  Options o;
  bool models_given = false, threads_given = false, epochs_given = false, images_given = false,
       phase_seconds_given = false;
  d2l::Flags::plain("bench_train")
      .add("--models", "mlp,lenet",
           [&](const std::string& v) {
             models_given = true;
             o.models.clear();
             std::istringstream in(v);
             for (std::string m; std::getline(in, m, ',');) {
               if (m != "mlp" && m != "lenet" && m != "resnet18" && m != "gru" && m != "lstm" && m != "vit")
                 throw std::runtime_error("--models: expected mlp, lenet, resnet18, gru, lstm or vit, got '" + m + "'");
               o.models.push_back(m);
             }
           })
      .add("--threads", "defaults,1,2",
           [&](const std::string& v) {
             threads_given = true;
             o.threads.clear();
             std::istringstream in(v);
             for (std::string t; std::getline(in, t, ',');) {
               if (t != "defaults" &&
                   (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || std::stoi(t) < 1))
                 throw std::runtime_error("--threads: expected `defaults` or a thread count >= 1, got '" + t + "'");
               o.threads.push_back(t);
             }
             if (o.threads.empty()) throw std::runtime_error("--threads: expected at least one setting");
           })
      .add("--epochs", "N",
           [&](const std::string& v) {
             epochs_given = true;
             o.epochs = positive("--epochs", v);
           })
      .add("--train-images", "N",
           [&](const std::string& v) {
             images_given = true;
             o.train_images = positive("--train-images", v);
             if (o.train_images < tb::kBatchSize)
               throw std::runtime_error("--train-images: expected at least one batch (" +
                                        std::to_string(tb::kBatchSize) + "), got " + std::to_string(o.train_images));
           })
      .add("--seed", o.seed, "S")
      .add("--markdown", o.markdown)
      .add("--anvil-env", "VAR=VALUE",
           [&](const std::string& v) {
             if (v.find('=') == std::string::npos || v.front() == '=')
               throw std::runtime_error("--anvil-env: expected VAR=VALUE, got '" + v + "'");
             o.anvil_env.push_back(v);
           })
      .add("--busy", o.busy)
      .add("--spinners", "N", [&](const std::string& v) { o.spinners = positive("--spinners", v); })
      .add("--phase-seconds", "S",
           [&](const std::string& v) {
             char* end = nullptr;
             o.phase_seconds = std::strtod(v.c_str(), &end);
             if (end == v.c_str() || *end != '\0' || !(o.phase_seconds >= 0 && o.phase_seconds <= 600))
               throw std::runtime_error("--phase-seconds: expected seconds from 0 to 600, got '" + v + "'");
             phase_seconds_given = true;
           })
      .details(
          "  --models    which models, comma-separated: mlp, lenet, resnet18, gru, lstm, vit (default mlp,lenet;\n"
          "              resnet18, gru, lstm and vit time steps on a fixed batch: s/step of 5 back to back per\n"
          "              epoch)\n"
          "  --threads   thread settings, one row each (default defaults,1,2): `defaults` is each library\n"
          "              in its defaults; N is both at N threads (LibTorch's OpenBLAS held to N too)\n"
          "  --epochs    epochs per model and library (default 10); s/epoch is the median of epochs 2..N\n"
          "  --train-images N  epochs over the first N training images only (default: all 60,000)\n"
          "  --seed      seed of both libraries' init and shuffling (default 0)\n"
          "  --markdown  the table as Markdown\n"
          "  --anvil-env VAR=VALUE  also time anvil with this environment variable set (repeatable;\n"
          "              a context row, not the target configuration)\n"
          "  --busy      each library alone and beside a background load of spinning processes: time alone,\n"
          "              time busy, slowdown = busy / alone; target anvil's slowdown <= LibTorch's. Defaults\n"
          "              here: --models mlp,lenet --threads defaults,1,2 --epochs 3 (busy phases, between\n"
          "              4 alone ones) --train-images 12800 --phase-seconds 1; about 3 minutes on 2 cores\n"
          "  --spinners  background processes for --busy (default: one per core)\n"
          "  --phase-seconds S  --busy: in every phase each worker trains epochs back to back for at least\n"
          "              S seconds (default 1; 0: one epoch), timed as their mean\n")
      .parse(argc, argv);
  if (o.spinners != 0 && !o.busy) throw std::runtime_error("--spinners: only with --busy");
  if (phase_seconds_given && !o.busy) throw std::runtime_error("--phase-seconds: only with --busy");
  if (o.busy) {
    if (!models_given) o.models = {"mlp", "lenet"};
    if (!threads_given) o.threads = {"defaults", "1", "2"};
    if (!epochs_given) o.epochs = 3;
    if (!images_given) o.train_images = 12800;
    if (o.spinners == 0) o.spinners = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (!phase_seconds_given) o.phase_seconds = 1.0;
  }
  return o;
}

std::string here() {
  std::array<char, 4096> buffer{};
  const auto n = readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0) return ".";
  const std::string path(buffer.data(), static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string base = fs::exists("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
    std::string pattern = base + "/anvil-bench-train-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a directory under " + base);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// See Note [Same tensors].
void dump(const std::string& dir, const std::string& name, const anvil::Tensor& t) {
  const anvil::Tensor c = t.contiguous();
  std::ofstream shape(dir + "/" + name + ".shape");
  for (int i = 0; i < c.dim(); ++i) shape << c.size(i) << (i + 1 < c.dim() ? " " : "\n");
  std::ofstream bin(dir + "/" + name + ".bin", std::ios::binary);
  bin.write(static_cast<const char*>(c.raw_data_ptr()),
            static_cast<std::streamsize>(c.numel() * static_cast<std::int64_t>(anvil::element_size(c.dtype()))));
  if (!bin || !shape) throw std::runtime_error("cannot write " + dir + "/" + name);
}

struct Library {
  std::string key;      // `anvil`, `torch`, `anvil t1`, ...: names it in progress lines and errors
  std::string program;  // next to bench_train
  std::vector<std::string> args;
  bool pthread_blas = false;  // LibTorch's OpenBLAS threads spin after a call
  std::string env;            // VAR=VALUE set for this worker only ("" for none)
  std::unique_ptr<WorkerProcess> process = nullptr;
  std::string info = "";  // its `info` reply, or why it is unavailable
};

// One row per model: anvil and LibTorch at the same thread setting.
struct Setting {
  std::string name;  // `defaults`, `1 thread`, `2 threads`
  std::size_t anvil, torch;
};

// `ok <rest>` → rest; anything else throws with the reply.
std::string expect_ok(Library& lib, const std::string& request) {
  const std::string reply = lib.process->request(request);
  if (reply.rfind("ok", 0) != 0) throw std::runtime_error(lib.key + ": '" + request + "' answered '" + reply + "'");
  return reply.size() > 3 ? reply.substr(3) : std::string();
}

struct Result {
  std::vector<double> seconds;       // per epoch, 1..N (--busy: per alone phase after the warm-up)
  std::vector<double> busy_seconds;  // --busy: per phase beside the background load
  // The cores each of those used: the worker's CPU seconds over its wall seconds.
  std::vector<double> cores, busy_cores;
  double loss = 0, accuracy = 0;
  bool ok = false;
  std::string error;
  double per_epoch() const {
    if (seconds.size() == 1) return seconds[0];
    return anvil::bench::median(std::vector<double>(seconds.begin() + 1, seconds.end()));
  }
};

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// The row label of a model: the step-timed ones say so.
std::string model_label(const std::string& model) {
  return model == "mlp" || model == "lenet" ? model : model + " (s/step)";
}

// The language models: trained on The Time Machine's characters, not images.
bool is_rnn(const std::string& model) { return model == "gru" || model == "lstm"; }

std::string accuracy_note(const std::string& model) {
  if (model == "resnet18") return "(of 32 test images)";
  if (model == "vit") return "(of 128 test images)";
  if (is_rnn(model)) return "(next char of the batch)";
  return "";
}

// One turn of every worker whose model is set up, the first one rotating
// with `round`: one epoch, or epochs back to back for at least `min_seconds`
// (Note [Busy machine]). The turn's seconds per epoch go to `into` of its
// result, the cores it used to `cores_into`. A failure marks the result and
// is reported under the table.
void train_round(std::vector<Library>& libs, std::vector<Result>& res, std::size_t round, const std::string& label,
                 std::vector<double> Result::*into, std::vector<double> Result::*cores_into, double min_seconds = 0) {
  for (std::size_t k = 0; k < libs.size(); ++k) {
    const std::size_t l = (k + round) % libs.size();
    if (!res[l].ok) continue;
    try {
      double seconds = 0, cpu_seconds = 0;
      int epochs = 0;
      const auto start = std::chrono::steady_clock::now();
      do {
        std::istringstream reply(expect_ok(libs[l], "epoch"));
        double s = 0, cpu = 0;
        reply >> s >> res[l].loss >> cpu;
        seconds += s;
        cpu_seconds += cpu;
        ++epochs;
      } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < min_seconds);
      const double s = seconds / epochs;
      (res[l].*into).push_back(s);
      if (seconds > 0) (res[l].*cores_into).push_back(cpu_seconds / seconds);
      std::cerr << "  " << label << " " << libs[l].key << ": " << fixed(s, 3) << " s"
                << (epochs > 1 ? " (mean of " + std::to_string(epochs) + " epochs)" : "") << ", loss "
                << fixed(res[l].loss, 4) << "\n";
    } catch (const std::exception& e) {
      res[l].ok = false;
      res[l].error = e.what();
    }
    // LibTorch's pthread OpenBLAS threads spin for up to ~0.1 s after a
    // call: let them settle before the next worker's epoch.
    std::this_thread::sleep_for(std::chrono::milliseconds(libs[l].pthread_blas ? 250 : 30));
  }
}

// Note [Busy machine]: warm-up, then alone and busy phases alternating,
// alone first and last. Returns the cores the background load held on
// average during the busy phases (its CPU seconds over its wall seconds).
double train_busy(std::vector<Library>& libs, std::vector<Result>& res, const std::string& model, const Options& opt) {
  train_round(libs, res, 0, model + " warm-up", &Result::busy_seconds, &Result::busy_cores);
  for (Result& r : res) {
    r.busy_seconds.clear();
    r.busy_cores.clear();
  }
  double load_cpu = 0, load_wall = 0;
  for (int phase = 0; phase < 2 * opt.epochs + 1; ++phase) {
    const std::size_t round = static_cast<std::size_t>(phase);
    const std::string count =
        " " + std::to_string(phase / 2 + 1) + "/" + std::to_string(opt.epochs + (phase % 2 ? 0 : 1));
    if (phase % 2 == 0) {
      train_round(libs, res, round, model + " alone" + count, &Result::seconds, &Result::cores, opt.phase_seconds);
      continue;
    }
    anvil_bench::BackgroundLoad load(opt.spinners);
    // Let the spinners take their share of the cores before the clock starts.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    train_round(libs, res, round, model + " busy" + count, &Result::busy_seconds, &Result::busy_cores,
                opt.phase_seconds);
    load.stop();
    load_cpu += load.cpu_seconds();
    load_wall += load.wall_seconds();
  }
  return load_wall > 0 ? load_cpu / load_wall : 0;
}

void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                 bool markdown) {
  const std::string sep = markdown ? " | " : "  ";
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto print_row = [&](const std::vector<std::string>& r) {
    std::cout << (markdown ? "| " : "  ");
    for (std::size_t c = 0; c < r.size(); ++c)
      std::cout << std::left << std::setw(static_cast<int>(width[c])) << r[c] << (c + 1 < r.size() ? sep : "");
    std::cout << (markdown ? " |" : "") << "\n";
  };
  std::cout << "\n";
  print_row(header);
  if (markdown) {
    std::cout << "|";
    for (std::size_t c = 0; c < header.size(); ++c) std::cout << std::string(width[c] + 2, '-') << "|";
    std::cout << "\n";
  }
  for (const auto& r : rows) print_row(r);
}

// The --busy table: one row per library, the slowdown target on anvil's.
constexpr const char* kSlowdownTarget = "<= 1.00";
std::vector<std::vector<std::string>> busy_rows(const std::vector<std::string>& models,
                                                const std::vector<Setting>& settings, const std::vector<Library>& libs,
                                                const std::vector<std::vector<Result>>& results, std::size_t first_env,
                                                const Setting& env_setting) {
  auto alone = [](const Result& r) { return anvil::bench::median(r.seconds); };
  auto busy = [](const Result& r) { return anvil::bench::median(r.busy_seconds); };
  auto measured = [](const Result& r) { return r.ok && !r.seconds.empty() && !r.busy_seconds.empty(); };
  auto cores = [](const std::vector<double>& c) {
    return c.empty() ? std::string("n/a") : fixed(anvil::bench::median(c), 2);
  };
  // `peer` is the LibTorch result the slowdown is compared with (none on LibTorch's own row).
  auto row = [&](const std::string& model, const std::string& setting, const std::string& library, const Result& r,
                 const Result* peer, const std::string& target) {
    std::vector<std::string> out{model, setting, library, "n/a", "n/a", "n/a", "n/a", "n/a", peer ? "n/a" : "", target};
    if (!measured(r)) return out;
    const double slowdown = busy(r) / alone(r);
    out[3] = fixed(alone(r), 3);
    out[4] = cores(r.cores);
    out[5] = fixed(busy(r), 3);
    out[6] = cores(r.busy_cores);
    out[7] = fixed(slowdown, 2) + "x";
    if (peer != nullptr && measured(*peer)) {
      const double ratio = slowdown / (busy(*peer) / alone(*peer));
      out[8] = fixed(ratio, 2) + (target == kSlowdownTarget && ratio > 1.0 ? " (miss)" : "");
    }
    return out;
  };
  std::vector<std::vector<std::string>> rows;
  for (std::size_t m = 0; m < models.size(); ++m) {
    const std::vector<Result>& res = results[m];
    for (std::size_t k = 0; k < settings.size(); ++k) {
      const Setting& st = settings[k];
      rows.push_back(
          row(k == 0 ? model_label(models[m]) : "", st.name, "anvil", res[st.anvil], &res[st.torch], kSlowdownTarget));
      rows.push_back(row("", "", "LibTorch", res[st.torch], nullptr, ""));
    }
    for (std::size_t l = first_env; l < libs.size(); ++l)  // context: anvil under --anvil-env
      rows.push_back(row("", env_setting.name, libs[l].key, res[l], &res[env_setting.torch], "(context)"));
  }
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options opt = parse(argc, argv);
    // Linking anvil put its OpenMP default (GOMP_SPINCOUNT or
    // OMP_WAIT_POLICY=passive, Note [Bounded OpenMP spinning]) into this
    // process's environment; the workers start from the user's, so LibTorch
    // runs in its own defaults and anvil's worker chooses for itself.
    if (anvil::openmp_wait_policy_defaulted()) {
      unsetenv("OMP_WAIT_POLICY");
      unsetenv("GOMP_SPINCOUNT");
    }
    std::vector<Library> libs;
    std::vector<Setting> settings;
    for (const std::string& t : opt.threads) {
      settings.push_back({t == "defaults" ? t : t + (t == "1" ? " thread" : " threads"), libs.size(), libs.size() + 1});
      if (t == "defaults") {
        libs.push_back({"anvil", "bench_train_anvil", {}, false, ""});
        libs.push_back({"torch", "bench_train_torch", {}, true, ""});
      } else {
        libs.push_back({"anvil t" + t, "bench_train_anvil", {"--threads", t}, false, ""});
        libs.push_back({"torch t" + t, "bench_train_torch", {"--threads", t, "--blas-threads", t}, true, ""});
      }
    }
    // --anvil-env rows run anvil at the defaults setting (or the first one) and
    // are measured against LibTorch at the same.
    const auto defaults =
        std::find_if(settings.begin(), settings.end(), [](const Setting& st) { return st.name == "defaults"; });
    const Setting& env_setting = defaults != settings.end() ? *defaults : settings.front();
    const std::size_t env_peer = env_setting.torch;
    const std::size_t first_env = libs.size();
    const std::vector<std::string> env_args = libs[env_setting.anvil].args;
    for (const std::string& env : opt.anvil_env)
      libs.push_back({"anvil " + env, "bench_train_anvil", env_args, false, env});
    for (Library& lib : libs) {
      const std::string path = here() + "/" + lib.program;
      if (access(path.c_str(), X_OK) != 0) {
        lib.info = "not built (" + path + ")";
        continue;
      }
      // The variable is set only while this worker starts (it inherits environ).
      const std::string var = lib.env.substr(0, lib.env.find('='));
      const char* before = lib.env.empty() ? nullptr : std::getenv(var.c_str());
      const std::string saved = before ? before : "";
      if (!lib.env.empty()) setenv(var.c_str(), lib.env.substr(var.size() + 1).c_str(), 1);
      lib.process = std::make_unique<WorkerProcess>(path, lib.args);
      if (!lib.env.empty()) {
        if (before)
          setenv(var.c_str(), saved.c_str(), 1);
        else
          unsetenv(var.c_str());
      }
      lib.info = expect_ok(lib, "info");
    }

    TempDir data;
    const bool needs_images =
        std::any_of(opt.models.begin(), opt.models.end(), [](const std::string& m) { return !is_rnn(m); });
    const bool needs_text = std::any_of(opt.models.begin(), opt.models.end(), is_rnn);
    if (needs_images) {
      const anvil::FashionMNIST train(anvil::FashionMNIST::Split::Train), test(anvil::FashionMNIST::Split::Test);
      const std::int64_t available = train.images().size(0);
      if (opt.train_images > available)
        throw std::runtime_error("--train-images: expected at most " + std::to_string(available) + ", got " +
                                 std::to_string(opt.train_images));
      const std::int64_t images = opt.train_images > 0 ? opt.train_images : available;
      dump(data.path(), "train-images", train.images().narrow(0, 0, images));
      dump(data.path(), "train-labels", train.labels().narrow(0, 0, images));
      dump(data.path(), "test-images", test.images());
      dump(data.path(), "test-labels", test.labels());
    }
    const std::string text_path = ANVIL_EXAMPLES_DIR "/data/timemachine.txt";
    if (needs_text) {  // the first minibatch of the example's sequential iterator (train_worker.h)
      const d2l::Corpus corpus = d2l::load_corpus(text_path, -1);
      std::mt19937_64 rng(opt.seed);
      const auto [xs, ys] = d2l::batches(corpus.tokens, tb::kRnnBatch, tb::kRnnSteps, /*random=*/false, rng).front();
      const anvil::Shape shape{tb::kRnnBatch, tb::kRnnSteps};
      dump(data.path(), "text-x", anvil::tensor(xs, shape, anvil::cpu()));
      dump(data.path(), "text-y", anvil::tensor(ys, shape, anvil::cpu()));
      const auto vocab = static_cast<std::int64_t>(corpus.chars.size());
      dump(data.path(), "text-vocab-size",
           anvil::tensor(std::vector<std::int64_t>{vocab}, anvil::Shape{1}, anvil::cpu()));
    }

    if (opt.busy)
      std::cout << "bench_train --busy: " << opt.epochs << " busy phases beside " << opt.spinners
                << " spinning processes, between " << opt.epochs + 1 << " alone, seed " << opt.seed << "\n";
    else
      std::cout << "bench_train: " << opt.epochs << " epochs, seed " << opt.seed << "\n";
    if (needs_images)
      std::cout << "  Fashion-MNIST from " << anvil::FashionMNIST::default_root() << "; mlp, lenet: "
                << (opt.train_images > 0 ? "epochs of the first " + std::to_string(opt.train_images) + " images, " : "")
                << "batch 256, SGD lr 0.1; resnet18: one step on 32 images; vit: one step on 128\n";
    if (needs_text) std::cout << "  gru, lstm: one step on 32 sequences of 35 characters of " << text_path << "\n";
    for (const Library& lib : libs) std::cout << "  " << lib.key << ": " << lib.info << "\n";
    std::cout << "  load average at start: " << loadavg() << "\n" << std::flush;
    const auto t0 = std::chrono::steady_clock::now();

    std::vector<std::vector<Result>> results(opt.models.size(), std::vector<Result>(libs.size()));
    std::vector<double> load_cores(opt.models.size(), 0.0);  // --busy: cores the spinners held
    for (std::size_t m = 0; m < opt.models.size(); ++m) {
      const std::string& model = opt.models[m];
      std::vector<Result>& res = results[m];
      for (std::size_t l = 0; l < libs.size(); ++l) {
        if (!libs[l].process) continue;
        try {
          expect_ok(libs[l], "setup " + model + " " + std::to_string(opt.seed) + " " + data.path());
          res[l].ok = true;
        } catch (const std::exception& e) {
          res[l].error = e.what();
        }
      }
      if (opt.busy) {
        load_cores[m] = train_busy(libs, res, model, opt);
        continue;
      }
      for (int epoch = 1; epoch <= opt.epochs; ++epoch)
        train_round(libs, res, static_cast<std::size_t>(epoch),
                    model + " epoch " + std::to_string(epoch) + "/" + std::to_string(opt.epochs), &Result::seconds,
                    &Result::cores);
      for (std::size_t l = 0; l < libs.size(); ++l) {
        if (!res[l].ok) continue;
        try {
          res[l].accuracy = std::stod(expect_ok(libs[l], "eval"));
        } catch (const std::exception& e) {
          res[l].ok = false;
          res[l].error = e.what();
        }
      }
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    auto print_errors = [&] {
      for (std::size_t m = 0; m < opt.models.size(); ++m)
        for (std::size_t l = 0; l < libs.size(); ++l)
          if (!results[m][l].ok && libs[l].process)
            std::cout << "  " << opt.models[m] << " / " << libs[l].key << ": " << results[m][l].error << "\n";
    };
    if (opt.busy) {
      print_table({"model", "threads", "library", "alone s/epoch", "cores", "busy s/epoch", "cores", "slowdown",
                   "anvil / LibTorch slowdown", "target"},
                  busy_rows(opt.models, settings, libs, results, first_env, env_setting), opt.markdown);
      print_errors();
      std::cout << "\n  alone, busy: medians of " << opt.epochs + 1 << " and " << opt.epochs
                << " phases, each epochs back to back for at least " << fixed(opt.phase_seconds, 1)
                << " s timed as their mean (s/step rows: steps), alternating after one warm-up epoch alone;"
                   " busy is beside "
                << opt.spinners << " spinning processes (benchmarks/background_load.h)\n"
                << "  cores: medians of the worker's CPU seconds over its wall seconds in those phases, all its threads"
                   " together (alone: what its threads used; busy: the share the spinners left it)\n"
                << "  slowdown = busy / alone; target: anvil's slowdown <= LibTorch's in the same thread setting\n"
                << "  threads: `defaults` is each library in its defaults; `N threads` is anvil::set_num_threads(N)"
                   " against at::set_num_threads(N) with LibTorch's OpenBLAS at N\n"
                << "  cores the spinners held during busy phases:";
      for (std::size_t m = 0; m < opt.models.size(); ++m)
        std::cout << " " << opt.models[m] << " " << fixed(load_cores[m], 2) << (m + 1 < opt.models.size() ? "," : "");
      std::cout << " (of " << opt.spinners << " spinning; the rest went to the worker under test)\n"
                << "  load average at end: " << loadavg() << "; measured in " << fixed(elapsed, 0) << " s\n";
      return 0;
    }

    // Scaling (issue 31): with a `1` setting, each row's speed-up over the
    // same library's 1-thread row, so `--threads 1,2,4,8,16` gives each
    // model's curve beside LibTorch's.
    const auto one_thread =
        std::find_if(settings.begin(), settings.end(), [](const Setting& st) { return st.name == "1 thread"; });
    const bool scaling = one_thread != settings.end();
    std::vector<std::string> header{"model",     "threads",      "anvil s/epoch", "LibTorch s/epoch",
                                    "ratio",     "target",       "anvil loss",    "LibTorch loss",
                                    "anvil acc", "LibTorch acc", "acc target"};
    if (scaling) header.insert(header.begin() + 6, {"anvil speed-up", "LibTorch speed-up"});
    auto seconds = [](const Result& r) { return r.ok ? fixed(r.per_epoch(), 3) : std::string("n/a"); };
    auto loss = [](const Result& r) { return r.ok ? fixed(r.loss, 4) : std::string("n/a"); };
    auto accuracy = [](const Result& r) { return r.ok ? fixed(r.accuracy, 4) : std::string("n/a"); };
    std::vector<std::vector<std::string>> rows;
    for (std::size_t m = 0; m < opt.models.size(); ++m) {
      const std::string& model = opt.models[m];
      const bool mlp = model == "mlp", per_step = model != "mlp" && model != "lenet";
      for (std::size_t k = 0; k < settings.size(); ++k) {
        const Setting& st = settings[k];
        const Result &a = results[m][st.anvil], &t = results[m][st.torch];
        // Issue 3's targets are for both libraries in their defaults.
        const bool targeted = st.name == "defaults" && !per_step;
        std::vector<std::string> row{k == 0 ? model_label(model) : "", st.name, seconds(a), seconds(t)};
        if (a.ok && t.ok) {
          const double ratio = a.per_epoch() / t.per_epoch();
          row.push_back(fixed(ratio, 2) + (targeted && ratio > 0.8 ? " (miss)" : ""));
        } else {
          row.push_back("n/a");
        }
        row.push_back(targeted ? "<= 0.80" : "");
        if (scaling) {
          for (std::size_t lib : {st.anvil, st.torch}) {
            const Result& r = results[m][lib];
            const Result& one = results[m][lib == st.anvil ? one_thread->anvil : one_thread->torch];
            row.push_back(r.ok && one.ok ? fixed(one.per_epoch() / r.per_epoch(), 2) + "x" : "n/a");
          }
        }
        row.push_back(loss(a));
        row.push_back(loss(t));
        row.push_back(accuracy(a));
        row.push_back(accuracy(t));
        if (k != 0)
          row.push_back("");
        else if (mlp && opt.epochs == 10 && opt.train_images == 0)
          row.push_back(std::string(">= 0.85") + (a.ok && a.accuracy < 0.85 ? " (miss)" : ""));
        else
          row.push_back(mlp ? ">= 0.85 after 10 epochs" : per_step ? accuracy_note(model) : "comparable");
        rows.push_back(row);
      }
      const Result& peer = results[m][env_peer];
      for (std::size_t l = first_env; l < libs.size(); ++l) {  // context: anvil under --anvil-env
        const Result& c = results[m][l];
        std::vector<std::string> row{"  " + libs[l].key,
                                     env_setting.name,
                                     seconds(c),
                                     "",
                                     c.ok && peer.ok ? fixed(c.per_epoch() / peer.per_epoch(), 2) : "n/a",
                                     "(context)",
                                     loss(c),
                                     "",
                                     accuracy(c),
                                     "",
                                     ""};
        if (scaling) row.insert(row.begin() + 6, {"", ""});
        rows.push_back(row);
      }
    }
    print_table(header, rows, opt.markdown);
    print_errors();
    std::cout << "\n  s/epoch: median of epochs 2.." << opt.epochs << " (s/step rows: of rounds 2.." << opt.epochs
              << ", each the mean of " << anvil_train_bench::kStepsPerRound
              << " steps on a fixed batch); "
                 "ratio = anvil / LibTorch (lower is better)\n"
              << "  threads: `defaults` is each library in its defaults; `N threads` is anvil::set_num_threads(N)"
                 " against at::set_num_threads(N) with LibTorch's OpenBLAS at N\n"
              << (scaling ? "  speed-up: the library's 1-thread time over this row's (higher is better)\n" : "")
              << "  loss: the last epoch's mean training loss (s/step rows: the last step's)\n"
              << "  load average at end: " << loadavg() << "; measured in " << fixed(elapsed, 0) << " s\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_train: " << e.what() << "\n";
    return 1;
  }
}
