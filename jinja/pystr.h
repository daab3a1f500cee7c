// Python string semantics for the Jinja interpreter: code points, Unicode whitespace and case,
// strip/split/replace, and repr of strings and floats, byte for byte as CPython prints them.
// Pure functions; invalid UTF-8 bytes travel as lone code points U+DC80..U+DCFF and come back unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ls::jinja::py {

std::u32string Decode(std::string_view s);
std::string Encode(std::u32string_view s);
void AppendUtf8(char32_t c, std::string* out);
size_t Length(std::string_view s);  // in code points
bool IsAscii(std::string_view s);

// Character classes as Python's str methods see them.
bool IsSpace(char32_t c);
bool IsPrintable(char32_t c);
bool IsCased(char32_t c);
bool IsAlpha(char32_t c);
bool IsDigit(char32_t c);
bool IsIdentifierStart(char32_t c);
bool IsIdentifierChar(char32_t c);

std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
std::string Title(std::string_view s);       // str.title()
std::string Capitalize(std::string_view s);  // str.capitalize()
bool IsLowerStr(std::string_view s);         // str.islower()
bool IsUpperStr(std::string_view s);         // str.isupper()

// str.strip/lstrip/rstrip; chars absent: Unicode whitespace.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split / str.rsplit; sep absent: runs of whitespace. maxsplit < 0: no limit. Empty sep is the
// caller's error to report (Python raises ValueError).
std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> RSplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> SplitLines(std::string_view s, bool keepends);
// str.replace; count < 0: all. Returns nullopt if the result would exceed max_bytes.
std::optional<std::string> Replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count,
                                   size_t max_bytes);
// str.find / str.rfind / str.count as code-point positions; -1 when absent.
int64_t Find(std::string_view s, std::string_view sub, bool reverse);
int64_t Count(std::string_view s, std::string_view sub);

std::string FloatRepr(double d);          // repr(float)
std::string StrRepr(std::string_view s);  // repr(str)
// int(str) / float(str) as Python parses them (whitespace, sign, underscores between digits).
bool ParseInt(std::string_view s, int base, int64_t* out);
bool ParseFloat(std::string_view s, double* out);

}  // namespace ls::jinja::py
