// RWKV-X models quantised to `.rwkvq` by `wick quantize` (issue 21): the file loads through the
// same tensor reader as the dense checkpoint, its attention blocks' projections stay packed where
// the layout fits (and are counted so by `info`), the logits stay close to the dense model's,
// the parallel pass and the recurrent step agree bit for bit, and damaged or mismatched files
// are refused naming the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "quant/dequant.h"
#include "tasks/quantize_file.h"
#include "quant/rwkvq.h"
#include "quant/rwkvq_writer.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"
#include "wick/quantize.h"
#include "wick/synth.h"

namespace wick::test {
namespace {

const char* kTiny = "rwkvx/rwkvx-tiny.safetensors";

// `in` quantised with the plain `layout` into a file in `dir`.
std::string quantised(const std::string& in, const std::string& layout,
                      const std::filesystem::path& dir) {
  std::string name = "x-" + layout + ".rwkvq";
  name[name.find(':')] = '-';
  const std::string out = (dir / name).string();
  quantize_plain(in, out, layout);
  return out;
}

std::string_view bytes_of(const io::TensorView& v) {
  return {reinterpret_cast<const char*>(v.data), v.nbytes};
}

// Mean and largest KL(p || q) per row of two [T, V] logit matrices, in nats.
std::pair<double, double> kl_per_row(const std::vector<float>& p, const std::vector<float>& q,
                                     int64_t V) {
  double sum = 0, worst = 0;
  const int64_t T = static_cast<int64_t>(p.size()) / V;
  for (int64_t t = 0; t < T; ++t) {
    auto log_softmax = [&](const float* x) {
      double m = x[0], z = 0;
      for (int64_t i = 1; i < V; ++i) m = std::max<double>(m, x[i]);
      for (int64_t i = 0; i < V; ++i) z += std::exp(x[i] - m);
      std::vector<double> l(V);
      for (int64_t i = 0; i < V; ++i) l[i] = x[i] - m - std::log(z);
      return l;
    };
    const std::vector<double> lp = log_softmax(p.data() + t * V), lq = log_softmax(q.data() + t * V);
    double kl = 0;
    for (int64_t i = 0; i < V; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    sum += kl;
    worst = std::max(worst, kl);
  }
  return {sum / static_cast<double>(T), worst};
}

// What the step's weight bytes shrink by against the dense fp32 model when every sb6 / sym
// record of `file` stays packed (the other packed layouts are dequantised to fp32 at load, as
// the dense fp32 tensors are used as they are): per projection 4 bytes per weight minus the bytes
// its product reads (sb6: with the scales unpacked); for the embedding one row.
int64_t packed_saving(const std::string& file, int64_t vocab, int64_t n_embd) {
  const quant::RwkvqFile f = quant::RwkvqFile::open(io::MappedFile::open(file));
  int64_t saving = 0;
  for (const quant::QuantTensor& t : f.tensors()) {
    if (t.layout != quant::Layout::kSb6 && t.layout != quant::Layout::kSym) continue;
    const auto stored = static_cast<int64_t>(t.stored_bytes());
    if (t.key.size() >= 10 && t.key.substr(t.key.size() - 10) == "emb.weight") {
      saving += 4 * n_embd - stored / vocab;
    } else if (t.layout == quant::Layout::kSb6) {
      // A superblock's 12 bytes of qs / qm and fp16 d, dm are read as 16 unpacked fp16 scales.
      saving += 4 * t.numel() - (stored - 16 * t.numel() / 256 + 32 * t.numel() / 256);
    } else {
      saving += 4 * t.numel() - stored;
    }
  }
  return saving;
}

// The dense fp32 checkpoint of the weights an .rwkvq holds (every tensor dequantised, metadata
// kept): what the quantised model must compute, up to the summation order of the packed kernels.
std::string dequantised_copy(const std::string& rwkvq, const std::filesystem::path& dir) {
  const quant::RwkvqFile f = quant::RwkvqFile::open(io::MappedFile::open(rwkvq));
  std::vector<std::vector<float>> values;
  values.reserve(f.tensors().size());
  std::vector<io::TensorToWrite> t;
  for (const quant::QuantTensor& q : f.tensors()) {
    values.push_back(quant::dequantize(q));
    t.push_back({q.key, DType::F32, q.shape,
                 std::string_view(reinterpret_cast<const char*>(values.back().data()),
                                  values.back().size() * sizeof(float))});
  }
  std::map<std::string, std::string> meta = f.buffers().metadata();
  meta.erase("rwkvq");
  const std::string out = (dir / (std::filesystem::path(rwkvq).stem().string() + "-f32.safetensors")).string();
  io::write_safetensors(out, t, meta);
  return out;
}

// Every position's logits from the parallel pass, then token by token; the two must agree bit
// for bit, and so must the states.
std::vector<float> both_passes(const Model& m, const std::vector<int32_t>& tokens) {
  State par = m.new_state(), rec = m.new_state();
  const std::vector<float> all = m.forward(tokens, par, true);
  const int64_t V = m.geometry().vocab;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<float> step = m.step(tokens[t], rec);
    const std::vector<float> row(all.begin() + static_cast<int64_t>(t) * V,
                                 all.begin() + static_cast<int64_t>(t + 1) * V);
    EXPECT_EQ(step, row) << "position " << t;
    if (step != row) break;
  }
  EXPECT_TRUE(par == rec);
  return all;
}

TEST(RwkvXRwkvq, QuantisedFixtureLoadsAndRunsLikeItsWeights) {
  const io::TensorSet f = load_fixture_tensors("rwkvx/full-seq96.safetensors");
  const std::vector<int32_t> tokens = ints(f, "tokens");
  const Model dense = Model::load(fixture(kTiny));
  const std::vector<float> original = both_passes(dense, tokens);
  const auto dir = scratch_dir();
  struct Case {
    const char* layout;
    const char* packed;  // layout of the FFN value matrices (512 columns)
    double max_kl;       // mean KL(original || quantised) per position accepted, nats
  };
  // Measured: sym:8 1.9e-3, sb6:4 2.4e-2 (the RWKV-7 part's LoRA asym@6 and the 128-column
  // projections' rtn@8 included). Against the weights the file holds the model agrees to ~1e-5.
  for (const Case& c : {Case{"sym:8", "sym@8", 5e-3}, Case{"sb6:4", "sb6@4", 5e-2}}) {
    SCOPED_TRACE(c.layout);
    const std::string path = quantised(fixture(kTiny), c.layout, dir);
    const Model m = Model::load(path);
    const ModelInfo& i = m.info();
    EXPECT_EQ(i.architecture, "rwkv-x");
    EXPECT_EQ(i.container, "rwkvq v2");
    EXPECT_EQ(i.source, path);
    EXPECT_EQ(i.parameters, dense.info().parameters);
    EXPECT_EQ(m.geometry().n_attn, 2);
    EXPECT_EQ(m.geometry().n_layer, 4);
    EXPECT_EQ(m.geometry().attn_ffn_dim, 512);
    EXPECT_EQ(m.geometry().lora_w, dense.geometry().lora_w);
    // C = 128 is narrower than a 256-wide superblock: only the FFN value matrices (512 columns)
    // take the layout - the four RWKV blocks' and the two attention blocks'.
    std::map<std::string, uint64_t> layouts(i.packed_parameters.begin(), i.packed_parameters.end());
    EXPECT_EQ(layouts[c.packed], 6u * 128 * 512);
    EXPECT_GT(layouts["rtn@8"], 0u);
    // ... and they stay packed: the step reads exactly their stored bytes (sb6: with the scales
    // unpacked).
    EXPECT_EQ(static_cast<int64_t>(dense.info().bytes_per_token) -
                  static_cast<int64_t>(i.bytes_per_token),
              packed_saving(path, 256, 128));
    EXPECT_NE(i.fingerprint, dense.info().fingerprint);

    // The model computes what its weights say: the dense model of the dequantised weights.
    const std::vector<float> got = both_passes(m, tokens);
    const Model unpacked = Model::load(dequantised_copy(path, dir));
    State us = unpacked.new_state();
    const double d_weights = max_abs_diff(got, unpacked.forward(tokens, us, true));
    // And stays close to the original model.
    const auto [mean_kl, max_kl] = kl_per_row(original, got, 256);
    const double d = max_abs_diff(original, got);
    std::printf("[rwkvx rwkvq] %s: vs its dequantised weights %.3g; vs the original: KL mean %.3g "
                "max %.3g, logits max |diff| %.3g\n",
                c.layout, d_weights, mean_kl, max_kl, d);
    EXPECT_LT(d_weights, 1e-4);
    EXPECT_LT(mean_kl, c.max_kl);
    EXPECT_GT(d, 1e-3);  // the quantised model is not the original

    // A different input gives a different output; the same input the same.
    State a = m.new_state(), b = m.new_state(), a2 = m.new_state();
    const std::vector<int32_t> other = {7, 100, 3, 250, 9};
    const std::vector<float> la = m.forward(std::span<const int32_t>(tokens).first(5), a);
    EXPECT_GT(max_abs_diff(la, m.forward(other, b)), 1e-2);
    EXPECT_EQ(la, m.forward(std::span<const int32_t>(tokens).first(5), a2));
  }
}

// C = 256: the attention blocks' r/k/v/o and FFN projections, the embedding and the head all take
// the packed layout and run through the packed kernels, in full and moba attention.
TEST(RwkvXRwkvq, AttentionProjectionsStayPackedWhereTheLayoutFits) {
  const auto dir = scratch_dir();
  const std::string dense_path = (dir / "x256.safetensors").string();
  write_synthetic_checkpoint(dense_path, make_synth_geometry(2, 256, 256, 1), DType::F32, 5);
  const Model dense = Model::load(dense_path);
  const std::string path = quantised(dense_path, "sym:8", dir);
  const Model m = Model::load(path);
  ASSERT_EQ(m.geometry().n_attn, 1);
  std::map<std::string, uint64_t> layouts(m.info().packed_parameters.begin(),
                                          m.info().packed_parameters.end());
  // Per block (2 RWKV + 1 attention): r/k/v/o 4 C^2, FFN 2 * 4 C^2; the head V x C.
  EXPECT_EQ(layouts["sym@8"], 3u * 12 * 256 * 256 + 256u * 256);
  EXPECT_EQ(layouts["sb6@5"], 256u * 256);  // the embedding
  EXPECT_EQ(static_cast<int64_t>(dense.info().bytes_per_token) -
                static_cast<int64_t>(m.info().bytes_per_token),
            packed_saving(path, 256, 256));

  std::vector<int32_t> tokens;
  for (int t = 0; t < 40; ++t) tokens.push_back((t * 37 + 11) % 256);
  const std::vector<float> got = both_passes(m, tokens);
  const Model unpacked = Model::load(dequantised_copy(path, dir));
  State us = unpacked.new_state();
  const double d_weights = max_abs_diff(got, unpacked.forward(tokens, us, true));
  const auto [mean_kl, max_kl] = kl_per_row(both_passes(dense, tokens), got, 256);
  std::printf("[rwkvx rwkvq] synthetic C 256 sym:8: vs its dequantised weights %.3g; KL mean %.3g "
              "max %.3g vs the original\n", d_weights, mean_kl, max_kl);
  EXPECT_LT(d_weights, 1e-4);
  EXPECT_LT(mean_kl, 2e-2);
  AttentionOptions moba;
  moba.mode = AttentionMode::kMoba;
  moba.moba_block = 4;
  moba.moba_topk = 2;
  const std::vector<float> sparse = both_passes(m.with_attention(moba), tokens);
  EXPECT_GT(max_abs_diff(sparse, got), 0.0);  // past 12 tokens moba drops blocks
}

// The checkpoint's RWKV-X metadata travels into the .rwkvq: the attention defaults, and the
// block counts the loader checks against the tensors.
TEST(RwkvXRwkvq, MetadataOfTheCheckpointIsCarriedOver) {
  const io::TensorSet src = io::read_safetensors(io::MappedFile::open(fixture(kTiny)));
  std::vector<io::TensorToWrite> t;
  for (const io::TensorView& v : src.tensors()) t.push_back({v.name, v.dtype, v.shape, bytes_of(v)});
  const auto dir = scratch_dir();
  const std::string in = (dir / "meta.safetensors").string();
  io::write_safetensors(in, t, {{"moba_chunk_size", "32"}, {"moba_topk", "2"},
                                {"n_attn_layer", "2"}, {"seed", "1"}});
  const std::string path = quantised(in, "sb6:4", dir);
  const Model m = Model::load(path);
  EXPECT_EQ(m.attention().moba_block, 32);
  EXPECT_EQ(m.attention().moba_topk, 2);
  const io::TensorSet out = io::read_safetensors(io::MappedFile::open(path));
  EXPECT_EQ(out.metadata().count("n_attn_layer"), 1u);
  EXPECT_EQ(out.metadata().count("seed"), 0u);  // only what the loader reads
}

// Activation statistics of an RWKV-X model (wick act-stats keys its RWKV-7 blocks by official
// names, without `rwkv.`) weight the checkpoint's `rwkv.*` tensors.
TEST(RwkvXRwkvq, ActivationStatisticsApplyToTheRwkvPart) {
  quant::FileQuantizeOptions o;
  o.config = quant::QuantConfig::preset("reduction");
  o.stats = ActStats{{"blocks.1.ffn.value.weight", std::vector<float>(512, 1.0f)},
                     {"blocks.3.ffn.value.weight", std::vector<float>(512, 2.0f)}};
  const std::string out = (scratch_dir() / "aw.rwkvq").string();
  const QuantizeSummary s = quant::quantize_checkpoint(fixture(kTiny), out, o);
  // rwkv.blocks.{1,3}.ffn.value.weight (512 columns) take sym_aw with their statistics.
  EXPECT_EQ(s.weighted_tensors, 2);
  EXPECT_EQ(Model::load(out).geometry().n_attn, 2);
}

// Files made from a good .rwkvq with one record (and its buffers) taken out.
class RwkvXRwkvqErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir();
    good_ = quantised(fixture(kTiny), "sb6:4", dir_);
  }

