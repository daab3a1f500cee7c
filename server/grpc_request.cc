// gRPC request conversion.
#include "server/grpc_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/structured_request.h"

namespace ls::server {
namespace {

namespace pb = latentserve::v1;
using grpc::Status;
using grpc::StatusCode;
using ojson = nlohmann::ordered_json;

SamplingParams ToParams(const pb::SamplingParams& s, SampledFields* given) {
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
  p.include_stop_str_in_output = s.include_stop_str_in_output();
  p.allowed_token_ids.assign(s.allowed_token_ids().begin(), s.allowed_token_ids().end());
  if (s.has_logprobs()) p.logprobs = s.logprobs();
  if (s.has_skip_special_tokens()) p.skip_special_tokens = s.skip_special_tokens();
  for (const auto& [id, bias] : s.logit_bias()) p.logit_bias.emplace_back(id, bias);
  given->temperature = s.has_temperature();
  given->top_p = s.has_top_p();
  given->top_k = s.has_top_k();
  given->min_p = s.has_min_p();
  given->repetition_penalty = s.has_repetition_penalty();
  return p;
}

// sampling.structured_output as the HTTP API's constraint, compiled into *params (a chat's with its
// reasoning and tool calls).
Status ApplyStructuredOutput(const pb::SamplingParams& s, const ApiContext& ctx, const ChatSession* chat,
                             SamplingParams* params) {
  structured::OutputConstraint c;
  ApiError e;
  if (!s.has_structured_output()) {
    if (chat && !ApplyReplyConstraint(*chat, c, ctx, "structured_output", params, &e))
      return InvalidArgument(absl::StrCat("chat.", e.param, ": ", e.message));
    return Status::OK;
  }
  const pb::StructuredOutput& so = s.structured_output();
  using Kind = structured::OutputConstraint::Kind;
  switch (so.kind_case()) {
    case pb::StructuredOutput::kJsonSchema:
      c.kind = Kind::kJsonSchema;
      c.text = so.json_schema();
      break;
    case pb::StructuredOutput::kJsonObject:
      if (so.json_object()) c.kind = Kind::kJsonObject;
      break;
    case pb::StructuredOutput::kRegex:
      c.kind = Kind::kRegex;
      c.text = so.regex();
      break;
    case pb::StructuredOutput::kChoice:
      c.kind = Kind::kChoice;
      c.choices.assign(so.choice().choices().begin(), so.choice().choices().end());
      break;
    case pb::StructuredOutput::kGrammar:
      c.kind = Kind::kGrammar;
      c.text = so.grammar();
      break;
    case pb::StructuredOutput::kStructuralTag:
      if (!ReadStructuralTag("structural_tag", so.structural_tag(), &c, &e))
        return InvalidArgument(absl::StrCat("sampling.structured_output: ", e.message));
      break;
    case pb::StructuredOutput::KIND_NOT_SET:
      return InvalidArgument(
          "sampling.structured_output: set one of json_schema, json_object, regex, choice, grammar and "
          "structural_tag");
  }
  if (c.kind != Kind::kNone && c.kind != Kind::kChoice && c.kind != Kind::kJsonObject && c.text.empty())
    return InvalidArgument(absl::StrCat("sampling.structured_output.", c.KindName(), " must not be empty"));
  if (chat ? !ApplyReplyConstraint(*chat, c, ctx, "structured_output", params, &e)
           : !ApplyConstraint(c, ctx, "structured_output", params, &e))
    return InvalidArgument(absl::StrCat("sampling.structured_output: ", e.message));
  return Status::OK;
}

// A JSON text field: null when empty.
Status ParseJsonField(const std::string& text, const char* field, ojson* out) {
  if (text.empty()) return Status::OK;
  *out = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return InvalidArgument(absl::StrCat("chat.", field, " is not valid JSON"));
  return Status::OK;
}

// The chat's messages as OpenAI's JSON.
ojson MessagesJson(const pb::Chat& chat) {
  ojson messages = ojson::array();
  for (const pb::ChatMessage& m : chat.messages()) {
    ojson j = {{"role", m.role()}};
    if (m.role() == "assistant" && m.content().empty() && m.tool_calls_size() > 0) {
      j["content"] = nullptr;
    } else {
      j["content"] = m.content();
    }
    if (!m.name().empty()) j["name"] = m.name();
    if (!m.tool_call_id().empty()) j["tool_call_id"] = m.tool_call_id();
    if (!m.reasoning_content().empty()) j["reasoning_content"] = m.reasoning_content();
    if (m.tool_calls_size() > 0) {
      ojson calls = ojson::array();
      for (const pb::ToolCall& c : m.tool_calls())
        calls.push_back({{"id", c.id()}, {"type", "function"},
                         {"function", {{"name", c.name()}, {"arguments", c.arguments()}}}});
      j["tool_calls"] = std::move(calls);
    }
    messages.push_back(std::move(j));
  }
  return messages;
}

}  // namespace

Status RenderGrpcChat(const pb::Chat& chat, const ApiContext& ctx, std::optional<bool> add_special_tokens,
                      bool for_tokenize, std::shared_ptr<const ChatSession>* session) {
  const ojson messages = MessagesJson(chat);
  ojson tools, kwargs, documents;
  if (Status s = ParseJsonField(chat.tools_json(), "tools_json", &tools); !s.ok()) return s;
  if (Status s = ParseJsonField(chat.chat_template_kwargs_json(), "chat_template_kwargs_json", &kwargs); !s.ok())
    return s;
  if (Status s = ParseJsonField(chat.documents_json(), "documents_json", &documents); !s.ok()) return s;
  ojson tool_choice;
  if (!chat.tool_choice_function().empty()) {
    tool_choice = {{"type", "function"}, {"function", {{"name", chat.tool_choice_function()}}}};
  } else if (!chat.tool_choice().empty()) {
    tool_choice = chat.tool_choice();
  }
  ChatFields f;
  f.messages = &messages;
  f.tools = &tools;
  f.tool_choice = &tool_choice;
  f.chat_template_kwargs = &kwargs;
  f.documents = &documents;
  const ojson effort = chat.reasoning_effort();
  if (!chat.reasoning_effort().empty()) f.reasoning_effort = &effort;
  if (chat.has_add_generation_prompt()) f.add_generation_prompt = chat.add_generation_prompt();
  f.continue_final_message = chat.continue_final_message();
  f.include_reasoning = !chat.has_include_reasoning() || chat.include_reasoning();
  f.parallel_tool_calls = !chat.has_parallel_tool_calls() || chat.parallel_tool_calls();
  f.add_special_tokens = add_special_tokens.value_or(false);
  f.prompt_only = for_tokenize;
  ChatRequest request;
  ApiError err;
  if (!ReadChatRequest(f, ctx, &request, &err)) return InvalidArgument(absl::StrCat("chat: ", err.message));
  *session = RenderChat(ctx, std::move(request), &err);
  if (!*session) return InvalidArgument(absl::StrCat("chat: ", err.message));
  return Status::OK;
}

static Status Prompt(const pb::GenerateRequest& req, const ApiContext& ctx, std::vector<int32_t>* ids,
                     std::shared_ptr<const ChatSession>* chat) {
  switch (req.prompt_case()) {
    case pb::GenerateRequest::kTokenIds:
      ids->assign(req.token_ids().ids().begin(), req.token_ids().ids().end());
      if (ids->empty()) return InvalidArgument("token_ids must not be empty");
      return Status::OK;
    case pb::GenerateRequest::kText: {
      if (!ctx.tokenizer()) return InvalidArgument("this model has no tokenizer: send token_ids");
      if (req.text().empty()) return InvalidArgument("text must not be empty");
      auto enc = ctx.tokenizer()->Encode(req.text());
      if (!enc.ok()) return InvalidArgument(absl::StrCat("text: ", enc.status().message()));
      *ids = std::move(*enc);
      return Status::OK;
    }
    case pb::GenerateRequest::kChat: {
      if (!ctx.tokenizer()) return InvalidArgument("this model has no tokenizer: send token_ids");
      std::shared_ptr<const ChatSession> session;
      if (Status s = RenderGrpcChat(req.chat(), ctx, std::nullopt, false, &session); !s.ok()) return s;
      *ids = session->prompt.ids;
      if (chat) *chat = std::move(session);
      return Status::OK;
    }
    default:
      return InvalidArgument("a prompt is required: set text, token_ids or chat");
  }
}

Status GrpcToEngineRequest(const pb::GenerateRequest& req, const ApiContext& ctx, ls::Request* out,
                           std::shared_ptr<const ChatSession>* chat) {
  out->id = req.request_id().empty() ? ctx.NewRequestId("gen-") : req.request_id();
  out->priority = req.priority();
  if (!req.cache_salt().empty()) out->cache_salt = CacheSaltHash(req.cache_salt());
  SampledFields given;
  out->params = ToParams(req.sampling(), &given);
  std::shared_ptr<const ChatSession> session;
  if (Status s = Prompt(req, ctx, &out->prompt_ids, &session); !s.ok()) return s;
  if (session)
    for (int32_t id : session->format->stop_token_ids()) out->params.stop_token_ids.push_back(id);
  ApplyGenerationDefaults(ctx.generation_defaults(), given, ctx.engine().model_config().eos_token_ids, &out->params);
  if (Status s = ApplyStructuredOutput(req.sampling(), ctx, session.get(), &out->params); !s.ok()) return s;
  if (!req.sampling().has_max_tokens())
    out->params.max_tokens = static_cast<int32_t>(std::max<int64_t>(
        1, DefaultMaxTokens(ctx.generation_defaults(), session != nullptr,
                            static_cast<int64_t>(out->prompt_ids.size()), ctx.engine().max_model_len())));
  if (chat) *chat = std::move(session);
  return Status::OK;
}

}  // namespace ls::server
