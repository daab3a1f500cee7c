// Fuzz target: config.json parsing and validation on arbitrary text.
#include <cstdint>
#include <string>

#include "models/families/load_config.h"
#include "models/loader/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)ls::ParseModelConfig(text, "fuzz/config.json");
  return 0;
}