  // A .rwkvq file of `buffers` with `manifest` and the good file's other metadata.
  std::string write(const std::string& manifest, const std::vector<io::TensorToWrite>& buffers) {
    std::map<std::string, std::string> meta =
        io::read_safetensors(io::MappedFile::open(good_)).metadata();
    meta["rwkvq"] = manifest;
    const std::string path = (dir_ / ("bad-" + std::to_string(files_++) + ".rwkvq")).string();
    io::write_safetensors(path, buffers, meta);
    return path;
  }

  // The file without the records `drop` (and their buffers).
  std::string without(const std::vector<std::string>& drop) {
    const io::TensorSet set = io::read_safetensors(io::MappedFile::open(good_));
    nlohmann::ordered_json manifest = nlohmann::ordered_json::parse(set.metadata().at("rwkvq"));
    auto dropped = [&](const std::string& name) {
      for (const std::string& d : drop)
        if (name == d || name.rfind(d + "::", 0) == 0) return true;
      return false;
    };
    for (const std::string& d : drop) EXPECT_EQ(manifest["tensors"].erase(d), 1u) << d;
    std::vector<io::TensorToWrite> buffers;
    for (const io::TensorView& v : set.tensors())
      if (!dropped(v.name)) buffers.push_back({v.name, v.dtype, v.shape, bytes_of(v)});
    return write(quant::python_json_dumps(manifest), buffers);
  }
  std::string load_error(const std::string& path) {
    try {
      Model::load(path);
    } catch (const CheckpointError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      return msg;
    }
    ADD_FAILURE() << "loaded " << path;
    return "";
  }
  std::filesystem::path dir_;
  std::string good_;
  int files_ = 0;
};

