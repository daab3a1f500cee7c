// Fuzz target: the structured-output compilers (JSON schema, regex, EBNF, structural tag) on
// arbitrary text, and, where one compiles, the matcher driven by the rest of the input (bytes
// fed, masks built over a one-byte vocabulary). The first byte picks the compiler; a 0 byte separates the constraint
// from the bytes fed. Any error must be a status, never a crash or a hang.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "structured/ebnf.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured/output_constraint.h"
#include "structured/regex.h"
#include "structured/structural_tag.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = all.find('\0');
  const std::string_view text = all.substr(0, cut), feed = cut == std::string_view::npos ? "" : all.substr(cut + 1);
  absl::StatusOr<ls::structured::Grammar> g = absl::InvalidArgumentError("");
  switch (data[0] % 4) {
    case 0: {
      const auto j = nlohmann::ordered_json::parse(text, nullptr, false);
      if (j.is_discarded()) return 0;
      g = ls::structured::JsonSchemaGrammar(j);
      break;
    }
    case 3: {
      const auto j = nlohmann::ordered_json::parse(text, nullptr, false);
      if (j.is_discarded()) return 0;
      auto tag = ls::structured::StructuralTag::Parse(j);
      if (!tag.ok()) return 0;
      ls::structured::OutputConstraint c;
      c.kind = ls::structured::OutputConstraint::Kind::kStructuralTag;
      c.text = tag->ToJson().dump();
      g = ls::structured::BuildGrammar(c);
      break;
    }
    case 1: g = ls::structured::RegexGrammar(text); break;
    default: g = ls::structured::EbnfGrammar(text); break;
  }
  if (!g.ok()) {
    if (g.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  ls::structured::Matcher m(std::make_shared<ls::structured::CompiledGrammar>(
      std::move(*g), std::make_shared<ls::structured::TokenTrie>(bytes), "fuzz"));
  std::vector<float> logits(256);
  for (size_t i = 0; i < feed.size() && i < 256; ++i) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    if (!m.MaskLogits(logits.data(), 256, {})) break;
    const auto b = static_cast<uint8_t>(feed[i]);
    // Masks and Accept agree: a byte is allowed exactly when it is taken.
    const bool allowed = logits[b] == 0.0f;
    if (m.Accept(b) != allowed) std::abort();
  }
  return 0;
}
