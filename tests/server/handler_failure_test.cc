// A request handler that throws (a server fault, not bad input) must cost only that request: the
// HTTP API answers 500 naming the fault when the response has not begun, else closes the stream's
// connection; gRPC answers INTERNAL; a generation already submitted is cancelled, a background
// response is stored as failed, and the server goes on serving. The faults come from a chat format
// that throws on chosen messages, in front of the tiny model.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "chat/jinja_chat_format.h"
#include "engine/engine.h"
#include "kernels/cpu/cpu_backend.h"
#include "latentserve/v1/generation.grpc.pb.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "server/api_context.h"
#include "server/grpc_server.h"
#include "server/http_server.h"
#include "tokenizer/load_tokenizer.h"

namespace ls::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace pb = latentserve::v1;
using json = nlohmann::json;

const std::string kTiny = std::string(LS_TEST_DATA_DIR) + "/../../models/tiny";

// A user message of "render fault" throws from Render; of "parser fault", from the reply parser's
// first token. Anything else is the tiny model's ChatML chat.
class FaultyChatFormat final : public chat::ChatFormat {
 public:
  explicit FaultyChatFormat(std::shared_ptr<const chat::ChatFormat> inner) : inner_(std::move(inner)) {}

  absl::StatusOr<chat::ChatPrompt> Render(const chat::ChatRequestInputs& inputs,
                                          const chat::RenderOptions& options) const override {
    if (Says(inputs, "render fault")) throw std::runtime_error("the renderer failed on purpose");
    return inner_->Render(inputs, options);
  }
  std::unique_ptr<chat::ChatOutputParser> NewParser(const chat::ChatRequestInputs& inputs,
                                                    const chat::RenderOptions& options,
                                                    const chat::ChatPrompt& prompt) const override {
    if (Says(inputs, "parser fault")) return std::make_unique<ThrowingParser>();
    return inner_->NewParser(inputs, options, prompt);
  }
  bool parses_tool_calls() const override { return inner_->parses_tool_calls(); }
  bool forces_tool_calls() const override { return inner_->forces_tool_calls(); }
  bool renders_tools() const override { return inner_->renders_tools(); }
  bool content_as_parts() const override { return inner_->content_as_parts(); }
  std::string Describe() const override { return inner_->Describe(); }

 private:
  class ThrowingParser final : public chat::ChatOutputParser {
   public:
    chat::ChatDelta Feed(int32_t, std::string_view) override {
      throw std::runtime_error("the parser failed on purpose");
    }
    chat::ChatDelta Finish() override { return {}; }
    const std::string& warning() const override { return warning_; }

   private:
    std::string warning_;
  };

  static bool Says(const chat::ChatRequestInputs& inputs, const char* text) {
    for (const auto& m : inputs.messages)
      if (m.contains("content") && m["content"].is_string() && m["content"].get<std::string>() == text) return true;
    return false;
  }

  std::shared_ptr<const chat::ChatFormat> inner_;
};

struct Reply {
  int status = 0;         // 0: no response head arrived
  bool complete = false;  // the whole response arrived
  std::string body;
};

Reply Call(int port, http::verb method, const std::string& target, const std::string& body = "") {
  net::io_context ioc;
  net::ip::tcp::socket socket(ioc);
  socket.connect({net::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)});
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  http::write(socket, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  boost::system::error_code ec;
  http::read(socket, buffer, parser, ec);
  Reply r;
  if (parser.is_header_done()) r.status = parser.get().result_int();
  r.complete = !ec && parser.is_done();
  r.body = parser.get().body();
  return r;
}

std::string Chat(const std::string& content, bool stream) {
  return json{{"messages", {{{"role", "user"}, {"content", content}}}},
              {"max_tokens", 200},
              {"ignore_eos", true},
              {"stream", stream}}
      .dump();
}

class HandlerFailureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_ = new Stack();
    s_->backend = std::make_unique<CpuBackend>(1);
    auto m = LoadModel(kTiny, s_->backend.get());
    ASSERT_TRUE(m.ok()) << m.status();
    s_->model = std::move(*m);
    auto t = tok::LoadTokenizer(kTiny);
    ASSERT_TRUE(t.ok()) << t.status();
    s_->tokenizer = std::move(*t);
    EngineConfig cfg;
    cfg.kv_cache_bytes = 8 << 20;
    cfg.warmup = false;
    auto e = Engine::Create(s_->model.get(), s_->tokenizer.get(), cfg);
    ASSERT_TRUE(e.ok()) << e.status();
    s_->engine = std::move(*e);
    auto chatml = std::make_shared<chat::JinjaChatFormat>(chat::ChatTemplate::ChatML(), s_->tokenizer.get(),
                                                          &chat::HermesToolCallFormat(), /*think=*/true);
    s_->api = std::make_unique<ApiContext>(s_->engine.get(), s_->tokenizer.get(),
                                           std::make_shared<FaultyChatFormat>(std::move(chatml)), "tiny", "cpu",
                                           ApiKeys(), LogLevel::kError);
    HttpOptions http;
    http.host = "127.0.0.1";
    http.port = 0;
    s_->http = std::make_unique<HttpServer>(http, s_->api.get());
    ASSERT_TRUE(s_->http->Start().ok());
    GrpcOptions grpc;
    grpc.host = "127.0.0.1";
    grpc.port = 0;
    s_->grpc = std::make_unique<GrpcServer>(grpc, s_->api.get());
    ASSERT_TRUE(s_->grpc->Start().ok());
  }
  static void TearDownTestSuite() {
    if (s_->grpc) s_->grpc->Stop();
    if (s_->http) s_->http->Stop();
    delete s_;
  }

  int http_port() const { return s_->http->port(); }
  uint64_t Count(const std::string& api, const std::string& status) const {
    const auto counts = s_->api->request_counts();
    const auto it = counts.find({api, status});
    return it == counts.end() ? 0 : it->second;
  }
  uint64_t Cancelled() const { return s_->engine->Metrics().finished[2]; }
  // Waits up to 10 s for the engine to have no live request.
  bool Idle() const {
    for (int i = 0; i < 1000 && s_->engine->num_live_requests() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return s_->engine->num_live_requests() == 0;
  }
  void ExpectStillServing() const {
    EXPECT_EQ(Call(http_port(), http::verb::get, "/health").status, 200);
    const Reply ok = Call(http_port(), http::verb::post, "/v1/chat/completions", Chat("hello", false));
    EXPECT_EQ(ok.status, 200) << ok.body;
    EXPECT_TRUE(ok.complete);
  }
  std::unique_ptr<pb::GenerationService::Stub> Stub() const {
    return pb::GenerationService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", s_->grpc->port()), grpc::InsecureChannelCredentials()));
  }

  struct Stack {
    std::unique_ptr<CpuBackend> backend;
    std::unique_ptr<Model> model;
    std::unique_ptr<tok::Tokenizer> tokenizer;
    std::unique_ptr<Engine> engine;
    std::unique_ptr<ApiContext> api;
    std::unique_ptr<HttpServer> http;
    std::unique_ptr<GrpcServer> grpc;
  };
  static Stack* s_;
};

HandlerFailureTest::Stack* HandlerFailureTest::s_ = nullptr;

// The error a 500 carries: the route, and what was thrown.
void ExpectInternalError(const Reply& r, const std::string& route, const std::string& what) {
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_TRUE(r.complete);
  const json body = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r.body;
  EXPECT_EQ(body["error"]["type"], "server_error");
  const std::string message = body["error"]["message"];
  EXPECT_NE(message.find(route), std::string::npos) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
}

TEST_F(HandlerFailureTest, FaultBeforeSubmittingIsA500) {
  const uint64_t before = Count("http", "500"), failures = s_->api->handler_failures();
  const Reply r = Call(http_port(), http::verb::post, "/v1/chat/completions", Chat("render fault", false));
  ExpectInternalError(r, "POST /v1/chat/completions", "the renderer failed on purpose");
  EXPECT_EQ(Count("http", "500"), before + 1);
  EXPECT_EQ(s_->api->handler_failures(), failures + 1);
  const Reply metrics = Call(http_port(), http::verb::get, "/metrics");
  EXPECT_NE(metrics.body.find(absl::StrCat("latentserve_handler_failures_total ", failures + 1, "\n")),
            std::string::npos);
  ExpectStillServing();
}

