// Model::load on checkpoints that are well-formed files but wrong models: the real tiny model's
// tensors, read from the fixture, modified one way per test and written to a scratch file. Each
// wrong one must be refused with a CheckpointError (or FileError) that names the file and says
// what is wrong; the right ones (extra layer-0 v0/v1/v2, bf16/f16 conversions, an unaligned MLX
// layout) must load and compute the same function.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/fp16.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "test_util.h"
#include "wick/errors.h"
#include "wick/model.h"

namespace wick {
namespace {

namespace fs = std::filesystem;
using io::TensorToWrite;

constexpr const char* kModel = "tiny-rwkv7/tiny-rwkv7-834K.safetensors";
const std::vector<int32_t> kTokens = {34, 105, 110};

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// The fixture's tensors as a list to edit and write back. The views point into `source` (kept
// mapped); replacement bytes live in `storage` (a deque: references stay valid).
struct Checkpoint {
  io::TensorSet source;
  std::vector<TensorToWrite> tensors;
  std::deque<std::string> storage;

  explicit Checkpoint(const std::string& rel) : source(test::load_fixture_tensors(rel)) {
    for (const io::TensorView& t : source.tensors())
      tensors.push_back({t.name, t.dtype, t.shape,
                         std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
  }
  TensorToWrite* find(const std::string& name) {
    for (auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  // Removes every tensor whose name starts with `prefix`; returns how many.
  int drop_prefix(const std::string& prefix) {
    size_t before = tensors.size();
    std::erase_if(tensors, [&](const TensorToWrite& t) { return t.name.rfind(prefix, 0) == 0; });
    return static_cast<int>(before - tensors.size());
  }
  void drop(const std::string& name) {
    ASSERT_EQ(std::erase_if(tensors, [&](const TensorToWrite& t) { return t.name == name; }), 1u)
        << name;
  }
  std::string_view keep(std::string bytes) {
    storage.push_back(std::move(bytes));
    return storage.back();
  }
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::string bytes) {
    tensors.push_back({name, dtype, std::move(shape), keep(std::move(bytes))});
  }
  void add_zeros_f32(const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    add(name, DType::F32, std::move(shape), std::string(static_cast<size_t>(n) * 4, '\0'));
  }
  std::string write(const fs::path& dir, const std::string& file = "model.safetensors") const {
    const std::string p = (dir / file).string();
    io::write_safetensors(p, tensors, source.metadata());
    return p;
  }
};

std::vector<float> logits_of(const Model& m) {
  State s = m.new_state();
  return m.forward(kTokens, s);
}

const std::vector<float>& reference_logits() {
  static const std::vector<float> ref = logits_of(Model::load(test::fixture(kModel)));
  return ref;
}

// Loads `path`, expecting a CheckpointError whose message contains the path and each of `parts`.
void expect_checkpoint_error(const std::string& path, const std::vector<std::string>& parts,
                             const std::string& path_in_message = "") {
  const std::string want_path = path_in_message.empty() ? path : path_in_message;
  try {
    Model m = Model::load(path);
    ADD_FAILURE() << "loaded " << path << " without error (" << m.geometry().n_layer << " layers)";
  } catch (const CheckpointError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, want_path)) << "path " << want_path << " not in: " << msg;
    for (const std::string& p : parts) EXPECT_TRUE(contains(msg, p)) << "'" << p << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected wick::CheckpointError loading " << path << ", got: " << e.what();
  }
}

TEST(LoaderErrors, RewrittenModelLoadsIdentically) {
  // The baseline for every test below: writing the fixture's tensors back changes nothing.
  Checkpoint ck(kModel);
  const std::string p = ck.write(test::scratch_dir());
  Model m = Model::load(p);
  EXPECT_EQ(m.info().source, p);
  EXPECT_EQ(m.geometry().n_layer, 12);
  EXPECT_EQ(logits_of(m), reference_logits());
}

TEST(LoaderErrors, MissingTensor) {
  Checkpoint ck(kModel);
  ck.drop("blocks.3.att.key.weight");
  expect_checkpoint_error(ck.write(test::scratch_dir()), {"blocks.3.att.key.weight", "missing"});
}

TEST(LoaderErrors, UnknownExtraTensor) {
  Checkpoint ck(kModel);
  ck.add_zeros_f32("blocks.0.ffn.s_emb.weight", {256, 64});
  expect_checkpoint_error(ck.write(test::scratch_dir()), {"unknown", "blocks.0.ffn.s_emb.weight"});
}

TEST(LoaderErrors, WrongShape) {
  Checkpoint ck(kModel);
  TensorToWrite* v = ck.find("blocks.2.att.value.weight");
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(v->shape, (std::vector<int64_t>{64, 64}));
  v->shape = {64, 32};
  v->bytes = v->bytes.substr(0, 64 * 32 * 4);
  expect_checkpoint_error(ck.write(test::scratch_dir()),
                          {"blocks.2.att.value.weight", "[64, 64]", "[64, 32]"});
}

TEST(LoaderErrors, IntegerDtypeForWeight) {
  Checkpoint ck(kModel);
  TensorToWrite* t = ck.find("ln_out.weight");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->dtype, DType::F32);
  t->dtype = DType::I32;  // same byte count, integer type
  expect_checkpoint_error(ck.write(test::scratch_dir()), {"ln_out.weight", "I32"});
}

// NaN or inf in a small tensor used to load silently and surface as "sampler: every logit is
// -inf or NaN"; the loader now refuses it, naming the file, the tensor and the element.
TEST(LoaderErrors, NonFiniteSmallTensorsAreRefusedNamingTheTensor) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* name;
    int64_t element;
    float value;
    const char* what;
  };
  for (const Case& c : {Case{"blocks.1.att.w0", 7, nan, "NaN"},
                        Case{"ln_out.weight", 0, inf, "an infinity"},
                        Case{"blocks.2.att.w1", 100, nan, "NaN"},  // a LoRA factor
                        Case{"blocks.0.att.r_k", 3, -inf, "an infinity"}}) {
    Checkpoint ck(kModel);
    TensorToWrite* t = ck.find(c.name);
    ASSERT_NE(t, nullptr) << c.name;
    ASSERT_EQ(t->dtype, DType::F32);
    std::string bytes(t->bytes);
    std::memcpy(bytes.data() + 4 * c.element, &c.value, 4);
    t->bytes = ck.keep(std::move(bytes));
    expect_checkpoint_error(ck.write(test::scratch_dir()),
                            {std::string("'") + c.name + "' holds " + c.what + " at element " +
                                 std::to_string(c.element),
                             "checkpoint is damaged"});
  }
}

