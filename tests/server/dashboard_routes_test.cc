// The dashboard's routes without a server: the page and its key form, the login that trades a key
// for a session cookie only the read-only views accept, logout, and the form decoding they use.
#include "server/dashboard_routes.h"

#include <gtest/gtest.h>

#include <string>

namespace ls::server {
namespace {

std::string Header(const WebReply& r, const std::string& name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return "";
}

// A request, built up field by field.
struct Call : WebCall {
  Call(std::string_view m, std::string_view p) {
    method = m;
    path = p;
  }
  Call& Query(std::string_view v) { return query = v, *this; }
  Call& Auth(std::string_view v) { return authorization = v, *this; }
  Call& Cookie(std::string_view v) { return cookie = v, *this; }
  Call& Body(std::string_view v) { return body = v, *this; }
  Call& Tls() { return tls = true, *this; }
};

// "latentserve_dashboard=<value>" from a Set-Cookie header.
std::string CookiePair(const WebReply& r) {
  const std::string set = Header(r, "Set-Cookie");
  return set.substr(0, set.find(';'));
}

class DashboardRoutesTest : public ::testing::Test {
 protected:
  ApiKeys keys_ = ApiKeys::FromList({"sk-right", "sk-other key"});
  DashboardRoutes routes_{&keys_, nullptr, "tiny"};
};

TEST_F(DashboardRoutesTest, ThePageWithoutAKeyIs401WithTheKeyForm) {
  const WebReply r = routes_.Handle(Call("GET", "/dashboard"));
  EXPECT_EQ(r.status, 401);
  EXPECT_FALSE(r.error);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("action=\"/dashboard/login\""), std::string::npos);
  EXPECT_EQ(r.body.find("<canvas"), std::string::npos) << "the dashboard itself is not given away";
  EXPECT_EQ(Header(r, "WWW-Authenticate"), "Bearer");
}

TEST_F(DashboardRoutesTest, ThePageWithABearerKeyIsTheDashboardWithAStrictPolicy) {
  const WebReply r = routes_.Handle(Call("GET", "/dashboard").Auth("Bearer sk-right"));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("<canvas id=\"heatmap\""), std::string::npos);
  EXPECT_NE(Header(r, "Content-Security-Policy").find("connect-src 'self'"), std::string::npos);
  EXPECT_NE(Header(r, "Content-Security-Policy").find("frame-ancestors 'none'"), std::string::npos);
  EXPECT_EQ(Header(r, "Cache-Control"), "no-store");
  EXPECT_EQ(routes_.Handle(Call("GET", "/dashboard").Auth("Bearer sk-wrong")).status, 401);
}

TEST_F(DashboardRoutesTest, LoginWithAValidKeySetsAStrictHttpOnlyCookieThatOpensTheViews) {
  const WebReply r = routes_.Handle(Call("POST", "/dashboard/login").Body("key=sk-other+key"));
  EXPECT_EQ(r.status, 303);
  EXPECT_EQ(Header(r, "Location"), "/dashboard");
  const std::string set = Header(r, "Set-Cookie");
  EXPECT_NE(set.find("HttpOnly"), std::string::npos);
  EXPECT_NE(set.find("SameSite=Strict"), std::string::npos);
  EXPECT_NE(set.find("Path=/"), std::string::npos);
  EXPECT_EQ(set.find("Secure"), std::string::npos) << "plain HTTP";
  EXPECT_EQ(set.find("sk-other"), std::string::npos) << "the cookie is a session, not the key";
  const std::string cookie = CookiePair(r);
  ASSERT_EQ(cookie.size(), std::string("latentserve_dashboard=").size() + 64);
  EXPECT_EQ(routes_.Handle(Call("GET", "/dashboard").Cookie("a=b; " + cookie + "; c=d")).status, 200);
  EXPECT_TRUE(routes_.MayView(Call("GET", "/metrics").Cookie(cookie)));
  // Over TLS the cookie is Secure.
  const WebReply tls = routes_.Handle(Call("POST", "/dashboard/login").Body("key=sk-right").Tls());
  EXPECT_NE(Header(tls, "Set-Cookie").find("; Secure"), std::string::npos);
}

