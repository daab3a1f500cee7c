// CreateBackend: the CPU backend always, the CUDA backend when built with it.
#include "kernels/create_backend.h"

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd/kernel_table.h"
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

std::string ActivationDtypeName(const BackendOptions& options) {
  if (options.activation_dtype != "auto") return options.activation_dtype;
  return options.name == "cuda" ? "bfloat16" : "float32";
}

std::string CpuIsaName() { return cpu::ActiveIsaName(); }

namespace {

// Applies --cpu_isa; false with *error naming the value and the choices.
bool ApplyCpuIsa(const std::string& name, std::string* error) {
  if (name == "auto") return true;
  std::string supported;
  for (cpu::SimdTarget t : cpu::CompiledTargets())
    if (cpu::CpuSupports(t)) supported += (supported.empty() ? "" : ", ") + std::string(cpu::SimdTargetName(t));
  const auto target = cpu::ParseSimdTarget(name);
  if (!target) {
    *error = "unknown --cpu_isa '" + name + "' (expected auto or one of: " + supported + ")";
    return false;
  }
  if (!cpu::SetSimdCap(*target)) {
    *error =
        "--cpu_isa " + name +
        (cpu::CpuSupports(*target) ? " is not compiled in this build (LATENTSERVE_SIMD_TARGETS left it out; it runs: "
                                   : " is not available on this CPU (it runs: ") +
        supported + ")";
    return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<Backend> CreateBackend(const BackendOptions& options, std::string* error) {
  const std::string& act = options.activation_dtype;
  if (!ApplyCpuIsa(options.cpu_isa, error)) return nullptr;
  if (act != "auto" && act != "float32" && act != "bfloat16" && act != "int8") {
    *error = "unknown --activation_dtype '" + act + "' (expected auto, float32, bfloat16 or int8)";
    return nullptr;
  }
  if (options.name == "cpu") {
    if (options.threads < 0) {
      *error = "--threads must not be negative, got " + std::to_string(options.threads);
      return nullptr;
    }
    const DType dtype = act == "bfloat16" ? DType::kBF16 : act == "int8" ? DType::kI8 : DType::kF32;
    return std::make_unique<CpuBackend>(options.threads, dtype);
  }
  if (options.name == "cuda") {
    if (act == "float32" || act == "int8") {
      *error =
          "--activation_dtype " + act + " is not available on --backend cuda (its GEMMs take bfloat16 activations)";
      return nullptr;
    }
#if defined(LS_HAVE_CUDA)
    auto backend = CreateCudaBackend(options.cuda_device, error);
    if (!backend) {
      *error = "--backend cuda: " + *error;
      return nullptr;
    }
    // bfloat16 asked for: FP8 checkpoints' dense weights dequantized to BF16 like the others.
    if (act == "bfloat16") backend->set_fp8_gemms(false);
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