TEST(LoaderErrors, Rwkv6Keys) {
  Checkpoint ck(kModel);
  ck.add_zeros_f32("blocks.0.att.time_maa_x", {1, 1, 64});
  expect_checkpoint_error(ck.write(test::scratch_dir()), {"RWKV-6"});
}

TEST(LoaderErrors, Layer0ValueResidualTensorsAreIgnored) {
  // Released checkpoints carry blocks.0.att.v0/v1/v2, which x070 never uses in layer 0.
  Checkpoint ck(kModel);
  for (const char* n : {"v0", "v1", "v2"}) {
    TensorToWrite* t1 = ck.find(std::string("blocks.1.att.") + n);
    ASSERT_NE(t1, nullptr) << n;
    TensorToWrite copy = *t1;
    copy.name = std::string("blocks.0.att.") + n;
    ck.tensors.push_back(copy);
  }
  const std::string p = ck.write(test::scratch_dir());
  Model m = Model::load(p);
  Model ref = Model::load(test::fixture(kModel));
  EXPECT_EQ(m.geometry(), ref.geometry());
  EXPECT_EQ(m.info().parameters, ref.info().parameters);
  EXPECT_EQ(logits_of(m), reference_logits());
}

TEST(LoaderErrors, LayerGap) {
  Checkpoint ck(kModel);
  EXPECT_GT(ck.drop_prefix("blocks.5."), 20);
  expect_checkpoint_error(ck.write(test::scratch_dir()), {"block 5"});
}

// Block indices that are not plain decimal numbers, or absurdly large, are CheckpointErrors
// (regression: an earlier std::stoi-based parser threw std::invalid_argument / out_of_range).
TEST(LoaderErrors, NonNumericOrHugeBlockIndexIsCheckpointError) {
  for (const char* name : {"blocks.final.weight", "blocks.", "blocks.99999999999.att.x_r"}) {
    SCOPED_TRACE(name);
    Checkpoint ck(kModel);
    ck.add_zeros_f32(name, {64});
    expect_checkpoint_error(ck.write(test::scratch_dir()), {name});
  }
}

