// TokenStream: the parser's cursor over the lexer's tokens, with the checks the statement and
// expression parsers share, and the stack of open blocks that an unexpected end of template names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jinja/lexer.h"

namespace ls::jinja {

class TokenStream {
 public:
  struct Open {  // a block being parsed: its tag, line and the tags that may end it
    std::string tag;
    int line;
    std::vector<std::string_view> ends;
  };

  explicit TokenStream(std::vector<Token> toks) : t_(std::move(toks)) {}

  const Token& cur() const { return t_[pos_]; }
  const Token& look() const { return t_[pos_ + 1 < t_.size() ? pos_ + 1 : t_.size() - 1]; }
  void next() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }
  bool IsName(std::string_view n) const { return cur().type == TokenType::kName && cur().text == n; }
  bool IsOp(std::string_view o) const { return cur().type == TokenType::kOp && cur().text == o; }
  bool SkipName(std::string_view n);
  bool SkipOp(std::string_view o);
  void Expect(TokenType type, const char* what);
  void ExpectOp(std::string_view o);
  std::string ExpectName();
  [[noreturn]] void Error(const std::string& msg, int line = 0) const;
  [[noreturn]] void FailEof() const;
  static std::string Describe(const Token& t);

  std::vector<Open>& open() { return open_; }

 private:
  std::vector<Token> t_;
  size_t pos_ = 0;
  std::vector<Open> open_;
};

}  // namespace ls::jinja
