// Fuzz target: the safetensors header parser on arbitrary file bytes. Whatever parses must lie
// inside the file.
#include <cstdint>
#include <cstdlib>

#include "models/loader/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto entries = ls::SafetensorsFile::ParseHeader(data, size, "fuzz");
  if (entries.ok()) {
    for (const auto& [name, e] : *entries) {
      const auto* p = static_cast<const uint8_t*>(e.data);
      if (p < data || p + e.bytes > data + size) std::abort();
    }
  }
  return 0;
}
