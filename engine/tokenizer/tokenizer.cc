// Tokenizer loading, encoding and decoding.
#include "engine/tokenizer/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace ls::tok {
namespace {

using json = nlohmann::json;

absl::Status Unsupported(const std::string& what) { return absl::InvalidArgumentError("unsupported: " + what); }

// Reads the normalizer section: null, NFC, or a Sequence of NFC.
absl::StatusOr<bool> ParseNormalizer(const json& j) {
  if (j.is_null()) return false;
  const std::string type = j.value("type", std::string("?"));
  if (type == "NFC") return true;
  if (type == "Sequence" && j.contains("normalizers") && j["normalizers"].is_array()) {
    bool nfc = false;
    for (const auto& n : j["normalizers"]) {
      auto r = ParseNormalizer(n);
      if (!r.ok()) return r.status();
      nfc |= *r;
    }
    return nfc;
  }
  return Unsupported("normalizer " + type);
}

// Reads the decoder section; sets which byte transforms decoding applies.
absl::Status ParseDecoder(const json& j, bool* byte_level, bool* byte_fallback) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = j.value("type", std::string("?"));
  if (type == "ByteLevel") {
    *byte_level = true;
  } else if (type == "ByteFallback") {
    *byte_fallback = true;
  } else if (type == "Fuse") {
    // Joining pieces is what decoding does anyway.
  } else if (type == "Sequence" && j.contains("decoders") && j["decoders"].is_array()) {
    for (const auto& d : j["decoders"])
      if (auto s = ParseDecoder(d, byte_level, byte_fallback); !s.ok()) return s;
  } else {
    return Unsupported("decoder " + type);
  }
  return absl::OkStatus();
}

bool IsWordChar(std::string_view text, size_t pos_before_or_at, bool before) {
  // ASCII approximation of a word boundary check for single_word added tokens.
  if (before) {
    if (pos_before_or_at == 0) return false;
    const unsigned char c = static_cast<unsigned char>(text[pos_before_or_at - 1]);
    return std::isalnum(c) || c == '_' || c >= 0x80;
  }
  if (pos_before_or_at >= text.size()) return false;
  const unsigned char c = static_cast<unsigned char>(text[pos_before_or_at]);
  return std::isalnum(c) || c == '_' || c >= 0x80;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = FromJson(ss.str());
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("invalid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("expected a JSON object");
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  try {
    auto nfc = ParseNormalizer(j.value("normalizer", json()));
    if (!nfc.ok()) return nfc.status();
    t->nfc_ = *nfc;
    if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
      auto pre = PreTokenizer::FromJson(j["pre_tokenizer"]);
      if (!pre.ok()) return pre.status();
      t->pre_ = std::move(*pre);
    }
    if (!j.contains("model")) return absl::InvalidArgumentError("missing \"model\"");
    auto model = BpeModel::FromJson(j["model"]);
    if (!model.ok()) return model.status();
    t->model_ = std::move(*model);
    if (auto s = ParseDecoder(j.value("decoder", json()), &t->byte_level_decoder_, &t->byte_fallback_decoder_);
        !s.ok())
      return s;
    if (j.contains("post_processor") && !j["post_processor"].is_null()) {
      const std::string pp = j["post_processor"].value("type", std::string("?"));
      if (pp != "ByteLevel") return Unsupported("post_processor " + pp);
    }
    t->vocab_size_ = t->model_->size();
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const auto& a : j["added_tokens"]) {
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
            !a["content"].is_string() || a["content"].get<std::string>().empty())
          return absl::InvalidArgumentError("added_tokens: each entry needs an integer \"id\" and a non-empty \"content\"");
        AddedToken tok{a["id"].get<int32_t>(), a["content"], a.value("special", false), a.value("lstrip", false),
                       a.value("rstrip", false), a.value("single_word", false)};
        if (tok.id < 0 || tok.id > (1 << 24)) return absl::InvalidArgumentError("added_tokens: id out of range");
        t->vocab_size_ = std::max(t->vocab_size_, tok.id + 1);
        t->added_by_id_[tok.id] = t->added_.size();
        t->added_.push_back(std::move(tok));
      }
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed tokenizer.json: ", e.what()));
  }
  return t;
}

