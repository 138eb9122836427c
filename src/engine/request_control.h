// The shared part of a submitted request: what the caller gave, the cancel flag, the result and
// its waiters. Shared by the caller's RequestHandle copies and the engine.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "wick/engine.h"

namespace wick::detail {

struct RequestControl {
  uint64_t id = 0;
  Request request;  // prompt ids moved out into `prompt`, initial_state into the row at admission
  std::vector<int32_t> prompt;        // the prompt ids (encoded by submit())
  std::shared_ptr<const State> init;  // a registered initial state, or null
  std::string init_digest;            // cache scope of the initial state; empty: not cacheable
  EngineClock::time_point submitted;
  std::atomic<bool> cancel{false};

  std::mutex mutex;  // guards done / result
  std::condition_variable cv;
  bool done = false;
  EngineResult result;
};

}  // namespace wick::detail
