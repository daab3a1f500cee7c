// RunInBackground: collecting a background Response into the store.
#include "server/background_response.h"

#include <exception>
#include <string>
#include <utility>

#include "server/api_error.h"
#include "server/choice_stream.h"
#include "server/openai_protocol.h"
#include "server/responses_api.h"

namespace ls::server {
namespace {

using boost::asio::awaitable;
using Clock = std::chrono::steady_clock;

// The collection itself, up to the final Response stored and the request logged.
awaitable<void> CollectInBackground(std::shared_ptr<Generation> g, ApiContext* ctx, ResponseStore* store,
                                    Clock::time_point start) {
  const ResponsesRequest& req = *g->responses;
  ChoiceStream stream(g->r, 0, ctx, g->id);
  Choice reply;
  bool started = false, cancelled = false;
  while (!g->tally.all_finished()) {
    for (auto& [i, o] : co_await g->channel->Wait()) {
      Choice delta = stream.Next(o);
      const FinishReason finish = delta.finish;
      AppendDelta(&reply, std::move(delta));
      if (o.finished()) {
        g->tally.Finished(i, o);
        reply.finish = finish;
        cancelled = o.finish_reason == FinishReason::kCancelled && o.error.empty();
      }
    }
    if (!started && !g->tally.all_finished()) {
      store->Replace(
          g->id, StoredResponse(
                     req, UnfinishedResponse(req, g->id, g->created, ctx->model_name(), "in_progress", reply), reply));
      started = true;
    }
  }
  const std::string& model = ctx->model_name();
  nlohmann::ordered_json body;
  if (g->tally.failure) {
    body = UnfinishedResponse(req, g->id, g->created, model, "failed", reply, &*g->tally.failure);
    g->tally.log.status = std::to_string(g->tally.failure->http_status);
  } else if (cancelled) {
    body = UnfinishedResponse(req, g->id, g->created, model, "cancelled", reply);
    g->tally.log.status = "cancelled";
  } else {
    body = ResponseBody(req, g->id, g->created, model, reply, g->tally.usage,
                        TextLogprobs(req, g->r, reply.text_logprobs, *ctx));
    g->tally.log.status = "200";
  }
  store->Replace(g->id, StoredResponse(req, body, reply));
  g->tally.log.total_s = std::chrono::duration<double>(Clock::now() - start).count();
  ctx->LogRequest(g->tally.log);
}

}  // namespace

awaitable<void> RunInBackground(std::shared_ptr<Generation> g, ApiContext* ctx, ResponseStore* store,
                                Clock::time_point start) {
  std::exception_ptr thrown;
  try {
    co_await CollectInBackground(g, ctx, store, start);
    co_return;
  } catch (...) {
    thrown = std::current_exception();
  }
  const absl::Status failure = UnexpectedFailure("a background response", thrown);
  ctx->HandlerFailed("http_handler_failed", failure);
  for (const auto& id : *g->ids) ctx->engine().Cancel(id);
  const ApiError error = ToApiError(failure);
  store->Replace(g->id, StoredResponse(*g->responses,
                                       UnfinishedResponse(*g->responses, g->id, g->created, ctx->model_name(), "failed",
                                                          Choice{}, &error),
                                       Choice{}));
  g->tally.log.status = "500";
  g->tally.log.total_s = std::chrono::duration<double>(Clock::now() - start).count();
  ctx->LogRequest(g->tally.log);
}

}  // namespace ls::server
