// Scope analysis: which names each frame of a parsed template starts with as undefined locals,
// so that name resolution follows jinja2's symbol tables: in each scope (the template, a loop
// body, a macro, a caller, a filter / set / with block), a name whose first occurrence is an
// unconditional assignment, and that no enclosing scope refers to, is local and undefined until
// assigned, even where the template's variables have that name.
#pragma once

#include "jinja/ast.h"

namespace ls::jinja {

// Fills Stmt::predeclared / else_predeclared throughout `root` (a kScope holding the template).
void AnalyzeScopes(Stmt& root);

}  // namespace ls::jinja
