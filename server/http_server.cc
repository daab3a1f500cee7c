// HttpServer implementation: one coroutine per connection, routes, generation handlers.
#include "server/http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <chrono>
#include <deque>
#include <exception>
#include <fstream>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/version.h"
#include "server/api_error.h"
#include "server/background_response.h"
#include "server/choice_stream.h"
#include "server/cors_policy.h"
#include "server/dashboard_routes.h"
#include "server/generation.h"
#include "server/openai_protocol.h"
#include "server/output_channel.h"
#include "server/prometheus.h"
#include "server/request_tally.h"
#include "server/responses_api.h"
#include "server/stored_response_routes.h"
#include "server/tokenize_api.h"

namespace ls::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using net::awaitable;
using net::use_awaitable;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

using Request = http::request<http::string_body>;

// `body`: JSON text.
http::response<http::string_body> JsonTextResponse(const Request& req, http::status status, std::string body) {
  http::response<http::string_body> res{status, req.version()};
  res.set(http::field::server, "latentserve");
  res.set(http::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

http::response<http::string_body> JsonResponse(const Request& req, http::status status, const json& body) {
  return JsonTextResponse(req, status, WireJson(body));
}

ApiError Err(int status, std::string message, std::string param = "", std::string type = "invalid_request_error") {
  return ApiError{status, std::move(message), std::move(param), std::move(type)};
}

http::response<http::string_body> ErrorResponse(const Request& req, const ApiError& e) {
  auto res = JsonResponse(req, static_cast<http::status>(e.http_status), ErrorBody(e));
  if (e.http_status == 429) res.set(http::field::retry_after, "1");
  if (e.http_status == 401) res.set(http::field::www_authenticate, "Bearer");
  return res;
}

// The client's X-Request-Id when a log line and a header may carry it as it is (1 to 128 of
// A-Z a-z 0-9 . _ : -), else "".
std::string ClientRequestId(const Request& req) {
  const auto v = req["X-Request-Id"];
  if (v.empty() || v.size() > 128) return "";
  for (char c : v)
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != ':') return "";
  return std::string(v);
}

// The dashboard's routes (server/dashboard_routes.h) see the request through a WebCall.
WebCall WebCallOf(const Request& req, const std::string& target, bool tls) {
  const size_t q = target.find('?');
  WebCall c;
  c.method = std::string_view(req.method_string().data(), req.method_string().size());
  c.path = std::string_view(target).substr(0, q);
  c.query = q == std::string::npos ? std::string_view() : std::string_view(target).substr(q + 1);
  c.authorization = std::string_view(req[http::field::authorization].data(), req[http::field::authorization].size());
  c.cookie = std::string_view(req[http::field::cookie].data(), req[http::field::cookie].size());
  c.body = req.body();
  c.tls = tls;
  return c;
}

http::response<http::string_body> WebResponse(const Request& req, WebReply reply) {
  if (reply.error) return ErrorResponse(req, *reply.error);
  http::response<http::string_body> res{static_cast<http::status>(reply.status), req.version()};
  res.set(http::field::server, "latentserve");
  res.set(http::field::content_type, reply.content_type);
  for (auto& [name, value] : reply.headers) res.insert(name, value);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(reply.body);
  res.prepare_payload();
  return res;
}

template <typename Stream>
tcp::socket& Socket(Stream& s) {
  return beast::get_lowest_layer(s).socket();
}

// Counts a generation from its request read to its response written (see HttpServer::Stop).
class InFlight {
 public:
  explicit InFlight(std::atomic<int>* n) : n_(n) { n_->fetch_add(1); }
  ~InFlight() { n_->fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>* n_;
};

// Per-connection state and handlers.
template <typename Stream>
class Session {
 public:
  Session(Stream& stream, ApiContext* ctx, const HttpOptions& opt, const CorsPolicy* cors, std::atomic<int>* generating,
          const DashboardRoutes* dashboard, const StoredResponseRoutes* stored, ResponseStore* responses)
      : stream_(stream),
        ctx_(ctx),
        opt_(opt),
        cors_(cors),
        generating_(generating),
        dashboard_(dashboard),
        stored_(stored),
        responses_(responses) {}

  // Serves requests until the client leaves, an error, or a timeout. The first request's head
  // must be complete by `head_deadline`; a later one's within the header timeout of its first
  // byte, which must come within the keep-alive timeout of the last response.
  awaitable<void> Run(Clock::time_point head_deadline) {
    beast::flat_buffer buffer;
    auto& lowest = beast::get_lowest_layer(stream_);
    HttpConnectionCounters& counters = ctx_->http_connections();
    for (bool first = true;; first = false) {
      boost::system::error_code ec;
      if (!first) {
        if (buffer.size() == 0) {  // else a pipelined request has begun already
          lowest.expires_after(opt_.keepalive_timeout);
          const size_t n = co_await stream_.async_read_some(buffer.prepare(4096), net::redirect_error(use_awaitable, ec));
          buffer.commit(n);
          if (ec == beast::error::timeout) {
            ++counters.idle_timeouts;
            ctx_->Log(LogLevel::kDebug, "http_idle_timeout", "");
          }
          if (ec) co_return;
        }
        head_deadline = Clock::now() + opt_.header_timeout;
      }
      http::request_parser<http::string_body> parser;
      parser.body_limit(opt_.max_body_bytes);
      parser.header_limit(64 * 1024);
      lowest.expires_at(head_deadline);
      co_await http::async_read_header(stream_, buffer, parser, net::redirect_error(use_awaitable, ec));
      if (ec == beast::error::timeout) {
        ++counters.header_timeouts;
        ctx_->Log(LogLevel::kDebug, "http_header_timeout", "");
        co_return;
      }
      if (!ec && !parser.is_done() && parser.get().version() >= 11 &&
          beast::iequals(parser.get()[http::field::expect], "100-continue")) {
        // The client sends its body only after this (curl waits a second for it, then sends anyway).
        // A body over the limit was refused with the head (below), before any 100.
        http::response<http::empty_body> go_on{http::status::continue_, 11};
        co_await http::async_write(stream_, go_on, net::redirect_error(use_awaitable, ec));
      }
      if (!ec) {
        lowest.expires_after(std::chrono::minutes(5));  // the body
        co_await http::async_read(stream_, buffer, parser, net::redirect_error(use_awaitable, ec));
      }
      if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset) co_return;
      if (ec == http::error::body_limit) {
        // Answered before the body is read: the rest is not read, and the connection closes.
        origin_ = std::string(parser.get()[http::field::origin]);
        Request req;
        req.version(11);
        req.keep_alive(false);
        http::response<http::string_body> res =
            ErrorResponse(req, Err(413, absl::StrCat("request body exceeds ", opt_.max_body_bytes, " bytes")));
        co_await Write(std::move(res));
        co_return;
      }
      if (ec) {
        if (ec != beast::error::timeout && ec != net::error::operation_aborted) {
          Request req;
          req.version(11);
          req.keep_alive(false);
          http::response<http::string_body> res = ErrorResponse(req, Err(400, "malformed HTTP request: " + ec.message()));
          co_await Write(std::move(res));
        }
        co_return;
      }
      lowest.expires_never();
      Request req = parser.release();
      const bool keep = req.keep_alive();
      if (!co_await Route(req)) co_return;
      if (!keep) co_return;
    }
  }

 private:
  awaitable<bool> Write(http::response<http::string_body> res) {
    answering_ = true;
    ctx_->CountRequest("http", std::to_string(res.result_int()));
    if (!reply_id_.empty()) res.set("X-Request-Id", reply_id_);
    for (const auto& [name, value] : cors_->ReplyHeaders(origin_)) res.set(name, value);
    boost::system::error_code ec;
    co_await http::async_write(stream_, res, net::redirect_error(use_awaitable, ec));
    co_return !ec;
  }

  // Serves one request; false when the connection must close. An exception out of its handler (a
  // server fault: see UnexpectedFailure) cancels the generation it submitted, is logged, and is
  // answered 500 naming it when the response has not begun; either way the connection closes.
  awaitable<bool> Route(Request& req) {
    answering_ = false;
    generation_.reset();
    origin_ = std::string(req[http::field::origin]);
    std::exception_ptr thrown;
    try {
      co_return co_await Dispatch(req);
    } catch (...) {
      thrown = std::current_exception();
    }
    const absl::Status failure =
        UnexpectedFailure(absl::StrCat(std::string(req.method_string()), " ", std::string(req.target())), thrown);
    ctx_->HandlerFailed("http_handler_failed", failure);
    if (std::shared_ptr<Generation> g = std::exchange(generation_, nullptr)) {
      *g->done = true;
      for (const auto& id : *g->ids) ctx_->engine().Cancel(id);
      boost::system::error_code ec;
      Socket(stream_).cancel(ec);  // the disconnect watch
      g->tally.log.status = "500";
      ctx_->LogRequest(g->tally.log);
    }
    if (answering_) {  // a stream had begun: its end cannot be an error response now
      ctx_->CountRequest("http", "500");
      co_return false;
    }
    http::response<http::string_body> res = ErrorResponse(req, ToApiError(failure));
    res.keep_alive(false);
    co_await Write(std::move(res));
    co_return false;
  }

  // Dispatches one request; false when the connection must close.
  awaitable<bool> Dispatch(Request& req) {
    client_id_ = reply_id_ = ClientRequestId(req);
    const std::string target(req.target());
    const std::string path = target.substr(0, target.find('?'));
    if (req.method() == http::verb::options && cors_->enabled() &&
        req.find(http::field::access_control_request_method) != req.end()) {
      http::response<http::string_body> res = Preflight(req);
      co_return co_await Write(std::move(res));
    }
    const bool generate = path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/responses";
    if (generate && req.method() == http::verb::post && ctx_->keys().Authorize(std::string(req[http::field::authorization]))) {
      if (path != "/v1/responses")
        co_return co_await Generate(req, path == "/v1/chat/completions" ? Endpoint::kChat : Endpoint::kCompletions);
      ApiError err;
      std::optional<ResponsesRequest> responses = ReadResponsesRequest(req.body(), responses_, &err);
      if (responses) co_return co_await Generate(req, Endpoint::kChat, std::move(responses));
      http::response<http::string_body> res = ErrorResponse(req, err);
      co_return co_await Write(std::move(res));
    }
    http::response<http::string_body> res = Simple(req, path);
    co_return co_await Write(std::move(res));
  }

  // A browser's CORS preflight: 204 with what the origin may send, or 403 when it may not call at all.
  // No API key: browsers send none with a preflight.
  http::response<http::string_body> Preflight(const Request& req) const {
    const CorsPolicy::Headers allowed =
        cors_->PreflightHeaders(origin_, std::string(req[http::field::access_control_request_headers]));
    if (allowed.empty())
      return ErrorResponse(
          req, Err(403, absl::StrCat("origin '", origin_, "' is not in --allowed_origins"), "", "permission_error"));
    http::response<http::string_body> res{http::status::no_content, req.version()};
    res.set(http::field::server, "latentserve");
    for (const auto& [name, value] : allowed) res.set(name, value);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    return res;
  }

  // Every route but generation (kept out of coroutines: GCC 12 mishandles some temporaries there).
  http::response<http::string_body> Simple(const Request& req, const std::string& path) {
    constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;
    const std::string target(req.target());
    if (DashboardRoutes::Serves(path)) return WebResponse(req, dashboard_->Handle(WebCallOf(req, target, kTls)));
    const bool get = req.method() == http::verb::get;
    if (StoredResponseRoutes::Serves(path)) return WebResponse(req, stored_->Handle(WebCallOf(req, target, kTls)));
    const bool tokenizer = path == "/tokenize" || path == "/detokenize";
    const bool known = path == "/health" || path == "/ready" || path == "/version" || path == "/metrics" ||
                       path == "/v1/models" || path == "/v1/completions" || path == "/v1/chat/completions" ||
                       path == "/v1/responses" || tokenizer;
    if (path == "/health" || path == "/ready" || path == "/version") {
      if (!get) return ErrorResponse(req, Err(405, absl::StrCat("use GET for ", path)));
      if (path == "/health") return JsonResponse(req, http::status::ok, {{"status", "ok"}});
      if (path == "/version") return JsonResponse(req, http::status::ok, {{"version", kVersion}});
      const bool ready = ctx_->ready();
      return JsonResponse(req, ready ? http::status::ok : http::status::service_unavailable,
                          {{"ready", ready}, {"draining", !ready}});
    }
    if (!known) return ErrorResponse(req, Err(404, absl::StrCat("no route for ", path), "", "not_found_error"));
    // /metrics also takes the dashboard's session cookie (the page reads it); the rest only a key.
    const bool authorized = path == "/metrics" ? dashboard_->MayView(WebCallOf(req, target, kTls))
                                               : ctx_->keys().Authorize(std::string(req[http::field::authorization]));
    if (!authorized) return ErrorResponse(req, Err(401, "missing or invalid API key", "", "authentication_error"));
    if (path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/responses" || (tokenizer && get))
      return ErrorResponse(req, Err(405, absl::StrCat("use POST for ", path)));
    if (tokenizer && req.method() == http::verb::post) {
      TokenizeReply reply = path == "/tokenize" ? Tokenize(req.body(), *ctx_) : Detokenize(req.body(), *ctx_);
      return JsonResponse(req, static_cast<http::status>(reply.http_status), reply.body);
    }
    if (!get) return ErrorResponse(req, Err(405, absl::StrCat("use GET for ", path)));
    if (path == "/metrics") {
      http::response<http::string_body> res{http::status::ok, req.version()};
      res.set(http::field::content_type, "text/plain; version=0.0.4");
      res.keep_alive(req.keep_alive());
      res.body() = RenderPrometheus(*ctx_, responses_);
      res.prepare_payload();
      return res;
    }
    json model = {{"id", ctx_->model_name()}, {"object", "model"}, {"created", created_},
                  {"owned_by", "latentserve"}, {"max_model_len", ctx_->engine().max_model_len()}};
    return JsonResponse(req, http::status::ok, {{"object", "list"}, {"data", json::array({model})}});
  }

  // Watches the socket while a generation runs: a client that hangs up cancels its requests.
  // Readiness alone is not proof (waits can complete spuriously), so each wake-up peeks: 0 bytes
  // is the peer's close, an error is a reset, would-block is a spurious wake-up (wait again), and
  // data is a pipelined request (stop watching; the client is there).
  awaitable<void> WatchDisconnect(std::shared_ptr<std::vector<std::string>> ids, std::shared_ptr<bool> done) {
    for (;;) {
      boost::system::error_code ec;
      co_await Socket(stream_).async_wait(tcp::socket::wait_read, net::redirect_error(use_awaitable, ec));
      if (*done || ec == net::error::operation_aborted) co_return;
      bool gone = static_cast<bool>(ec);
      if (!gone) {
        char byte;
        const ssize_t n = ::recv(Socket(stream_).native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) co_return;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
        gone = true;
      }
      if (gone) {
        for (const auto& id : *ids) ctx_->engine().Cancel(id);
        co_return;
      }
    }
  }

  // A generation request: parse and submit, then stream or collect its choices, then log it.
  // `responses`: a /v1/responses request, served as the chat request it stands for.
  awaitable<bool> Generate(Request& req, Endpoint endpoint, std::optional<ResponsesRequest> responses = std::nullopt) {
    const InFlight in_flight(generating_);
    const auto start = Clock::now();
    ApiError err;
    auto parsed =
        responses ? ParseResponsesRequest(*responses, *ctx_, &err) : ParseRequest(endpoint, req.body(), *ctx_, &err);
    if (!parsed) {
      http::response<http::string_body> res = ErrorResponse(req, err);
      co_return co_await Write(std::move(res));
    }
    std::string id = ctx_->NewRequestId(responses ? "resp_" : endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-");
    if (reply_id_.empty()) reply_id_ = id;
    auto generation = std::make_shared<Generation>(std::move(*parsed), std::move(id), co_await net::this_coro::executor,
                                                   std::move(responses));
    generation_ = generation;
    Generation& g = *generation;
    g.tally.log.client_request_id = client_id_;
    if (g.responses) g.tally.log.endpoint = "responses";
    if (std::optional<ApiError> refused = Submit(g)) {
      http::response<http::string_body> res = ErrorResponse(req, *refused);
      co_return co_await Write(std::move(res));
    }
    if (g.responses && g.responses->background) {  // stored as queued, answered, generated detached
      const auto queued = UnfinishedResponse(*g.responses, g.id, g.created, ctx_->model_name(), "queued", Choice{});
      responses_->Put(g.id, StoredResponse(*g.responses, queued, Choice{}));
      generation_.reset();  // the background coroutine's from here
      net::co_spawn(co_await net::this_coro::executor, RunInBackground(generation, ctx_, responses_, start),
                    net::detached);
      http::response<http::string_body> res = JsonTextResponse(req, http::status::ok, WireJson(queued));
      co_return co_await Write(std::move(res));
    }
    net::co_spawn(co_await net::this_coro::executor, WatchDisconnect(g.ids, g.done), net::detached);
    const bool ok = g.r.stream ? co_await StreamChoices(req, g) : co_await CollectChoices(req, g);
    g.tally.log.total_s = std::chrono::duration<double>(Clock::now() - start).count();
    ctx_->LogRequest(g.tally.log);
    generation_.reset();
    co_return ok;
  }

  // Submits every choice to the engine at once: all are queued, or none and the reason.
  std::optional<ApiError> Submit(Generation& g) {
    const ParsedRequest& r = g.r;
    const int32_t num_choices = r.num_choices();
    std::vector<ls::Request> choices(num_choices);
    std::vector<ls::OutputCallback> callbacks;
    std::vector<std::string> ids;
    for (int32_t i = 0; i < num_choices; ++i) {
      const int32_t sample = i % r.n;  // choice i is sample `sample` of prompt i / n
      ls::Request& er = choices[i];
      er.id = num_choices == 1 ? g.id : absl::StrCat(g.id, "-", i);
      er.prompt_ids = r.prompts[i / r.n];
      er.params = r.params;
      if (r.params.seed && sample > 0) er.params.seed = *r.params.seed + sample;
      er.priority = r.priority;
      er.cache_salt = r.cache_salt;
      callbacks.push_back(g.channel->Callback(i));
      ids.push_back(er.id);
    }
    if (absl::Status st = ctx_->engine().SubmitAll(std::move(choices), std::move(callbacks)); !st.ok())
      return ToApiError(st);
    *g.ids = std::move(ids);
    return std::nullopt;
  }

  // Server-sent events: one chunk per choice delta as the engine makes them, the usage chunk, [DONE].
  awaitable<bool> StreamChoices(const Request& req, Generation& g) {
    const ParsedRequest& r = g.r;
    const int32_t num_choices = r.num_choices();
    http::response<http::empty_body> head{http::status::ok, req.version()};
    head.set(http::field::server, "latentserve");
    head.set(http::field::content_type, "text/event-stream; charset=utf-8");
    head.set(http::field::cache_control, "no-cache");
    head.chunked(true);
    head.keep_alive(req.keep_alive());
    head.set("X-Request-Id", reply_id_);
    for (const auto& [name, value] : cors_->ReplyHeaders(origin_)) head.set(name, value);
    http::response_serializer<http::empty_body> sr{head};
    boost::system::error_code ec;
    answering_ = true;
    co_await http::async_write_header(stream_, sr, net::redirect_error(use_awaitable, ec));
    bool ok = !ec;
    std::vector<ChoiceStream> streams = ChoiceStreams(g);
    std::vector<bool> first(num_choices, true);    // no output of the choice sent yet
    std::vector<int64_t> offsets(num_choices, 0);  // characters of each choice's text sent so far
    std::optional<ResponseEvents> events;          // a Responses stream: its events, not chunks
    bool client_left = false;                      // a choice was cancelled because the client hung up
    if (g.responses) events.emplace(*g.responses, g.r, *ctx_, g.id, g.created, ctx_->model_name());
    std::string pending = events ? events->Start() : "";
    while (!g.tally.all_finished()) {
      auto batch = co_await g.channel->Wait();
      std::string data = std::move(pending);
      pending.clear();
      for (auto& [i, o] : batch) {
        Choice delta = streams[i].Next(o);
        delta.text_offset = offsets[i];
        if (o.finished()) {
          g.tally.Finished(i, o);
          if (o.finish_reason == FinishReason::kCancelled && o.error.empty()) client_left = true;
        }
        if (events) {
          if (auto f = RequestTally::FailureOf(o)) {
            data += events->Error(*f);
            continue;
          }
          data += events->Delta(delta);
          continue;
        }
        if (delta.text.empty() && delta.reasoning.empty() && delta.tool_calls.empty() && delta.logprobs.empty() &&
            delta.finish == FinishReason::kNone && !first[i])
          continue;
        if (auto f = RequestTally::FailureOf(o)) {
          absl::StrAppend(&data, "data: ", WireJson(ErrorBody(*f)), "\n\n");
          continue;
        }
        const json usage = r.continuous_usage ? ChunkUsage(r, i, o.completion_tokens) : json();
        for (json& chunk : StreamChunks(r, g.id, g.created, ctx_->model_name(), i, delta, first[i], *ctx_)) {
          if (!usage.is_null()) chunk["usage"] = usage;
          absl::StrAppend(&data, "data: ", WireJson(chunk), "\n\n");
        }
        offsets[i] += TextChars(delta.text);
        first[i] = false;
      }
      if (g.tally.all_finished() && events) {
        if (!g.tally.failure) {
          data += events->Finish(g.tally.usage);
          // Kept before the client reads its end, so that a next request may continue it at once;
          // one whose client hung up was cut short, and is not kept (as a whole reply is not).
          if (g.responses->store && ok && !client_left)
            responses_->Put(g.id, StoredResponse(*g.responses, events->final_response(), events->reply()));
        }
      } else if (g.tally.all_finished()) {
        if (r.include_usage)
          absl::StrAppend(&data, "data: ", WireJson(UsageChunk(r, g.id, g.created, ctx_->model_name(), g.tally.usage)),
                          "\n\n");
        data += "data: [DONE]\n\n";
      }
      if (ok && !data.empty()) {
        co_await net::async_write(stream_, http::make_chunk(net::buffer(data)), net::redirect_error(use_awaitable, ec));
        if (ec) {
          ok = false;  // the client is gone: cancel, keep draining the engine's outputs
          for (const auto& rid : *g.ids) ctx_->engine().Cancel(rid);
        }
      }
    }
    *g.done = true;
    Socket(stream_).cancel(ec);
    if (ok) co_await net::async_write(stream_, http::make_chunk_last(), net::redirect_error(use_awaitable, ec));
    ok = ok && !ec;
    const std::string status = g.tally.failure ? std::to_string(g.tally.failure->http_status) : "200";
    ctx_->CountRequest("http", status);
    g.tally.log.status = ok ? status : "client_disconnected";
    co_return ok;
  }

  // The text of a whole reply: a chat or text completion, or a Response (its fields in their
  // order; stored first when it asks to be).
  std::string ReplyBody(const Generation& g, const std::vector<Choice>& choices) const {
    if (g.responses) {
      const auto body = ResponseBody(*g.responses, g.id, g.created, ctx_->model_name(), choices[0], g.tally.usage,
                                     TextLogprobs(*g.responses, g.r, choices[0].text_logprobs, *ctx_));
      if (g.responses->store) responses_->Put(g.id, StoredResponse(*g.responses, body, choices[0]));
      return WireJson(body);
    }
    return WireJson(CompletionBody(g.r, g.id, g.created, ctx_->model_name(), choices, g.tally.usage, *ctx_));
  }

  std::vector<ChoiceStream> ChoiceStreams(const Generation& g) const {
    std::vector<ChoiceStream> streams;
    for (int32_t i = 0; i < g.r.num_choices(); ++i) streams.emplace_back(g.r, i, ctx_, g.id);
    return streams;
  }

  // One JSON response once every choice has finished.
  awaitable<bool> CollectChoices(const Request& req, Generation& g) {
    const ParsedRequest& r = g.r;
    const int32_t num_choices = r.num_choices();
    std::vector<Choice> choices(num_choices);
    std::vector<ChoiceStream> streams = ChoiceStreams(g);
    bool client_left = false;
    while (!g.tally.all_finished()) {
      for (auto& [i, o] : co_await g.channel->Wait()) {
        Choice delta = streams[i].Next(o);
        Choice& c = choices[i];
        const FinishReason finish = delta.finish;
        AppendDelta(&c, std::move(delta));
        if (o.finished()) {
          g.tally.Finished(i, o);
          c.finish = finish;
          if (o.finish_reason == FinishReason::kCancelled && o.error.empty()) client_left = true;
        }
      }
    }
    *g.done = true;
    boost::system::error_code ec;
    Socket(stream_).cancel(ec);
    if (client_left) {
      g.tally.log.status = "client_disconnected";
      ctx_->CountRequest("http", "499");
      co_return false;
    }
    if (g.tally.failure) {
      g.tally.log.status = std::to_string(g.tally.failure->http_status);
      http::response<http::string_body> res = ErrorResponse(req, *g.tally.failure);
      co_return co_await Write(std::move(res));
    }
    g.tally.log.status = "200";
    http::response<http::string_body> res = JsonTextResponse(req, http::status::ok, ReplyBody(g, choices));
    co_return co_await Write(std::move(res));
  }

  Stream& stream_;
  ApiContext* ctx_;
  const HttpOptions& opt_;
  const CorsPolicy* cors_;
  std::atomic<int>* generating_;
  const DashboardRoutes* dashboard_;
  // The request's X-Request-Id as the client sent it, and as the reply carries it (the client's,
  // else a generation's own id).
  std::string client_id_, reply_id_;
  std::string origin_;                      // the request's Origin header (CORS)
  bool answering_ = false;                  // the request's response has begun to be written
  std::shared_ptr<Generation> generation_;  // the request's generation, while its handler runs it
  const StoredResponseRoutes* stored_;
  ResponseStore* responses_;
  const int64_t created_ = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch()).count();
};

}  // namespace

struct HttpServer::Impl {
  HttpOptions opt;
  ApiContext* ctx;
  net::io_context ioc;
  std::unique_ptr<net::ssl::context> ssl;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  int port = 0;
  std::atomic<int> generating{0};  // generation requests read and not yet answered
  const DashboardRoutes dashboard;
  ResponseStore responses;  // the Responses API's stored responses
  const StoredResponseRoutes stored;
  CorsPolicy cors;  // set by Start

  Impl(HttpOptions o, ApiContext* c)
      : opt(std::move(o)),
        ctx(c),
        ioc(std::max(1, opt.threads)),
        dashboard(&c->keys(), &c->engine(), c->model_name()),
        responses(opt.responses_store_bytes),
        stored(&c->keys(), &c->engine(), &responses) {}

  // Counts a served connection as open until it ends.
  struct OpenConnection {
    std::atomic<int64_t>* open;
    ~OpenConnection() { open->fetch_sub(1); }
  };

  awaitable<void> Serve(tcp::socket socket, Clock::time_point accepted) {
    const OpenConnection counted{&ctx->http_connections().open};
    const Clock::time_point head_deadline = accepted + opt.header_timeout;
    if (ssl) {
      beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), *ssl);
      beast::get_lowest_layer(stream).expires_at(head_deadline);
      boost::system::error_code ec;
      co_await stream.async_handshake(net::ssl::stream_base::server, net::redirect_error(use_awaitable, ec));
      if (ec == beast::error::timeout) ++ctx->http_connections().header_timeouts;
      if (ec) co_return;
      Session<beast::ssl_stream<beast::tcp_stream>> s(stream, ctx, opt, &cors, &generating, &dashboard, &stored,
                                                      &responses);
      co_await s.Run(head_deadline);
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
      co_await stream.async_shutdown(net::redirect_error(use_awaitable, ec));
    } else {
      beast::tcp_stream stream(std::move(socket));
      Session<beast::tcp_stream> s(stream, ctx, opt, &cors, &generating, &dashboard, &stored, &responses);
      co_await s.Run(head_deadline);
      boost::system::error_code ec;
      stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    }
  }

  // Over --max_connections: a 503 with the JSON error and Connection: close, without reading the
  // request; then the client has a moment to read it before the socket closes.
  template <typename Stream>
  static awaitable<void> Refuse(Stream& stream) {
    Request req;
    req.version(11);
    req.keep_alive(false);
    http::response<http::string_body> res = ErrorResponse(
        req, Err(503, "the server is at its connection limit (--max_connections); retry later", "", "service_unavailable"));
    res.set(http::field::retry_after, "1");
    boost::system::error_code ec;
    co_await http::async_write(stream, res, net::redirect_error(use_awaitable, ec));
    Socket(stream).shutdown(tcp::socket::shutdown_send, ec);
    char sink[4096];  // until the client closes, at most a second
    while (!ec) co_await stream.async_read_some(net::buffer(sink), net::redirect_error(use_awaitable, ec));
  }

  awaitable<void> Reject(tcp::socket socket) {
    const auto deadline = Clock::now() + std::min<Clock::duration>(opt.header_timeout, std::chrono::seconds(1));
    ctx->Log(LogLevel::kDebug, "http_connection_rejected", "");
    if (ssl) {
      beast::ssl_stream<beast::tcp_stream> stream(beast::tcp_stream(std::move(socket)), *ssl);
      beast::get_lowest_layer(stream).expires_at(deadline);
      boost::system::error_code ec;
      co_await stream.async_handshake(net::ssl::stream_base::server, net::redirect_error(use_awaitable, ec));
      if (!ec) co_await Refuse(stream);
    } else {
      beast::tcp_stream stream(std::move(socket));
      stream.expires_at(deadline);
      co_await Refuse(stream);
    }
  }

  awaitable<void> Listen() {
    HttpConnectionCounters& counters = ctx->http_connections();
    for (;;) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(net::make_strand(ioc), net::redirect_error(use_awaitable, ec));
      if (ec == net::error::operation_aborted) co_return;
      if (ec) {  // e.g. out of file descriptors: keep serving the connections we have, retry shortly
        net::steady_timer pause(ioc, std::chrono::milliseconds(10));
        co_await pause.async_wait(net::redirect_error(use_awaitable, ec));
        continue;
      }
      auto ex = socket.get_executor();
      if (counters.open.load() >= opt.max_connections) {
        ++counters.rejected;
        net::co_spawn(ex, Reject(std::move(socket)), net::detached);
        continue;
      }
      ++counters.open;
      ++counters.accepted;
      net::co_spawn(ex, Serve(std::move(socket), Clock::now()), net::detached);
    }
  }
};

