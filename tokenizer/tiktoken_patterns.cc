// Kimi's pre-tokenizer pattern for PCRE2.
//
// The reference (tokenization_kimi.py, run by tiktoken on Rust's regex engine) is the
// alternation of
//   [\p{Han}]+
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//   \p{N}{1,3}
//    ?[^\s\p{L}\p{N}]+[\r\n]*
//   \s*[\r\n]+
//   \s+(?!\S)
//   \s+
//
// Rust's \p{Han} is the Script property; PCRE2 reads a bare script name as Script_Extensions
// (which puts U+3002 '。' and other shared CJK punctuation in Han), so it is spelled \p{sc:Han}.
// PCRE2 has no `&&`. Each intersection A && [^Han] is rewritten as one negated class: the general
// categories partition every code point (Cn, unassigned, is part of C), so the complement of
// A = Lu|Lt|Lm|Lo|M is Ll|N|P|S|Z|C, and A minus Han = NOT(Han or Ll|N|P|S|Z|C):
//   [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]  ==  [^\p{sc:Han}\p{Ll}\p{N}\p{P}\p{S}\p{Z}\p{C}]
//   [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]        ==  [^\p{sc:Han}\p{Lu}\p{Lt}\p{N}\p{P}\p{S}\p{Z}\p{C}]
// A class, unlike a (?!\p{sc:Han}) lookahead per character, keeps the JIT's fast path.
// Rust's `\s` is the White_Space property, which is the Z categories plus U+0009..U+000D and
// U+0085; PCRE2's `\s` leaves out U+0085, so White_Space is spelled out as [\t-\r\x{85}\p{Z}].
// tokenizer_test's KimiPattern tests check both rewrites over every code point and the whole
// pattern against tiktoken's pieces.
#include "tokenizer/tiktoken_patterns.h"

#include "absl/strings/str_cat.h"

namespace ls::tok {

// clang-format off
#define LS_KIMI_UPPER R"([^\p{sc:Han}\p{Ll}\p{N}\p{P}\p{S}\p{Z}\p{C}])"
#define LS_KIMI_LOWER R"([^\p{sc:Han}\p{Lu}\p{Lt}\p{N}\p{P}\p{S}\p{Z}\p{C}])"
#define LS_WS R"(\t-\r\x{85}\p{Z})"
#define LS_CONTRACTION R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"

const char kKimiPattern[] =
    R"([\p{sc:Han}]+)"
    R"(|[^\r\n\p{L}\p{N}]?)" LS_KIMI_UPPER "*" LS_KIMI_LOWER "+" LS_CONTRACTION
    R"(|[^\r\n\p{L}\p{N}]?)" LS_KIMI_UPPER "+" LS_KIMI_LOWER "*" LS_CONTRACTION
    R"(|\p{N}{1,3})"
    R"(| ?[^)" LS_WS R"(\p{L}\p{N}]+[\r\n]*)"
    R"(|[)" LS_WS R"(]*[\r\n]+)"
    R"(|[)" LS_WS R"(]+(?![^)" LS_WS R"(]))"
    R"(|[)" LS_WS R"(]+)";

#undef LS_KIMI_UPPER
#undef LS_KIMI_LOWER
#undef LS_WS
#undef LS_CONTRACTION
// clang-format on

absl::StatusOr<std::string> TiktokenPatternFor(const std::string& model_type) {
  if (model_type == "kimi_k2" || model_type == "kimi_k3" || model_type == "kimi_linear")
    return std::string(kKimiPattern);
  return absl::NotFoundError(absl::StrCat("no pre-tokenizer pattern is known for tiktoken.model with model_type '",
                                          model_type, "' (known: kimi_k2, kimi_k3, kimi_linear)"));
}

}  // namespace ls::tok
