// The model geometry from the tensor shapes (model/geometry.h).
#include "model/geometry.h"

#include <charconv>
#include <set>

#include "base/strings.h"
#include "wick/errors.h"

namespace wick::model {
namespace {

// No released model has more than a few dozen blocks; an index beyond this is a damaged file.
constexpr int64_t kMaxLayers = 1 << 16;

}  // namespace

std::string convention_hint(NamingConvention c) {
  return c == NamingConvention::kOfficial
             ? ""
             : std::string(", in a ") + std::string(naming_convention_name(c)) + " checkpoint";
}

Geometry derive_geometry(const OfficialNames& official, const std::string& path) {
  const auto& names = official.tensors;
  Geometry g;
  auto shape_of = [&](const std::string& n) -> const std::vector<int64_t>& {
    auto it = names.find(n);
    if (it == names.end()) {
      throw CheckpointError(path, "missing tensor '" + n + "'" +
                                      convention_hint(official.convention) +
                                      "; the geometry cannot be derived without it");
    }
    return it->second.view.shape;
  };
  const auto& emb = shape_of("emb.weight");
  if (emb.size() != 2 || emb[0] <= 0 || emb[1] <= 0) {
    throw CheckpointError(
        path, "tensor 'emb.weight': expected shape [V, C], found " + base::shape_string(emb));
  }
  g.vocab = static_cast<int>(emb[0]);
  g.n_embd = static_cast<int>(emb[1]);
  // Layers: blocks.0 .. blocks.{L-1} must all be present. Names whose index does not parse are
  // left unconsumed and reported as unknown tensors.
  std::set<int64_t> layers;
  for (auto& [name, t] : names) {
    if (name.rfind("blocks.", 0) != 0) continue;
    const size_t dot = name.find('.', 7);
    if (dot == std::string::npos || dot == 7 || dot > 7 + 9) continue;
    if (name[7] < '0' || name[7] > '9') continue;  // from_chars would accept a sign
    int64_t index = 0;
    auto res = std::from_chars(name.data() + 7, name.data() + dot, index);
    if (res.ec != std::errc() || res.ptr != name.data() + dot) continue;
    if (index >= kMaxLayers) {
      throw CheckpointError(path, "tensor '" + t.stored_name + "': expected a block index below " +
                                      std::to_string(kMaxLayers) + ", found " +
                                      std::to_string(index));
    }
    layers.insert(index);
  }
  if (layers.empty())
    throw CheckpointError(path, "no blocks found: expected blocks.0 .. blocks.{L-1}");
  const int64_t last = *layers.rbegin();
  if (static_cast<int64_t>(layers.size()) != last + 1) {
    int64_t expect = 0;
    for (int64_t i : layers) {
      if (i != expect) break;
      ++expect;
    }
    throw CheckpointError(path, "block " + std::to_string(expect) + " is missing (blocks up to " +
                                    std::to_string(last) + " exist); expected blocks 0.." +
                                    std::to_string(last) + " without gaps");
  }
  g.n_layer = static_cast<int>(last + 1);
  const auto& rk = shape_of("blocks.0.att.r_k");
  if (rk.size() != 2 || rk[0] <= 0 || rk[1] <= 0 || rk[0] * rk[1] != g.n_embd) {
    throw CheckpointError(path, "tensor 'blocks.0.att.r_k': expected shape [H, N] with H*N = C = " +
                                    std::to_string(g.n_embd) + ", found " + base::shape_string(rk));
  }
  g.n_head = static_cast<int>(rk[0]);
  g.head_size = static_cast<int>(rk[1]);
  const auto& fk = shape_of("blocks.0.ffn.key.weight");
  if (fk.size() != 2 || fk[0] <= 0) {
    throw CheckpointError(path, "tensor 'blocks.0.ffn.key.weight': expected shape [F, C], found " +
                                    base::shape_string(fk));
  }
  g.ffn_dim = static_cast<int>(fk[0]);
  auto rank = [&](const std::string& n) {
    const auto& it = names.find(n);
    if (it == names.end()) shape_of(n);  // throws "missing"
    const auto& s = it->second.view.shape;
    if (s.size() != 2) {
      throw CheckpointError(path, "tensor '" + it->second.stored_name +
                                      "': expected a 2-D LoRA factor, found " +
                                      base::shape_string(s));
    }
    return static_cast<int>(it->second.linear_layout ? s[0] : s[1]);
  };
  g.lora_w = rank("blocks.0.att.w1");
  g.lora_a = rank("blocks.0.att.a1");
  g.lora_g = rank("blocks.0.att.g1");
  g.lora_v = g.n_layer > 1 ? rank("blocks.1.att.v1") : 0;
  for (auto [value, what] : {std::pair{g.lora_w, "decay LoRA rank (att.w1)"},
                             {g.lora_a, "in-context-rate LoRA rank (att.a1)"},
                             {g.lora_g, "gate LoRA rank (att.g1)"},
                             {g.ffn_dim, "FFN width F (ffn.key)"}}) {
    if (value <= 0) {
      throw CheckpointError(
          path, std::string("expected a positive ") + what + ", found " + std::to_string(value));
    }
  }
  if (g.n_layer > 1 && g.lora_v <= 0) {
    throw CheckpointError(path,
                          "expected a positive value-residual LoRA rank (blocks.1.att.v1), found " +
                              std::to_string(g.lora_v));
  }
  return g;
}

}  // namespace wick::model
