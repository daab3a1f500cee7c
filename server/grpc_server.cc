// GrpcServer implementation (synchronous gRPC API; each stream's thread waits on its queue).
#include "server/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <exception>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/expert_planner.h"
#include "latentserve/v1/generation.grpc.pb.h"
#include "server/api_error.h"
#include "server/chat_reply.h"
#include "server/grpc_request.h"
#include "server/prometheus.h"

namespace ls::server {
namespace {

namespace pb = latentserve::v1;
using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

pb::FinishReason ToProto(FinishReason f) {
  switch (f) {
    case FinishReason::kStop: return pb::FINISH_REASON_STOP;
    case FinishReason::kLength: return pb::FINISH_REASON_LENGTH;
    case FinishReason::kCancelled: return pb::FINISH_REASON_CANCELLED;
    case FinishReason::kError: return pb::FINISH_REASON_ERROR;
    case FinishReason::kNone: return pb::FINISH_REASON_UNSPECIFIED;
  }
  return pb::FINISH_REASON_UNSPECIFIED;
}

class Service final : public pb::GenerationService::Service {
 public:
  explicit Service(ApiContext* ctx) : ctx_(ctx) {}

  Status Generate(ServerContext* sc, const pb::GenerateRequest* req,
                  grpc::ServerWriter<pb::GenerateResponse>* writer) override {
    return Guarded("Generate", [&] { return Serve(sc, req, writer); });
  }
  Status Tokenize(ServerContext* sc, const pb::TokenizeRequest* req, pb::TokenizeResponse* resp) override {
    return Guarded("Tokenize", [&] { return Serve(sc, req, resp); });
  }
  Status Detokenize(ServerContext* sc, const pb::DetokenizeRequest* req, pb::DetokenizeResponse* resp) override {
    return Guarded("Detokenize", [&] { return Serve(sc, req, resp); });
  }
  Status GetModelInfo(ServerContext* sc, const pb::GetModelInfoRequest* req, pb::ModelInfo* info) override {
    return Guarded("GetModelInfo", [&] { return Serve(sc, req, info); });
  }
  Status GetExpertLoad(ServerContext* sc, const pb::GetExpertLoadRequest* req, pb::ExpertLoad* out) override {
    return Guarded("GetExpertLoad", [&] { return Serve(sc, req, out); });
  }

 private:
  // Runs a method's handler. An exception out of it (a server fault: see UnexpectedFailure) is
  // logged and answered INTERNAL naming it; the handler has cancelled what it submitted.
  template <typename Handler>
  Status Guarded(const char* method, Handler handler) {
    std::exception_ptr thrown;
    try {
      return handler();
    } catch (...) {
      thrown = std::current_exception();
    }
    const absl::Status failure = UnexpectedFailure(method, thrown);
    ctx_->HandlerFailed("grpc_handler_failed", failure);
    return Count(ToGrpcStatus(failure));
  }

