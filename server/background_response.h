// RunInBackground: a background Response (/v1/responses with background: true) after its request
// was answered. It collects the reply detached from the connection (a client that leaves does not
// cancel it) and keeps the Response in the store as it goes: in_progress at its first output, then
// completed or incomplete, cancelled (POST /v1/responses/{id}/cancel) or failed. Once deleted (or
// dropped for room) it is not stored again.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>

#include "server/api_context.h"
#include "server/generation.h"
#include "server/response_store.h"

namespace ls::server {

// Spawned detached on the connection's executor once the queued Response is stored and answered;
// `start` is when its request was read. An exception out of it (a server fault: see
// UnexpectedFailure) cancels the generation and stores the Response as failed with the error, as
// an engine failure would.
boost::asio::awaitable<void> RunInBackground(std::shared_ptr<Generation> g, ApiContext* ctx, ResponseStore* store,
                                             std::chrono::steady_clock::time_point start);

}  // namespace ls::server
