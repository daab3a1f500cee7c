// Split, ByteLevel and Sequence pre-tokenizers.
#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace ls::tok {

const char kGpt2Pattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

using json = nlohmann::json;

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Offsets of the parts `matches` cut `s` into, flagged as match or not (HF Pattern::find_matches).
struct Part {
  size_t b, e;
  bool match;
};

// Splits piece `p` at `parts` according to `behavior` (HF NormalizedString::split).
void SplitParts(const std::vector<Part>& parts, Behavior behavior, const PreToken& p, std::vector<PreToken>* out) {
  std::vector<std::pair<size_t, size_t>> pieces;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Part& q : parts)
        if (!q.match) pieces.emplace_back(q.b, q.e);
      break;
    case Behavior::kIsolated:
      for (const Part& q : parts) pieces.emplace_back(q.b, q.e);
      break;
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Part& q : parts) {
        if (q.match && !previous_match && !pieces.empty()) {
          pieces.back().second = q.e;
        } else {
          pieces.emplace_back(q.b, q.e);
        }
        previous_match = q.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      // Walks from the end: a match joins the piece after it unless it follows another match.
      bool previous_match = false;
      for (size_t k = parts.size(); k-- > 0;) {
        const Part& q = parts[k];
        if (q.match && !previous_match && !pieces.empty()) {
          pieces.back().first = q.b;
        } else {
          pieces.emplace_back(q.b, q.e);
        }
        previous_match = q.match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const Part& q : parts) {
        if (q.match == previous_match && !pieces.empty()) {
          pieces.back().second = q.e;
        } else {
          pieces.emplace_back(q.b, q.e);
        }
        previous_match = q.match;
      }
      break;
    }
  }
  for (auto [b, e] : pieces)
    if (e > b) out->push_back({p.text.substr(b, e - b), p.at_start && b == 0});
}

// Splits piece `p` by the regex's matches according to `behavior`.
void SplitOne(const Regex& re, Behavior behavior, bool invert, const PreToken& p, std::vector<PreToken>* out) {
  if (behavior == Behavior::kIsolated) {  // the hot path of byte-level BPE: no part list
    size_t prev = 0;
    for (auto [b, e] : re.FindAll(p.text)) {
      if (b > prev) out->push_back({p.text.substr(prev, b - prev), p.at_start && prev == 0});
      out->push_back({p.text.substr(b, e - b), p.at_start && b == 0});
      prev = e;
    }
    if (prev < p.text.size()) out->push_back({p.text.substr(prev), p.at_start && prev == 0});
    return;
  }
  std::vector<Part> parts;
  size_t prev = 0;
  for (auto [b, e] : re.FindAll(p.text)) {
    if (b > prev) parts.push_back({prev, b, invert});
    parts.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < p.text.size()) parts.push_back({prev, p.text.size(), invert});
  SplitParts(parts, behavior, p, out);
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> re, Behavior b, bool invert) : re_(std::move(re)), behavior_(b), invert_(invert) {}
  std::vector<PreToken> Apply(std::vector<PreToken> pieces) const override {
    std::vector<PreToken> out;
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
  std::vector<PreToken> Apply(std::vector<PreToken> pieces) const override {
    std::vector<PreToken> split;
    for (auto& p : pieces) {
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(p.text.begin(), ' ');
      if (re_) {
        SplitOne(*re_, Behavior::kIsolated, false, p, &split);
      } else if (!p.text.empty()) {
        split.push_back(std::move(p));
      }
    }
    const ByteLevel& bl = ByteLevel::Get();
    for (auto& p : split) p.text = bl.Encode(p.text);
    return split;
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;
};

// Spaces become the replacement character, which is prepended per the scheme; with split, each
// replacement character starts a new pre-token (HF MergedWithNext).
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(std::string replacement, Prepend scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  std::vector<PreToken> Apply(std::vector<PreToken> pieces) const override {
    std::vector<PreToken> out;
    for (auto& p : pieces) {
      std::string t;
      t.reserve(p.text.size() + 8);
      for (char c : p.text) {
        if (c == ' ') {
          t += replacement_;
        } else {
          t.push_back(c);
        }
      }
      const bool starts = t.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == Prepend::kAlways || (scheme_ == Prepend::kFirst && p.at_start))) t.insert(0, replacement_);
      PreToken q{std::move(t), p.at_start};
      if (!split_) {
        if (!q.text.empty()) out.push_back(std::move(q));
        continue;
      }
      std::vector<Part> parts;
      size_t prev = 0;
      for (size_t at = q.text.find(replacement_); at != std::string::npos; at = q.text.find(replacement_, prev)) {
        if (at > prev) parts.push_back({prev, at, false});
        parts.push_back({at, at + replacement_.size(), true});
        prev = at + replacement_.size();
      }
      if (prev < q.text.size()) parts.push_back({prev, q.text.size(), false});
      SplitParts(parts, Behavior::kMergedWithNext, q, &out);
    }
    return out;
  }

 private:
  std::string replacement_;
  Prepend scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  std::vector<PreToken> Apply(std::vector<PreToken> pieces) const override {
    for (const auto& s : steps_) pieces = s->Apply(std::move(pieces));
    return pieces;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

absl::Status UnsupportedPreTokenizer(const std::string& what) {
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
  if (type == "Metaspace") {
    if (!j.contains("replacement") || !j["replacement"].is_string() || j["replacement"].get<std::string>().empty())
      return absl::InvalidArgumentError("pre_tokenizer Metaspace: missing \"replacement\" character");
    const std::string scheme = j.value("prepend_scheme", std::string("always"));
    using P = MetaspacePreTokenizer::Prepend;
    P p;
    if (scheme == "always") p = P::kAlways;
    else if (scheme == "first") p = P::kFirst;
    else if (scheme == "never") p = P::kNever;
    else return UnsupportedPreTokenizer("Metaspace prepend_scheme " + scheme);
    // Older files say add_prefix_space instead; false means never (HF refuses it with another scheme).
    if (j.contains("add_prefix_space") && j["add_prefix_space"].is_boolean() && !j["add_prefix_space"].get<bool>()) {
      if (p != P::kNever && j.contains("prepend_scheme"))
        return absl::InvalidArgumentError("pre_tokenizer Metaspace: add_prefix_space false contradicts prepend_scheme");
      p = P::kNever;
    }
    return std::unique_ptr<PreTokenizer>(
        new MetaspacePreTokenizer(j["replacement"].get<std::string>(), p, j.value("split", true)));
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
    else return UnsupportedPreTokenizer("Split behavior " + behavior);
    auto re = Regex::Compile(pattern);
    if (!re.ok()) return absl::InvalidArgumentError(absl::StrCat("pre_tokenizer Split: ", re.status().message()));
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(*re), b, j.value("invert", false)));
  }
  return UnsupportedPreTokenizer("pre_tokenizer " + type);
}

}  // namespace ls::tok
