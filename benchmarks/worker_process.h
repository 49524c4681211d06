// benchmarks/worker_process.h — a benchmark worker as a child process driven
// over pipes, one request line and one reply line at a time (bench_compare,
// bench_train). Why processes: Note [One process per BLAS] in CMakeLists.txt.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace anvil_bench {

class WorkerProcess {
 public:
  WorkerProcess(const std::string& path, const std::vector<std::string>& args) {
    int to_child[2];
    int from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
    posix_spawn_file_actions_addclose(&actions, to_child[1]);
    posix_spawn_file_actions_addclose(&actions, from_child[0]);
    std::vector<std::string> argv_storage{path};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(to_child[0]);
    close(from_child[1]);
    if (rc != 0) {
      close(to_child[1]);
      close(from_child[0]);
      throw std::runtime_error("cannot start " + path + ": " + std::strerror(rc));
    }
    to_ = fdopen(to_child[1], "w");
    from_ = fdopen(from_child[0], "r");
  }
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  ~WorkerProcess() {
    if (to_ != nullptr) {
      std::fputs("quit\n", to_);
      std::fclose(to_);
    }
    if (from_ != nullptr) std::fclose(from_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }

  // One request line, one reply line; throws when the worker has gone.
  std::string request(const std::string& line) {
    std::fputs((line + "\n").c_str(), to_);
    std::fflush(to_);
    char* buffer = nullptr;
    std::size_t capacity = 0;
    const auto n = getline(&buffer, &capacity, from_);
    std::string reply = n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
    std::free(buffer);
    if (n <= 0) throw std::runtime_error("worker exited (see its stderr above)");
    while (!reply.empty() && (reply.back() == '\n' || reply.back() == '\r')) reply.pop_back();
    return reply;
  }

 private:
  pid_t pid_ = 0;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

}  // namespace anvil_bench
