// The request types' helpers: finish reasons' names and the cache salt's hash.
#include "engine/request.h"

#include "engine/fnv1a.h"

namespace ls {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
    case FinishReason::kNone:
      return "";
  }
  return "";
}

uint64_t CacheSaltHash(std::string_view salt) {
  uint64_t h = kFnv1aOffset;
  for (unsigned char c : salt) h = Fnv1aByte(h, c);
  return h == 0 ? 1 : h;
}

}  // namespace ls