TEST_F(HandlerFailureTest, FaultWhileCollectingIsA500AndCancelsTheGeneration) {
  const uint64_t cancelled = Cancelled();
  const Reply r = Call(http_port(), http::verb::post, "/v1/chat/completions", Chat("parser fault", false));
  ExpectInternalError(r, "POST /v1/chat/completions", "the parser failed on purpose");
  EXPECT_TRUE(Idle());
  EXPECT_EQ(Cancelled(), cancelled + 1);  // not left to run its 200 tokens
  ExpectStillServing();
}

TEST_F(HandlerFailureTest, FaultWhileStreamingClosesTheStream) {
  const uint64_t cancelled = Cancelled();
  const uint64_t before = Count("http", "500");
  const Reply r = Call(http_port(), http::verb::post, "/v1/chat/completions", Chat("parser fault", true));
  EXPECT_EQ(r.status, 200);  // the stream had begun: it ends without its last chunk
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(Count("http", "500"), before + 1);
  EXPECT_TRUE(Idle());
  EXPECT_EQ(Cancelled(), cancelled + 1);
  ExpectStillServing();
}

TEST_F(HandlerFailureTest, FaultInABackgroundResponseStoresItAsFailed) {
  const json request = {{"input", "parser fault"}, {"background", true}, {"max_output_tokens", 200}};
  const Reply queued = Call(http_port(), http::verb::post, "/v1/responses", request.dump());
  ASSERT_EQ(queued.status, 200) << queued.body;
  const std::string id = json::parse(queued.body)["id"];
  json stored;
  for (int i = 0; i < 1000; ++i) {
    const Reply r = Call(http_port(), http::verb::get, "/v1/responses/" + id);
    ASSERT_EQ(r.status, 200) << r.body;
    stored = json::parse(r.body);
    if (stored["status"] != "queued" && stored["status"] != "in_progress") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(stored["status"], "failed") << stored.dump();
  const std::string message = stored["error"]["message"];
  EXPECT_NE(message.find("the parser failed on purpose"), std::string::npos) << message;
  EXPECT_TRUE(Idle());
  ExpectStillServing();
}

pb::GenerateRequest GrpcChat(const std::string& content) {
  pb::GenerateRequest req;
  auto* m = req.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content(content);
  req.mutable_sampling()->set_max_tokens(200);
  req.mutable_sampling()->set_ignore_eos(true);
  return req;
}

TEST_F(HandlerFailureTest, GrpcFaultsAreInternalAndCancelTheGeneration) {
  auto stub = Stub();
  for (const auto& [content, what] : {std::pair<std::string, std::string>{"render fault", "the renderer failed"},
                                      {"parser fault", "the parser failed"}}) {
    SCOPED_TRACE(content);
    const uint64_t cancelled = Cancelled();
    grpc::ClientContext cc;
    auto reader = stub->Generate(&cc, GrpcChat(content));
    pb::GenerateResponse out;
    while (reader->Read(&out)) {
    }
    const grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL) << st.error_message();
    EXPECT_NE(st.error_message().find("Generate"), std::string::npos) << st.error_message();
    EXPECT_NE(st.error_message().find(what), std::string::npos) << st.error_message();
    EXPECT_TRUE(Idle());
    EXPECT_EQ(Cancelled(), cancelled + (content == "parser fault" ? 1 : 0));
  }
  EXPECT_EQ(Count("grpc", "INTERNAL"), 2u);
  grpc::ClientContext cc;
  auto reader = stub->Generate(&cc, GrpcChat("hello"));
  pb::GenerateResponse out;
  while (reader->Read(&out)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
}

}  // namespace
}  // namespace ls::server
