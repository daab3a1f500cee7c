// Kimi-K2 (config.json model_type kimi_k2, architectures DeepseekV3ForCausalLM): DeepSeek-V3's
// architecture, config keys and tensor names, with Moonshot's tokenizer (tiktoken.model) and
// Kimi-K2's tool-call format.
#include "models/families/families.h"
#include "models/loader/common_keys.h"

namespace ls {

const Family kKimiK2 = {
    .name = "Kimi-K2",
    .architectures = {"DeepseekV3ForCausalLM"},
    .model_types = {"kimi_k2"},
    .read_config = ReadDeepseekV3Config,
    .unused_ok = IsMtpLayerTensor,
    .tool_call_format = "kimi_k2",
};

}  // namespace ls
