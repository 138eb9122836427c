// rwkv-quant's presets (docs/rwkvq-format.md §3.7) against the files rwkv-quant wrote from the
// same source model and statistics (fixtures/rwkvq): the same tensors, layouts, bits and manifest
// records; identical codes for the plain modes; for the search and activation-weighted modes at
// least 99.9 % identical codes and a reconstruction error no worse than the fixture's (§3.11);
// and the file reproduces rwkv-quant's fp32 reference logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "quant/dequant.h"
#include "quant/quant_config.h"
#include "quant/quant_test_util.h"
#include "tasks/quantize_file.h"
#include "quant/rwkvq.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/quantize.h"

namespace wick::test {
namespace {

// Every weight's integer code, whatever the layout (dense: none).
std::vector<int> codes_of(const quant::QuantTensor& t) {
  std::vector<int> out;
  const int64_t rows = t.shape[0];
  int64_t cols = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) cols *= t.shape[i];
  auto byte = [](const io::TensorView* v, int64_t i) { return v->data[i]; };
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      int q = 0;
      switch (t.layout) {
        case quant::Layout::kSb6:
        case quant::Layout::kSym:
          if (t.codes) {
            q = static_cast<int8_t>(byte(t.codes, r * cols + c));
          } else {
            const int gs = t.layout == quant::Layout::kSb6 ? 32 : 16;
            q = nibble_at(t.codes_packed->data + r * (cols / 2), gs, c);
            if (t.gw_qh) q |= plane_bit(t.gw_qh->data + r * (cols / 8), c) << 4;
            if (t.gw_qh2) q |= plane_bit(t.gw_qh2->data + r * (cols / 8), c) << 5;
          }
          break;
        case quant::Layout::kAsym:
        case quant::Layout::kRtn:
          q = byte(t.codes, r * cols + c);
          break;
        case quant::Layout::kDense:
          return {};
      }
      out.push_back(q);
    }
  }
  return out;
}

struct PresetCase {
  const char* preset;
  const char* fixture_file;
  const char* logits;
};

class Presets : public ::testing::TestWithParam<PresetCase> {};