TEST_F(RwkvXRwkvqErrors, AMissingTensorIsRefusedNamingIt) {
  // A dense (bf16) record and a packed one, in an attention block and in the RWKV-7 part.
  std::string e = load_error(without({"moba.1.ln2.bias"}));
  EXPECT_NE(e.find("missing tensor 'moba.1.ln2.bias'"), std::string::npos) << e;
  EXPECT_NE(e.find("expected a complete RWKV-X attention block"), std::string::npos) << e;
  e = load_error(without({"moba.0.ffn.value.weight"}));
  EXPECT_NE(e.find("missing tensor 'moba.0.ffn.value.weight'"), std::string::npos) << e;
  e = load_error(without({"rwkv.blocks.2.ffn.value.weight"}));
  EXPECT_NE(e.find("in the RWKV-7 part"), std::string::npos) << e;
  EXPECT_NE(e.find("missing tensor 'blocks.2.ffn.value.weight'"), std::string::npos) << e;
}

TEST_F(RwkvXRwkvqErrors, ABlockMissingAgainstTheCarriedMetadataIsRefused) {
  std::vector<std::string> block1;
  for (const char* n : {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "att.receptance.weight",
                        "att.key.weight", "att.value.weight", "att.output.weight", "ffn.x_k",
                        "ffn.key.weight", "ffn.value.weight"})
    block1.push_back(std::string("moba.1.") + n);
  const std::string e = load_error(without(block1));
  EXPECT_NE(e.find("metadata 'n_attn_layer' says 2 attention blocks but the tensors hold 1"),
            std::string::npos)
      << e;
}