HttpServer::HttpServer(HttpOptions options, ApiContext* ctx) : impl_(std::make_unique<Impl>(std::move(options), ctx)) {}
HttpServer::~HttpServer() { Stop(); }

absl::Status HttpServer::Start() {
  Impl& m = *impl_;
  absl::StatusOr<CorsPolicy> cors = CorsPolicy::Parse(m.opt.allowed_origins);
  if (!cors.ok()) return cors.status();
  m.cors = std::move(*cors);
  if (!m.opt.tls_cert.empty() || !m.opt.tls_key.empty()) {
    if (m.opt.tls_cert.empty() || m.opt.tls_key.empty())
      return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
    m.ssl = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
    for (auto [flag, path] : {std::pair<const char*, const std::string&>{"tls_cert", m.opt.tls_cert},
                              {"tls_key", m.opt.tls_key}})
      if (!std::ifstream(path)) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot open ", path));
    boost::system::error_code ec;
    m.ssl->use_certificate_chain_file(m.opt.tls_cert, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls_cert ", m.opt.tls_cert, ": ", ec.message()));
    m.ssl->use_private_key_file(m.opt.tls_key, net::ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--tls_key ", m.opt.tls_key, ": ", ec.message()));
  }
  boost::system::error_code ec;
  auto addr = net::ip::make_address(m.opt.host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--host: '", m.opt.host, "' is not an IP address"));
  tcp::endpoint ep(addr, static_cast<uint16_t>(m.opt.port));
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("HTTP: cannot listen on ", m.opt.host, ":", m.opt.port, ": ", ec.message()));
  m.port = m.acceptor.local_endpoint().port();
  net::co_spawn(m.ioc, m.Listen(), net::detached);
  for (int i = 0; i < std::max(1, m.opt.threads); ++i) m.threads.emplace_back([&m] { m.ioc.run(); });
  return absl::OkStatus();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Stop(std::chrono::milliseconds grace) {
  if (impl_->threads.empty()) return;
  net::post(impl_->ioc, [this] {
    boost::system::error_code e;
    impl_->acceptor.close(e);
  });
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (impl_->generating.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

}  // namespace ls::server