int32_t Tokenizer::TokenToId(const std::string& token) const {
  for (const auto& a : added_)
    if (a.content == token) return a.id;
  return model_->TokenToId(token);
}

bool Tokenizer::IsSpecial(int32_t id) const {
  auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && added_[it->second].special;
}

std::vector<std::pair<std::string, int32_t>> Tokenizer::SplitAdded(const std::string& text) const {
  std::vector<std::pair<std::string, int32_t>> out;
  size_t seg_begin = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* best = nullptr;
    for (const auto& a : added_) {
      if (text.compare(i, a.content.size(), a.content) != 0) continue;
      if (a.single_word && (IsWordChar(text, i, true) || IsWordChar(text, i + a.content.size(), false))) continue;
      if (!best || a.content.size() > best->content.size()) best = &a;
    }
    if (!best) {
      ++i;
      continue;
    }
    size_t b = i, e = i + best->content.size();
    if (best->lstrip)
      while (b > seg_begin && std::isspace(static_cast<unsigned char>(text[b - 1]))) --b;
    if (best->rstrip)
      while (e < text.size() && std::isspace(static_cast<unsigned char>(text[e]))) ++e;
    if (b > seg_begin) out.emplace_back(text.substr(seg_begin, b - seg_begin), -1);
    out.emplace_back(std::string(), best->id);
    seg_begin = i = e;
  }
  if (seg_begin < text.size()) out.emplace_back(text.substr(seg_begin), -1);
  return out;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text) const {
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos)
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 (byte offset ", bad, ")"));
  std::string normalized(text);
  if (nfc_ && !normalized.empty()) {
    utf8proc_uint8_t* n = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(normalized.c_str()));
    if (!n) return absl::InvalidArgumentError("text could not be NFC-normalized");
    normalized.assign(reinterpret_cast<char*>(n));
    std::free(n);
  }
  std::vector<int32_t> ids;
  for (auto& [segment, added_id] : SplitAdded(normalized)) {
    if (added_id >= 0) {
      ids.push_back(added_id);
      continue;
    }
    std::vector<std::string> pieces{std::move(segment)};
    if (pre_) pieces = pre_->Apply(std::move(pieces));
    for (const auto& p : pieces) model_->Tokenize(p, &ids);
  }
  return ids;
}

bool Tokenizer::AppendTokenBytes(int32_t id, bool skip_special, std::string* bytes) const {
  if (id < 0 || id >= vocab_size_) return false;
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) {
    const AddedToken& a = added_[it->second];
    if (!(a.special && skip_special)) bytes->append(a.content);
    return true;
  }
  const std::string* tok = model_->IdToToken(id);
  if (!tok) return false;
  if (byte_fallback_decoder_ && tok->size() == 6 && tok->compare(0, 3, "<0x") == 0 && (*tok)[5] == '>') {
    bytes->push_back(static_cast<char>(std::strtol(tok->substr(3, 2).c_str(), nullptr, 16)));
    return true;
  }
  if (!byte_level_decoder_) {
    bytes->append(*tok);
    return true;
  }
  const ByteLevel& bl = ByteLevel::Get();
  for (size_t i = 0; i < tok->size();) {
    const size_t start = i;
    const int b = bl.ByteOf(NextCodePoint(*tok, &i));
    if (b >= 0) {
      bytes->push_back(static_cast<char>(b));
    } else {
      bytes->append(*tok, start, i - start);
    }
  }
  return true;
}

absl::StatusOr<std::string> Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids)
    if (!AppendTokenBytes(id, skip_special, &bytes))
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is outside the vocabulary [0, ", vocab_size_, ")"));
  std::string text;
  DecodeUtf8Lossy(bytes, /*final=*/true, &text);
  return text;
}

}  // namespace ls::tok