TEST_F(RwkvXRwkvqErrors, AnUnknownAttentionTensorIsRefused) {
  // moba.0.ffn.x_k's record under another name: x_k goes missing first...
  const io::TensorSet set = io::read_safetensors(io::MappedFile::open(good_));
  std::string manifest = set.metadata().at("rwkvq");
  std::vector<io::TensorToWrite> buffers;
  std::vector<std::string> names;
  for (const io::TensorView& v : set.tensors()) {
    std::string name = v.name;
    if (name.rfind("moba.0.ffn.x_k::", 0) == 0) name = "moba.0.ffn.x_q::" + name.substr(16);
    names.push_back(name);
  }
  for (size_t k = 0; k < names.size(); ++k) {
    const io::TensorView& v = set.tensors()[k];
    buffers.push_back({names[k], v.dtype, v.shape, bytes_of(v)});
  }
  const size_t at = manifest.find("\"moba.0.ffn.x_k\"");
  ASSERT_NE(at, std::string::npos);
  manifest.replace(at, 16, "\"moba.0.ffn.x_q\"");
  std::string e = load_error(write(manifest, buffers));
  EXPECT_NE(e.find("missing tensor 'moba.0.ffn.x_k'"), std::string::npos) << e;
  // ... and with x_k present too, the extra tensor is named as unknown.
  const io::TensorView* xk = set.find("moba.0.ffn.x_k::dense");
  ASSERT_NE(xk, nullptr);
  buffers.push_back({xk->name, xk->dtype, xk->shape, bytes_of(*xk)});
  nlohmann::ordered_json m = nlohmann::ordered_json::parse(manifest);
  m["tensors"]["moba.0.ffn.x_k"] = m["tensors"]["moba.0.ffn.x_q"];
  e = load_error(write(quant::python_json_dumps(m), buffers));
  EXPECT_NE(e.find("unknown tensor 'moba.0.ffn.x_q'"), std::string::npos) << e;
}

}  // namespace
}  // namespace wick::test