  Status Serve(ServerContext* sc, const pb::GenerateRequest* req, grpc::ServerWriter<pb::GenerateResponse>* writer) {
    const auto start = std::chrono::steady_clock::now();
    if (Status a = Auth(sc); !a.ok()) return Count(a);
    ls::Request r;
    std::shared_ptr<const ChatSession> chat;
    if (Status s = GrpcToEngineRequest(*req, *ctx_, &r, &chat); !s.ok()) return Count(s);
    std::optional<ChatReply> reply;  // a chat's reply, read by the model's output parsers
    if (chat) reply.emplace(chat, ctx_, r.id);
    // Shared with the engine's callback, which may still deliver after an exception left this
    // handler; that exception cancels the request.
    auto queue = std::make_shared<OutputQueue>();
    OutputQueue& q = *queue;
    OutputCallback deliver = [queue, to = queue->Callback()](RequestOutput o) { to(std::move(o)); };
    if (absl::Status st = ctx_->engine().Submit(r, std::move(deliver)); !st.ok()) return Count(ToGrpcStatus(st));
    bool finished = false;
    const absl::Cleanup cancel_unfinished = [&] {
      if (!finished) ctx_->engine().Cancel(r.id);
    };
    RequestLogEntry log;
    log.id = r.id;
    log.api = "grpc";
    log.endpoint = "Generate";
    log.prompt_tokens = static_cast<int32_t>(r.prompt_ids.size());
    bool client_gone = false;
    for (;;) {
      std::optional<RequestOutput> o = q.NextFor(std::chrono::milliseconds(50));
      if (!o) {
        if (sc->IsCancelled() && !client_gone) {
          client_gone = true;
          ctx_->engine().Cancel(r.id);
        }
        continue;
      }
      pb::GenerateResponse resp;
      resp.set_request_id(r.id);
      for (int32_t id : o->token_ids) resp.add_token_ids(id);
      resp.set_text(o->text);
      for (const auto& lp : o->logprobs) {
        auto* l = resp.add_logprobs();
        l->set_token_id(lp.token_id);
        l->set_logprob(lp.logprob);
        for (auto [id, v] : lp.top) {
          auto* t = l->add_top();
          t->set_token_id(id);
          t->set_logprob(v);
        }
      }
      if (reply) {
        chat::ChatDelta d = reply->Next(o->token_ids, o->text, o->finished());
        resp.set_reasoning_content(std::move(d.reasoning));
        resp.set_content(std::move(d.content));
        for (chat::ToolCallDelta& t : d.tool_calls) {
          auto* c = resp.add_tool_calls();
          c->set_index(t.index);
          c->set_id(std::move(t.id));
          c->set_name(std::move(t.name));
          c->set_arguments(std::move(t.arguments));
        }
      }
      if (o->finished()) {
        const bool called = reply && reply->made_calls() &&
                            (o->finish_reason == FinishReason::kStop || o->finish_reason == FinishReason::kLength);
        resp.set_finish_reason(called ? pb::FINISH_REASON_TOOL_CALLS : ToProto(o->finish_reason));
        resp.mutable_usage()->set_prompt_tokens(o->prompt_tokens);
        resp.mutable_usage()->set_completion_tokens(o->completion_tokens);
        resp.mutable_usage()->set_cached_prompt_tokens(o->cached_prompt_tokens);
        log.output_tokens = o->completion_tokens;
        log.queue_s = o->queue_seconds;
        log.ttft_s = o->ttft_seconds;
      }
      if (!client_gone && !writer->Write(resp)) {
        client_gone = true;
        ctx_->engine().Cancel(r.id);
      }
      if (o->finished()) {
        finished = true;
        log.total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // The server's own cancellation (a shutdown) carries its reason: UNAVAILABLE, worth a retry.
        Status result = client_gone ? Status(StatusCode::CANCELLED, "cancelled by the client")
                        : o->finish_reason == FinishReason::kError ? Status(StatusCode::INTERNAL, o->error)
                        : o->finish_reason == FinishReason::kCancelled && !o->error.empty()
                            ? Status(StatusCode::UNAVAILABLE, o->error)
                            : Status::OK;
        log.status = client_gone ? "CANCELLED" : FinishReasonName(o->finish_reason);
        ctx_->LogRequest(log);
        return Count(result);
      }
    }
  }

  Status Serve(ServerContext* sc, const pb::TokenizeRequest* req, pb::TokenizeResponse* resp) {
    if (Status a = Auth(sc); !a.ok()) return Count(a);
    if (!ctx_->tokenizer()) return Count(Status(StatusCode::FAILED_PRECONDITION, "this model has no tokenizer"));
    const std::optional<bool> add_special =
        req->has_add_special_tokens() ? std::optional<bool>(req->add_special_tokens()) : std::nullopt;
    std::vector<int32_t> ids;
    if (req->has_chat()) {
      std::shared_ptr<const ChatSession> session;
      if (Status s = RenderGrpcChat(req->chat(), *ctx_, add_special, /*for_tokenize=*/true, &session); !s.ok())
        return Count(s);
      ids = session->prompt.ids;
    } else {
      auto enc = ctx_->tokenizer()->Encode(
          req->text(), tok::EncodeOptions{add_special.value_or(true), tok::SpecialText::kLayoutDefault});
      if (!enc.ok()) return Count(InvalidArgument(absl::StrCat("text: ", enc.status().message())));
      ids = std::move(*enc);
    }
    for (int32_t id : ids) resp->add_token_ids(id);
    resp->set_count(static_cast<int32_t>(ids.size()));
    resp->set_max_model_len(ctx_->engine().max_model_len());
    return Count(Status::OK);
  }

  Status Serve(ServerContext* sc, const pb::DetokenizeRequest* req, pb::DetokenizeResponse* resp) {
    if (Status a = Auth(sc); !a.ok()) return Count(a);
    if (!ctx_->tokenizer()) return Count(Status(StatusCode::FAILED_PRECONDITION, "this model has no tokenizer"));
    std::vector<int32_t> ids(req->token_ids().begin(), req->token_ids().end());
    auto text = ctx_->tokenizer()->Decode(ids, req->skip_special_tokens());
    if (!text.ok()) return Count(InvalidArgument(absl::StrCat("token_ids: ", text.status().message())));
    resp->set_text(*text);
    return Count(Status::OK);
  }

  Status Serve(ServerContext* sc, const pb::GetModelInfoRequest*, pb::ModelInfo* info) {
    if (Status a = Auth(sc); !a.ok()) return Count(a);
    const ModelConfig& c = ctx_->engine().model_config();
    info->set_name(ctx_->model_name());
    info->set_architecture(c.architecture.empty() ? "StableLatentMoeForCausalLM" : c.architecture);
    info->set_vocab_size(c.vocab_size);
    info->set_hidden_size(c.hidden_size);
    info->set_num_layers(c.num_hidden_layers);
    info->set_num_routed_experts(c.moe.num_experts);
    info->set_experts_per_token(c.moe.top_k);
    info->set_latent_size(c.moe.latent_size);
    info->set_num_shared_experts(c.moe.shared_ffn > 0 && c.moe.expert_ffn > 0
                                     ? static_cast<int32_t>(c.moe.shared_ffn / c.moe.expert_ffn)
                                     : 0);
    info->set_max_model_len(ctx_->engine().max_model_len());
    info->set_backend(ctx_->backend());
    info->set_kv_cache_blocks(ctx_->engine().num_kv_blocks());
    info->set_kv_block_size(ctx_->engine().kv_block_size());
    return Count(Status::OK);
  }

