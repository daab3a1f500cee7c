// Normalizers, and Unicode normalization over utf8proc pinned to Hugging Face's tables.
#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace ls::tok {
namespace {

using json = nlohmann::json;

// Code points utf8proc's tables (Unicode 15) normalize but Hugging Face's do not: they were
// assigned, or gained their decomposition, combining class or composition, after the Unicode
// version `tokenizers` 0.23 was built with. Written by models/reference/hf_unicode_pin.py.
constexpr CodePointRange kHfUnknownToNormalization[] = {
#include "tokenizer/hf_unicode_pin.inc"
};

bool HfUnknown(uint32_t cp) { return InRanges(kHfUnknownToNormalization, cp); }

void AppendNormalized(std::string_view s, NormalForm form, std::string* out) {
  if (s.empty()) return;
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* mapped = nullptr;
  // Length-bounded (no UTF8PROC_NULLTERM), so a NUL is an ordinary character.
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                   &mapped, static_cast<utf8proc_option_t>(options));
  if (n < 0) {
    out->append(s);  // cannot happen for valid UTF-8; keep the text rather than lose it
  } else {
    out->append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
  }
  std::free(mapped);
}

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(NormalForm form) : form_(form) {}
  void Normalize(std::string* text) const override { *text = NormalizeUnicode(*text, form_); }

 private:
  NormalForm form_;
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::unique_ptr<Regex> re, std::string content)
      : literal_(std::move(literal)), re_(std::move(re)), content_(std::move(content)) {}
  void Normalize(std::string* text) const override {
    std::string out;
    size_t prev = 0;
    if (re_) {
      for (auto [b, e] : re_->FindAll(*text)) {
        out.append(*text, prev, b - prev);
        out += content_;
        prev = e;
      }
    } else {
      if (literal_.empty()) return;
      for (size_t at = text->find(literal_); at != std::string::npos; at = text->find(literal_, prev)) {
        out.append(*text, prev, at - prev);
        out += content_;
        prev = at + literal_.size();
      }
    }
    if (prev == 0 && out.empty()) return;  // no match
    out.append(*text, prev, std::string::npos);
    *text = std::move(out);
  }

 private:
  std::string literal_;
  std::unique_ptr<Regex> re_;
  std::string content_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void Normalize(std::string* text) const override {
    for (const auto& s : steps_) s->Normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError("normalizer " + what); }

}  // namespace

std::string NormalizeUnicode(std::string_view text, NormalForm form) {
  bool ascii = true;
  for (char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);  // every normal form leaves ASCII as it is
  std::string out;
  out.reserve(text.size());
  size_t seg = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    if (!HfUnknown(NextCodePoint(text, &i))) continue;
    // A character the reference does not know blocks reordering and composition on both sides.
    AppendNormalized(text.substr(seg, at - seg), form, &out);
    out.append(text.substr(at, i - at));
    seg = i;
  }
  AppendNormalized(text.substr(seg), form, &out);
  return out;
}

absl::StatusOr<std::unique_ptr<Normalizer>> Normalizer::FromJson(const json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return absl::InvalidArgumentError("normalizer: expected an object with a \"type\"");
  const std::string type = j["type"];
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfc);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfd);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkc);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormalForm::kNfkd);
  if (type == "Prepend") {
    if (!j.contains("prepend") || !j["prepend"].is_string()) return Bad("Prepend: missing \"prepend\" string");
    return std::make_unique<PrependNormalizer>(j["prepend"].get<std::string>());
  }
  if (type == "Replace") {
    if (!j.contains("content") || !j["content"].is_string()) return Bad("Replace: missing \"content\" string");
    const json pat = j.value("pattern", json::object());
    if (pat.contains("String") && pat["String"].is_string())
      return std::make_unique<ReplaceNormalizer>(pat["String"].get<std::string>(), nullptr, j["content"]);
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      auto re = Regex::Compile(pat["Regex"].get<std::string>());
      if (!re.ok()) return Bad(absl::StrCat("Replace: ", re.status().message()));
      return std::make_unique<ReplaceNormalizer>("", std::move(*re), j["content"]);
    }
    return Bad("Replace: \"pattern\" needs a \"String\" or a \"Regex\"");
  }
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return Bad("Sequence: missing \"normalizers\" list");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const auto& n : j["normalizers"]) {
      auto s = FromJson(n);
      if (!s.ok()) return s.status();
      steps.push_back(std::move(*s));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  return absl::InvalidArgumentError("unsupported: normalizer " + type);
}

}  // namespace ls::tok
