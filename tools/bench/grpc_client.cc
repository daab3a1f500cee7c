// LatentServe gRPC client for the benchmark: streaming Generate, one message per step.
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "latentserve/v1/generation.grpc.pb.h"
#include "tools/bench/client.h"

namespace ls::bench {
namespace {

namespace pb = latentserve::v1;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class GrpcClient final : public Client {
 public:
  explicit GrpcClient(ClientOptions o) : o_(std::move(o)) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel(absl::StrCat(o_.host, ":", o_.port), grpc::InsecureChannelCredentials(), args);
    stub_ = pb::GenerationService::NewStub(channel_);
  }

  RequestRecord Send(const BenchRequest& req, std::chrono::steady_clock::time_point t0) override {
    RequestRecord rec;
    rec.start = Since(t0);
    pb::GenerateRequest r;
    if (!req.prompt.empty()) {
      r.set_text(req.prompt);
    } else {
      for (int32_t id : req.prompt_ids) r.mutable_token_ids()->add_ids(id);
    }
    r.mutable_sampling()->set_max_tokens(req.max_tokens);
    r.mutable_sampling()->set_temperature(0);
    r.mutable_sampling()->set_ignore_eos(o_.ignore_eos);
    rec.prompt_tokens = static_cast<int32_t>(req.prompt_ids.size());
    grpc::ClientContext ctx;
    if (!o_.api_key.empty()) ctx.AddMetadata("authorization", "Bearer " + o_.api_key);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(o_.timeout_s)));
    auto reader = stub_->Generate(&ctx, r);
    pb::GenerateResponse m;
    while (reader->Read(&m)) {
      if (m.token_ids_size() > 0) {
        const double now = Since(t0);
        if (rec.first_token < 0) rec.first_token = now;
        rec.token_times.push_back(now);
      }
      if (m.finish_reason() == pb::FINISH_REASON_CANCELLED || m.finish_reason() == pb::FINISH_REASON_ERROR)
        rec.error = m.finish_reason() == pb::FINISH_REASON_CANCELLED ? "finish_cancelled" : "finish_error";
      if (m.has_usage() && m.finish_reason() != pb::FINISH_REASON_UNSPECIFIED) {
        rec.output_tokens = m.usage().completion_tokens();
        rec.prompt_tokens = m.usage().prompt_tokens();
      }
    }
    grpc::Status st = reader->Finish();
    if (!st.ok()) rec.error = absl::StrCat("grpc_", st.error_code());
    rec.end = Since(t0);
    return rec;
  }

 private:
  ClientOptions o_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::GenerationService::Stub> stub_;
};

}  // namespace

std::unique_ptr<Client> MakeGrpcClient(const ClientOptions& o) { return std::make_unique<GrpcClient>(o); }

}  // namespace ls::bench
