// KvCacheBytesFromDeviceMemory: a probe engine's warm-up, then the device's memory read.
#include "engine/device_memory_budget.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ls {

absl::StatusOr<size_t> KvCacheBytesFromDeviceMemory(Model* model, const tok::Tokenizer* tokenizer,
                                                    const EngineConfig& config) {
  const double u = config.gpu_memory_utilization;
  if (!(u > 0 && u <= 1))
    return absl::InvalidArgumentError(absl::StrCat("gpu_memory_utilization must be in (0, 1], got ", u));
  Backend* backend = model->backend();
  size_t free_bytes = 0, total_bytes = 0;
  if (!backend->DeviceMemory(&free_bytes, &total_bytes))
    return absl::InvalidArgumentError(
        absl::StrCat("gpu_memory_utilization needs a backend with device memory of its own "
                     "(cuda); the ",
                     std::string(backend->name()), " backend has none: size the cache with kv_cache_mb"));
  if (config.ranks && config.ranks->num_processes() > 1)
    return absl::InvalidArgumentError(
        "gpu_memory_utilization is not available in a rank group yet: size the cache "
        "with kv_cache_mb");
  // The probe: blocks for the warm-up's largest step (max_num_batched_tokens over up to
  // max_num_seqs sequences), no prefix-cache snapshots, the rest as configured.
  EngineConfig probe = config;
  probe.gpu_memory_utilization = 0;
  probe.warmup = true;
  probe.enable_prefix_caching = false;
  probe.num_kv_blocks = (config.scheduler.max_num_batched_tokens + config.block_size - 1) / config.block_size +
                        config.scheduler.max_num_seqs + 1;
  {
    auto engine = Engine::Create(model, tokenizer, probe);
    if (!engine.ok())
      return absl::Status(engine.status().code(),
                          absl::StrCat("gpu_memory_utilization: the warm-up step to measure memory failed: ",
                                       engine.status().message()));
  }
  if (!backend->DeviceMemory(&free_bytes, &total_bytes))
    return absl::InternalError("gpu_memory_utilization: the backend stopped reporting its memory");
  const double used = static_cast<double>(total_bytes - free_bytes);
  const double budget = u * static_cast<double>(total_bytes) - used;
  auto gib = [](double b) { return absl::StrFormat("%.2f GiB", b / (1 << 30)); };
  if (budget < static_cast<double>(size_t{16} << 20))
    return absl::ResourceExhaustedError(
        absl::StrCat("gpu_memory_utilization ", u, " leaves no room for the KV cache: ", gib(used), " of the device's ",
                     gib(static_cast<double>(total_bytes)),
                     " is in use after the weights and a warm-up step (this process and any "
                     "other), and ",
                     u, " of it is ", gib(u * static_cast<double>(total_bytes))));
  return static_cast<size_t>(budget);
}

}  // namespace ls
