// DashboardRoutes: the page, the login form's session cookie and the expert-load answer.
#include "server/dashboard_routes.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <chrono>
#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/dashboard_assets.h"
#include "server/expert_load_json.h"
#include "server/form_values.h"

namespace ls::server {
namespace {

// This abseil's string_view is its own type, not std::string_view.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }
std::string_view S(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// The page's scripts and styles are inline; it fetches only from this server and cannot be framed.
constexpr const char* kPagePolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

WebReply Html(int status, std::string body) {
  WebReply r;
  r.status = status;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::move(body);
  r.headers = {{"Content-Security-Policy", kPagePolicy},
               {"Cache-Control", "no-store"},
               {"Referrer-Policy", "no-referrer"},
               {"X-Content-Type-Options", "nosniff"}};
  return r;
}

WebReply SeeOther(std::string location) {
  WebReply r;
  r.status = 303;
  r.content_type = "text/plain; charset=utf-8";
  r.headers = {{"Location", std::move(location)}, {"Cache-Control", "no-store"}};
  return r;
}

// The login form, with `message` (plain text from this file, never the client's) above it.
WebReply LoginPage(int status, std::string_view message) {
  std::string page(kLoginHtml, kLoginHtmlSize);
  constexpr std::string_view kSlot = "<!--message-->";
  if (const size_t at = page.find(kSlot); at != std::string::npos)
    page.replace(at, kSlot.size(), message.empty() ? "" : absl::StrCat("<p class=\"error\">", A(message), "</p>"));
  WebReply r = Html(status, std::move(page));
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

// The value of cookie `name` in a Cookie header ("a=1; b=2"), or empty.
std::string_view CookieValue(std::string_view header, std::string_view name) {
  for (absl::string_view piece : absl::StrSplit(A(header), ';')) {
    const std::string_view part = S(absl::StripAsciiWhitespace(piece));
    if (part.size() > name.size() && part.substr(0, name.size()) == name && part[name.size()] == '=')
      return part.substr(name.size() + 1);
  }
  return {};
}

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

DashboardRoutes::DashboardRoutes(const ApiKeys* keys, const Engine* engine, std::string model_name)
    : keys_(keys), engine_(engine), model_name_(std::move(model_name)) {
  unsigned char secret[32];
  if (RAND_bytes(secret, sizeof secret) != 1) {
    // OpenSSL could not seed itself: the system's random device instead.
    for (unsigned char& b : secret) b = static_cast<unsigned char>(std::random_device{}());
  }
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char b : secret) {
    session_ += kHex[b >> 4];
    session_ += kHex[b & 15];
  }
}

bool DashboardRoutes::Serves(std::string_view path) {
  return path == "/dashboard" || path == "/dashboard/login" || path == "/dashboard/logout" || path == "/v1/expert_load";
}

bool DashboardRoutes::MayView(const WebCall& call) const {
  if (keys_->Authorize(call.authorization)) return true;  // also true when keys are off
  const std::string_view cookie = CookieValue(call.cookie, kCookie);
  return cookie.size() == session_.size() && CRYPTO_memcmp(cookie.data(), session_.data(), session_.size()) == 0;
}

std::string DashboardRoutes::SessionCookie(bool tls, int max_age) const {
  return absl::StrCat(A(kCookie), "=", max_age > 0 ? session_ : "", "; Path=/; Max-Age=", max_age,
                      "; HttpOnly; SameSite=Strict", tls ? "; Secure" : "");
}

WebReply DashboardRoutes::Handle(const WebCall& call) const {
  if (call.path == "/v1/expert_load") return ExpertLoad(call);
  if (call.path == "/dashboard/login") return Login(call);
  if (call.path == "/dashboard/logout") {
    if (call.method != "POST") return ErrorReply(405, "use POST for /dashboard/logout");
    WebReply r = SeeOther("/dashboard");
    r.headers.emplace_back("Set-Cookie", SessionCookie(call.tls, 0));
    return r;
  }
  return Page(call);
}

WebReply DashboardRoutes::Page(const WebCall& call) const {
  if (call.method != "GET") return ErrorReply(405, "use GET for /dashboard");
  if (!MayView(call)) return LoginPage(401, "");
  return Html(200, std::string(kDashboardHtml, kDashboardHtmlSize));
}

WebReply DashboardRoutes::Login(const WebCall& call) const {
  if (!keys_->enabled()) return SeeOther("/dashboard");  // nothing to log in to
  if (call.method == "GET") return LoginPage(200, "");
  if (call.method != "POST") return ErrorReply(405, "use GET or POST for /dashboard/login");
  const std::optional<std::string> key = FormValue(call.body, "key");
  if (!key || key->empty()) return LoginPage(401, "Enter an API key.");
  if (!keys_->Authorize(absl::StrCat("Bearer ", *key))) return LoginPage(401, "That key is not valid.");
  WebReply r = SeeOther("/dashboard");
  r.headers.emplace_back("Set-Cookie", SessionCookie(call.tls, kSessionSeconds));
  return r;
}

WebReply DashboardRoutes::ExpertLoad(const WebCall& call) const {
  if (!MayView(call)) return UnauthorizedReply();
  if (call.method != "GET") return ErrorReply(405, "use GET for /v1/expert_load");
  ExpertLoadJsonOptions options;
  for (absl::string_view piece : absl::StrSplit(A(call.query), '&', absl::SkipEmpty())) {
    const std::string_view pair = S(piece);
    const size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq), value = eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (name != "totals")
      return ErrorReply(400, absl::StrCat("unknown query parameter '", A(name), "' (known: totals)"),
                        std::string(name));
    if (value == "true" || value == "1") {
      options.totals = true;
    } else if (value == "false" || value == "0") {
      options.totals = false;
    } else {
      return ErrorReply(400, "totals must be true, false, 1 or 0", "totals");
    }
  }
  if (!engine_) return ErrorReply(503, "no engine is serving", "", "service_unavailable");
  options.now_unix_seconds = UnixSeconds();
  options.model = model_name_;
  const MetricsSnapshot m = engine_->Metrics();
  const ExpertLoadWindowSnapshot w = engine_->ExpertWindow();
  WebReply r;
  r.content_type = "application/json";
  r.body = ExpertLoadJson(m, w, options);
  r.headers = {{"Cache-Control", "no-store"}};
  return r;
}

}  // namespace ls::server
