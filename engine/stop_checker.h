// StopChecker: finds stop strings in a sequence's streamed text, also when one spans token
// boundaries, and holds back any text that might still turn into a stop string so that a stop
// string is never emitted (unless asked to include it: then the text ends with it). One per
// sequence; not thread-safe.
#pragma once

#include <string>
#include <vector>

namespace ls {

class StopChecker {
 public:
  explicit StopChecker(std::vector<std::string> stops, bool include_stop = false);

  // Adds newly detokenized text. Returns the text that is now safe to emit. Sets *stopped when a
  // stop string was found (the returned text then ends right before it, or with it when it is to
  // be included: the longest of those that start where the first one found does).
  std::string Push(const std::string& text, bool* stopped);
  // The text still held back, released when the sequence ends for another reason.
  std::string Flush();

 private:
  std::vector<std::string> stops_;
  bool include_stop_ = false;
  size_t max_len_ = 0;
  std::string held_;
};

}  // namespace ls
