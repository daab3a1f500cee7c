// The builtins of the template language: filters (filters.cc), tests (tests.cc), methods of
// strings, dicts, lists and loops (methods.cc) and global functions (globals.cc). The parser
// resolves filter and test names at load time; methods are known by name.
#pragma once

#include <string>
#include <string_view>

#include "jinja/ast.h"
#include "jinja/interpreter.h"

namespace ls::jinja {

FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);
// Filters and tests jinja2 has that this interpreter does not implement (a load error says so).
bool IsUnsupportedFilter(std::string_view name);
bool IsUnsupportedTest(std::string_view name);

// True if some value type has a method of this name (a call of any other name is a load error).
bool IsMethodName(std::string_view name);
// obj.name(args) for strings, dicts and lists; *handled = false when the type has no such method.
Value CallBuiltinMethod(Interpreter& in, const Value& obj, std::string_view name, CallArgs& args, bool* handled);
// obj.name without a call: a bound method when the type has one of that name, else Undefined
// with *found = false.
Value BuiltinMethodAttr(const Value& obj, std::string_view name, bool* found);

// printf-style `fmt % args` (args: a value, a tuple of values, or a dict for %(name)s).
std::string PercentFormat(Interpreter& in, const std::string& fmt, const Value& args);

// A method bound to its object (x.startswith without a call): calling it calls the method.
Value MakeBoundMethod(Value self, std::string name);

// The global functions: range, dict, namespace, raise_exception, strftime_now.
void AddGlobals(Frame& frame);

}  // namespace ls::jinja
