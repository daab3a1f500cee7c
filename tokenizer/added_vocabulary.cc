// Leftmost-longest added-token matching and the HF single_word / lstrip / rstrip rules.
#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace ls::tok {

void AddedVocabulary::Add(const AddedToken& token, std::string match_form) {
  const uint32_t index = static_cast<uint32_t>(tokens_.size());
  tokens_.push_back(token);
  if (match_form.empty()) return;
  PatternSet& set = sets_[token.normalized];
  if (!set.forms.insert(match_form).second) return;
  const uint32_t pi = static_cast<uint32_t>(set.patterns.size());
  set.patterns.push_back({std::move(match_form), index});
  auto& bucket = set.by_first_byte[static_cast<unsigned char>(set.patterns.back().text[0])];
  // Longest first; among equal lengths, the earlier token first.
  const size_t len = set.patterns.back().text.size();
  bucket.insert(std::upper_bound(bucket.begin(), bucket.end(), len,
                                 [&set](size_t l, uint32_t b) { return l > set.patterns[b].text.size(); }),
                pi);
}

int AddedVocabulary::LongestAt(const PatternSet& set, std::string_view text, size_t pos) const {
  for (uint32_t pi : set.by_first_byte[static_cast<unsigned char>(text[pos])]) {
    const std::string& p = set.patterns[pi].text;
    if (text.size() - pos >= p.size() && text.compare(pos, p.size(), p) == 0) return static_cast<int>(pi);
  }
  return -1;
}

std::vector<TextSpan> AddedVocabulary::Split(std::string_view text, bool normalized_set, bool skip_special) const {
  std::vector<TextSpan> out;
  if (text.empty()) return out;
  const PatternSet& set = sets_[normalized_set];
  if (set.patterns.empty()) {
    out.push_back({0, text.size(), -1});
    return out;
  }
  size_t start_offset = 0;
  for (size_t i = 0; i < text.size();) {
    const int pi = set.by_first_byte[static_cast<unsigned char>(text[i])].empty() ? -1 : LongestAt(set, text, i);
    if (pi < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[set.patterns[pi].token];
    const size_t match_begin = i, match_end = i + set.patterns[pi].text.size();
    i = match_end;  // the search goes on after the match whether or not it is kept
    if (skip_special && tok.special) continue;
    if (tok.single_word) {
      const bool word_before = match_begin > 0 && IsWordChar(PrevCodePoint(text, match_begin));
      size_t next = match_end;
      const bool word_after = match_end < text.size() && IsWordChar(NextCodePoint(text, &next));
      if (word_before || word_after) continue;
    }
    size_t begin = match_begin, end = match_end;
    if (tok.lstrip) {
      size_t b = begin;
      while (b > 0) {
        size_t prev = b - 1;
        while (prev > 0 && (static_cast<unsigned char>(text[prev]) & 0xc0) == 0x80) --prev;
        size_t at = prev;
        if (!IsWhiteSpace(NextCodePoint(text, &at))) break;
        b = prev;
      }
      begin = std::max(b, start_offset);
    }
    if (tok.rstrip) {
      while (end < text.size()) {
        size_t at = end;
        if (!IsWhiteSpace(NextCodePoint(text, &at))) break;
        end = at;
      }
    }
    if (start_offset < begin) out.push_back({start_offset, begin, -1});
    out.push_back({begin, end, tok.id});
    start_offset = end;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
  return out;
}

}  // namespace ls::tok
