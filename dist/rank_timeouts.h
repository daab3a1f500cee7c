// RankTimeouts: how long a rank group waits before it counts a rank as gone — any one collective
// while serving, the start-up exchange (ranks load their models at their own pace), and the
// heartbeat interval while the engine is idle (a worker waits for the next message no longer than
// the step timeout, so heartbeats must come more often). Set from the server's flags.
#pragma once

#include <chrono>

namespace ls::dist {

struct RankTimeouts {
  std::chrono::milliseconds step{30000};
  std::chrono::milliseconds start{600000};
  std::chrono::milliseconds idle{1000};
};

}  // namespace ls::dist
