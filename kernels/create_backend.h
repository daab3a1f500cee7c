// CreateBackend: the compute backend a binary runs on, chosen by name ("cpu", the default, or
// "cuda" in builds with the CUDA kernels), so that the server and tools share one switch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ls {

struct BackendOptions {
  std::string name = "cpu";
  int threads = 0;      // CPU worker threads (0: one per hardware thread)
  int cuda_device = 0;  // CUDA device index
};

// The backends this build can create.
std::vector<std::string> AvailableBackends();

// Null with *error set (naming the backend and why) when it cannot be created.
std::unique_ptr<Backend> CreateBackend(const BackendOptions& options, std::string* error);

}  // namespace ls