TEST_F(DashboardRoutesTest, ForgedOrForeignSessionCookiesAreRefused) {
  const std::string cookie = CookiePair(routes_.Handle(Call("POST", "/dashboard/login").Body("key=sk-right")));
  std::string forged = cookie;
  forged.back() = forged.back() == '0' ? '1' : '0';
  EXPECT_FALSE(routes_.MayView(Call("GET", "/dashboard").Cookie(forged)));
  EXPECT_FALSE(routes_.MayView(Call("GET", "/dashboard").Cookie("latentserve_dashboard=")));
  EXPECT_FALSE(routes_.MayView(Call("GET", "/dashboard").Cookie("x" + cookie)));
  // Another server process draws another session secret.
  DashboardRoutes other(&keys_, nullptr, "tiny");
  EXPECT_FALSE(other.MayView(Call("GET", "/dashboard").Cookie(cookie)));
}

TEST_F(DashboardRoutesTest, LoginWithAWrongOrMissingKeyIs401WithAMessageAndNoCookie) {
  const WebReply wrong = routes_.Handle(Call("POST", "/dashboard/login").Body("key=sk-wrong"));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_NE(wrong.body.find("That key is not valid."), std::string::npos);
  EXPECT_EQ(Header(wrong, "Set-Cookie"), "");
  const WebReply missing = routes_.Handle(Call("POST", "/dashboard/login").Body("other=1"));
  EXPECT_EQ(missing.status, 401);
  EXPECT_NE(missing.body.find("Enter an API key."), std::string::npos);
  const WebReply malformed = routes_.Handle(Call("POST", "/dashboard/login").Body("key=%zz"));
  EXPECT_EQ(malformed.status, 401);
  EXPECT_EQ(routes_.Handle(Call("GET", "/dashboard/login")).status, 200);
  EXPECT_EQ(routes_.Handle(Call("PUT", "/dashboard/login")).error->http_status, 405);
}

TEST_F(DashboardRoutesTest, LogoutExpiresTheCookie) {
  const WebReply r = routes_.Handle(Call("POST", "/dashboard/logout"));
  EXPECT_EQ(r.status, 303);
  EXPECT_NE(Header(r, "Set-Cookie").find("latentserve_dashboard=; Path=/; Max-Age=0"), std::string::npos);
  EXPECT_EQ(routes_.Handle(Call("GET", "/dashboard/logout")).error->http_status, 405);
}

TEST_F(DashboardRoutesTest, ExpertLoadNeedsAKeyOrTheSessionAndNamesBadQueryParameters) {
  const WebReply no_key = routes_.Handle(Call("GET", "/v1/expert_load"));
  ASSERT_TRUE(no_key.error);
  EXPECT_EQ(no_key.error->http_status, 401);
  const WebReply bad = routes_.Handle(Call("GET", "/v1/expert_load").Query("total=1").Auth("Bearer sk-right"));
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->http_status, 400);
  EXPECT_EQ(bad.error->param, "total");
  const WebReply bad_value = routes_.Handle(Call("GET", "/v1/expert_load").Query("totals=yes").Auth("Bearer sk-right"));
  EXPECT_EQ(bad_value.error->param, "totals");
  const WebReply post = routes_.Handle(Call("POST", "/v1/expert_load").Auth("Bearer sk-right"));
  EXPECT_EQ(post.error->http_status, 405);
}

TEST(DashboardRoutesOpenTest, WithoutKeysEverythingIsOpenAndLoginRedirects) {
  const ApiKeys none;
  const DashboardRoutes routes(&none, nullptr, "tiny");
  EXPECT_EQ(routes.Handle(Call("GET", "/dashboard")).status, 200);
  const WebReply login = routes.Handle(Call("POST", "/dashboard/login").Body("key=x"));
  EXPECT_EQ(login.status, 303);
  EXPECT_EQ(Header(login, "Set-Cookie"), "");
}

}  // namespace
}  // namespace ls::server
