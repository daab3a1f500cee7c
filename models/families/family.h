// Family: one checkpoint architecture the server loads — how its config.json reads into a
// ModelConfig, the names of its tensors, and which tensors it leaves unread on purpose. Each
// family is one short file in models/families/ defining a Family; Families() lists them all.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "models/layers/tensor_names.h"
#include "models/loader/config_reader.h"
#include "models/loader/model_config.h"

namespace ls {

struct Family {
  std::string name;                        // as the README and the logs call it
  std::vector<std::string> architectures;  // config.json architectures[0]
  std::vector<std::string> model_types;    // config.json model_type, when architectures is absent
  // Fills everything but architecture, model_type and family; errors go through the reader.
  void (*read_config)(ConfigReader& r, ModelConfig* c) = nullptr;
  TensorNames names;
  // Whether a checkpoint tensor no layer reads is skipped on purpose (null: none is).
  bool (*unused_ok)(const std::string& tensor, const ModelConfig& c) = nullptr;
  // How its chat replies are read when the server's parser flags say "auto": the
  // --tool_call_parser name of the tool-call format the family writes ("" when none served here
  // is its format), and the --reasoning_parser name ("" leaves it to the chat template: think tags
  // when the template writes </think>). "xtml" for both is Kimi K3's XTML chat.
  std::string tool_call_format;
  std::string reasoning_format;
};

// Every family, in the order the README lists them.
const std::vector<const Family*>& Families();
// The family of an architecture and model_type: one that lists both (Kimi-K2 is a
// DeepseekV3ForCausalLM of its own model_type), else the architecture's, else (no architecture)
// the model_type's; null when none serves it.
const Family* FindFamily(const std::string& architecture, const std::string& model_type);

}  // namespace ls
