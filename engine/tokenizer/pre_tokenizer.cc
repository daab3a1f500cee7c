// Split, ByteLevel and Sequence pre-tokenizers.
#include "engine/tokenizer/pre_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/regex.h"
#include "nlohmann/json.hpp"

namespace ls::tok {

const char kGpt2Pattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

using json = nlohmann::json;

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits `s` by the regex's matches according to `behavior` (HF SplitDelimiterBehavior).
void SplitOne(const Regex& re, Behavior behavior, bool invert, const std::string& s, std::vector<std::string>* out) {
  // Pieces as (begin, end, is_match).
  struct Part {
    size_t b, e;
    bool match;
  };
  std::vector<Part> parts;
  size_t prev = 0;
  for (auto [b, e] : re.FindAll(s)) {
    if (b > prev) parts.push_back({prev, b, invert});
    parts.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < s.size()) parts.push_back({prev, s.size(), invert});

  std::vector<std::pair<size_t, size_t>> pieces;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Part& p : parts)
        if (!p.match) pieces.emplace_back(p.b, p.e);
      break;
    case Behavior::kIsolated:
      for (const Part& p : parts) pieces.emplace_back(p.b, p.e);
      break;
    case Behavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.match && !pieces.empty() && !parts.empty() && pieces.back().second == p.b) {
          pieces.back().second = p.e;
        } else {
          pieces.emplace_back(p.b, p.e);
        }
      }
      break;
    case Behavior::kMergedWithNext: {
      bool carry = false;
      for (const Part& p : parts) {
        if (carry) {
          pieces.back().second = p.e;
        } else {
          pieces.emplace_back(p.b, p.e);
        }
        carry = p.match;
      }
      break;
    }
    case Behavior::kContiguous: {
      bool last_match = false;
      for (const Part& p : parts) {
        if (p.match && last_match) {
          pieces.back().second = p.e;
        } else {
          pieces.emplace_back(p.b, p.e);
        }
        last_match = p.match;
      }
      break;
    }
  }
  for (auto [b, e] : pieces)
    if (e > b) out->push_back(s.substr(b, e - b));
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> re, Behavior b, bool invert) : re_(std::move(re)), behavior_(b), invert_(invert) {}
  std::vector<std::string> Apply(std::vector<std::string> pieces) const override {
    std::vector<std::string> out;
    for (const auto& p : pieces) SplitOne(*re_, behavior_, invert_, p, &out);
    return out;
  }

 private:
  std::unique_ptr<Regex> re_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> re)
      : add_prefix_space_(add_prefix_space), re_(std::move(re)) {}
  bool is_byte_level() const override { return true; }
  std::vector<std::string> Apply(std::vector<std::string> pieces) const override {
    std::vector<std::string> split;
    for (auto& p : pieces) {
      if (add_prefix_space_ && (p.empty() || p[0] != ' ')) p.insert(p.begin(), ' ');
      if (re_) {
        SplitOne(*re_, Behavior::kIsolated, false, p, &split);
      } else {
        split.push_back(std::move(p));
      }
    }
    const ByteLevel& bl = ByteLevel::Get();
    for (auto& p : split) p = bl.Encode(p);
    return split;
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  bool is_byte_level() const override {
    for (const auto& s : steps_)
      if (s->is_byte_level()) return true;
    return false;
  }
  std::vector<std::string> Apply(std::vector<std::string> pieces) const override {
    for (const auto& s : steps_) pieces = s->Apply(std::move(pieces));
    return pieces;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

absl::Status Unsupported(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("unsupported: ", what));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromJson(const json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return absl::InvalidArgumentError("pre_tokenizer: expected an object with a \"type\"");
  const std::string type = j["type"];
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      return absl::InvalidArgumentError("pre_tokenizer Sequence: missing \"pretokenizers\" list");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (const auto& s : j["pretokenizers"]) {
      auto p = FromJson(s);
      if (!p.ok()) return p.status();
      steps.push_back(std::move(*p));
    }
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(steps)));
  }
  if (type == "ByteLevel") {
    const bool prefix = j.value("add_prefix_space", false);
    std::unique_ptr<Regex> re;
    if (j.value("use_regex", true)) {
      auto r = Regex::Compile(kGpt2Pattern);
      if (!r.ok()) return r.status();
      re = std::move(*r);
    }
    return std::unique_ptr<PreTokenizer>(new ByteLevelPreTokenizer(prefix, std::move(re)));
  }
  if (type == "Split") {
    const auto& pat = j.value("pattern", json::object());
    std::string pattern;
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      pattern = pat["Regex"];
    } else if (pat.contains("String") && pat["String"].is_string()) {
      // A literal string: escape it for PCRE2.
      pattern = "\\Q" + pat["String"].get<std::string>() + "\\E";
    } else {
      return absl::InvalidArgumentError("pre_tokenizer Split: missing pattern");
    }
    const std::string behavior = j.value("behavior", "Isolated");
    Behavior b;
    if (behavior == "Isolated") b = Behavior::kIsolated;
    else if (behavior == "Removed") b = Behavior::kRemoved;
    else if (behavior == "MergedWithPrevious") b = Behavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext") b = Behavior::kMergedWithNext;
    else if (behavior == "Contiguous") b = Behavior::kContiguous;
    else return Unsupported("Split behavior " + behavior);
    auto re = Regex::Compile(pattern);
    if (!re.ok()) return absl::InvalidArgumentError(absl::StrCat("pre_tokenizer Split: ", re.status().message()));
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(*re), b, j.value("invert", false)));
  }
  return Unsupported("pre_tokenizer " + type);
}

}  // namespace ls::tok
