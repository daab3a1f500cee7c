// tiktoken.model loading, the chunk guard, rank-based BPE and control tokens.
#include "tokenizer/tiktoken_tokenizer.h"


#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/read_file.h"
#include "nlohmann/json.hpp"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace ls::tok {
namespace {

using json = nlohmann::json;

absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Strict standard base64 (tiktoken writes it padded, without line breaks).
bool DecodeBase64(std::string_view s, std::string* out) {
  if (s.empty() || s.size() % 4 != 0) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=')) return false;
  return absl::Base64Unescape(absl::string_view(s.data(), s.size()), out);
}

}  // namespace

class TiktokenTokenizer::Stream final : public DecodeStream {
 public:
  Stream(const TiktokenTokenizer* t, bool skip_special) : t_(t), skip_(skip_special) {}
  absl::StatusOr<std::string> Push(int32_t id) override {
    if (!t_->AppendTokenBytes(id, skip_, &pending_))
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ", t_->vocab_size(), ")"));
    std::string out;
    pending_.erase(0, DecodeUtf8Lossy(pending_, /*final=*/false, &out));
    return out;
  }
  std::string Finish() override {
    std::string out;
    DecodeUtf8Lossy(pending_, /*final=*/true, &out);
    pending_.clear();
    return out;
  }

 private:
  const TiktokenTokenizer* t_;
  bool skip_;
  std::string pending_;
};

absl::StatusOr<std::unique_ptr<TiktokenTokenizer>> TiktokenTokenizer::Load(const std::string& model_path,
                                                                           const std::string& tokenizer_config_path,
                                                                           const std::string& pattern) {
  auto model = ReadFile(model_path);
  if (!model.ok()) return model.status();
  std::string config;
  if (!tokenizer_config_path.empty()) {
    auto c = ReadFile(tokenizer_config_path);
    if (c.ok()) {
      config = std::move(*c);
    } else if (!absl::IsNotFound(c.status())) {
      return c.status();
    }
  }
  auto t = FromText(*model, config, pattern);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(model_path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::unique_ptr<TiktokenTokenizer>> TiktokenTokenizer::FromText(std::string_view model_text,
                                                                               std::string_view tokenizer_config_json,
                                                                               const std::string& pattern) {
  std::unique_ptr<TiktokenTokenizer> t(new TiktokenTokenizer());
  int64_t line_no = 0;
  std::vector<std::pair<int64_t, std::string>> entries;
  for (size_t b = 0; b < model_text.size();) {
    size_t e = model_text.find('\n', b);
    if (e == std::string_view::npos) e = model_text.size();
    std::string_view line = model_text.substr(b, e - b);
    b = e + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    int64_t rank;
    std::string bytes;
    if (sp == std::string_view::npos || !DecodeBase64(line.substr(0, sp), &bytes) ||
        !absl::SimpleAtoi(AsAbsl(line.substr(sp + 1)), &rank) || rank < 0 || bytes.empty())
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": expected \"<base64 token> <rank>\""));
    entries.emplace_back(rank, std::move(bytes));
  }
  const int64_t n = static_cast<int64_t>(entries.size());
  if (n == 0) return absl::InvalidArgumentError("no tokens");
  if (n > (1 << 24)) return absl::InvalidArgumentError("too many tokens");
  t->bytes_of_.resize(n);
  for (auto& [rank, bytes] : entries) {
    if (rank >= n)
      return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not below the number of tokens (", n,
                                                     "): ranks must be 0..N-1, control ids follow them"));
    if (!t->bytes_of_[rank].empty()) return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " appears twice"));
    if (!t->ranks_.emplace(bytes, static_cast<int32_t>(rank)).second)
      return absl::InvalidArgumentError(absl::StrCat("the bytes of rank ", rank, " appear twice"));
    t->bytes_of_[rank] = std::move(bytes);
  }
  for (int b = 0; b < 256; ++b)
    if (!t->ranks_.count(std::string(1, static_cast<char>(b))))
      return absl::InvalidArgumentError(
          absl::StrCat("the single byte 0x", absl::Hex(b, absl::kZeroPad2), " has no rank"));
  t->num_base_ = static_cast<int32_t>(n);

  std::unordered_map<int64_t, std::string> names;
  if (!tokenizer_config_json.empty()) {
    json c = json::parse(tokenizer_config_json.begin(), tokenizer_config_json.end(), nullptr, false);
    if (c.is_discarded() || !c.is_object())
      return absl::InvalidArgumentError("tokenizer_config.json is not a JSON object");
    if (c.contains("added_tokens_decoder") && c["added_tokens_decoder"].is_object()) {
      for (auto it = c["added_tokens_decoder"].begin(); it != c["added_tokens_decoder"].end(); ++it) {
        int64_t id;
        if (!absl::SimpleAtoi(it.key(), &id) || !it.value().is_object() || !it.value().contains("content") ||
            !it.value()["content"].is_string())
          return absl::InvalidArgumentError(absl::StrCat("tokenizer_config.json added_tokens_decoder[\"", it.key(),
                                                         "\"]: needs an id and a \"content\""));
        names[id] = it.value()["content"];
      }
    }
  }
  for (int32_t k = 0; k < kNumReserved; ++k) {
    const int32_t id = t->num_base_ + k;
    auto it = names.find(id);
    std::string name =
        it != names.end() && !it->second.empty() ? it->second : absl::StrCat("<|reserved_token_", id, "|>");
    t->control_ids_.emplace(name, id);
    AddedToken tok;
    tok.id = id;
    tok.content = name;
    tok.special = true;
    tok.normalized = false;
    t->controls_.Add(tok, name);
    t->control_names_.push_back(std::move(name));
  }
  auto re = Regex::Compile(pattern);
  if (!re.ok()) return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer pattern: ", re.status().message()));
  t->pattern_ = std::move(*re);
  return t;
}

