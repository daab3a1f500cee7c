// BPE merging with a rank table and a pre-token cache.
#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/utf8.h"

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
  if (j.contains("unk_token") && j["unk_token"].is_string()) m->unk_id_ = m->TokenToId(j["unk_token"].get<std::string>());
  m->byte_fallback_ = j.value("byte_fallback", false);
  m->fuse_unk_ = j.value("fuse_unk", false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    m->byte_ids_[b] = m->TokenToId(name);
  }
  m->ignore_merges_ = j.value("ignore_merges", false);
  return m;
}

void BpeModel::Tokenize(const std::string& piece, std::vector<int32_t>* ids) const {
  {
    MutexLock lock(&cache_mu_);
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
  if (piece.size() > kMaxCachedPiece) return;  // whole lines of files without a pre-tokenizer
  MutexLock lock(&cache_mu_);
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
  // Initial symbols: one per code point. An unknown code point becomes its <0xXX> byte tokens
  // when byte_fallback has all of them, else the unk token; with fuse_unk a run of unknowns is
  // one unk. A pending unk is written at the next known code point or at the end (as HF does,
  // also when byte-fallback tokens came in between).
  std::vector<int32_t> sym;
  bool pending_unk = false;
  for (size_t i = 0; i < piece.size();) {
    const size_t start = i;
    NextCodePoint(piece, &i);
    const std::string_view ch(piece.data() + start, i - start);
    if (int32_t id = TokenToId(ch); id >= 0) {
      if (pending_unk) sym.push_back(unk_id_);
      pending_unk = false;
      sym.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      int32_t bytes[4];
      bool all = true;
      for (size_t k = 0; k < ch.size(); ++k) {
        bytes[k] = byte_ids_[static_cast<unsigned char>(ch[k])];
        all &= bytes[k] >= 0;
      }
      if (all) {
        sym.insert(sym.end(), bytes, bytes + ch.size());
        continue;
      }
    }
    if (unk_id_ < 0) continue;
    if (pending_unk && !fuse_unk_) sym.push_back(unk_id_);
    pending_unk = true;
  }
  if (pending_unk) sym.push_back(unk_id_);
  MergeByRank(&sym, [this](int32_t left, int32_t right, int32_t* merged) -> int64_t {
    auto it = merges_.find(PairKey(left, right));
    if (it == merges_.end()) return -1;
    *merged = it->second.second;
    return it->second.first;
  });
  ids->insert(ids->end(), sym.begin(), sym.end());
}

}  // namespace ls::tok
