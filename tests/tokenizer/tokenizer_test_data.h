// The committed tokenizer test data: a tokenizer's directory, and the records of its .jsonl vectors.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace ls::tok::test {

inline std::string Dir(const std::string& name) { return std::string(LS_TEST_DATA_DIR) + "/tokenizer/" + name; }

// Records of a .jsonl file, split on '\n' only (texts may hold U+2028 and U+0085).
inline std::vector<nlohmann::json> ReadJsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<nlohmann::json> out;
  std::string line;
  std::istringstream lines(ss.str());
  while (std::getline(lines, line, '\n'))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace ls::tok::test
