// The backend table (DESIGN §2): one entry per DeviceType, null where a
// backend is not compiled in or its module did not load. The CPU backend is
// part of the core; the device backends are modules loaded on first use
// (Note [Backend modules] in core/backend_module.h). Adding a backend is one
// row in kModules here (the rest: docs/adding-a-backend.md).
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/error.h"
#include "core/backend.h"
#include "core/backend_module.h"

namespace anvil::detail {

Backend* make_cpu_backend();

namespace {

struct ModuleSpec {
  DeviceType type;
  const char* name;  // libanvil_backend_<name>.so, anvil_backend_<name>_init
  bool built;        // whether this build of anvil made the module
};

constexpr ModuleSpec kModules[] = {
#ifdef ANVIL_HAVE_CUDA
    {DeviceType::CUDA, "cuda", true},
#else
    {DeviceType::CUDA, "cuda", false},
#endif
#ifdef ANVIL_HAVE_OPENCL
    {DeviceType::OpenCL, "opencl", true},
#else
    {DeviceType::OpenCL, "opencl", false},
#endif
};

struct Slot {
  std::once_flag once;
  // Set after `once` ran: every op looks its backend up, and libstdc++'s
  // call_once goes through thread-local storage even when the flag is set
  // (a sixth of a small op's time), so the fast path reads this instead.
  std::atomic<bool> ready{false};
  Backend* backend = nullptr;
  bool built = false;
  std::string reason;  // why backend is null
};

std::array<Slot, kNumDeviceTypes>& slots() noexcept {
  static std::array<Slot, kNumDeviceTypes> s;
  return s;
}

std::vector<std::string> split_path(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const std::size_t colon = list.find(':');
    const std::string_view dir = list.substr(0, colon);
    if (!dir.empty()) out.emplace_back(dir);
    if (colon == std::string_view::npos) break;
    list.remove_prefix(colon + 1);
  }
  return out;
}

// The directory libanvil.so was loaded from ("" if it cannot be told).
std::string core_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&backend_for), &info) == 0 || info.dli_fname == nullptr) return "";
  std::error_code ec;
  const std::filesystem::path lib = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::filesystem::path(info.dli_fname).parent_path().string() : lib.parent_path().string();
}

// Where to look for modules, in order (Note [Backend modules]); the loader's
// own search is tried after these unless ANVIL_BACKEND_PATH is set.
std::vector<std::string> module_dirs(bool& use_loader_search) {
  if (const char* env = std::getenv("ANVIL_BACKEND_PATH"); env != nullptr) {
    use_loader_search = false;
    return split_path(env);
  }
  use_loader_search = true;
  std::vector<std::string> dirs;
  if (std::string dir = core_library_dir(); !dir.empty()) dirs.push_back(std::move(dir));
#ifdef ANVIL_INSTALL_LIBDIR
  if (dirs.empty() || dirs.front() != ANVIL_INSTALL_LIBDIR) dirs.emplace_back(ANVIL_INSTALL_LIBDIR);
#endif
  return dirs;
}

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

