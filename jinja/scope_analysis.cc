// Scope analysis (see scope_analysis.h), after jinja2's idtracking: a scope's own statements are
// visited in order (loads in expressions, then assignments), `if` branches count as the same
// scope but their assignments never make a name undefined, and nested scopes are analysed once
// the enclosing scope is complete.
#include "jinja/scope_analysis.h"

#include <set>
#include <string>
#include <vector>

namespace ls::jinja {
namespace {

struct Symbols {
  std::set<std::string, std::less<>> refs;
  const Symbols* parent = nullptr;
  bool Has(const std::string& n) const {
    for (const Symbols* s = this; s; s = s->parent)
      if (s->refs.count(n)) return true;
    return false;
  }
};

void Loads(const Expr* e, Symbols& s) {  // recursion bounded by the parser's tree depth
  if (!e) return;
  if (e->kind == Expr::Kind::kName && !s.Has(e->name)) s.refs.insert(e->name);
  Loads(e->a.get(), s);
  Loads(e->b.get(), s);
  Loads(e->c.get(), s);
  for (const auto& x : e->items) Loads(x.get(), s);
  for (const auto& kv : e->kwargs) Loads(kv.second.get(), s);
}

void Store(const std::string& n, Symbols& s, bool conditional, std::vector<std::string>* predeclared) {
  if (s.refs.count(n)) return;
  const bool outer = s.parent && s.parent->Has(n);
  s.refs.insert(n);
  if (!outer && !conditional) predeclared->push_back(n);
}

void Assign(const Stmt& st, Symbols& s, bool conditional, std::vector<std::string>* predeclared) {
  if (!st.ns_attr.empty()) {  // ns.attr = ...: a use of ns
    if (!s.Has(st.targets[0])) s.refs.insert(st.targets[0]);
    return;
  }
  for (const auto& t : st.targets) Store(t, s, conditional, predeclared);
}

void VisitLevel(const Body& body, Symbols& s, bool conditional, std::vector<std::string>* predeclared) {
  for (const StmtPtr& st : body) {
    switch (st->kind) {
      case Stmt::Kind::kPrint:
        Loads(st->expr.get(), s);
        break;
      case Stmt::Kind::kIf:
        for (const auto& [test, branch] : st->branches) {
          Loads(test.get(), s);
          VisitLevel(branch, s, true, predeclared);
        }
        VisitLevel(st->else_body, s, true, predeclared);
        break;
      case Stmt::Kind::kFor:
        Loads(st->expr.get(), s);
        break;
      case Stmt::Kind::kSet:
        Loads(st->expr.get(), s);
        Assign(*st, s, conditional, predeclared);
        break;
      case Stmt::Kind::kSetBlock:
        Assign(*st, s, conditional, predeclared);
        break;
      case Stmt::Kind::kMacro:
        Store(st->text, s, conditional, predeclared);
        break;
      case Stmt::Kind::kCallBlock:
        Loads(st->expr.get(), s);
        break;
      case Stmt::Kind::kFilterBlock:
        Loads(st->filter.get(), s);
        break;
      case Stmt::Kind::kWith:
        for (const auto& v : st->values) Loads(v.get(), s);
        break;
      default:
        break;
    }
  }
}

void AnalyzeFrame(Body& body, const Symbols* parent, const std::vector<std::string>& params,
                  std::vector<std::string>* predeclared);

void Children(Body& body, const Symbols& s) {
  for (StmtPtr& st : body) {
    std::vector<std::string> params;
    switch (st->kind) {
      case Stmt::Kind::kIf:
        for (auto& branch : st->branches) Children(branch.second, s);
        Children(st->else_body, s);
        break;
      case Stmt::Kind::kFor:
        params = st->targets;
        params.push_back("loop");
        AnalyzeFrame(st->body, &s, params, &st->predeclared);
        AnalyzeFrame(st->else_body, &s, {}, &st->else_predeclared);
        break;
      case Stmt::Kind::kMacro:
      case Stmt::Kind::kCallBlock:
        for (const Param& p : st->params) params.push_back(p.name);
        for (const char* special : {"caller", "varargs", "kwargs"}) params.push_back(special);
        AnalyzeFrame(st->body, &s, params, &st->predeclared);
        break;
      case Stmt::Kind::kWith:
        AnalyzeFrame(st->body, &s, st->targets, &st->predeclared);
        break;
      case Stmt::Kind::kSetBlock:
      case Stmt::Kind::kFilterBlock:
      case Stmt::Kind::kScope:
        AnalyzeFrame(st->body, &s, {}, &st->predeclared);
        break;
      default:
        break;
    }
  }
}

void AnalyzeFrame(Body& body, const Symbols* parent, const std::vector<std::string>& params,
                  std::vector<std::string>* predeclared) {
  Symbols s;
  s.parent = parent;
  s.refs.insert(params.begin(), params.end());
  VisitLevel(body, s, false, predeclared);
  Children(body, s);
}

}  // namespace

void AnalyzeScopes(Stmt& root) { AnalyzeFrame(root.body, nullptr, {}, &root.predeclared); }

}  // namespace ls::jinja
