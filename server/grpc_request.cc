// gRPC request conversion.
#include "server/grpc_request.h"

#include "absl/strings/str_cat.h"

namespace ls::server {
namespace {

namespace pb = latentserve::v1;
using grpc::Status;
using grpc::StatusCode;

Status Invalid(const std::string& msg) { return Status(StatusCode::INVALID_ARGUMENT, msg); }

SamplingParams ToParams(const pb::SamplingParams& s) {
  SamplingParams p;
  if (s.has_temperature()) p.temperature = s.temperature();
  if (s.has_top_k()) p.top_k = s.top_k();
  if (s.has_top_p()) p.top_p = s.top_p();
  if (s.has_min_p()) p.min_p = s.min_p();
  if (s.has_repetition_penalty()) p.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) p.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) p.frequency_penalty = s.frequency_penalty();
  if (s.has_seed()) p.seed = s.seed();
  if (s.has_max_tokens()) p.max_tokens = s.max_tokens();
  if (s.has_min_tokens()) p.min_tokens = s.min_tokens();
  p.stop.assign(s.stop().begin(), s.stop().end());
  p.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  p.ignore_eos = s.ignore_eos();
  if (s.has_logprobs()) p.logprobs = s.logprobs();
  if (s.has_skip_special_tokens()) p.skip_special_tokens = s.skip_special_tokens();
  return p;
}

}  // namespace

Status RenderGrpcChat(const pb::Chat& chat, const ApiContext& ctx, std::string* text) {
  if (chat.messages().empty()) return Invalid("chat.messages must not be empty");
  std::vector<tok::ChatMessage> msgs;
  for (int i = 0; i < chat.messages_size(); ++i) {
    const auto& m = chat.messages(i);
    if (m.role() != "system" && m.role() != "user" && m.role() != "assistant")
      return Invalid(absl::StrCat("chat.messages[", i, "].role must be system, user or assistant, got '", m.role(), "'"));
    msgs.push_back({m.role(), m.content()});
  }
  auto r = ctx.chat_template().Render(msgs, true);
  if (!r.ok()) return Invalid(std::string(r.status().message()));
  *text = std::move(*r);
  return Status::OK;
}

static Status Prompt(const pb::GenerateRequest& req, const ApiContext& ctx, std::vector<int32_t>* ids) {
  switch (req.prompt_case()) {
    case pb::GenerateRequest::kTokenIds:
      ids->assign(req.token_ids().ids().begin(), req.token_ids().ids().end());
      if (ids->empty()) return Invalid("token_ids must not be empty");
      return Status::OK;
    case pb::GenerateRequest::kText:
    case pb::GenerateRequest::kChat: {
      if (!ctx.tokenizer()) return Invalid("this model has no tokenizer: send token_ids");
      std::string text = req.text();
      if (req.prompt_case() == pb::GenerateRequest::kChat) {
        if (Status s = RenderGrpcChat(req.chat(), ctx, &text); !s.ok()) return s;
      } else if (text.empty()) {
        return Invalid("text must not be empty");
      }
      auto enc = req.prompt_case() == pb::GenerateRequest::kChat
                     ? ctx.tokenizer()->Encode(text, tok::EncodeOptions::RenderedChat())
                     : ctx.tokenizer()->Encode(text);
      if (!enc.ok()) return Invalid(absl::StrCat("text: ", enc.status().message()));
      *ids = std::move(*enc);
      return Status::OK;
    }
    default:
      return Invalid("a prompt is required: set text, token_ids or chat");
  }
}


Status GrpcToEngineRequest(const pb::GenerateRequest& req, const ApiContext& ctx, ls::Request* out) {
  out->id = req.request_id().empty() ? ctx.NewRequestId("gen-") : req.request_id();
  out->priority = req.priority();
  out->params = ToParams(req.sampling());
  return Prompt(req, ctx, &out->prompt_ids);
}

}  // namespace ls::server