// Layer index INT_MAX: `*layers.rbegin() + 1` overflows int (UB), then std::length_error.
TEST(LoaderErrors, LayerIndexIntMaxIsCheckpointError) {
  Checkpoint ck(kModel);
  ck.add_zeros_f32("blocks.2147483647.att.x_r", {64});
  expect_checkpoint_error(ck.write(test::scratch_dir()), {"blocks.2147483647.att.x_r"});
}

// map_to_official_names() keys its map by the name with `module.` / `_orig_mod.` stripped, so
// "emb.weight" and "module.emb.weight" collapse silently (one of them wins) instead of raising
// "two stored tensors map to 'emb.weight'" as naming.h promises.
TEST(LoaderErrors, WrapperPrefixDuplicateIsCheckpointError) {
  Checkpoint ck(kModel);
  ck.add_zeros_f32("module.emb.weight", {256, 64});
  expect_checkpoint_error(ck.write(test::scratch_dir()), {"emb.weight"});
}

// An HF folder: the fixture's hf/model.safetensors with an edited config.json.
fs::path hf_folder(const std::function<void(nlohmann::json&)>& edit) {
  const fs::path dir = test::scratch_dir() / "hf";
  fs::create_directories(dir);
  fs::copy_file(test::fixture("tiny-rwkv7/hf/model.safetensors"), dir / "model.safetensors");
  nlohmann::json c = nlohmann::json::parse(test::read_file(test::fixture("tiny-rwkv7/hf/config.json")));
  edit(c);
  test::write_file(dir / "config.json", c.dump(2));
  return dir;
}

TEST(LoaderErrors, HfFolderUnchangedLoads) {
  const fs::path dir = hf_folder([](nlohmann::json&) {});
  Model m = Model::load(dir.string());
  EXPECT_EQ(m.info().container, "hf-folder");
  EXPECT_EQ(m.info().convention, NamingConvention::kHuggingFace);
  EXPECT_LT(test::max_abs_diff(logits_of(m), reference_logits()), 1e-4);
}

TEST(LoaderErrors, HfConfigHiddenSizeDisagrees) {
  const fs::path dir = hf_folder([](nlohmann::json& c) { c["hidden_size"] = 128; });
  expect_checkpoint_error(dir.string(), {"hidden_size", "128", "64"});
}

TEST(LoaderErrors, HfConfigHybridAttention) {
  const fs::path dir = hf_folder([](nlohmann::json& c) {
    c["attn"] = {{"layers", {1, 5}}, {"num_heads", 4}, {"window_size", nullptr}};
  });
  expect_checkpoint_error(dir.string(), {"attn"});
}