TEST_P(Presets, MatchRwkvQuantsOwnFile) {
  const PresetCase& pc = GetParam();
  const std::string src = fixture("rwkvq/tiny_world_dense.safetensors");
  const std::string stats_path = fixture("rwkvq/tiny_act_stats.safetensors");
  const std::string out = (scratch_dir() / "out.rwkvq").string();
  QuantizeOptions o;
  o.preset = pc.preset;
  o.act_stats_path = stats_path;
  o.tokenizer = "rwkv_vocab_v20230424.txt";
  const QuantizeSummary summary = quantize(src, out, o);
  EXPECT_EQ(summary.weighted_tensors, 13);  // att r/k/v/o, ffn key/value per layer, head
  ASSERT_EQ(summary.warnings.size(), 1u);   // emb has no statistics (a gather)
  EXPECT_NE(summary.warnings[0].find("emb.weight"), std::string::npos);

  const quant::RwkvqFile ours = quant::RwkvqFile::open(io::MappedFile::open(out));
  const quant::RwkvqFile ref = quant::RwkvqFile::open(io::MappedFile::open(fixture(pc.fixture_file)));
  const nlohmann::json om = nlohmann::json::parse(ours.manifest().text);
  const nlohmann::json rm = nlohmann::json::parse(ref.manifest().text);
  for (const char* k : {"format", "format_version", "naming", "n_layer", "n_embd", "head_size",
                        "vocab_size", "config_repr", "tokenizer"})
    EXPECT_EQ(om[k], rm[k]) << k;
  nlohmann::json oc = om["config"], rc = rm["config"];
  oc.erase("act_stats_path");  // a path on the quantising machine
  rc.erase("act_stats_path");
  EXPECT_EQ(oc, rc);
  ASSERT_EQ(om["tensors"].size(), rm["tensors"].size());
  for (auto it = rm["tensors"].begin(); it != rm["tensors"].end(); ++it)
    EXPECT_EQ(om["tensors"][it.key()], it.value()) << it.key();

  const io::TensorSet stats = io::read_safetensors(io::MappedFile::open(stats_path));
  const io::TensorSet source = io::read_safetensors(io::MappedFile::open(src));
  int64_t total = 0, same = 0;
  for (const quant::QuantTensor& r : ref.tensors()) {
    const quant::QuantTensor* q = ours.find(r.key);
    ASSERT_NE(q, nullptr) << r.key;
    ASSERT_EQ(q->layout, r.layout) << r.key;
    ASSERT_EQ(q->describe(), r.describe()) << r.key;
    const std::vector<float> ref_w = quant::dequantize(r);
    const std::vector<float> our_w = quant::dequantize(*q);
    const nlohmann::json& rec = rm["tensors"][r.key];
    const std::string mode = rm["config"]["group_scale_mode"].value(rec["group"].get<std::string>(), "");
    const bool searched = mode == "sym_aw" || mode == "asym_sb6_aw" || mode == "sym" ||
                          mode == "asym_sb6_search";
    if (r.layout == quant::Layout::kDense || !searched) {
      // Plain modes (asym LoRA, rtn, dense): identical values.
      EXPECT_EQ(our_w, ref_w) << r.key;
      EXPECT_EQ(codes_of(*q), codes_of(r)) << r.key;
      continue;
    }
    const std::vector<int> oq = codes_of(*q), rq = codes_of(r);
    ASSERT_EQ(oq.size(), rq.size());
    int64_t n_same = 0;
    for (size_t i = 0; i < oq.size(); ++i) n_same += oq[i] == rq[i];
    total += static_cast<int64_t>(oq.size());
    same += n_same;
    EXPECT_GE(static_cast<double>(n_same) / oq.size(), 0.999) << r.key;
    // Reconstruction error in float64, weighted by E[x^2] per column where the mode is.
    const std::vector<float> w = source_floats(*source.find(r.key));
    const io::TensorView* st = stats.find(r.key);
    const int64_t cols = r.shape[1];
    std::vector<float> e;
    if (st) e = floats(stats, r.key);
    double err_ours = 0, err_ref = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      const double weight = e.empty() ? 1.0 : std::max(double(e[i % cols]), 1e-12);
      err_ours += weight * std::pow(double(our_w[i]) - w[i], 2);
      err_ref += weight * std::pow(double(ref_w[i]) - w[i], 2);
    }
    EXPECT_LE(err_ours, err_ref * (1 + 1e-12)) << r.key;
  }
  std::printf("[parity] preset %s: %lld of %lld searched codes identical (%.5f %%)\n", pc.preset,
              static_cast<long long>(same), static_cast<long long>(total),
              100.0 * double(same) / double(std::max<int64_t>(total, 1)));

  // The file runs and reproduces rwkv-quant's fp32 reference logits.
  const io::TensorSet ref_fwd = load_fixture_tensors("rwkvq/tiny_reference_forward.safetensors");
  const std::vector<int32_t> tokens = ints(ref_fwd, "tokens");
  const Model model = Model::load(out);
  State s = model.new_state();
  const std::vector<float> logits = model.forward(tokens, s, true);
  const double diff = max_abs_diff(logits, floats(ref_fwd, pc.logits));
  std::printf("[parity] preset %s written by wick: logits max-abs %.3g vs %s\n", pc.preset, diff,
              pc.logits);
  EXPECT_LE(diff, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Rwkvq, Presets,
    ::testing::Values(PresetCase{"reduction", "rwkvq/tiny_reduction.rwkvq", "logits.reduction_f32"},
                      PresetCase{"compression", "rwkvq/tiny_compression.rwkvq",
                                 "logits.compression_f32"}),
    [](const auto& info) { return std::string(info.param.preset); });

TEST(Presets, WithoutStatisticsTheAwModesRunUnweightedAndSaySo) {
  const std::string out = (scratch_dir() / "noaw.rwkvq").string();
  QuantizeOptions o;
  o.preset = "compression";
  std::vector<std::pair<int64_t, int64_t>> progress;  // every (done, total) reported
  o.progress = [&progress](int64_t done, int64_t total) { progress.emplace_back(done, total); };
  const QuantizeSummary s = quantize(fixture("rwkvq/tiny_world_dense.safetensors"), out, o);
  EXPECT_EQ(s.weighted_tensors, 0);
  // Progress: once per tensor, counting up to the number of tensors written.
  ASSERT_EQ(static_cast<int64_t>(progress.size()), s.tensors);
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].first, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(progress[i].second, s.tensors);
  }
  o.progress = nullptr;
  bool loud = false;
  for (const std::string& w : s.warnings)
    if (w.find("NO ACTIVATION STATISTICS") != std::string::npos &&
        w.find("asym_sb6_search") != std::string::npos)
      loud = true;
  EXPECT_TRUE(loud);
  // The file differs from the one made with statistics.
  const std::string aw = (scratch_dir() / "aw.rwkvq").string();
  o.act_stats_path = fixture("rwkvq/tiny_act_stats.safetensors");
  quantize(fixture("rwkvq/tiny_world_dense.safetensors"), aw, o);
  EXPECT_NE(read_file(out), read_file(aw));
}

