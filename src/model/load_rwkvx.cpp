// RWKV-X checkpoints (docs/rwkvx.md §2-3): `rwkv.*` is a complete x070 state dict, loaded by the
// x070 loader unchanged; `moba.{j}.*` are the attention blocks, read and checked here through the
// same TensorReader (dense, or packed in a .rwkvq); the block order follows from the counts.
#include <charconv>
#include <map>

#include "model/attention.h"
#include "model/block_reader.h"
#include "model/model_impl.h"
#include "wick/errors.h"

namespace wick::model {
namespace {

constexpr const char* kAttentionPrefix = "moba.";
constexpr int64_t kMaxAttentionBlocks = 1 << 12;

// The tensors of one attention block, by their name inside the block ("ln1.weight", ...).
using BlockTensors = std::map<std::string, const io::TensorView*>;

// Reads "moba.{j}.<rest>" into (j, rest); false when the index does not parse.
bool split_attention_name(const std::string& name, int64_t* j, std::string* rest) {
  const size_t start = std::char_traits<char>::length(kAttentionPrefix);
  const size_t dot = name.find('.', start);
  if (dot == std::string::npos || dot == start || dot > start + 9) return false;
  if (name[start] < '0' || name[start] > '9') return false;
  if (name[start] == '0' && dot != start + 1) return false;  // "moba.01." is not block 1
  auto res = std::from_chars(name.data() + start, name.data() + dot, *j);
  if (res.ec != std::errc() || res.ptr != name.data() + dot) return false;
  *rest = name.substr(dot + 1);
  return true;
}

// A positive integer (at most 2^30) from the checkpoint's metadata, or `fallback`.
int64_t metadata_int(const io::TensorSet& set, const std::string& key, int64_t fallback) {
  auto it = set.metadata().find(key);
  if (it == set.metadata().end()) return fallback;
  int64_t v = 0;
  auto res = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  if (res.ec != std::errc() || res.ptr != it->second.data() + it->second.size() || v < 1 ||
      v > (int64_t{1} << 30)) {
    throw CheckpointError(set.source(), "metadata '" + key + "' is '" + it->second +
                                            "'; expected a positive integer up to 2^30");
  }
  return v;
}

}  // namespace

bool is_rwkvx(const io::TensorSet& set) {
  for (const io::TensorView& t : set.tensors())
    if (t.name.rfind(kAttentionPrefix, 0) == 0) return true;
  return false;
}

std::shared_ptr<Model::Impl> build_rwkvx(io::TensorSet set, const quant::RwkvqFile* packed) {
  const std::string path = set.source();
  // Group the attention tensors by block; anything outside rwkv.* and moba.* is refused.
  std::map<int64_t, BlockTensors> blocks;
  for (const io::TensorView& t : set.tensors()) {
    if (t.name.rfind("rwkv.", 0) == 0) continue;
    int64_t j = 0;
    std::string rest;
    if (t.name.rfind(kAttentionPrefix, 0) != 0 || !split_attention_name(t.name, &j, &rest)) {
      throw CheckpointError(path, "unknown tensor '" + t.name +
                                      "': an RWKV-X checkpoint holds rwkv.* (the RWKV-7 blocks, "
                                      "embedding, ln_out, head) and moba.{j}.* (attention blocks) "
                                      "only");
    }
    if (j >= kMaxAttentionBlocks) {
      throw CheckpointError(path, "tensor '" + t.name +
                                      "': expected an attention block index below " +
                                      std::to_string(kMaxAttentionBlocks));
    }
    if (!blocks[j].emplace(rest, &t).second) {
      throw CheckpointError(path, "tensor '" + t.name + "' appears twice; the file is damaged");
    }
  }
  const int n_attn = static_cast<int>(blocks.size());
  if (blocks.rbegin()->first != n_attn - 1) {
    int64_t expect = 0;
    for (auto& [j, b] : blocks) {
      if (j != expect) break;
      ++expect;
    }
    throw CheckpointError(path, "attention block moba." + std::to_string(expect) +
                                    " is missing (blocks up to moba." +
                                    std::to_string(blocks.rbegin()->first) +
                                    " exist); expected moba.0 .. moba.{N_a-1} without gaps");
  }

  std::shared_ptr<Model::Impl> impl;
  try {
    BuildOptions options;
    options.packed_prefix = "rwkv.";
    impl = build_model(io::strip_prefix(set, "rwkv."), "", "", packed, options);
  } catch (const CheckpointError& e) {
    throw CheckpointError(path, std::string("in the RWKV-7 part (rwkv.*, names below without the "
                                            "prefix): ") +
                                    e.what());
  }
  Geometry& g = impl->geometry;
  const int64_t C = g.n_embd;
  if (C % kAttentionHeadSize != 0) {
    throw CheckpointError(path, "width C = " + std::to_string(C) +
                                    " is not a multiple of the attention head size 64");
  }
  if (g.n_layer % n_attn != 0) {
    throw CheckpointError(path, std::to_string(g.n_layer) + " RWKV blocks and " +
                                    std::to_string(n_attn) +
                                    " attention blocks: expected N_r to be a multiple of N_a (the "
                                    "reference silently drops the trailing RWKV blocks of such a "
                                    "file; wick refuses it)");
  }
  g.n_attn = n_attn;
  // Metadata that states the counts must agree with the tensors (the fixture format writes
  // n_attn_layer / n_rwkv_layer, wick synth wick.synth.attention_blocks).
  const std::pair<const char*, int64_t> counts[] = {{"n_attn_layer", n_attn},
                                                    {"wick.synth.attention_blocks", n_attn},
                                                    {"n_rwkv_layer", g.n_layer}};
  for (const auto& [key, found] : counts) {
    const int64_t said = metadata_int(set, key, found);
    if (said != found) {
      const bool attn = key != std::string("n_rwkv_layer");
      throw CheckpointError(
          path,
          "metadata '" + std::string(key) + "' says " + std::to_string(said) +
              (attn ? " attention blocks" : " RWKV blocks") + " but the tensors hold " +
              std::to_string(found) +
              (attn ? " (moba.0 .. moba." + std::to_string(found - 1) + ")" : " (in rwkv.*)") +
              "; expected them to agree: the file is truncated or was edited by hand, "
              "re-export it from the original checkpoint");
    }
  }

  // What `wick info` reports and what identifies the weights: the RWKV-7 part's, then the
  // attention blocks' tensors in block order.
  ModelInfo& info = impl->info;
  info.architecture = "rwkv-x";
  base::Sha256 h;
  h.update("rwkv-x\n" + info.fingerprint + "\n");

  ModelWeights& w = impl->weights;
  w.attention.resize(n_attn);
  for (int j = 0; j < n_attn; ++j) {
    const std::string p = kAttentionPrefix + std::to_string(j) + ".";
    model::OfficialNames names;
    for (const auto& [rest, t] : blocks[j])
      names.tensors[p + rest] = model::MappedTensor{*t, t->name};
    TensorReader r(std::move(names), path,
                   "a complete RWKV-X attention block (ln1, att.receptance/key/value/output, ln2, "
                   "ffn.x_k/key/value)",
                   packed);
    // The channel-mix width F_a comes from the shapes (one for all attention blocks).
    const io::TensorView& fk = r.get(p + "ffn.key.weight").view;
    if (fk.shape.size() != 2 || fk.shape[0] <= 0 || fk.shape[1] != C) {
      throw CheckpointError(path, "tensor '" + p +
                                      "ffn.key.weight': expected shape [F, C] with C = " +
                                      std::to_string(C) + ", found " + fk.shape_string());
    }
    const int64_t F = fk.shape[0];
    if (j == 0) g.attn_ffn_dim = static_cast<int>(F);
    if (F != g.attn_ffn_dim) {
      throw CheckpointError(path, "attention block " + std::to_string(j) + " has FFN width " +
                                      std::to_string(F) + " but block 0 has " +
                                      std::to_string(g.attn_ffn_dim) +
                                      "; expected one width for all attention blocks");
    }
    read_block(r, attention_tensors(), p, g, NormFlags{}, -1, w.attention[j]);
    r.refuse_leftovers(
        "an RWKV-X attention block has ln1, ln2, att.receptance/key/value/output "
        "and ffn.x_k/key/value only (no biases, no ln_x, no position tables)");
    r.tally(info);
    r.hash_records(h);
  }
  info.fingerprint = "sha256:" + h.hex_digest();

  // Execution order: groups of N_r / N_a RWKV blocks, each followed by one attention block.
  const int interval = g.n_layer / n_attn;
  w.order.clear();
  for (int j = 0; j < n_attn; ++j) {
    for (int i = j * interval; i < (j + 1) * interval; ++i) w.order.push_back(BlockRef{false, i});
    w.order.push_back(BlockRef{true, j});
  }

  for (const AttentionBlockWeights& A : w.attention)
    info.bytes_per_token += linear_bytes(attention_tensors(), A);
  info.file_bytes = 0;
  for (const auto& f : set.files()) info.file_bytes += f->size();

  impl->default_attention.moba_block = metadata_int(set, "moba_chunk_size", 2048);
  impl->default_attention.moba_topk = static_cast<int>(metadata_int(set, "moba_topk", 3));
  impl->sources.push_back(std::move(set));
  return impl;
}

}  // namespace wick::model