TEST(LoaderErrors, NonexistentPath) {
  const std::string p = (test::scratch_dir() / "no-such-model.safetensors").string();
  try {
    Model::load(p);
    ADD_FAILURE() << "no error";
  } catch (const FileError& e) {
    EXPECT_EQ(e.path(), p);
    EXPECT_TRUE(contains(e.what(), p)) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected wick::FileError, got: " << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Half-precision conversions, done here independently of the engine's own converters.

uint16_t f32_to_bf16_rne(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

uint16_t f32_to_f16_rne(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);  // inf, NaN
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (ax < 0x38800000u) {                         // below 2^-14: a half subnormal (or zero)
    float a;
    std::memcpy(&a, &ax, 4);
    // a * 2^24 is exact; nearbyint rounds half to even. 1024 becomes the smallest normal.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t h = ((((ax >> 23) - 127 + 15) << 10) | ((ax & 0x7fffffu) >> 13));
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return sign | static_cast<uint16_t>(h);
}

TEST(LoaderErrors, HalfConvertersRoundToNearestEven) {
  EXPECT_EQ(f32_to_bf16_rne(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_rne(-2.0f), 0xc000);
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(f32_to_bf16_rne(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_rne(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);
  EXPECT_EQ(f32_to_f16_rne(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_rne(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_rne(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16_rne(0x1p-24f), 0x0001);
  EXPECT_EQ(f32_to_f16_rne(0x1p-25f), 0x0000);  // tie to even (0)
  EXPECT_EQ(f32_to_f16_rne(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(f32_to_f16_rne(1.0f + 0x1p-10f + 0x1p-11f), 0x3c02);
  EXPECT_EQ(f32_to_f16_rne(-0.0f), 0x8000);
  // Agrees with the engine's widening on a sweep of values.
  for (int i = -4000; i <= 4000; ++i) {
    const float v = std::ldexp(static_cast<float>(i) * 1.2345f, i / 250);  // 2^-16 .. 2^16 scale
    const float back = base::f16_to_f32(f32_to_f16_rne(v));
    if (std::abs(v) < 65504.0f) EXPECT_LE(std::abs(back - v), std::abs(v) * 0x1p-11f + 0x1p-25f) << v;
    const float bback = base::bf16_to_f32(f32_to_bf16_rne(v));
    EXPECT_LE(std::abs(bback - v), std::abs(v) * 0x1p-8f) << v;
  }
}

// Converts every F32 tensor of the model to `to` (BF16 or F16) and writes it.
std::string write_converted(Checkpoint& ck, DType to, const fs::path& dir) {
  for (TensorToWrite& t : ck.tensors) {
    if (t.dtype != DType::F32) continue;
    const size_t n = t.bytes.size() / 4;
    std::string out(n * 2, '\0');
    for (size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, t.bytes.data() + 4 * i, 4);
      const uint16_t h = to == DType::BF16 ? f32_to_bf16_rne(f) : f32_to_f16_rne(f);
      EXPECT_NE(h & 0x7fffu, to == DType::BF16 ? 0x7f80u : 0x7c00u)
          << t.name << "[" << i << "] = " << f << " overflows";
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
    t.dtype = to;
    t.bytes = ck.keep(std::move(out));
  }
  return ck.write(dir);
}

// Scales every F32 weight by `factor` in place (new bytes in the checkpoint's storage).
void scale_f32(Checkpoint& ck, float factor) {
  for (TensorToWrite& t : ck.tensors) {
    if (t.dtype != DType::F32) continue;
    std::string out(t.bytes);
    for (size_t i = 0; i < out.size(); i += 4) {
      float f;
      std::memcpy(&f, out.data() + i, 4);
      f *= factor;
      std::memcpy(out.data() + i, &f, 4);
    }
    t.bytes = ck.keep(std::move(out));
  }
}

struct Converted {
  std::vector<float> f32_logits, half_logits;
};

// Writes the (optionally scaled) F32 model and its conversion to `to`; loads both, checks what
// info() reports for the converted one and returns both logits.
Converted convert_and_run(DType to, float scale) {
  Checkpoint ck(kModel);
  const fs::path dir = test::scratch_dir();
  if (scale != 1.0f) scale_f32(ck, scale);
  Model f32 = Model::load(ck.write(dir, "f32.safetensors"));
  Model m = Model::load(write_converted(ck, to, dir));
  EXPECT_EQ(m.geometry(), f32.geometry());
  const ModelInfo& info = m.info();
  EXPECT_EQ(info.parameters, f32.info().parameters);
  EXPECT_EQ(info.weight_bytes * 2, f32.info().weight_bytes);
  EXPECT_EQ(info.dtype_parameters,
            (std::vector<std::pair<DType, uint64_t>>{{to, f32.info().parameters}}));
  Converted r{logits_of(f32), logits_of(m)};
  EXPECT_EQ(r.half_logits.size(), r.f32_logits.size());
  // The recurrent step reads the same converted weights.
  State s = m.new_state();
  std::vector<float> step;
  for (int32_t t : kTokens) step = m.step(t, s);
  EXPECT_LT(test::max_abs_diff(step, r.half_logits), 1e-3);
  std::cout << "[          ] " << dtype_name(to) << " (weights x" << scale
            << ") vs F32: max |logit diff| = " << test::max_abs_diff(r.half_logits, r.f32_logits)
            << "\n";
  return r;
}

TEST(LoaderErrors, Bf16ConversionLoads) {
  // Every weight of the tiny model is exactly representable in bf16 (its low 16 bits are zero),
  // so the plain conversion is lossless and must give bit-identical logits.
  {
    SCOPED_TRACE("lossless");
    Converted c = convert_and_run(DType::BF16, 1.0f);
    EXPECT_EQ(c.half_logits, c.f32_logits);
    EXPECT_EQ(c.f32_logits, reference_logits());
  }
  // Scaled by 1 + 3 * 2^-11 the weights are no longer bf16-exact: the conversion rounds them,
  // and the logits move a little, but not far.
  {
    SCOPED_TRACE("rounded");
    Converted c = convert_and_run(DType::BF16, 1.0f + 3.0f * 0x1p-11f);
    EXPECT_LT(test::max_abs_diff(c.half_logits, c.f32_logits), 0.1);
    EXPECT_NE(c.half_logits, c.f32_logits) << "bit-identical: were the weights converted?";
  }
}

TEST(LoaderErrors, F16ConversionLoads) {
  // 944 of the tiny model's weights are not exactly representable in fp16.
  Converted c = convert_and_run(DType::F16, 1.0f);
  EXPECT_LT(test::max_abs_diff(c.half_logits, c.f32_logits), 1e-3);  // measured 2.4e-7
  EXPECT_NE(c.half_logits, c.f32_logits) << "bit-identical: were the weights converted?";
}

// An MLX-style file (header not padded, so the data section and every matrix start at an odd
// byte) loads and computes exactly the same logits.
TEST(LoaderErrors, UnalignedMlxStyleFileGivesSameLogits) {
  Checkpoint ck(kModel);
  std::string bytes = io::serialize_safetensors(ck.tensors, ck.source.metadata());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  std::string header = bytes.substr(8, n);
  const std::string data = bytes.substr(8 + n);
  while (!header.empty() && header.back() == ' ') header.pop_back();
  if (header.size() % 2 == 0) header += ' ';  // odd: the data section is not even 2-aligned
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff);
  out += header + data;
  const fs::path p = test::scratch_dir() / "mlx.safetensors";
  test::write_file(p, out);
  Model m = Model::load(p.string());
  EXPECT_EQ(logits_of(m), reference_logits());
}

TEST(LoaderErrors, NegativeBlockIndexIsUnknownTensor) {
  Checkpoint ck(kModel);
  ck.add_zeros_f32("blocks.-1.att.x_r", {64});
  expect_checkpoint_error(ck.write(test::scratch_dir()), {"unknown tensors", "blocks.-1.att.x_r"});
}

TEST(LoaderErrors, ZeroLoraRankIsCheckpointError) {
  Checkpoint ck(kModel);
  for (int i = 0; i < 12; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".att.";
    ck.drop(p + "w1");
    ck.drop(p + "w2");
    ck.add(p + "w1", DType::F32, {64, 0}, "");
    ck.add(p + "w2", DType::F32, {0, 64}, "");
  }
  expect_checkpoint_error(ck.write(test::scratch_dir()), {"decay LoRA rank"});
}

// Formats wick does not read are named, not misreported as broken safetensors.
TEST(LoaderErrors, ForeignFormatsAreNamed) {
  const fs::path dir = test::scratch_dir();
  const std::pair<const char*, std::string> cases[] = {
      {"gguf", std::string("GGUF\x03\0\0\0", 8) + std::string(64, '\0')},
      {"ggmf", std::string("fmgg\x65\0\0\0", 8) + std::string(64, '\0')},
      {"legacy", std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8", 12) + std::string(64, '\0')},
  };
  for (auto& [name, bytes] : cases) {
    const fs::path p = dir / (std::string(name) + ".bin");
    test::write_file(p, bytes);
    expect_checkpoint_error(p.string(), {name == std::string("legacy") ? "legacy" : name == std::string("gguf") ? "GGUF" : "rwkv.cpp"});
  }
}

// Deeply nested JSON is refused while parsing (printing it would recurse past the stack).
TEST(LoaderErrors, DeeplyNestedJsonIsRefused) {
  const fs::path dir = test::scratch_dir();
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  std::string header = "{\"a\":{\"dtype\":\"F32\",\"shape\":" + deep + ",\"data_offsets\":[0,0]}}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  test::write_file(dir / "deep.safetensors", file + header);
  EXPECT_THROW(Model::load((dir / "deep.safetensors").string()), FormatError);
  // A shape array longer than any tensor's rank.
  std::string longshape = "{\"a\":{\"dtype\":\"F32\",\"shape\":[" ;
  for (int i = 0; i < 1000; ++i) longshape += (i ? ",1" : "1");
  longshape += "],\"data_offsets\":[0,4]}}";
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((longshape.size() >> (8 * i)) & 0xff);
  test::write_file(dir / "long.safetensors", file + longshape + std::string(4, '\0'));
  EXPECT_THROW(Model::load((dir / "long.safetensors").string()), FormatError);
  // config.json of an HF folder.
  const fs::path hf = hf_folder([](nlohmann::json&) {});
  test::write_file(hf / "config.json", "{\"model_type\": " + deep + "}");
  EXPECT_THROW(Model::load(hf.string()), FormatError);
}

// fla layouts and config flags (docs/naming.md §2 note 1, §4), built from the HF fixture.
struct HfCheckpoint : Checkpoint {
  HfCheckpoint() : Checkpoint("tiny-rwkv7/hf/model.safetensors") {}
  std::string write_folder(const std::function<void(nlohmann::json&)>& edit) {
    const fs::path dir = test::scratch_dir() / "hfx";
    fs::create_directories(dir);
    write(dir);
    nlohmann::json c = nlohmann::json::parse(test::read_file(test::fixture("tiny-rwkv7/hf/config.json")));
    edit(c);
    test::write_file(dir / "config.json", c.dump(2));
    return dir.string();
  }
};

TEST(LoaderErrors, HfLegacyFusedMixesGiveIdenticalLogits) {
  HfCheckpoint ck;
  for (int i = 0; i < 12; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".attn.";
    std::string fused;
    for (const char* m : {"x_r", "x_w", "x_k", "x_v", "x_a", "x_g"}) {
      fused += std::string(ck.find(p + m)->bytes);
      ck.drop(p + m);
    }
    ck.add(p + "x_x", DType::F32, {6, 64}, fused);
  }
  Model m = Model::load(ck.write_folder([](nlohmann::json&) {}));
  EXPECT_EQ(logits_of(m), reference_logits());
}

TEST(LoaderErrors, HfTiedEmbeddingsUseTheEmbeddingAsHead) {
  HfCheckpoint ck;
  ck.drop("lm_head.weight");
  Model tied = Model::load(ck.write_folder([](nlohmann::json& c) { c["tie_word_embeddings"] = true; }));
  // Reference: the official file with head.weight replaced by the embedding.
  Checkpoint ref(kModel);
  const std::string emb(ref.find("emb.weight")->bytes);
  ref.drop("head.weight");
  ref.add("head.weight", DType::F32, {256, 64}, emb);
  Model expected = Model::load(ref.write(test::scratch_dir() / "..", "tied-ref.safetensors"));
  // To rounding, not in bits: a head of its own is packed into panels at load, while a tied head
  // reads the table in place (model/panel_packing.h), and the two orders of summation differ.
  EXPECT_LT(test::max_abs_diff(logits_of(tied), logits_of(expected)), 1e-6);
  EXPECT_GT(test::max_abs_diff(logits_of(tied), reference_logits()), 1e-3);
  // Without the flag a missing lm_head is a missing tensor.
  HfCheckpoint untied;
  untied.drop("lm_head.weight");
  expect_checkpoint_error(untied.write_folder([](nlohmann::json&) {}) + "/model.safetensors",
                          {"head.weight"});
}

TEST(LoaderErrors, HfNormBiasFalseMeansZeroLayerNormBiases) {
  HfCheckpoint ck;
  Checkpoint ref(kModel);  // official file with every LayerNorm bias set to zero
  for (int i = 0; i < 12; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    ck.drop(p + "attn_norm.bias");
    ck.drop(p + "ffn_norm.bias");
    for (const char* n : {".ln1.bias", ".ln2.bias"}) {
      const std::string name = "blocks." + std::to_string(i) + n;
      ref.drop(name);
      ref.add_zeros_f32(name, {64});
    }
  }
  ck.drop("model.layers.0.pre_norm.bias");
  ck.drop("model.norm.bias");
  for (const char* name : {"blocks.0.ln0.bias", "ln_out.bias"}) {
    ref.drop(name);
    ref.add_zeros_f32(name, {64});
  }
  Model m = Model::load(ck.write_folder([](nlohmann::json& c) { c["norm_bias"] = false; }));
  Model expected = Model::load(ref.write(test::scratch_dir() / "..", "nobias-ref.safetensors"));
  EXPECT_EQ(logits_of(m), logits_of(expected));
  EXPECT_GT(test::max_abs_diff(logits_of(m), reference_logits()), 1e-3);
}

TEST(LoaderErrors, HfNormFirstFalseSkipsLn0AndContradictionsAreRefused) {
  HfCheckpoint ck;
  ck.drop("model.layers.0.pre_norm.weight");
  ck.drop("model.layers.0.pre_norm.bias");
  Model m = Model::load(ck.write_folder([](nlohmann::json& c) { c["norm_first"] = false; }));
  EXPECT_GT(test::max_abs_diff(logits_of(m), reference_logits()), 1e-3);
  // pre_norm present although the config says there is none: the config is not for these weights.
  HfCheckpoint both;
  const std::string dir = both.write_folder([](nlohmann::json& c) { c["norm_first"] = false; });
  expect_checkpoint_error(dir, {"norm_first", "pre_norm"}, dir + "/config.json");
}

}  // namespace
}  // namespace wick
