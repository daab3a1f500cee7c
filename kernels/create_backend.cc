// CreateBackend: the CPU backend always, the CUDA backend when built with it.
#include "kernels/create_backend.h"

#include "kernels/cpu/cpu_backend.h"
#if defined(LS_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#endif

namespace ls {

std::vector<std::string> AvailableBackends() {
#if defined(LS_HAVE_CUDA)
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<Backend> CreateBackend(const BackendOptions& options, std::string* error) {
  if (options.name == "cpu") {
    if (options.threads < 0) {
      *error = "--threads must not be negative, got " + std::to_string(options.threads);
      return nullptr;
    }
    return std::make_unique<CpuBackend>(options.threads);
  }
  if (options.name == "cuda") {
#if defined(LS_HAVE_CUDA)
    auto backend = CreateCudaBackend(options.cuda_device, error);
    if (!backend) *error = "--backend cuda: " + *error;
    return backend;
#else
    *error = "--backend cuda is not available: this build has no CUDA kernels (configure with -DLATENTSERVE_CUDA=ON)";
    return nullptr;
#endif
  }
  std::string names;
  for (const std::string& n : AvailableBackends()) names += (names.empty() ? "" : ", ") + n;
  *error = "unknown --backend '" + options.name + "' (this build has: " + names + ")";
  return nullptr;
}

}  // namespace ls