  Status Serve(ServerContext* sc, const pb::GetExpertLoadRequest*, pb::ExpertLoad* out) {
    if (Status a = Auth(sc); !a.ok()) return Count(a);
    const MetricsSnapshot m = ctx_->engine().Metrics();
    for (const auto& [layer, ratio] : ExpertLoadMaxOverMean(m)) {
      auto* l = out->add_layers();
      l->set_layer(layer);
      for (int32_t e = 0; e < m.num_experts; ++e)
        l->add_tokens_per_expert(m.expert_tokens[static_cast<size_t>(layer) * m.num_experts + e]);
      l->set_max_over_mean(ratio);
      if (m.num_devices > 0 && m.device_rows.size() >= static_cast<size_t>(layer + 1) * m.num_devices &&
          static_cast<size_t>(layer) < m.replica_map.size()) {
        std::vector<double> rows;
        for (int32_t d = 0; d < m.num_devices; ++d) {
          const int64_t r = m.device_rows[static_cast<size_t>(layer) * m.num_devices + d];
          l->add_rows_per_device(r);
          rows.push_back(static_cast<double>(r));
        }
        l->set_device_max_over_mean(MaxOverMean(rows));
        for (int32_t e : m.replica_map[layer]) l->add_slot_expert(e);
      }
    }
    out->set_num_devices(m.num_devices);
    out->set_slots_per_device(m.slots_per_device);
    out->set_replans(m.replans);
    out->set_replan_seconds_total(m.replan_seconds_total);
    out->set_longest_switch_step_seconds(m.longest_switch_step_seconds);
    out->set_migration_seconds_total(m.migration_seconds_total);
    out->set_migration_chunks_total(m.migration_chunks_total);
    out->set_migration_step_delay_max_seconds(m.max_migration_chunk_seconds);
    return Count(Status::OK);
  }

  Status Count(Status s) {
    static const char* kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                                   "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                                   "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                                   "UNAUTHENTICATED"};
    const int code = static_cast<int>(s.error_code());
    ctx_->CountRequest("grpc", code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN");
    return s;
  }

  Status Auth(ServerContext* sc) const {
    if (!ctx_->keys().enabled()) return Status::OK;
    auto md = sc->client_metadata();
    auto it = md.find("authorization");
    const std::string header = it == md.end() ? "" : std::string(it->second.data(), it->second.size());
    if (!ctx_->keys().Authorize(header)) return Status(StatusCode::UNAUTHENTICATED, "missing or invalid API key");
    return Status::OK;
  }

  ApiContext* ctx_;
};

absl::StatusOr<std::string> ReadFile(const char* flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

struct GrpcServer::Impl {
  GrpcOptions opt;
  ApiContext* ctx;
  std::unique_ptr<Service> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

GrpcServer::GrpcServer(GrpcOptions options, ApiContext* ctx)
    : impl_(new Impl{std::move(options), ctx, nullptr, nullptr}) {}
GrpcServer::~GrpcServer() { Stop(); }

absl::Status GrpcServer::Start() {
  Impl& m = *impl_;
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!m.opt.tls_cert.empty() || !m.opt.tls_key.empty()) {
    if (m.opt.tls_cert.empty() || m.opt.tls_key.empty())
      return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
    auto key = ReadFile("tls_key", m.opt.tls_key);
    if (!key.ok()) return key.status();
    auto cert = ReadFile("tls_cert", m.opt.tls_cert);
    if (!cert.ok()) return cert.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    creds = grpc::SslServerCredentials(ssl);
  }
  m.service = std::make_unique<Service>(m.ctx);
  grpc::ServerBuilder b;
  const std::string addr = absl::StrCat(m.opt.host.find(':') != std::string::npos ? "[" + m.opt.host + "]" : m.opt.host,
                                        ":", m.opt.port);
  b.AddListeningPort(addr, creds, &m.port);
  b.RegisterService(m.service.get());
  m.server = b.BuildAndStart();
  if (!m.server || m.port == 0)
    return absl::UnavailableError(absl::StrCat("gRPC: cannot listen on ", addr,
                                               m.opt.tls_cert.empty() ? "" : " with the --tls_cert / --tls_key given"));
  m.server->GetHealthCheckService()->SetServingStatus(true);
  return absl::OkStatus();
}

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::SetNotServing() {
  if (impl_->server) impl_->server->GetHealthCheckService()->SetServingStatus(false);
}

void GrpcServer::Stop() {
  if (!impl_->server) return;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace ls::server
