// Lexer: splits a Jinja template into tokens (text, tag delimiters, names, literals, operators)
// exactly as jinja2's lexer does with trim_blocks and lstrip_blocks on, including whitespace
// control (-/+), comments, raw blocks, and newline normalisation. Throws TemplateError.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ls::jinja {

enum class TokenType { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  TokenType type;
  int line;
  std::string text;  // data, name, decoded string literal, operator
  int64_t int_value = 0;
  double float_value = 0;
};

std::vector<Token> Lex(std::string_view source);

}  // namespace ls::jinja
