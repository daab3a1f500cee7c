// StoredResponseRoutes: the Responses API's routes over stored responses — GET and DELETE
// /v1/responses/{id}, GET /v1/responses/{id}/input_items, POST /v1/responses/{id}/cancel. They
// read and change the ResponseStore and cancel a background response's generation in the engine;
// generation itself (POST /v1/responses) stays with the HTTP server. Independent of the HTTP
// library, as DashboardRoutes: the server hands in a WebCall and writes out the WebReply.
// Thread-safe (the store locks itself, and Engine::Cancel may be called from any thread).
#pragma once

#include <string>
#include <string_view>

#include "engine/engine.h"
#include "server/api_keys.h"
#include "server/response_store.h"
#include "server/web_call.h"

namespace ls::server {

class StoredResponseRoutes {
 public:
  // Everything below this prefix is answered here.
  static constexpr std::string_view kPrefix = "/v1/responses/";

  // `keys`, `engine` and `store` must outlive the routes.
  StoredResponseRoutes(const ApiKeys* keys, Engine* engine, ResponseStore* store)
      : keys_(keys), engine_(engine), store_(store) {}

  static bool Serves(std::string_view path) { return path.size() > kPrefix.size() && path.starts_with(kPrefix); }
  WebReply Handle(const WebCall& call) const;

 private:
  WebReply Get(const WebCall& call, const std::string& id, bool items) const;
  WebReply Delete(const std::string& id) const;
  WebReply Cancel(const std::string& id) const;

  const ApiKeys* keys_;
  Engine* engine_;
  ResponseStore* store_;
};

}  // namespace ls::server
