// Single-threaded encode throughput of the tokenizer on a text file, line by line (newlines
// kept), first pass (cold BPE cache) and best of three warm passes. Prints JSON.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/load_tokenizer.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tokenizer_bench TOKENIZER_JSON|TIKTOKEN_MODEL|MODEL_DIR TEXT_FILE\n");
    return 2;
  }
  auto tok = ls::tok::LoadTokenizerAt(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::string> lines;
  for (size_t b = 0; b < text.size();) {
    size_t e = text.find('\n', b);
    e = e == std::string::npos ? text.size() : e + 1;
    lines.push_back(text.substr(b, e - b));
    b = e;
  }
  auto pass = [&](size_t* tokens) {
    auto t0 = std::chrono::steady_clock::now();
    *tokens = 0;
    for (const auto& l : lines) {
      auto ids = (*tok)->Encode(l);
      if (ids.ok()) *tokens += ids->size();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  size_t tokens = 0;
  const double cold = pass(&tokens);
  double warm = 1e30;
  for (int i = 0; i < 3; ++i) warm = std::min(warm, pass(&tokens));
  std::printf(
      "{\"mb_per_s_cold\": %.3f, \"mb_per_s\": %.3f, \"bytes\": %zu, \"tokens\": %zu, \"lines\": %zu, "
      "\"mode\": \"per line, 1 thread\"}\n",
      text.size() / 1e6 / cold, text.size() / 1e6 / warm, text.size(), tokens, lines.size());
  return 0;
}
