// DashboardRoutes: the operator's read-only views over HTTP — GET /dashboard (the page compiled
// into the binary) and GET /v1/expert_load — and, when API keys are on, a browser session for
// them: POST /dashboard/login trades a valid key for a cookie that only these views and /metrics
// accept (never generation), POST /dashboard/logout drops it. Independent of the HTTP library:
// the server hands in a WebCall and writes out the WebReply. Immutable after construction, so
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "server/api_keys.h"
#include "server/request_fields.h"
#include "server/web_call.h"

namespace ls::server {

class DashboardRoutes {
 public:
  // The session cookie's name and lifetime.
  static constexpr std::string_view kCookie = "latentserve_dashboard";
  static constexpr int kSessionSeconds = 12 * 3600;

  // Draws the session secret: 32 random bytes for this process's life (a restart logs browsers out).
  // `keys` and `engine` must outlive the routes; only /v1/expert_load reads the engine.
  DashboardRoutes(const ApiKeys* keys, const Engine* engine, std::string model_name);

  // The paths Handle answers: /dashboard, /dashboard/login, /dashboard/logout, /v1/expert_load.
  static bool Serves(std::string_view path);
  WebReply Handle(const WebCall& call) const;
  // Whether the call may read the read-only views (the dashboard, the expert load, /metrics):
  // keys are off, or it carries a valid bearer key, or the session cookie.
  bool MayView(const WebCall& call) const;

 private:
  WebReply Page(const WebCall& call) const;
  WebReply Login(const WebCall& call) const;
  WebReply ExpertLoad(const WebCall& call) const;
  std::string SessionCookie(bool tls, int max_age) const;

  const ApiKeys* keys_;
  const Engine* engine_;
  std::string model_name_;
  std::string session_;  // 64 hex characters
};

}  // namespace ls::server
