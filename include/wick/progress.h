// Progress reporting for long library calls (embedding many texts, folding many documents).
#pragma once

#include <cstdint>
#include <functional>

namespace wick {

// Called from the calling thread after each batch with the units finished so far and the total
// (texts, documents, pairs). An empty function reports nothing. It must not throw.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

}  // namespace wick
