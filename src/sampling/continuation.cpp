// What a generation continues from (wick/continuation.h): the one rule of the CLI, the server and
// the Python bindings for keeping or dropping a stored sampler.
#include "wick/continuation.h"

namespace wick {

Continuation continue_with(Continuation stored, const SamplingConfig& sampling,
                           bool resume_sampler) {
  if (stored.sampler && (!resume_sampler || stored.sampler->mode != sampling.mode))
    stored.sampler.reset();
  return stored;
}

}  // namespace wick
