// Parser: tokens (lexer.h) to a syntax tree (ast.h), following jinja2's grammar and operator
// precedence. The whole template is checked at load: an unknown tag, filter, test or method, an
// unclosed block or a syntax error throws TemplateError naming it and its line.
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace ls::jinja {

// Nesting bounds of a template's source: blocks inside blocks, and expressions inside expressions.
constexpr int kMaxBlockNesting = 64;
constexpr int kMaxExprNesting = 64;

// The template as one kScope statement holding its body, scopes analysed (scope_analysis.h).
StmtPtr Parse(std::string_view source);

}  // namespace ls::jinja
