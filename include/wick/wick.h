// The whole public API of libwick in one include (README "Library"):
//
//   #include <wick/wick.h>
//
// It pulls in every header of include/wick/, each of which also compiles on its own and includes
// only the standard library and other wick headers (no third-party header reaches a consumer):
//   errors.h        wick::Error and its subclasses (every error wick throws)
//   dtype.h         element types of stored tensors
//   rng.h           SplitMix64, the one pseudo-random generator
//   runtime.h       worker threads and scratch memory of the passes
//   state.h         the recurrent state (and RWKV-X KV caches)
//   model.h         loading checkpoints (and the embedded default model), forward() / step()
//   tokenizer.h     byte-level, World and BPE tokenizers; default_tokenizer_for_vocab()
//   sampler.h       the wick and ChatRWKV samplers
//   continuation.h  what continuing a context needs besides its State
//   generate.h      generate() / generate_tokens() / generate_batch()
//   state_file.h    saving and loading States (safetensors)
//   tuned_state.h   state-tuned initial states (RWKV-PEFT time_state files)
//   chat.h          the RWKV World chat format
//   prefix_cache.h  the prefix state cache
//   prefix_codec.h  cached prefixes as bytes (shared cache tiers)
//   engine.h        the serving engine (continuous batching)
//   progress.h      progress callbacks of long calls
//   perplexity.h    perplexity and KL divergence
//   act_stats.h     activation statistics: collecting them from a model
//   act_stats_file.h activation statistics: the data and its file
//   quantize.h      writing .rwkvq files
//   calibrate.h     choosing a quantisation config by measurement
//   synth.h         synthetic checkpoints of the released geometries
//   embed.h         text embeddings
//   rerank.h        reranking
// Including a single header instead (e.g. <wick/generate.h>) compiles less.
//
// Link with the `wick::wick` target: find_package(wick CONFIG REQUIRED) of an installed wick, or
// the `wick` target inside this project's build.
#pragma once

#include "wick/act_stats.h"
#include "wick/act_stats_file.h"
#include "wick/calibrate.h"
#include "wick/chat.h"
#include "wick/continuation.h"
#include "wick/dtype.h"
#include "wick/embed.h"
#include "wick/engine.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/lora.h"
#include "wick/model.h"
#include "wick/perplexity.h"
#include "wick/prefix_cache.h"
#include "wick/prefix_codec.h"
#include "wick/progress.h"
#include "wick/quantize.h"
#include "wick/rerank.h"
#include "wick/rng.h"
#include "wick/runtime.h"
#include "wick/sampler.h"
#include "wick/state.h"
#include "wick/state_file.h"
#include "wick/synth.h"
#include "wick/tokenizer.h"
#include "wick/tuned_state.h"
