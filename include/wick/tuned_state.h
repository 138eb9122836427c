// State-tuned initial states (RWKV-PEFT state tuning, docs/serving.md §6.1): a file whose only
// tensors are one trained WKV matrix per layer, `blocks.{i}.att.time_state` [H, N, N] (bf16, fp16
// or fp32; RWKV-X files may prefix the keys with `rwkv.`), used as the WKV part of the state a
// context starts from. For x070 the trained layout is value-major - row = value channel, column =
// key channel, exactly State::wkv()'s - so the matrices are taken as stored, without a transpose
// (the transpose some tools apply is the x060 convention and gives a wrong state for x070). The
// token shifts start at zero, attention blocks (RWKV-X) with empty KV caches.
//
// The container is a .pth (torch.save zip) or a safetensors file, sniffed from the bytes.
// Thread-safety: free functions without shared state.
#pragma once

#include <string>

#include "wick/model.h"
#include "wick/state.h"
#include "wick/state_file.h"

namespace wick {

// The initial state a state-tuning file describes for `model`: State::wkv(i) = the file's
// blocks.{i}.att.time_state widened to fp32 exactly, every shift zero.
// Throws FileError (cannot read), FormatError / CheckpointError (a damaged or foreign container),
// StateFileError (a tensor that is not a time_state, a layer missing, one beyond the model's
// n_layer, a shape other than [H, N, N] of the model, a dtype other than bf16/fp16/fp32, a
// non-finite value, or a file that is a wick state file: use load_state() for those).
State load_tuned_state(const std::string& path, const Model& model);

// True when `path` is a state-tuning file (its tensors are time_state keys) rather than a wick
// state file; false for anything else (including unreadable files: the loader then reports).
bool is_tuned_state_file(const std::string& path);

// Either kind of initial state for `model`: a wick state file (load_state(), with its checks and
// `allow_other_base`) or a state-tuning file (load_tuned_state(); info.n_tokens = 0, the note
// says which file). Throws as the chosen loader does.
LoadedState load_any_state(const std::string& path, const Model& model,
                           bool allow_other_base = false);

}  // namespace wick
