// BPE merging with a rank table and a pre-token cache.
#include "engine/tokenizer/bpe_model.h"

#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace ls::tok {
namespace {

uint64_t PairKey(int32_t a, int32_t b) { return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b); }

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(const nlohmann::json& j) {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError("model: " + m); };
  if (!j.is_object()) return bad("expected an object");
  if (j.value("type", std::string("BPE")) != "BPE")
    return absl::InvalidArgumentError("unsupported: model " + j.value("type", std::string("?")));
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (j.contains(k) && !j[k].is_null() && !(j[k].is_string() && j[k].get<std::string>().empty()))
      return absl::InvalidArgumentError(absl::StrCat("unsupported: model ", k));
  if (j.contains("dropout") && !j["dropout"].is_null() && j["dropout"].get<double>() != 0.0)
    return absl::InvalidArgumentError("unsupported: model dropout");
  std::unique_ptr<BpeModel> m(new BpeModel());
  if (!j.contains("vocab") || !j["vocab"].is_object()) return bad("missing \"vocab\" object");
  for (auto it = j["vocab"].begin(); it != j["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) return bad("vocab entry \"" + it.key() + "\" has a non-integer id");
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > (1 << 24)) return bad(absl::StrCat("vocab id ", id, " out of range"));
    m->vocab_[it.key()] = static_cast<int32_t>(id);
    if (static_cast<size_t>(id) >= m->id_to_token_.size()) m->id_to_token_.resize(id + 1);
    m->id_to_token_[id] = it.key();
  }
  if (!j.contains("merges") || !j["merges"].is_array()) return bad("missing \"merges\" list");
  int32_t rank = 0;
  for (const auto& mg : j["merges"]) {
    std::string a, b;
    if (mg.is_string()) {
      const std::string s = mg;
      const size_t sp = s.find(' ', 1);
      if (sp == std::string::npos) return bad("merge \"" + s + "\" is not two symbols separated by a space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
      a = mg[0];
      b = mg[1];
    } else {
      return bad("merge entries must be \"a b\" strings or [\"a\", \"b\"] pairs");
    }
    const int32_t ia = m->TokenToId(a), ib = m->TokenToId(b), im = m->TokenToId(a + b);
    if (ia < 0 || ib < 0 || im < 0) return bad("merge \"" + a + " " + b + "\" uses a symbol missing from the vocab");
    m->merges_.emplace(PairKey(ia, ib), std::make_pair(rank++, im));
  }
  if (j.contains("unk_token") && j["unk_token"].is_string()) m->unk_id_ = m->TokenToId(j["unk_token"]);
  m->byte_fallback_ = j.value("byte_fallback", false);
  m->ignore_merges_ = j.value("ignore_merges", false);
  return m;
}

void BpeModel::Tokenize(const std::string& piece, std::vector<int32_t>* ids) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      ++cache_hits_;
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> out;
  TokenizeUncached(piece, &out);
  ids->insert(ids->end(), out.begin(), out.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kCacheCapacity) cache_.clear();
  cache_.emplace(piece, std::move(out));
}

void BpeModel::TokenizeUncached(const std::string& piece, std::vector<int32_t>* ids) const {
  if (ignore_merges_) {
    if (int32_t id = TokenToId(piece); id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  // Initial symbols: one per code point (or its bytes with byte fallback).
  std::vector<int32_t> sym;
  for (size_t i = 0; i < piece.size();) {
    const size_t start = i;
    NextCodePoint(piece, &i);
    const std::string ch = piece.substr(start, i - start);
    if (int32_t id = TokenToId(ch); id >= 0) {
      sym.push_back(id);
    } else if (byte_fallback_) {
      for (unsigned char b : ch) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        const int32_t bid = TokenToId(name);
        if (bid >= 0) {
          sym.push_back(bid);
        } else if (unk_id_ >= 0) {
          sym.push_back(unk_id_);
        }
      }
    } else if (unk_id_ >= 0) {
      sym.push_back(unk_id_);
    }
  }
  // Merge the lowest-ranked adjacent pair, leftmost first, until none applies.
  for (;;) {
    int32_t best_rank = std::numeric_limits<int32_t>::max(), best_pos = -1, best_id = -1;
    for (size_t p = 0; p + 1 < sym.size(); ++p) {
      auto it = merges_.find(PairKey(sym[p], sym[p + 1]));
      if (it != merges_.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        best_pos = static_cast<int32_t>(p);
        best_id = it->second.second;
      }
    }
    if (best_pos < 0) break;
    sym[best_pos] = best_id;
    sym.erase(sym.begin() + best_pos + 1);
  }
  ids->insert(ids->end(), sym.begin(), sym.end());
}

}  // namespace ls::tok
