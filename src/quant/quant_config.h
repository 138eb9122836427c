// rwkv-quant's quantisation config (docs/rwkvq-format.md §1.3.2, §3.7): per parameter group the
// bits, the block width (whose presence selects a block layout) and the encoder mode, plus
// per-key bit overrides. The two presets, the config the plain writer uses, and the JSON form
// that the manifest stores and `wick quantize --config` / `wick calibrate` read and write.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wick::quant {

// The parameter groups of §1.5, in the manifest's order.
const std::vector<std::string>& quant_groups();

struct QuantConfig {
  std::map<std::string, int> bits;                      // group -> bits (16 = not quantised)
  std::map<std::string, int> group_scale;               // group -> block width gs (block layout)
  std::map<std::string, std::string> group_scale_mode;  // group -> mode (§3.1; absent = "asym")
  std::vector<std::pair<std::string, int>> bits_overrides;  // key substring -> bits, first match
  std::map<std::string, double> outlier_fracs;              // group -> SpQR fraction (rtn only)
  std::map<std::string, double> clip_percentiles;  // measurement only; ignored by the writer
  std::string act_stats_path;                      // informational (the path given), "" = none

  // `reduction` or `compression` (§3.7). Throws InputError for another name.
  static QuantConfig preset(std::string_view name);
  // The config of `wick quantize --plain --layout L` (L = "sb6:4" ... "sym:6"; see
  // plain_quantize.h).
  static QuantConfig plain(std::string_view layout_kind, int bits);
  // Parses the §1.3.2 object (the manifest's `config`, or a config file): every key optional
  // except `bits`; the alias group `emb_head` sets emb and head. Throws InputError naming `source`
  // and the field for unknown groups or keys, wrong types, bits outside 2..8 / 16, an unknown
  // mode, or a mode/bits/width combination no layout has (§1.5 step 4).
  static QuantConfig from_json(const nlohmann::json& j, const std::string& source);
  // A config file's text (`wick quantize --config`): the §1.3.2 object itself, or a whole
  // manifest or calibration result holding it under "config". Parsed with limits (nesting depth
  // 16), so a hostile file cannot exhaust the stack. Throws FormatError (not JSON, too deep or
  // too large) and what from_json() throws.
  static QuantConfig from_file_text(std::string_view text, const std::string& source);
  // The §1.3.2 object, keys in the manifest's order.
  nlohmann::ordered_json to_json() const;
  // rwkv-quant's repr: "QuantConfig(proj=5, w_lora=6, ..., emb_head=5)" (emb_head when emb and
  // head agree, else emb=.., head=..).
  std::string repr() const;

  int bits_of(const std::string& group) const;  // 16 when the group has no entry
};

}  // namespace wick::quant