TEST(Presets, ConfigFilesRoundTripAndBadConfigsAreRefused) {
  for (const char* name : {"reduction", "compression"}) {
    const quant::QuantConfig c = quant::QuantConfig::preset(name);
    const quant::QuantConfig back =
        quant::QuantConfig::from_json(nlohmann::json::parse(c.to_json().dump()), "test");
    EXPECT_EQ(back.to_json(), c.to_json());
  }
  // A config file equal to the preset writes the same file as the preset.
  const auto dir = scratch_dir();
  write_file(dir / "c.json", quant::QuantConfig::preset("reduction").to_json().dump());
  QuantizeOptions by_config;
  by_config.config_path = (dir / "c.json").string();
  QuantizeOptions by_preset;
  by_preset.preset = "reduction";
  const std::string src = fixture("rwkvq/tiny_world_dense.safetensors");
  quantize(src, (dir / "a.rwkvq").string(), by_config);
  quantize(src, (dir / "b.rwkvq").string(), by_preset);
  const quant::RwkvqFile a = quant::RwkvqFile::open(io::MappedFile::open((dir / "a.rwkvq").string()));
  const quant::RwkvqFile b = quant::RwkvqFile::open(io::MappedFile::open((dir / "b.rwkvq").string()));
  for (const quant::QuantTensor& t : a.tensors())
    EXPECT_EQ(quant::dequantize(t), quant::dequantize(*b.find(t.key))) << t.key;
  // bits_overrides: the first matching substring wins.
  nlohmann::json j = quant::QuantConfig::preset("compression").to_json();
  j["bits_overrides"] = {{"blocks.1.att.key", 6}};
  write_file(dir / "o.json", j.dump());
  QuantizeOptions over;
  over.config_path = (dir / "o.json").string();
  quantize(src, (dir / "o.rwkvq").string(), over);
  const quant::RwkvqFile ov = quant::RwkvqFile::open(io::MappedFile::open((dir / "o.rwkvq").string()));
  EXPECT_EQ(ov.find("blocks.1.att.key.weight")->describe(), "sb6@6");
  EXPECT_EQ(ov.find("blocks.0.att.key.weight")->describe(), "sb6@5");

  auto refused = [&](nlohmann::json cfg, const std::string& needle) {
    try {
      quant::QuantConfig::from_json(cfg, "cfg.json");
      ADD_FAILURE() << "accepted: " << cfg.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  nlohmann::json base = quant::QuantConfig::preset("compression").to_json();
  nlohmann::json bad = base;
  bad["bits"]["proj"] = 7;  // sb6 takes 4..6
  refused(bad, "sb6 takes 4, 5 or 6 bits");
  bad = base;
  bad["group_scale_mode"]["proj"] = "mxfp4";
  refused(bad, "measurement-only");
  bad = base;
  bad["bits"]["attention"] = 8;
  refused(bad, "unknown group 'attention'");
  bad = base;
  bad["colour"] = 1;
  refused(bad, "unknown config key 'colour'");
  bad = base;
  bad["outlier_fracs"] = {{"g_lora", 0.01}};
  refused(bad, "SpQR");
  // A per-group field that is not an object (found by the quant_config fuzzer: a number here
  // used to escape as nlohmann's invalid_iterator instead of wick's InputError).
  for (const char* key : {"group_scale", "group_scale_mode", "outlier_fracs", "clip_percentiles",
                          "bits_overrides"}) {
    bad = base;
    bad[key] = 501;
    refused(bad, std::string(key) + ": expected an object");
    bad[key] = nlohmann::json::array({1, 2});
    refused(bad, std::string(key) + ": expected an object");
  }
  bad = base;
  bad["act_stats_path"] = 3;
  refused(bad, "act_stats_path: expected a string");
  EXPECT_THROW(quant::QuantConfig::preset("tiny"), InputError);
}

}  // namespace
}  // namespace wick::test
