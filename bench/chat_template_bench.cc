// Chat-template rendering time: each template in DIR/templates x each conversation in
// DIR/conversations (tests/data/chat_templates by default), parsed once, rendered many times on
// one thread; also a long conversation (200 messages) through each template. Prints JSON: load
// and render microseconds per template, with the median over conversations.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/positional_args.h"
#include "chat/chat_template.h"

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double Micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

ls::chat::ChatRequestInputs Inputs(const ojson& conv) {
  ls::chat::ChatRequestInputs in;
  in.messages = conv["messages"];
  if (conv.contains("tools")) in.tools = conv["tools"];
  in.add_generation_prompt = conv.value("add_generation_prompt", true);
  in.continue_final_message = conv.value("continue_final_message", false);
  if (conv.contains("chat_template_kwargs")) in.chat_template_kwargs = conv["chat_template_kwargs"];
  return in;
}

// Median microseconds per render of `in` (0 when the template refuses the conversation).
double RenderMicros(const ls::chat::ChatTemplate& t, const ls::chat::ChatRequestInputs& in, int reps) {
  if (!t.Render(in).ok()) return 0;
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto a = Clock::now();
    auto out = t.Render(in);
    times.push_back(Micros(a, Clock::now()));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  ls::bench::PositionalArgs args(argc, argv, "chat_template_bench [DIR with templates/ and conversations/]");
  const fs::path dir = args.Str("DIR", "tests/data/chat_templates");
  args.End();
  std::vector<fs::path> templates, convs;
  for (const auto& e : fs::directory_iterator(dir / "templates")) templates.push_back(e.path());
  for (const auto& e : fs::directory_iterator(dir / "conversations")) convs.push_back(e.path());
  if (templates.empty() || convs.empty()) {
    std::fprintf(stderr, "usage: chat_template_bench [DIR with templates/ and conversations/]\n");
    return 2;
  }
  std::sort(templates.begin(), templates.end());
  ls::chat::SpecialTokens tokens;  // bos_token, eos_token, ... from DIR/special_tokens.json
  if (fs::exists(dir / "special_tokens.json")) {
    const ojson special = ojson::parse(Read(dir / "special_tokens.json"));
    for (auto it = special.begin(); it != special.end(); ++it)
      tokens.emplace_back(it.key(), it.value().get<std::string>());
  }
  std::sort(convs.begin(), convs.end());
  // A long chat: 100 user/assistant exchanges of a few hundred bytes each.
  ojson long_chat = {{"messages", ojson::array()}};
  for (int i = 0; i < 100; ++i) {
    long_chat["messages"].push_back(
        {{"role", "user"}, {"content", "Question " + std::to_string(i) + ": " + std::string(200, 'q')}});
    long_chat["messages"].push_back(
        {{"role", "assistant"}, {"content", "Answer " + std::to_string(i) + ": " + std::string(300, 'a')}});
  }
  std::printf("{\"templates\": [");
  for (size_t ti = 0; ti < templates.size(); ++ti) {
    const std::string src = Read(templates[ti]);
    const auto a = Clock::now();
    auto t = ls::chat::ChatTemplate::FromString(src, tokens);
    const double load_us = Micros(a, Clock::now());
    if (!t.ok()) return 1;
    std::vector<double> per_conv;
    for (const auto& c : convs) {
      const double us = RenderMicros(*t, Inputs(ojson::parse(Read(c))), 200);
      if (us > 0) per_conv.push_back(us);
    }
    std::sort(per_conv.begin(), per_conv.end());
    const double long_us = RenderMicros(*t, Inputs(long_chat), 20);
    std::printf(
        "%s{\"template\": \"%s\", \"bytes\": %zu, \"load_us\": %.1f, \"render_us_median\": %.1f, "
        "\"render_us_max\": %.1f, \"conversations\": %zu, \"render_us_200_messages\": %.1f}",
        ti ? ", " : "", templates[ti].filename().c_str(), src.size(), load_us,
        per_conv.empty() ? 0.0 : per_conv[per_conv.size() / 2], per_conv.empty() ? 0.0 : per_conv.back(),
        per_conv.size(), long_us);
  }
  std::printf("], \"threads\": 1}\n");
  return 0;
}
