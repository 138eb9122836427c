#include "quant/quant_config.h"

#include <algorithm>

#include "io/json_limits.h"
#include "wick/errors.h"

namespace wick::quant {
namespace {

using oj = nlohmann::ordered_json;

const std::vector<std::string>& known_modes() {
  static const std::vector<std::string> kModes = {
      "asym", "asym_sb6", "asym_sb6_search", "asym_sb6_aw", "sym", "sym_plain", "sym_aw"};
  return kModes;
}

bool is_group(const std::string& g) {
  const auto& gs = quant_groups();
  return std::find(gs.begin(), gs.end(), g) != gs.end();
}

void check_bits(int b, const std::string& where, const std::string& source) {
  if (b != 16 && (b < 2 || b > 8)) {
    throw InputError(source + ": " + where + " = " + std::to_string(b) +
                     ": expected 2..8 bits, or 16 (not quantised)");
  }
}

// §1.5 step 4: which block layout a mode writes, and the bits / widths it accepts.
void check_block_layout(const std::string& group, const std::string& mode, int bits, int gs,
                        const std::string& source) {
  const std::string where = source + ": group '" + group + "' (mode " + mode + ", " +
                            std::to_string(bits) + " bits, group_scale " + std::to_string(gs) + ")";
  if (mode.rfind("asym_sb6", 0) == 0) {
    if (bits < 4 || bits > 6) throw InputError(where + ": sb6 takes 4, 5 or 6 bits");
    if (gs != 32) throw InputError(where + ": sb6 blocks are 32 wide (group_scale 32)");
  } else if (mode.rfind("sym", 0) == 0) {
    if (bits != 6 && bits != 8) throw InputError(where + ": sym takes 6 or 8 bits");
    if (gs != 16) throw InputError(where + ": sym blocks are 16 wide (group_scale 16)");
  } else if (mode == "asym") {
    if (bits < 5 || bits > 8) throw InputError(where + ": asym takes 5..8 bits");
    if (gs < 1) throw InputError(where + ": the block width must be positive");
  }
}

}  // namespace

const std::vector<std::string>& quant_groups() {
  static const std::vector<std::string> kGroups = {"proj",  "w_lora", "a_lora", "v_lora", "g_lora",
                                                   "small", "cmix",   "emb",    "head"};
  return kGroups;
}

int QuantConfig::bits_of(const std::string& group) const {
  auto it = bits.find(group);
  return it == bits.end() ? 16 : it->second;
}

QuantConfig QuantConfig::preset(std::string_view name) {
  QuantConfig c;
  if (name == "reduction") {
    c.bits = {{"proj", 8},   {"w_lora", 6}, {"a_lora", 6}, {"v_lora", 6}, {"g_lora", 8},
              {"small", 16}, {"cmix", 6},   {"emb", 8},    {"head", 8}};
    c.group_scale = {{"proj", 16},   {"cmix", 16},   {"emb", 16},   {"head", 16},
                     {"w_lora", 64}, {"a_lora", 64}, {"v_lora", 64}};
    c.group_scale_mode = {
        {"proj", "sym_aw"}, {"cmix", "sym_aw"}, {"emb", "sym_aw"}, {"head", "sym_aw"}};
  } else if (name == "compression") {
    c.bits = {{"proj", 5},   {"w_lora", 6}, {"a_lora", 6}, {"v_lora", 6}, {"g_lora", 8},
              {"small", 16}, {"cmix", 4},   {"emb", 5},    {"head", 5}};
    c.group_scale = {{"proj", 32},   {"cmix", 32},   {"emb", 32},   {"head", 32},
                     {"w_lora", 64}, {"a_lora", 64}, {"v_lora", 64}};
    c.group_scale_mode = {{"proj", "asym_sb6_aw"},
                          {"cmix", "asym_sb6_aw"},
                          {"emb", "asym_sb6_aw"},
                          {"head", "asym_sb6_aw"}};
  } else {
    throw InputError("unknown preset '" + std::string(name) +
                     "': expected reduction (sym 8/6-bit, near-lossless) or compression (sb6 "
                     "5/4-bit, small)");
  }
  return c;
}

QuantConfig QuantConfig::plain(std::string_view layout_kind, int b) {
  QuantConfig c;
  const bool sb6 = layout_kind == "sb6";
  const int gs = sb6 ? 32 : 16;
  const std::string mode = sb6 ? "asym_sb6" : "sym_plain";
  c.bits = {{"proj", b},   {"w_lora", 6}, {"a_lora", 6}, {"v_lora", 6}, {"g_lora", 8},
            {"small", 16}, {"cmix", b},   {"emb", 5},    {"head", b}};
  c.group_scale = {{"proj", gs},   {"cmix", gs},   {"emb", 32},   {"head", gs},
                   {"w_lora", 64}, {"a_lora", 64}, {"v_lora", 64}};
  c.group_scale_mode = {{"proj", mode}, {"cmix", mode}, {"emb", "asym_sb6_search"}, {"head", mode}};
  return c;
}

QuantConfig QuantConfig::from_file_text(std::string_view text, const std::string& source) {
  io::JsonLimits limits;
  limits.max_depth = 16;
  nlohmann::json j = io::parse_json_limited(text, source, "quantisation config", limits);
  // A whole manifest or a calibration result holds the config under "config".
  if (j.is_object() && j.contains("config") && j["config"].is_object()) j = j["config"];
  return from_json(j, source);
}

QuantConfig QuantConfig::from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw InputError(source + ": expected a JSON object (a quantisation config)");
  static const std::vector<std::string> kKeys = {
      "bits",        "clip_percentiles", "outlier_fracs", "bits_overrides",
      "group_scale", "group_scale_mode", "act_stats_path"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(kKeys.begin(), kKeys.end(), it.key()) == kKeys.end()) {
      throw InputError(source + ": unknown config key '" + it.key() +
                       "' (expected bits, group_scale, group_scale_mode, bits_overrides, "
                       "outlier_fracs, clip_percentiles, act_stats_path)");
    }
  }
  if (!j.contains("bits") || !j["bits"].is_object())
    throw InputError(source + ": missing 'bits' (an object: group -> bits)");
  // The optional object fields: absent or null (nullptr), else an object (`entries` says what
  // it maps).
  auto object_field = [&](const char* key, const char* entries) -> const nlohmann::json* {
    if (!j.contains(key) || j[key].is_null()) return nullptr;
    if (!j[key].is_object()) {
      throw InputError(source + ": " + key + ": expected an object (" + entries +
                       ") or null, found " + j[key].type_name());
    }
    return &j[key];
  };
  QuantConfig c;
  auto groups_of = [&](const std::string& key, const std::string& field) {
    if (key == "emb_head") return std::vector<std::string>{"emb", "head"};
    if (!is_group(key)) {
      throw InputError(source + ": " + field + ": unknown group '" + key +
                       "' (expected proj, w_lora, a_lora, v_lora, g_lora, small, cmix, emb, head "
                       "or emb_head)");
    }
    return std::vector<std::string>{key};
  };
  auto int_of = [&](const nlohmann::json& v, const std::string& where) {
    if (!v.is_number_integer()) throw InputError(source + ": " + where + ": expected an integer");
    return v.get<int>();
  };
  for (auto it = j["bits"].begin(); it != j["bits"].end(); ++it) {
    const int b = int_of(it.value(), "bits." + it.key());
    check_bits(b, "bits." + it.key(), source);
    for (const std::string& g : groups_of(it.key(), "bits")) c.bits[g] = b;
  }
  if (const nlohmann::json* f = object_field("group_scale", "group -> block width")) {
    for (auto it = f->begin(); it != f->end(); ++it) {
      const int gs = int_of(it.value(), "group_scale." + it.key());
      for (const std::string& g : groups_of(it.key(), "group_scale")) c.group_scale[g] = gs;
    }
  }
  if (const nlohmann::json* f = object_field("group_scale_mode", "group -> layout mode")) {
    for (auto it = f->begin(); it != f->end(); ++it) {
      if (!it.value().is_string())
        throw InputError(source + ": group_scale_mode." + it.key() + ": expected a string");
      const std::string mode = it.value().get<std::string>();
      if (mode == "mxfp4") {
        throw InputError(source + ": group_scale_mode." + it.key() +
                         " = mxfp4 is a measurement-only mode; rwkv-quant's writer refuses it too");
      }
      if (std::find(known_modes().begin(), known_modes().end(), mode) == known_modes().end()) {
        throw InputError(source + ": group_scale_mode." + it.key() + ": unknown mode '" + mode +
                         "' (expected asym, asym_sb6, asym_sb6_search, asym_sb6_aw, sym, "
                         "sym_plain or sym_aw)");
      }
      for (const std::string& g : groups_of(it.key(), "group_scale_mode"))
        c.group_scale_mode[g] = mode;
    }
  }
  if (const nlohmann::json* f = object_field("bits_overrides", "key substring -> bits")) {
    for (auto it = f->begin(); it != f->end(); ++it) {
      const int b = int_of(it.value(), "bits_overrides." + it.key());
      check_bits(b, "bits_overrides." + it.key(), source);
      c.bits_overrides.emplace_back(it.key(), b);
    }
  }
  for (const char* key : {"outlier_fracs", "clip_percentiles"}) {
    const nlohmann::json* f = object_field(key, "group -> number");
    if (!f) continue;
    for (auto it = f->begin(); it != f->end(); ++it) {
      if (!it.value().is_number())
        throw InputError(source + ": " + key + "." + it.key() + ": expected a number");
      for (const std::string& g : groups_of(it.key(), key))
        (std::string(key) == "outlier_fracs" ? c.outlier_fracs : c.clip_percentiles)[g] =
            it.value().get<double>();
    }
  }
  if (j.contains("act_stats_path") && !j["act_stats_path"].is_null()) {
    if (!j["act_stats_path"].is_string()) {
      throw InputError(source + ": act_stats_path: expected a string (a file) or null, found " +
                       j["act_stats_path"].type_name());
    }
    c.act_stats_path = j["act_stats_path"].get<std::string>();
  }
  // Every quantised group with a block width must name a layout that exists.
  for (const auto& [g, gs] : c.group_scale) {
    const int b = c.bits_of(g);
    if (b == 16) continue;
    auto m = c.group_scale_mode.find(g);
    const std::string mode = m == c.group_scale_mode.end() ? "asym" : m->second;
    check_block_layout(g, mode, b, gs, source);
    if (mode.rfind("sym", 0) == 0 && c.outlier_fracs.count(g) && c.outlier_fracs.at(g) > 0) {
      throw InputError(source + ": group '" + g +
                       "': sym layouts have no outliers (outlier_fracs)");
    }
  }
  for (const auto& [g, frac] : c.outlier_fracs) {
    if (frac > 0) {
      throw InputError(source + ": outlier_fracs." + g +
                       ": SpQR outliers (rtn with kept outlier values) are not supported by "
                       "wick's writer yet; remove the entry or set it to 0");
    }
  }
  return c;
}