// Loads one module; on failure leaves slot.backend null and says why.
void load_module(const ModuleSpec& spec, Slot& slot) noexcept {
  try {
    const std::string file = cat("libanvil_backend_", spec.name, ".so");
    const std::string entry = cat("anvil_backend_", spec.name, "_init");
    bool use_loader_search = true;
    const std::vector<std::string> dirs = module_dirs(use_loader_search);

    std::vector<std::string> candidates;
    for (const std::string& dir : dirs) {
      const std::filesystem::path path = std::filesystem::path(dir) / file;
      std::error_code ec;
      if (std::filesystem::exists(path, ec)) candidates.push_back(path.string());
    }
    if (use_loader_search) candidates.push_back(file);

    std::vector<std::string> failures;
    for (const std::string& candidate : candidates) {
      // RTLD_LOCAL: each module keeps its runtime's symbols to itself.
      // RTLD_NODELETE: backends live until exit (tensors may outlive main).
      void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
      if (handle == nullptr) {
        const std::string why = dl_error();
        // The bare name not found by the loader is "absent", not a failure.
        if (candidate == file && why.rfind(file + ":", 0) == 0) continue;
        failures.push_back(cat(candidate, " did not load: ", why));
        continue;
      }
      const std::string abi_entry = cat("anvil_backend_", spec.name, "_abi");
      auto abi = reinterpret_cast<BackendModuleAbi>(dlsym(handle, abi_entry.c_str()));
      if (abi == nullptr || std::string_view(abi()) != ANVIL_BACKEND_ABI) {
        failures.push_back(cat(candidate, " was built against another libanvil (backend interface ",
                               abi != nullptr ? abi() : "unknown", ", this libanvil's ", ANVIL_BACKEND_ABI,
                               "); rebuild it with this libanvil"));
        continue;
      }
      auto init = reinterpret_cast<BackendModuleInit>(dlsym(handle, entry.c_str()));
      if (init == nullptr) {
        failures.push_back(cat(candidate, " does not export ", entry));
        continue;
      }
      Backend* b = init();
      if (b == nullptr || b->type() != spec.type) {
        failures.push_back(cat(candidate, ": ", entry, " did not return a ", spec.name, " backend"));
        continue;
      }
      slot.backend = b;
      return;
    }

    if (!failures.empty()) {
      std::string why = cat("the ", spec.name, " backend module ");
      for (std::size_t i = 0; i < failures.size(); ++i) why += (i ? "; " : "") + failures[i];
      slot.reason = why;
      return;
    }
    std::string where;
    for (std::size_t i = 0; i < dirs.size(); ++i) where += (i ? ", " : "") + dirs[i];
    if (where.empty()) where = "no directory";
    slot.reason = cat("the ", spec.name, " backend module ", file, " was not found (looked in ", where,
                      use_loader_search ? " and the loader's search path" : " from ANVIL_BACKEND_PATH",
                      "); install it beside libanvil or set ANVIL_BACKEND_PATH to its directory");
  } catch (const std::exception& e) {
    slot.reason = cat("the ", spec.name, " backend module did not load: ", e.what());
  } catch (...) {
    slot.reason = cat("the ", spec.name, " backend module did not load");
  }
}

Slot& slot_for(DeviceType type) noexcept {
  Slot& slot = slots()[static_cast<int>(type)];
  if (slot.ready.load(std::memory_order_acquire)) [[likely]]
    return slot;
  std::call_once(slot.once, [&] {
    if (type == DeviceType::CPU) {
      slot.built = true;
      slot.backend = make_cpu_backend();
      return;
    }
    for (const ModuleSpec& spec : kModules) {
      if (spec.type != type) continue;
      slot.built = spec.built;
      if (spec.built)
        load_module(spec, slot);
      else
        slot.reason = cat(to_string(type), " is not compiled into this build of anvil");
      return;
    }
    slot.reason = cat(to_string(type), " is not compiled into this build of anvil");
  });
  slot.ready.store(true, std::memory_order_release);
  return slot;
}

}  // namespace

Backend* backend_for(DeviceType type) noexcept { return slot_for(type).backend; }

bool backend_built(DeviceType type) noexcept { return slot_for(type).built; }

std::string backend_missing_reason(DeviceType type) {
  const Slot& slot = slot_for(type);
  return slot.backend != nullptr ? "" : slot.reason;
}

Backend& backend_checked(Device d, const char* op) {
  Backend* b = backend_for(d.type());
  ANVIL_CHECK(b != nullptr || backend_built(d.type()), NotCompiled, op, ": ", to_string(d.type()),
              " is not compiled into this build of anvil; expected a device of a built-in backend, got ", d,
              "; use try_gpu() to fall back to the CPU");
  const int n = b != nullptr ? b->device_count() : 0;
  if (d.index() >= n) {
    const std::string why = n > 0 ? "" : b != nullptr ? b->unavailable_reason() : backend_missing_reason(d.type());
    throw DeviceError(cat(op, ": device ", d, " does not exist; expected an index below ", n, ", got ", d.index(),
                          why.empty() ? "" : " (" + why + ")", "; use try_gpu() to fall back to the CPU"));
  }
  return *b;
}

}  // namespace anvil::detail
