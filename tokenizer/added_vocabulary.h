// AddedVocabulary: tokens matched in the raw or normalized text before pre-tokenization — a
// tokenizer.json's `added_tokens` or tiktoken's control tokens — found leftmost-longest and
// applied with the Hugging Face rules for `single_word`, `lstrip`, `rstrip`, `normalized` and
// `special` (Unicode word characters and White_Space). Immutable after building; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace ls::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = true;  // matched against the normalized text, in its normalized form
};

// A byte range of the searched text: an added token (id >= 0) or plain text (id == -1). With
// rstrip the range of a token can reach into where the next token matched, as in HF.
struct TextSpan {
  size_t begin;
  size_t end;
  int32_t id;
};

class AddedVocabulary {
 public:
  // `match_form` is what is searched for: the content, or for a normalized token the content
  // after the tokenizer's normalizer. Empty forms are ignored; the first token of a form wins.
  void Add(const AddedToken& token, std::string match_form);

  // Splits `text` by the tokens whose `normalized` flag equals `normalized_set`. Matches of
  // special tokens are left as text when `skip_special`. Empty text gives no spans.
  std::vector<TextSpan> Split(std::string_view text, bool normalized_set, bool skip_special) const;
  bool HasTokens(bool normalized_set) const { return !sets_[normalized_set].patterns.empty(); }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Pattern {
    std::string text;
    uint32_t token;  // index into tokens_
  };
  struct PatternSet {
    std::vector<Pattern> patterns;
    std::array<std::vector<uint32_t>, 256> by_first_byte;  // pattern indices, longest first
    std::unordered_set<std::string> forms;
  };
  // The longest pattern of `set` that matches at `pos`, or -1.
  int LongestAt(const PatternSet& set, std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  PatternSet sets_[2];
};

}  // namespace ls::tok