std::vector<std::pair<size_t, size_t>> TiktokenTokenizer::GuardChunks(std::string_view text, size_t max_chars,
                                                                      size_t max_run) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t chunk_start = 0, chunk_chars = 0;
  size_t slice_start = 0, run = 0;
  bool run_is_space = false;
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    const bool space = IsPythonSpace(NextCodePoint(text, &i));
    if (chunk_chars == max_chars) {  // a new chunk starts: its runs are counted afresh
      out.emplace_back(slice_start, at);
      chunk_start = slice_start = at;
      chunk_chars = 0;
    }
    if (chunk_chars == 0) {
      run = 0;
      run_is_space = space;
    }
    ++chunk_chars;
    if (space != run_is_space) {
      run = 1;
      run_is_space = space;
    } else if (++run > max_run) {
      out.emplace_back(slice_start, at);
      slice_start = at;
      run = 1;
    }
  }
  (void)chunk_start;
  if (slice_start < text.size()) out.emplace_back(slice_start, text.size());
  return out;
}

void TiktokenTokenizer::EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  if (auto it = ranks_.find(AsAbsl(piece)); it != ranks_.end()) {
    ids->push_back(it->second);
    return;
  }
  const bool cacheable = piece.size() <= kMaxCachedPiece;
  if (cacheable) {
    MutexLock lock(&cache_mu_);
    if (auto it = cache_.find(std::string(piece)); it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  // Symbols are byte ranges; two merge when their joined bytes have a rank.
  std::vector<std::pair<uint32_t, uint32_t>> sym(piece.size());
  for (uint32_t i = 0; i < piece.size(); ++i) sym[i] = {i, i + 1};
  MergeByRank(&sym,
              [&](const std::pair<uint32_t, uint32_t>& a, const std::pair<uint32_t, uint32_t>& b,
                  std::pair<uint32_t, uint32_t>* merged) -> int64_t {
                auto it = ranks_.find(AsAbsl(piece.substr(a.first, b.second - a.first)));
                if (it == ranks_.end()) return -1;
                *merged = {a.first, b.second};
                return it->second;
              });
  std::vector<int32_t> out;
  out.reserve(sym.size());
  for (auto [b, e] : sym) out.push_back(ranks_.find(AsAbsl(piece.substr(b, e - b)))->second);
  ids->insert(ids->end(), out.begin(), out.end());
  if (!cacheable) return;
  MutexLock lock(&cache_mu_);
  if (cache_.size() >= kCacheCapacity) cache_.clear();
  cache_.emplace(std::string(piece), std::move(out));
}

void TiktokenTokenizer::EncodeOrdinary(std::string_view text, std::vector<int32_t>* ids) const {
  for (auto [b, e] : pattern_->FindAll(text)) EncodePiece(text.substr(b, e - b), ids);
}

absl::StatusOr<std::vector<int32_t>> TiktokenTokenizer::Encode(std::string_view text,
                                                               const EncodeOptions& options) const {
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos)
    return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 (byte offset ", bad, ")"));
  const bool match = options.special == SpecialText::kMatch;
  std::vector<int32_t> ids;
  for (auto [cb, ce] : GuardChunks(text)) {
    const std::string_view chunk = text.substr(cb, ce - cb);
    if (!match) {
      EncodeOrdinary(chunk, &ids);
      continue;
    }
    for (const TextSpan& s : controls_.Split(chunk, /*normalized_set=*/false, /*skip_special=*/false)) {
      if (s.id >= 0) {
        ids.push_back(s.id);
      } else {
        EncodeOrdinary(chunk.substr(s.begin, s.end - s.begin), &ids);
      }
    }
  }
  return ids;
}

std::unique_ptr<DecodeStream> TiktokenTokenizer::NewDecodeStream(bool skip_special) const {
  return std::make_unique<Stream>(this, skip_special);
}

bool TiktokenTokenizer::AppendTokenBytes(int32_t id, bool skip_special, std::string* bytes) const {
  if (id < 0 || id >= vocab_size()) return false;
  if (id < num_base_) {
    bytes->append(bytes_of_[id]);
  } else if (!skip_special) {
    bytes->append(ControlName(id));
  }
  return true;
}

int32_t TiktokenTokenizer::TokenToId(const std::string& token) const {
  if (auto it = control_ids_.find(token); it != control_ids_.end()) return it->second;
  auto it = ranks_.find(token);
  return it == ranks_.end() ? -1 : it->second;
}

}  // namespace ls::tok
