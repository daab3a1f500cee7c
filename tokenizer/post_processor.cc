// TemplateProcessing's single-sequence template as prefix and suffix ids.
#include "tokenizer/post_processor.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ls::tok {

using json = nlohmann::json;

absl::StatusOr<PostProcessor> PostProcessor::FromJson(const json& j) {
  PostProcessor p;
  if (!j.is_null())
    if (auto s = p.Add(j); !s.ok()) return s;
  return p;
}

// Composes `j` after what is already there: a later template wraps the earlier result.
absl::Status PostProcessor::Add(const json& j) {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError("post_processor " + m); };
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return bad("expects an object with a \"type\"");
  const std::string type = j["type"];
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array()) return bad("Sequence: missing \"processors\" list");
    for (const auto& p : j["processors"])
      if (auto s = Add(p); !s.ok()) return s;
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") return absl::InvalidArgumentError("unsupported: post_processor " + type);
  if (!j.contains("single") || !j["single"].is_array()) return bad("TemplateProcessing: missing \"single\" template");
  const json specials = j.value("special_tokens", json::object());
  std::vector<int32_t> before, after;
  int sequences = 0;
  for (const auto& piece : j["single"]) {
    if (piece.contains("Sequence")) {
      if (piece["Sequence"].value("id", std::string("A")) != "A")
        return bad("TemplateProcessing: the single template may only hold sequence A");
      ++sequences;
      continue;
    }
    if (!piece.contains("SpecialToken") || !piece["SpecialToken"].contains("id") ||
        !piece["SpecialToken"]["id"].is_string())
      return bad("TemplateProcessing: a piece must be a Sequence or a SpecialToken with an \"id\"");
    const std::string name = piece["SpecialToken"]["id"];
    if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
      return bad("TemplateProcessing: special token \"" + name + "\" is not in \"special_tokens\"");
    for (const auto& id : specials[name]["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24))
        return bad("TemplateProcessing: special token \"" + name + "\" has an invalid id");
      (sequences == 0 ? before : after).push_back(id.get<int32_t>());
    }
  }
  if (sequences != 1) return bad("TemplateProcessing: the single template must hold $A exactly once");
  prefix_.insert(prefix_.begin(), before.begin(), before.end());
  suffix_.insert(suffix_.end(), after.begin(), after.end());
  return absl::OkStatus();
}

void PostProcessor::Apply(std::vector<int32_t>* ids) const {
  if (!prefix_.empty()) ids->insert(ids->begin(), prefix_.begin(), prefix_.end());
  ids->insert(ids->end(), suffix_.begin(), suffix_.end());
}

}  // namespace ls::tok
