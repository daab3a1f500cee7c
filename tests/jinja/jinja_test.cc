// The Jinja interpreter beyond output conformance (jinja_conformance_test.cc): load errors name
// the construct and its line, render errors name their line, raise_exception keeps its message,
// every render limit holds, and one parsed template renders from many threads.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "jinja/template.h"
#include "nlohmann/json.hpp"

namespace ls::jinja {
namespace {

using ojson = nlohmann::ordered_json;

std::string LoadError(const std::string& src) {
  auto t = Template::Parse(src);
  EXPECT_FALSE(t.ok()) << "loaded: " << src;
  return t.ok() ? "" : std::string(t.status().message());
}

absl::StatusOr<std::string> Render(const std::string& src, const ojson& vars = ojson::object(), Limits limits = {}) {
  auto t = Template::Parse(src);
  if (!t.ok()) return t.status();
  return t->Render(vars, limits);
}

TEST(JinjaLoadError, UnknownFilterNamesItAndItsLine) {
  EXPECT_EQ(LoadError("line one\n{{ x }}\n{{ x | nosuchfilter }}"), "line 3: unknown filter 'nosuchfilter'");
}

TEST(JinjaLoadError, UnknownFilterInsideAnUntakenBranchIsStillALoadError) {
  EXPECT_EQ(LoadError("{% if false %}\n\n{{ x | from_json }}{% endif %}"), "line 3: unknown filter 'from_json'");
}

TEST(JinjaLoadError, JinjaFiltersNotImplementedSayThatTheyAreNotSupported) {
  EXPECT_EQ(LoadError("{{ x | truncate(3) }}"), "line 1: the filter 'truncate' is not supported");
}

TEST(JinjaLoadError, UnknownTestNamesItAndItsLine) {
  EXPECT_EQ(LoadError("\n{% if x is shiny %}{% endif %}"), "line 2: unknown test 'shiny'");
}

TEST(JinjaLoadError, UnknownFilterOrTestNamedAsAnArgument) {
  EXPECT_EQ(LoadError("{{ xs | map('nosuch') | list }}"), "line 1: unknown filter 'nosuch' in 'map'");
  EXPECT_EQ(LoadError("{{ xs | selectattr('a', 'nosuch') | list }}"), "line 1: unknown test 'nosuch' in 'selectattr'");
}

TEST(JinjaLoadError, UnknownMethodNamesItAndItsLine) {
  EXPECT_EQ(LoadError("{{ 'a' }}\n{{ s.zfill(3) }}"), "line 2: unknown method 'zfill'");
}

TEST(JinjaLoadError, UnknownTagNamesTheOpenBlock) {
  EXPECT_EQ(LoadError("{% for x in xs %}\n{% frobnicate %}\n{% endfor %}"),
            "line 2: unknown tag 'frobnicate' (the 'for' block opened on line 1 is still open)");
  EXPECT_EQ(LoadError("{% do x.append(1) %}"), "line 1: unknown tag 'do'");
}

TEST(JinjaLoadError, UnsupportedJinjaTagsSaySo) {
  EXPECT_EQ(LoadError("{% include 'other.jinja' %}"), "line 1: the 'include' tag is not supported");
  EXPECT_EQ(LoadError("{% extends 'base' %}"), "line 1: the 'extends' tag is not supported");
  EXPECT_EQ(LoadError("{% for x in xs recursive %}{% endfor %}"), "line 1: recursive for loops are not supported");
}

TEST(JinjaLoadError, UnclosedBlockNamesWhereItOpenedAndWhatEndsIt) {
  EXPECT_EQ(LoadError("a\n{% if x %}\nb\n{% for y in z %}\nc"),
            "line 5: unexpected end of template: the 'for' block opened on line 4 is not closed (expected "
            "'endfor' or 'else')");
  EXPECT_EQ(LoadError("{% macro m() %}x"),
            "line 1: unexpected end of template: the 'macro' block opened on line 1 is not closed (expected "
            "'endmacro')");
}

TEST(JinjaLoadError, StrayEndTagIsUnknown) { EXPECT_EQ(LoadError("x\n{% endif %}"), "line 2: unknown tag 'endif'"); }

TEST(JinjaLoadError, BreakOutsideALoop) {
  EXPECT_EQ(LoadError("{% break %}"), "line 1: 'break' outside of a for loop");
  EXPECT_EQ(LoadError("{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
            "line 1: 'continue' outside of a for loop");
}

TEST(JinjaLoadError, SyntaxErrorsNameTheirLine) {
  EXPECT_EQ(LoadError("\n\n{{ 1 + }}"), "line 3: unexpected end of print statement '}}'");
  EXPECT_EQ(LoadError("{{ }}"), "line 1: expected an expression, got end of print statement '}}'");
  EXPECT_EQ(LoadError("{{ 'open }}"), "line 1: unexpected char ''' (unterminated string)");
  EXPECT_EQ(LoadError("x\n{# never closed"), "line 2: missing end of comment tag");
  EXPECT_EQ(LoadError("{% raw %}never closed"), "line 1: missing end of raw directive");
  EXPECT_EQ(LoadError("{{ a ! b }}"), "line 1: unexpected char '!'");
  EXPECT_EQ(LoadError("{{ (1 }}"), "line 1: unexpected '}', expected ')'");
  EXPECT_EQ(LoadError("{% set true = 1 %}"), "line 1: can't assign to 'true'");
  EXPECT_EQ(LoadError("{% macro m(a=1, b) %}{% endmacro %}"), "line 1: non-default argument follows default argument");
  EXPECT_EQ(LoadError("{{ f(a=1, 2) }}"), "line 1: positional argument after keyword argument");
  EXPECT_EQ(LoadError("{{ f(*args) }}"), "line 1: *args and **kwargs in calls are not supported");
  EXPECT_EQ(LoadError("{{ 99999999999999999999 }}"), "line 1: integer literal too large: 99999999999999999999");
}

TEST(JinjaLoadError, NestingDeeperThanTheBoundsIsRefused) {
  std::string deep_parens = "{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}";
  EXPECT_EQ(LoadError(deep_parens), "line 1: expression nested too deeply");
  std::string long_sum = "{{ 1";
  for (int i = 0; i < 400; ++i) long_sum += " + 1";
  EXPECT_EQ(LoadError(long_sum + " }}"), "line 1: expression nested too deeply");
  std::string deep_ifs;
  for (int i = 0; i < 100; ++i) deep_ifs += "{% if true %}";
  EXPECT_EQ(LoadError(deep_ifs), "line 1: blocks nested too deeply");
}

TEST(JinjaRenderError, UndefinedUseNamesTheNameAndLine) {
  auto r = Render("ok\n{{ message.content.strip() }}", {{"message", nullptr}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "line 2: 'None' has no attribute 'content'");
  EXPECT_EQ(*Render("[{{ message.content }}]", {{"message", nullptr}}), "[]");  // printing Undefined is fine
  r = Render("a\nb\n{{ missing.attr }}");
  EXPECT_EQ(r.status().message(), "line 3: 'missing' is undefined");
  r = Render("{{ m.content.strip() }}", {{"m", ojson::object()}});
  EXPECT_EQ(r.status().message(), "line 1: 'dict object' has no attribute 'content'");
}

TEST(JinjaRenderError, TypeErrorsNameTheirLine) {
  auto r = Render("{% for m in messages %}\n{{ m.content + 1 }}\n{% endfor %}", {{"messages", {{{"content", "x"}}}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "line 2: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JinjaRenderError, RaiseExceptionKeepsTheTemplatesMessage) {
  auto t =
      Template::Parse("{% if messages | length > 1 %}{{ raise_exception('Roles must alternate: ' ~ n) }}{% endif %}");
  ASSERT_TRUE(t.ok());
  bool raised = false;
  auto r = t->Render(ojson{{"messages", {1, 2}}, {"n", 2}}, {}, &raised);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(raised);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "Roles must alternate: 2");
  r = t->Render(ojson{{"messages", {1}}}, {}, &raised);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(raised);
  EXPECT_EQ(Render("{{ raise_exception(nothing) }}").status().message(),
            "the template called raise_exception() without a message");
}

TEST(JinjaRenderError, ImmutableSandboxRefusesMutatingMethods) {
  auto r = Render("{% set l = [] %}{% set _ = l.append(1) %}");
  EXPECT_EQ(r.status().message(), "line 1: access to attribute 'append' of 'list' object is unsafe.");
  r = Render("{% set d = {} %}{{ d.update({'a': 1}) }}");
  EXPECT_EQ(r.status().message(), "line 1: access to attribute 'update' of 'dict' object is unsafe.");
}

TEST(JinjaLimits, OutputSizeIsBounded) {
  Limits limits;
  limits.max_output_bytes = 1000;
  auto r = Render("{% for i in range(1000) %}0123456789{% endfor %}", ojson::object(), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(), "line 1: rendered text exceeds the output limit (1000 bytes)");
}

TEST(JinjaLimits, BuiltValuesAreBoundedBeforeAllocation) {
  Limits limits;
  limits.max_output_bytes = 1 << 20;
  for (const char* src : {"{{ 'a' * 1000000000 }}", "{{ [1] * 1000000000 }}", "{{ 'x' | center(2000000000) }}",
                          "{{ 'x' | indent(2000000000, true) }}", "{{ 'abc' | replace('', 'x' * 600000) }}"}) {
    auto r = Render(src, ojson::object(), limits);
    ASSERT_FALSE(r.ok()) << src;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << src << ": " << r.status();
  }
  auto r = Render("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                  ojson::object(), limits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
}

TEST(JinjaLimits, WorkIsBounded) {
  Limits limits;
  limits.max_steps = 100000;
  auto r = Render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}done", ojson::object(),
                  limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(), "line 1: template exceeded its work limit");
  // The same loops within the default limit render.
  EXPECT_TRUE(Render("{% for i in range(300) %}{% for j in range(300) %}{% endfor %}{% endfor %}done").ok());
}

TEST(JinjaLimits, RecursionIsBounded) {
  auto r = Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("template nested too deeply"), std::string::npos) << r.status();
  // Bounded recursion is fine.
  EXPECT_EQ(*Render("{% macro f(n) %}{% if n %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(20) }}"),
            "2019181716151413121110987654321");
}

TEST(JinjaLimits, ValueNestingIsBounded) {
  auto r = Render("{% set ns = namespace(x=[]) %}{% for i in range(2000) %}{% set ns.x = [ns.x] %}{% endfor %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  ojson deep = 1;
  for (int i = 0; i < 600; ++i) deep = ojson::array({deep});
  r = Render("{{ x }}", {{"x", deep}});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(JinjaLimits, SandboxRangeBound) {
  auto r = Render("{{ range(100001) | length }}");
  EXPECT_EQ(r.status().message(), "line 1: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  EXPECT_EQ(*Render("{{ range(100000) | length }}"), "100000");
}

TEST(JinjaLimits, IntegerOverflowIsAnError) {
  auto r = Render("{{ 2 ** 64 }}");
  EXPECT_EQ(r.status().message(), "line 1: integer overflow (values beyond 64 bits are not supported)");
  EXPECT_EQ(*Render("{{ 2 ** 62 }}"), "4611686018427387904");
}

TEST(JinjaRender, NamespacesAndMacroScopesDoNotLeakBetweenRenders) {
  auto t = Template::Parse(
      "{% set ns = namespace(n=0) %}{% macro m() %}{{ ns.n }}{% endmacro %}{% for i in xs %}{% set ns.n = ns.n + i "
      "%}{% endfor %}{{ m() }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->Render(ojson{{"xs", {1, 2, 3}}}), "6");
  EXPECT_EQ(*t->Render(ojson{{"xs", {1, 2, 3}}}), "6");
  EXPECT_EQ(*t->Render(ojson{{"xs", ojson::array()}}), "0");
}

TEST(JinjaRender, KeyOrderOfInputIsKeptInTojson) {
  ojson tool = ojson::parse(R"({"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}})");
  EXPECT_EQ(*Render("{{ t | tojson }}", {{"t", tool}}),
            R"({"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}})");
}

TEST(JinjaRender, UnsignedJsonBeyondInt64BecomesAFloat) {
  EXPECT_EQ(*Render("{{ x }}", {{"x", 18446744073709551615ull}}), "1.8446744073709552e+19");
}

TEST(JinjaRender, StrftimeNowFormatsTheLocalTime) {
  auto r = Render("{{ strftime_now('%Y') | length }}|{{ strftime_now('%d %b %Y') | length }}");
  EXPECT_EQ(*r, "4|11");
}

TEST(JinjaRender, InvalidUtf8PassesThroughUnchanged) {
  const std::string bad =
      "a\xff\xfe"
      "b\xc3";
  EXPECT_EQ(*Render("{{ s }}|{{ s | length }}|{{ s[::-1][::-1] }}", {{"s", bad}}), bad + "|5|" + bad);
}

TEST(JinjaRender, OneTemplateRendersConcurrently) {
  auto t = Template::Parse(
      "{% set ns = namespace(total=0) %}{% for m in messages %}{% set ns.total = ns.total + m.n %}<{{ m.role }}:{{ m.n "
      "}}>{% endfor %}={{ ns.total }}");
  ASSERT_TRUE(t.ok());
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 200; ++rep) {
        ojson msgs = ojson::array();
        int total = 0;
        for (int i = 0; i <= k; ++i) {
          msgs.push_back({{"role", absl::StrCat("r", i)}, {"n", i + rep}});
          total += i + rep;
        }
        auto out = t->Render(ojson{{"messages", msgs}});
        if (!out.ok() || out->substr(out->rfind('=') + 1) != std::to_string(total)) ++failures[k];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(failures[k], 0) << "thread " << k;
}

}  // namespace
}  // namespace ls::jinja