oj QuantConfig::to_json() const {
  oj c = oj::object();
  oj b = oj::object();
  for (const std::string& g : quant_groups())
    if (bits.count(g)) b[g] = bits.at(g);
  c["bits"] = b;
  oj cp = oj::object();
  for (const auto& [g, v] : clip_percentiles) cp[g] = v;
  c["clip_percentiles"] = cp;
  oj of = oj::object();
  for (const auto& [g, v] : outlier_fracs) of[g] = v;
  c["outlier_fracs"] = of;
  oj bo = oj::object();
  for (const auto& [k, v] : bits_overrides) bo[k] = v;
  c["bits_overrides"] = bo;
  static const std::vector<std::string> kScaleOrder = {
      "proj", "cmix", "emb", "head", "w_lora", "a_lora", "v_lora", "g_lora", "small"};
  oj gsj = oj::object();
  for (const std::string& g : kScaleOrder)
    if (group_scale.count(g)) gsj[g] = group_scale.at(g);
  c["group_scale"] = gsj;
  oj gm = oj::object();
  for (const std::string& g : kScaleOrder)
    if (group_scale_mode.count(g)) gm[g] = group_scale_mode.at(g);
  c["group_scale_mode"] = gm;
  c["act_stats_path"] = act_stats_path.empty() ? oj(nullptr) : oj(act_stats_path);
  return c;
}

std::string QuantConfig::repr() const {
  std::string r = "QuantConfig(";
  const char* order[] = {"proj", "w_lora", "a_lora", "v_lora", "g_lora", "small", "cmix"};
  for (size_t i = 0; i < 7; ++i)
    r += std::string(i ? ", " : "") + order[i] + "=" + std::to_string(bits_of(order[i]));
  if (bits_of("emb") == bits_of("head")) {
    r += ", emb_head=" + std::to_string(bits_of("emb"));
  } else {
    r += ", emb=" + std::to_string(bits_of("emb")) + ", head=" + std::to_string(bits_of("head"));
  }
  return r + ")";
}

}  // namespace wick::quant
