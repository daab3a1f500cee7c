// latentserve-tokenize: encodes stdin line by line (one line of space-separated ids per input
// line) with a model directory's tokenizer, a tokenizer.json or a tiktoken.model, or with
// --decode turns lines of ids back into text (written byte for byte, NULs included).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/cli_usage.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/tokenizer.h"

ABSL_FLAG(std::string, tokenizer, "", "a model directory, a tokenizer.json or a tiktoken.model");
ABSL_FLAG(bool, decode, false, "read lines of ids and print their text");
ABSL_FLAG(bool, skip_special, false, "with --decode, drop special tokens");
ABSL_FLAG(bool, add_special_tokens, true, "run the tokenizer.json post-processor (e.g. prepend BOS)");
ABSL_FLAG(std::string, special, "default",
          "special-token text in the input: default (tokenizer.json matches it, tiktoken does not), match, text");

int main(int argc, char** argv) {
  ls::ShowOwnFlagsInHelp();
  absl::SetProgramUsageMessage(
      "latentserve-tokenize --tokenizer MODEL_DIR|tokenizer.json|tiktoken.model [--decode] < input");
  absl::ParseCommandLine(argc, argv);
  ls::tok::EncodeOptions options;
  options.add_special_tokens = absl::GetFlag(FLAGS_add_special_tokens);
  const std::string special = absl::GetFlag(FLAGS_special);
  if (special == "match") {
    options.special = ls::tok::SpecialText::kMatch;
  } else if (special == "text") {
    options.special = ls::tok::SpecialText::kAsText;
  } else if (special != "default") {
    std::fprintf(stderr, "latentserve-tokenize: --special must be default, match or text, got '%s'\n", special.c_str());
    return 2;
  }
  auto tok = ls::tok::LoadTokenizerAt(absl::GetFlag(FLAGS_tokenizer));
  if (!tok.ok()) {
    std::fprintf(stderr, "latentserve-tokenize: %s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  int rc = 0;
  std::string line;
  for (int64_t n = 1; std::getline(std::cin, line); ++n) {
    if (absl::GetFlag(FLAGS_decode)) {
      std::vector<int32_t> ids;
      bool ok = true;
      for (absl::string_view s : absl::StrSplit(line, ' ', absl::SkipWhitespace())) {
        int32_t id;
        if (!absl::SimpleAtoi(s, &id)) {
          std::fprintf(stderr, "latentserve-tokenize: line %ld: '%s' is not an id\n", static_cast<long>(n),
                       std::string(s).c_str());
          ok = false;
          break;
        }
        ids.push_back(id);
      }
      auto text = ok ? (*tok)->Decode(ids, absl::GetFlag(FLAGS_skip_special)) : absl::StatusOr<std::string>("");
      if (!ok || !text.ok()) {
        if (ok)
          std::fprintf(stderr, "latentserve-tokenize: line %ld: %s\n", static_cast<long>(n),
                       std::string(text.status().message()).c_str());
        rc = 1;
        std::printf("\n");
        continue;
      }
      text->push_back('\n');
      std::fwrite(text->data(), 1, text->size(), stdout);  // %s would stop at a NUL
    } else {
      auto ids = (*tok)->Encode(line, options);
      if (!ids.ok()) {
        std::fprintf(stderr, "latentserve-tokenize: line %ld: %s\n", static_cast<long>(n),
                     std::string(ids.status().message()).c_str());
        rc = 1;
        std::printf("\n");
        continue;
      }
      std::printf("%s\n", absl::StrJoin(*ids, " ").c_str());
    }
  }
  return rc;
}
