// `wick quantize IN OUT --plain --layout L` end to end: the file it writes reopens through the
// `.rwkvq` reader, every tensor holds exactly the buffers the encoders produce from the source,
// dequantises within the layout's error, and the manifest records what was done. Also the tensor
// grouping and layout choice of src/tasks/quantize_file.h, and the refusals (unknown layout, no
// --plain, input that is not a dense checkpoint).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>

#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "quant/dequant.h"
#include "tasks/quantize_file.h"
#include "quant/quant_test_util.h"
#include "quant/rwkvq.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/quantize.h"

namespace wick::test {
namespace {

std::string q(const std::string& s) { return shell_quote(s); }

// Largest relative RMS error accepted per stored layout on Gaussian-like weights (a few times the
// expected half-step error; a wrong scale or code shows up as errors of order 1).
double max_rel_rms(const std::string& layout) {
  static const std::map<std::string, double> kMax = {
      {"sb6@4", 0.15}, {"sb6@5", 0.075}, {"sb6@6", 0.04}, {"sym@8", 0.01},
      {"sym@6", 0.04}, {"asym@6", 0.04}, {"rtn@8", 0.02}};
  return kMax.at(layout);
}

struct CheckStats {
  int tensors = 0;
  std::map<std::string, int> per_layout;
};

// Reopens `out` and checks every tensor against the source `src` quantised by the same plan.
CheckStats check_quantized_file(const std::string& src_path, const std::string& out,
                                const quant::PlainLayout& layout,
                                const std::optional<std::string>& tokenizer = std::nullopt) {
  CheckStats st;
  io::TensorSet src = io::read_safetensors(io::MappedFile::open(src_path));
  const quant::RwkvqFile f = quant::RwkvqFile::open(io::MappedFile::open(out));
  EXPECT_EQ(f.manifest().format_version, 2);
  EXPECT_EQ(f.manifest().naming, "world");
  EXPECT_EQ(f.manifest().tokenizer, tokenizer);
  EXPECT_EQ(f.tensors().size(), src.size());
  const std::string mode = layout.layout == quant::Layout::kSb6 ? "asym_sb6" : "sym_plain";
  EXPECT_EQ(f.manifest().config["group_scale_mode"]["proj"], mode);
  EXPECT_EQ(f.manifest().config["group_scale_mode"]["emb"], "asym_sb6_search");
  EXPECT_EQ(f.manifest().config["bits"]["cmix"], layout.bits);
  static const std::regex kLora(R"(^blocks\.\d+\.att\.[wavg][12]$)");
  for (const quant::QuantTensor& t : f.tensors()) {
    SCOPED_TRACE(t.key);
    const io::TensorView* s = src.find(t.key);
    EXPECT_NE(s, nullptr);
    if (!s) continue;
    EXPECT_EQ(t.shape, s->shape);
    const std::vector<float> w = source_floats(*s);
    const quant::TensorPlan plan = quant::plan_tensor(t.key, t.shape, layout);
    EXPECT_EQ(t.layout, plan.layout);
    EXPECT_EQ(t.bits, plan.bits);
    EXPECT_EQ(t.group, plan.group);
    EXPECT_EQ(t.transposed, std::regex_match(t.key, kLora));
    // The file holds exactly the encoder's output.
    const quant::EncodedTensor e = quant::encode_planned(plan, w.data(), t.shape);
    for (const quant::EncodedBuffer& b : e.buffers) {
      const io::TensorView* v = field_view(t, b.field);
      EXPECT_NE(v, nullptr) << b.field;
      if (!v) continue;
      EXPECT_EQ(v->dtype, b.dtype) << b.field;
      EXPECT_EQ(v->shape, b.shape) << b.field;
      EXPECT_TRUE(v->nbytes == b.bytes.size() &&
                  std::memcmp(v->data, b.bytes.data(), v->nbytes) == 0)
          << b.field << " differs from the encoder's output";
    }
    const std::vector<float> deq = quant::dequantize(t);
    const std::string label = t.layout == quant::Layout::kDense
                                  ? std::string("dense bf16")
                                  : std::string(quant::layout_name(t.layout)) + "@" +
                                        std::to_string(t.bits);
    st.per_layout[label] += 1;
    ++st.tensors;
    if (t.layout == quant::Layout::kDense) {
      EXPECT_EQ(deq, w) << "bf16 source stored dense must come back exactly";
      continue;
    }
    double ss = 0;
    for (float x : w) ss += static_cast<double>(x) * x;
    const double rel = std::sqrt(sse(deq, w) / std::max(ss, 1e-30));
    EXPECT_LE(rel, max_rel_rms(label)) << label;
  }
  return st;
}

int64_t count_of(const CheckStats& s, const std::string& label) {
  auto it = s.per_layout.find(label);
  return it == s.per_layout.end() ? 0 : it->second;
}

TEST(CliQuantize, FixtureModelRoundTripsInEveryLayout) {
  const std::string src = fixture("rwkvq/tiny_world_dense.safetensors");
  const auto dir = scratch_dir();
  const std::map<std::string, std::string> bits_text = {
      {"sb6:4", "4.5000"}, {"sb6:5", "5.5000"}, {"sb6:6", "6.5000"}, {"sym:8", "8.5625"},
      {"sym:6", "6.5625"}};
  for (const auto& [name, bpw] : bits_text) {
    SCOPED_TRACE(name);
    const std::string out = (dir / (name.substr(0, 3) + name.substr(4) + ".rwkvq")).string();
    const CliRun r = run_wick("quantize " + q(src) + " " + q(out) + " --plain --layout " + name);
    ASSERT_EQ(r.status, 0) << r.err;
    std::printf("[quantize] %s", r.out.c_str());
    EXPECT_NE(r.out.find("72 tensors"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(bpw + " bits/weight"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::to_string(std::filesystem::file_size(out)) + " bytes"),
              std::string::npos);
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one summary line";
    const quant::PlainLayout layout = quant::parse_plain_layout(name);
    const CheckStats st = check_quantized_file(src, out, layout);
    EXPECT_EQ(st.tensors, 72);
    const std::string want = std::string(layout.layout == quant::Layout::kSb6 ? "sb6@" : "sym@") +
                             std::to_string(layout.bits);
    // 8 attention projections + 4 FFN matrices + head; emb is sb6@5 in every layout.
    EXPECT_EQ(count_of(st, want), name == "sb6:5" ? 14 : 13);
    if (name != "sb6:5") EXPECT_EQ(count_of(st, "sb6@5"), 1);
    EXPECT_EQ(count_of(st, "asym@6"), 12);
    EXPECT_EQ(count_of(st, "rtn@8"), 4);
    EXPECT_EQ(count_of(st, "dense bf16"), 42);
  }
}

TEST(CliQuantize, SyntheticModelRoundTrips) {
  const auto dir = scratch_dir();
  const std::string src = (dir / "synth.safetensors").string();
  const CliRun s = run_wick("synth --geometry 2:256:512 --seed 5 --out " + q(src));
  ASSERT_EQ(s.status, 0) << s.err;
  for (const char* name : {"sym:6", "sb6:4"}) {
    SCOPED_TRACE(name);
    const std::string stem = name[1] == 'y' ? "sym" : "sb6";
    const std::string out = (dir / (stem + ".rwkvq")).string();
    const CliRun r = run_wick("quantize " + q(src) + " " + q(out) + " --plain --layout " + name +
                              " --tokenizer rwkv_vocab_v20230424.txt");
    ASSERT_EQ(r.status, 0) << r.err;
    std::printf("[quantize] %s", r.out.c_str());
    const CheckStats st = check_quantized_file(src, out, quant::parse_plain_layout(name),
                                               std::string("rwkv_vocab_v20230424.txt"));
    EXPECT_EQ(st.tensors, 2 * 33 + 6);
    EXPECT_EQ(count_of(st, name[1] == 'y' ? "sym@6" : "sb6@4"), 13);
  }
}

TEST(CliQuantize, NarrowMatricesFallBackToRtnWithANote) {
  // Width 64: the attention matrices and the embedding have 64 columns, which no 256-column
  // superblock layout holds; ffn.value [64, 256] still fits.
  const auto dir = scratch_dir();
  const std::string src = (dir / "narrow.safetensors").string();
  ASSERT_EQ(run_wick("synth --geometry 1:64:256 --seed 1 --out " + q(src)).status, 0);
  const std::string out = (dir / "narrow.rwkvq").string();
  const CliRun r = run_wick("quantize " + q(src) + " " + q(out) + " --plain --layout sb6:5");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("note: blocks.0.att.key.weight: shape [64, 64] does not fit sb6@5"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("note: emb.weight"), std::string::npos) << r.err;
  const quant::RwkvqFile f = quant::RwkvqFile::open(io::MappedFile::open(out));
  EXPECT_EQ(f.find("blocks.0.att.key.weight")->layout, quant::Layout::kRtn);
  EXPECT_EQ(f.find("blocks.0.att.key.weight")->group, "proj");
  EXPECT_EQ(f.find("blocks.0.ffn.key.weight")->layout, quant::Layout::kRtn);  // [256, 64]
  EXPECT_EQ(f.find("blocks.0.ffn.value.weight")->layout, quant::Layout::kSb6);  // [64, 256]
  EXPECT_EQ(f.find("emb.weight")->layout, quant::Layout::kRtn);
  const CheckStats st = check_quantized_file(src, out, quant::parse_plain_layout("sb6:5"));
  EXPECT_EQ(st.tensors, 33 + 6);
}

TEST(PlainQuantize, GroupsAndPlansFollowTheSpec) {
  using quant::tensor_group;
  EXPECT_EQ(tensor_group("blocks.3.att.key.weight"), "proj");
  EXPECT_EQ(tensor_group("blocks.3.tmix.r_proj.weight"), "proj");
  EXPECT_EQ(tensor_group("blocks.3.att.w1"), "w_lora");
  EXPECT_EQ(tensor_group("blocks.3.att.w0"), "w_lora");
  EXPECT_EQ(tensor_group("blocks.3.tmix.a_lora_B.bias"), "a_lora");
  EXPECT_EQ(tensor_group("blocks.3.att.v2"), "v_lora");
  EXPECT_EQ(tensor_group("blocks.3.att.g1"), "g_lora");
  EXPECT_EQ(tensor_group("blocks.3.att.r_k"), "small");
  EXPECT_EQ(tensor_group("blocks.3.att.k_k"), "small");
  EXPECT_EQ(tensor_group("blocks.3.ffn.key.weight"), "cmix");
  EXPECT_EQ(tensor_group("blocks.3.cmix.value.weight"), "cmix");
  EXPECT_EQ(tensor_group("emb.weight"), "emb");
  EXPECT_EQ(tensor_group("head.weight"), "head");
  EXPECT_EQ(tensor_group("blocks.3.att.x_w"), "other");
  EXPECT_EQ(tensor_group("blocks.3.att.ln_x.weight"), "other");
  EXPECT_EQ(tensor_group("ln_out.bias"), "other");

  const quant::PlainLayout sym8 = quant::parse_plain_layout("sym:8");
  auto plan = [&](const char* key, std::vector<int64_t> shape) {
    return quant::plan_tensor(key, shape, sym8);
  };
  EXPECT_EQ(plan("blocks.0.att.key.weight", {512, 512}).layout, quant::Layout::kSym);
  EXPECT_EQ(plan("blocks.0.att.key.weight", {512, 512}).mode, "sym_plain");
  EXPECT_EQ(plan("head.weight", {1000, 256}).bits, 8);
  EXPECT_EQ(plan("emb.weight", {1000, 256}).layout, quant::Layout::kSb6);
  EXPECT_EQ(plan("emb.weight", {1000, 256}).mode, "asym_sb6_search");
  EXPECT_EQ(plan("emb.weight", {1000, 256}).bits, 5);
  EXPECT_EQ(plan("blocks.0.att.w1", {256, 96}).layout, quant::Layout::kAsym);
  EXPECT_EQ(plan("blocks.0.att.w1", {256, 96}).gs, 64);
  EXPECT_EQ(plan("blocks.0.att.g2", {32, 256}).layout, quant::Layout::kRtn);
  EXPECT_EQ(plan("blocks.0.att.w0", {1, 1, 256}).layout, quant::Layout::kDense);
  EXPECT_EQ(plan("blocks.0.att.w0", {1, 1, 256}).group, "w_lora");
  EXPECT_EQ(plan("blocks.0.att.r_k", {4, 64}).layout, quant::Layout::kDense);
  EXPECT_EQ(plan("blocks.0.att.key.weight", {256}).layout, quant::Layout::kDense);
  const quant::TensorPlan narrow = plan("blocks.0.att.key.weight", {64, 96});
  EXPECT_EQ(narrow.layout, quant::Layout::kRtn);
  EXPECT_EQ(narrow.bits, 8);
  EXPECT_FALSE(narrow.note.empty());

  EXPECT_THROW(quant::parse_plain_layout("sb6:7"), InputError);
  EXPECT_THROW(quant::parse_plain_layout("asym:6"), InputError);
}

TEST(PlainQuantize, LibraryEntryPointReportsWhatItWrote) {
  const auto dir = scratch_dir();
  const std::string out = (dir / "m.rwkvq").string();
  const QuantizeSummary s =
      quantize_plain(fixture("rwkvq/tiny_world_dense.safetensors"), out, "sb6:4");
  EXPECT_EQ(s.tensors, 72);
  EXPECT_EQ(s.naming, "world");
  EXPECT_EQ(s.layout, "sb6:4");
  EXPECT_EQ(s.file_bytes, std::filesystem::file_size(out));
  EXPECT_DOUBLE_EQ(s.layout_bits_per_weight(), 4.5);
  EXPECT_TRUE(s.notes.empty());
  // Deterministic: the same input gives the same bytes.
  const std::string again = (dir / "m2.rwkvq").string();
  quantize_plain(fixture("rwkvq/tiny_world_dense.safetensors"), again, "sb6:4");
  EXPECT_TRUE(read_file(out) == read_file(again));
}

TEST(CliQuantize, BadInputIsRefusedClearly) {
  const std::string src = fixture("rwkvq/tiny_world_dense.safetensors");
  const auto dir = scratch_dir();
  const std::string out = (dir / "x.rwkvq").string();

  CliRun r = run_wick("quantize " + q(src) + " " + q(out) + " --plain --layout sb6:7");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unknown layout 'sb6:7'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sym:8"), std::string::npos) << r.err;

  r = run_wick("quantize " + q(src) + " " + q(out) + " --layout sb6:5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--layout belongs to --plain"), std::string::npos) << r.err;

  r = run_wick("quantize " + q(src) + " " + q(out));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--preset reduction|compression"), std::string::npos) << r.err;

  r = run_wick("quantize " + q(src) + " " + q(out) + " --plain --layout sb6:5 --preset reduction");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot be combined"), std::string::npos) << r.err;

  r = run_wick("quantize " + q(src) + " " + q(out) + " --preset huge");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unknown preset 'huge'"), std::string::npos) << r.err;

  // A preset without statistics says loudly which mode ran instead.
  r = run_wick("quantize " + q(src) + " " + q((dir / "ok.rwkvq").string()) +
               " --preset compression");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("NO ACTIVATION STATISTICS: asym_sb6_aw -> asym_sb6_search"),
            std::string::npos)
      << r.err;

