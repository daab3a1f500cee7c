// StoredResponseRoutes: reading, listing the input of, deleting and cancelling stored responses.
#include "server/stored_response_routes.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/responses_api.h"

namespace ls::server {
namespace {

using ojson = nlohmann::ordered_json;

WebReply Json(std::string body) {
  WebReply r;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

WebReply NotFound(const std::string& id) {
  return ErrorReply(404,
                    absl::StrCat("response '", id, "' is not stored here (never stored, deleted, or dropped for room)"),
                    "", "not_found_error");
}

}  // namespace

WebReply StoredResponseRoutes::Handle(const WebCall& call) const {
  if (!keys_->Authorize(call.authorization))
    return ErrorReply(401, "missing or invalid API key", "", "authentication_error");
  constexpr std::string_view kItems = "/input_items", kCancel = "/cancel";
  std::string_view id = call.path.substr(kPrefix.size());
  const bool items = id.ends_with(kItems), cancel = id.ends_with(kCancel);
  if (items) id.remove_suffix(kItems.size());
  if (cancel) id.remove_suffix(kCancel.size());
  if (id.empty() || id.find('/') != std::string_view::npos)
    return ErrorReply(404, absl::StrCat("no route for ", std::string(call.path)), "", "not_found_error");
  const std::string name(id);
  if (items) {
    if (call.method != "GET")
      return ErrorReply(405, absl::StrCat("use GET for ", std::string(kPrefix), "{id}", std::string(kItems)));
    return Get(call, name, true);
  }
  if (cancel) {
    if (call.method != "POST")
      return ErrorReply(405, absl::StrCat("use POST for ", std::string(kPrefix), "{id}", std::string(kCancel)));
    return Cancel(name);
  }
  if (call.method == "GET") return Get(call, name, false);
  if (call.method == "DELETE") return Delete(name);
  return ErrorReply(405, absl::StrCat("use GET or DELETE for ", std::string(kPrefix), "{id}"));
}

WebReply StoredResponseRoutes::Get(const WebCall& call, const std::string& id, bool items) const {
  std::optional<ResponseStore::Entry> entry = store_->Get(id);
  if (!entry) return NotFound(id);
  if (!items) return Json(std::move(entry->response));
  ApiError err;
  std::optional<ojson> page = InputItemsPage(entry->input_items, call.query, &err);
  if (!page) return ErrorReply(std::move(err));
  return Json(WireJson(*page));
}

// A background response still generating stops with its deletion.
WebReply StoredResponseRoutes::Delete(const std::string& id) const {
  std::optional<ResponseStore::Entry> entry = store_->Get(id);
  if (!entry || !store_->Erase(id)) return NotFound(id);
  if (StillRunning(ojson::parse(entry->response))) engine_->Cancel(id);
  return Json(WireJson(ojson{{"id", id}, {"object", "response.deleted"}, {"deleted", true}}));
}

// A background response still generating is cancelled (the store says so once the engine has
// stopped it, at its next step) and answered as cancelled; a finished one is left as it is, and
// an error says so.
WebReply StoredResponseRoutes::Cancel(const std::string& id) const {
  std::optional<ResponseStore::Entry> entry = store_->Get(id);
  if (!entry) return NotFound(id);
  ojson r = ojson::parse(entry->response);
  if (r.value("background", false) != true)
    return ErrorReply(400, absl::StrCat("response '", id,
                                        "' was not created with background: true; only background responses can be "
                                        "cancelled"));
  const std::string status = r.value("status", "");
  if (status == "cancelled") return Json(std::move(entry->response));
  if (!StillRunning(r))
    return ErrorReply(400, absl::StrCat("response '", id, "' has already finished (status ", status,
                                        "); only a queued or in-progress response can be cancelled"));
  engine_->Cancel(id);
  r["status"] = "cancelled";
  return Json(WireJson(r));
}

}  // namespace ls::server
