// The families the server loads, each defined in its own file in this directory and listed
// once in families.cc.
#pragma once

#include "models/families/family.h"

namespace ls {

extern const Family kStableLatentMoe;
extern const Family kQwen3Moe;
extern const Family kQwen3;
extern const Family kQwen2Moe;
extern const Family kMixtral;
extern const Family kGlm4Moe;
extern const Family kDeepseekV3;
extern const Family kKimiK2;
extern const Family kDeepseekV2;
extern const Family kKimiLinear;
extern const Family kKimiK3;

// DeepSeek-V3's config adapter, which Kimi-K2 (the same architecture) shares.
void ReadDeepseekV3Config(ConfigReader& r, ModelConfig* c);

}  // namespace ls
