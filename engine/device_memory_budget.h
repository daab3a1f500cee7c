// The KV cache's size from the device's memory (EngineConfig::gpu_memory_utilization, vLLM's
// --gpu-memory-utilization): what is left of that fraction of the device once the weights are in
// place and the largest step has run once. Called by Engine::Create before it sizes its cache.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace ls {

// Runs a probe engine over `model` (config with a cache just large enough for the warm-up step),
// so that the step's buffers reach their full size, and returns utilization × total − in use
// afterwards: the bytes for kv_cache_bytes. An error naming the setting when the backend has no
// device memory of its own, in a rank group, or when nothing is left.
absl::StatusOr<size_t> KvCacheBytesFromDeviceMemory(Model* model, const tok::Tokenizer* tokenizer,
                                                    const EngineConfig& config);

}  // namespace ls
