// TokenStream (see token_stream.h).
#include "jinja/token_stream.h"

#include "jinja/value.h"

namespace ls::jinja {

bool TokenStream::SkipName(std::string_view n) {
  if (!IsName(n)) return false;
  next();
  return true;
}

bool TokenStream::SkipOp(std::string_view o) {
  if (!IsOp(o)) return false;
  next();
  return true;
}

void TokenStream::Error(const std::string& msg, int line) const { throw TemplateError(msg, line ? line : cur().line); }

std::string TokenStream::Describe(const Token& t) {
  switch (t.type) {
    case TokenType::kEof:
      return "end of template";
    case TokenType::kData:
      return "template data";
    case TokenType::kVarBegin:
      return "begin of print statement '{{'";
    case TokenType::kVarEnd:
      return "end of print statement '}}'";
    case TokenType::kBlockBegin:
      return "begin of statement block '{%'";
    case TokenType::kBlockEnd:
      return "end of statement block '%}'";
    case TokenType::kString:
      return "string";
    case TokenType::kInt:
    case TokenType::kFloat:
      return "number '" + t.text + "'";
    default:
      return "'" + t.text + "'";
  }
}

void TokenStream::Expect(TokenType type, const char* what) {
  if (cur().type != type) {
    if (cur().type == TokenType::kEof) FailEof();
    Error(std::string("expected ") + what + ", got " + Describe(cur()));
  }
  next();
}

void TokenStream::ExpectOp(std::string_view o) {
  if (!IsOp(o)) {
    if (cur().type == TokenType::kEof) FailEof();
    Error("expected '" + std::string(o) + "', got " + Describe(cur()));
  }
  next();
}

std::string TokenStream::ExpectName() {
  if (cur().type != TokenType::kName) Error("expected a name, got " + Describe(cur()));
  std::string n = cur().text;
  next();
  return n;
}

void TokenStream::FailEof() const {
  if (open_.empty()) Error("unexpected end of template");
  const Open& o = open_.back();
  std::string ends;
  for (auto e : o.ends) ends += (ends.empty() ? "'" : " or '") + std::string(e) + "'";
  Error("unexpected end of template: the '" + o.tag + "' block opened on line " + std::to_string(o.line) +
        " is not closed (expected " + ends + ")");
}

}  // namespace ls::jinja