  r = run_wick("quantize " + q(src) + " " + q(out) + " --plain");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--layout"), std::string::npos) << r.err;

  const auto text = dir / "notes.txt";
  write_file(text, "these are not weights\n");
  r = run_wick("quantize " + q(text.string()) + " " + q(out) + " --plain --layout sb6:5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("not a checkpoint"), std::string::npos) << r.err;

  r = run_wick("quantize " + q(fixture("rwkvq/tiny_reduction.rwkvq")) + " " + q(out) +
               " --plain --layout sb6:5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("already a quantised .rwkvq"), std::string::npos) << r.err;

  r = run_wick("quantize " + q((dir / "missing.safetensors").string()) + " " + q(out) +
               " --plain --layout sb6:5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("missing.safetensors"), std::string::npos) << r.err;

  EXPECT_FALSE(std::filesystem::exists(out)) << "nothing written on failure";
}

}  // namespace
}  // namespace wick::test

namespace wick::test {
namespace {

// `wick quantize IN IN` used to overwrite the dense checkpoint with a .rwkvq (exit 0).
TEST(CliQuantize, NeverOverwritesTheInputAndAsksBeforeReplacingAFile) {
  const auto dir = scratch_dir();
  const std::string model = (dir / "model.safetensors").string();
  std::filesystem::copy_file(fixture("rwkvq/tiny_world_dense.safetensors"), model);
  const std::string before = read_file(model);
  CliRun r = run_wick("quantize " + q(model) + " " + q(model) + " --plain --layout sb6:5 --force");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is the input checkpoint itself"), std::string::npos) << r.err;
  // The same file under another name (a hard link) is the input too.
  const std::string link = (dir / "link.rwkvq").string();
  std::filesystem::create_hard_link(model, link);
  r = run_wick("quantize " + q(model) + " " + q(link) + " --plain --layout sb6:5 --force");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is the input checkpoint itself"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(model), before) << "the input is untouched";
  // An existing other file is replaced only with --force.
  const std::string out = (dir / "out.rwkvq").string();
  write_file(out, "old");
  r = run_wick("quantize " + q(model) + " " + q(out) + " --plain --layout sb6:5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("already exists; pass --force"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(out), "old");
  r = run_wick("quantize " + q(model) + " " + q(out) + " --plain --layout sb6:5 --force");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(read_file(out), "old");
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  // A name that hides the format gets a warning (and the file).
  r = run_wick("quantize " + q(model) + " " + q((dir / "q.safetensors").string()) +
               " --plain --layout sb6:5");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("ends in '.safetensors'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace wick::test
