// OpenAI-compatible HTTP client for the benchmark: one blocking Beast connection per request,
// SSE events timed as they arrive; output tokens from the usage chunk (or counted chunks).
#include <limits>
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tools/bench/client.h"

namespace ls::bench {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::json;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class HttpClient final : public Client {
 public:
  explicit HttpClient(ClientOptions o) : o_(std::move(o)) {}

  RequestRecord Send(const BenchRequest& req, std::chrono::steady_clock::time_point t0) override {
    RequestRecord rec;
    rec.start = Since(t0);
    const bool chat = o_.endpoint == "chat";
    json body = {{"max_tokens", req.max_tokens}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
                 {"ignore_eos", o_.ignore_eos}, {"temperature", 0}};
    if (!o_.model.empty()) body["model"] = o_.model;
    if (chat) {
      body["messages"] = !req.messages_json.empty() ? json::parse(req.messages_json)
                         : json::array({{{"role", "user"}, {"content", req.prompt.empty() ? IdsAsText(req) : req.prompt}}});
    } else if (!req.prompt.empty()) {
      body["prompt"] = req.prompt;
    } else {
      body["prompt"] = req.prompt_ids;
    }
    rec.prompt_tokens = static_cast<int32_t>(req.prompt_ids.size());
    try {
      net::io_context ioc;
      beast::tcp_stream stream(ioc);
      stream.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(o_.timeout_s)));
      tcp::resolver resolver(ioc);
      stream.connect(resolver.resolve(o_.host, std::to_string(o_.port)));
      http::request<http::string_body> r{http::verb::post, chat ? "/v1/chat/completions" : "/v1/completions", 11};
      r.set(http::field::host, o_.host);
      r.set(http::field::content_type, "application/json");
      if (!o_.api_key.empty()) r.set(http::field::authorization, "Bearer " + o_.api_key);
      r.body() = body.dump();
      r.prepare_payload();
      http::write(stream, r);
      beast::flat_buffer buf;
      http::response_parser<http::buffer_body> p;
      p.body_limit(std::numeric_limits<std::uint64_t>::max());
      http::read_header(stream, buf, p);
      if (p.get().result_int() != 200) {
        rec.error = absl::StrCat("http_", p.get().result_int());
        rec.end = Since(t0);
        return rec;
      }
      std::string pending;
      char chunk[8192];
      int32_t chunks_with_text = 0;
      bool done = false;
      while (!p.is_done() && !done) {
        p.get().body().data = chunk;
        p.get().body().size = sizeof(chunk);
        beast::error_code ec;
        http::read_some(stream, buf, p, ec);
        if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
        pending.append(chunk, sizeof(chunk) - p.get().body().size);
        size_t pos;
        while ((pos = pending.find("\n\n")) != std::string::npos) {
          std::string event = pending.substr(0, pos);
          pending.erase(0, pos + 2);
          if (event.rfind("data: ", 0) != 0) continue;
          const std::string data = event.substr(6);
          if (data == "[DONE]") {
            done = true;
            break;
          }
          auto j = json::parse(data, nullptr, false);
          if (j.is_discarded()) continue;
          if (j.contains("error")) {
            rec.error = "stream_error";
            continue;
          }
          if (j.contains("usage") && j["usage"].is_object()) {
            rec.output_tokens = j["usage"].value("completion_tokens", 0);
            rec.prompt_tokens = j["usage"].value("prompt_tokens", rec.prompt_tokens);
          }
          if (!j.contains("choices") || j["choices"].empty()) continue;
          const auto& c = j["choices"][0];
          if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
            const std::string f = c["finish_reason"];
            if (f != "stop" && f != "length") rec.error = "finish_" + f;  // aborted or failed on the server
          }
          const std::string text = chat ? c["delta"].value("content", std::string()) : c.value("text", std::string());
          if (!text.empty()) {
            const double now = Since(t0);
            if (rec.first_token < 0) rec.first_token = now;
            rec.token_times.push_back(now);
            ++chunks_with_text;
          }
        }
      }
      if (rec.output_tokens == 0) rec.output_tokens = chunks_with_text;
      beast::error_code ec;
      stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    } catch (const std::exception& e) {
      rec.error = std::string("connection: ") + e.what();
      if (rec.error.size() > 60) rec.error.resize(60);
    }
    rec.end = Since(t0);
    return rec;
  }

 private:
  static std::string IdsAsText(const BenchRequest& req) {
    // Chat needs text: one short pseudo-word per token id.
    static const char* kWords[] = {"alpha", "bravo", "delta", "echo", "gold", "hill", "iron", "lake", "moon", "north",
                                   "oak", "pine", "river", "stone", "tide", "vale", "wind", "yarrow"};
    std::string s;
    for (int32_t id : req.prompt_ids) absl::StrAppend(&s, s.empty() ? "" : " ", kWords[id % 18]);
    return s;
  }
  ClientOptions o_;
};

}  // namespace

std::unique_ptr<Client> MakeHttpClient(const ClientOptions& o) { return std::make_unique<HttpClient>(o); }

}  // namespace ls::bench
