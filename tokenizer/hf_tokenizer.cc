// tokenizer.json loading, the encode pipeline and decode streams.
#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tokenizer/utf8.h"

namespace ls::tok {
namespace {

using json = nlohmann::json;

absl::Status Unsupported(const std::string& what) { return absl::InvalidArgumentError("unsupported: " + what); }

}  // namespace

// Decoding with the tokenizer's decoder chain, special tokens dropped before it when skipping.
class HfTokenizer::Stream final : public DecodeStream {
 public:
  Stream(const HfTokenizer* t, bool skip_special) : t_(t), skip_(skip_special), chain_(t->decoder_->NewStream()) {}
  absl::StatusOr<std::string> Push(int32_t id) override {
    const std::string* form = t_->DecodeForm(id);
    if (!form)
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ", t_->vocab_size(), ")"));
    std::string out;
    if (!(skip_ && t_->Skipped(id))) chain_->Push(*form, &out);
    return out;
  }
  std::string Finish() override {
    std::string out;
    chain_->Finish(&out);
    return out;
  }

 private:
  const HfTokenizer* t_;
  bool skip_;
  std::unique_ptr<Decoder::Stream> chain_;
};

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::FromJson(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("invalid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("expected a JSON object");
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  try {
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      auto n = Normalizer::FromJson(j["normalizer"]);
      if (!n.ok()) return n.status();
      t->normalizer_ = std::move(*n);
    }
    if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
      auto pre = PreTokenizer::FromJson(j["pre_tokenizer"]);
      if (!pre.ok()) return pre.status();
      t->pre_ = std::move(*pre);
    }
    if (!j.contains("model")) return absl::InvalidArgumentError("missing \"model\"");
    auto model = BpeModel::FromJson(j["model"]);
    if (!model.ok()) return model.status();
    t->model_ = std::move(*model);
    auto decoder = Decoder::FromJson(j.value("decoder", json()));
    if (!decoder.ok()) return decoder.status();
    t->decoder_ = std::move(*decoder);
    auto post = PostProcessor::FromJson(j.value("post_processor", json()));
    if (!post.ok()) return post.status();
    t->post_ = std::move(*post);
    if (j.contains("truncation") && !j["truncation"].is_null()) return Unsupported("truncation");
    if (j.contains("padding") && !j["padding"].is_null() && j["padding"].value("strategy", json()) != "BatchLongest")
      return Unsupported("padding other than BatchLongest");  // one sequence: BatchLongest pads nothing
    t->vocab_size_ = t->model_->size();
    std::unordered_set<std::string> special_contents;
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const auto& a : j["added_tokens"]) {
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
            !a["content"].is_string() || a["content"].get<std::string>().empty())
          return absl::InvalidArgumentError(
              "added_tokens: each entry needs an integer \"id\" and a non-empty \"content\"");
        AddedToken tok;
        tok.id = a["id"].get<int32_t>();
        tok.content = a["content"];
        tok.special = a.value("special", false);
        tok.lstrip = a.value("lstrip", false);
        tok.rstrip = a.value("rstrip", false);
        tok.single_word = a.value("single_word", false);
        tok.normalized = a.value("normalized", !tok.special);
        if (tok.id < 0 || tok.id > (1 << 24)) return absl::InvalidArgumentError("added_tokens: id out of range");
        if (t->added_by_content_.count(tok.content)) continue;  // HF keeps the first of a content
        std::string form = tok.content;
        if (tok.normalized && t->normalizer_) {
          t->normalizer_->Normalize(&form);
          if (form != tok.content) t->added_decode_form_[tok.id] = form;
        }
        if (tok.special) special_contents.insert(tok.content);
        t->vocab_size_ = std::max(t->vocab_size_, tok.id + 1);
        t->added_by_content_[tok.content] = tok.id;
        t->added_by_id_[tok.id] = t->added_.tokens().size();
        t->added_.Add(tok, std::move(form));
      }
    }
    // skip_special drops an id when the string it decodes from is a special token's content.
    t->skipped_.assign(t->vocab_size_, false);
    if (!special_contents.empty())
      for (int32_t id = 0; id < t->vocab_size_; ++id)
        if (const std::string* f = t->DecodeForm(id)) t->skipped_[id] = special_contents.count(*f) > 0;
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed tokenizer.json: ", e.what()));
  }
  return t;
}

const std::string* HfTokenizer::DecodeForm(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return nullptr;
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) {
    auto f = added_decode_form_.find(id);
    return f != added_decode_form_.end() ? &f->second : &added_.tokens()[it->second].content;
  }
  return model_->IdToToken(id);
}

bool HfTokenizer::Skipped(int32_t id) const { return id >= 0 && id < vocab_size_ && skipped_[id]; }

int32_t HfTokenizer::TokenToId(const std::string& token) const {
  if (auto it = added_by_content_.find(token); it != added_by_content_.end()) return it->second;
  return model_->TokenToId(token);
}

bool HfTokenizer::IsSpecial(int32_t id) const {
  auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && added_.tokens()[it->second].special;
}

// One stretch of raw text between non-normalized added tokens: normalize, cut out normalized
// added tokens, pre-tokenize and run the model.
void HfTokenizer::EncodeSegment(std::string text, bool at_start, bool skip_special, std::vector<int32_t>* ids) const {
  if (normalizer_) normalizer_->Normalize(&text);
  std::vector<PreToken> pieces;
  if (added_.HasTokens(/*normalized_set=*/true)) {
    for (const TextSpan& s : added_.Split(text, true, skip_special)) {
      if (s.id >= 0) {
        if (pre_) {
          for (const PreToken& p : pre_->Apply(std::move(pieces))) model_->Tokenize(p.text, ids);
        } else {
          for (const PreToken& p : pieces) model_->Tokenize(p.text, ids);
        }
        pieces.clear();
        ids->push_back(s.id);
        continue;
      }
      pieces.push_back({text.substr(s.begin, s.end - s.begin), at_start && s.begin == 0});
    }
  } else if (!text.empty()) {
    pieces.push_back({std::move(text), at_start});
  }
  if (pre_) pieces = pre_->Apply(std::move(pieces));
  for (const PreToken& p : pieces) model_->Tokenize(p.text, ids);
}

absl::StatusOr<std::vector<int32_t>> HfTokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos)
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 (byte offset ", bad, ")"));
  const bool skip_special = options.special == SpecialText::kAsText;
  std::vector<int32_t> ids;
  for (const TextSpan& s : added_.Split(text, /*normalized_set=*/false, skip_special)) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      EncodeSegment(std::string(text.substr(s.begin, s.end - s.begin)), s.begin == 0, skip_special, &ids);
    }
  }
  if (options.add_special_tokens) post_.Apply(&ids);
  return ids;
}

std::unique_ptr<DecodeStream> HfTokenizer::NewDecodeStream(bool skip_special) const {
  return std::make_unique<Stream>(this, skip_special);
}

bool HfTokenizer::AppendTokenBytes(int32_t id, bool skip_special, std::string* bytes) const {
  const std::string* form = DecodeForm(id);
  if (!form) return false;
  if (!(skip_special && Skipped(id))) decoder_->AppendPiece(*form, bytes);
  return true;
}

}  // namespace ls::tok
