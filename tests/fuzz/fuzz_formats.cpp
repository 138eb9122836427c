// Targets for wick's own and the ecosystem's small formats: .rwkvq, tokenizers, state files,
// activation statistics, quantiser configs.
#include <cmath>
#include <cstring>

#include "fuzz/fuzz_models.h"
#include "fuzz/fuzz_target.h"
#include "io/mapped_file.h"
#include "quant/dequant.h"
#include "quant/quant_config.h"
#include "quant/rwkvq.h"
#include "wick/act_stats_file.h"
#include "wick/errors.h"
#include "wick/state_file.h"
#include "wick/tokenizer.h"

namespace wick::fuzz {

void check_rwkvq(Bytes in) {
  {
    const quant::RwkvqFile f =
        quant::RwkvqFile::open(io::MappedFile::borrow(in.data(), in.size(), "fuzz.rwkvq"));
    uint64_t dequantised = 0;
    for (const quant::QuantTensor& t : f.tensors()) {
      WICK_FUZZ_EXPECT(f.find(t.key) == &t, "find('" + t.key + "') is another tensor");
      WICK_FUZZ_EXPECT(t.numel() >= 0 && t.rows() >= 0 && t.cols() >= 0, t.describe());
      WICK_FUZZ_EXPECT(t.stored_bytes() <= in.size(), t.key + ": more stored bytes than the file");
      // Decoding reads only what the buffers hold (bounded work: the first small tensors).
      if (dequantised + static_cast<uint64_t>(t.numel()) > (uint64_t{1} << 22)) continue;
      dequantised += static_cast<uint64_t>(t.numel());
      const std::vector<float> w = quant::dequantize(t);
      WICK_FUZZ_EXPECT(w.size() == static_cast<size_t>(t.numel()), t.key + ": dequantised size");
    }
  }
  check_model_file(input_file(in, ".rwkvq"));
}

namespace {

// Encodes a few texts (and a slice of the input itself): ids in range, and the ids decode.
void check_tokenizer(const Tokenizer& tok, Bytes in) {
  WICK_FUZZ_EXPECT(tok.vocab_size() > 0, "a tokenizer with an empty vocabulary");
  const std::string texts[] = {"Hello, world! 123", "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
                               "\xff\xfe bad \xc3", "\n\n  \t", std::string(as_text(in).substr(0, 256))};
  for (const std::string& text : texts) {
    std::vector<int32_t> ids;
    try {
      ids = tok.encode(text);
    } catch (const Error&) {
      continue;  // a tokenizer may refuse text it cannot represent, by a typed error
    }
    for (int32_t id : ids)
      WICK_FUZZ_EXPECT(id >= 0 && id < tok.vocab_size(),
                       "encode produced id " + std::to_string(id) + " outside [0, " +
                           std::to_string(tok.vocab_size()) + ")");
    (void)tok.decode(ids);  // a typed error at most
  }
}

}  // namespace

void check_tokenizer_json(Bytes in) {
  const std::unique_ptr<Tokenizer> t = load_tokenizer(input_file(in, "-tokenizer.json"));
  check_tokenizer(*t, in);
}

void check_world_vocab(Bytes in) {
  const std::unique_ptr<Tokenizer> t = load_world_tokenizer(input_file(in, "-vocab.txt"));
  check_tokenizer(*t, in);
}

namespace {

void check_state_for(const Model& model, Bytes in) {
  LoadedState l = parse_state(as_text(in), "fuzz.state", model, /*allow_other_base=*/true);
  const Geometry& g = model.geometry();
  const State& s = l.state;
  WICK_FUZZ_EXPECT(s.n_layer() == g.n_layer && s.n_embd() == g.n_embd && s.n_head() == g.n_head &&
                       s.head_size() == g.head_size && s.n_attn() == g.n_attn,
                   "a loaded state of another geometry");
  WICK_FUZZ_EXPECT(s.kv_length() >= 0 && (g.n_attn > 0 || s.kv_length() == 0), "kv_length");
  for (size_t i = 0; i < s.size(); ++i)
    WICK_FUZZ_EXPECT(std::isfinite(s.data()[i]), "a non-finite state value was accepted");
  const Continuation& c = l.info.continuation;
  WICK_FUZZ_EXPECT(!c.has_logits() || c.logits.size() == static_cast<size_t>(g.vocab),
                   "continuation logits of another size");
  if (c.sampler) {
    int32_t previous = -1;
    for (const auto& [id, w] : c.sampler->history) {
      WICK_FUZZ_EXPECT(id > previous && id < g.vocab && std::isfinite(w) && w >= 0,
                       "a sampler history entry out of range was accepted");
      previous = id;
    }
  }
  // The state continues: one step from it.
  State run = s;
  if (model.attention().kv_max > 0 && run.kv_length() >= model.attention().kv_max) return;
  WICK_FUZZ_EXPECT(model.step(1, run).size() == static_cast<size_t>(g.vocab), "step logits size");
}

}  // namespace

void check_state_file(Bytes in) { check_state_for(tiny_model(), in); }
void check_state_file_rwkvx(Bytes in) { check_state_for(rwkvx_model(), in); }

void check_act_stats(Bytes in) {
  std::map<std::string, std::string> meta;
  const ActStats stats = load_act_stats(input_file(in, ".safetensors"), &meta);
  WICK_FUZZ_EXPECT(!stats.empty(), "statistics without a tensor were accepted");
  for (const auto& [key, v] : stats) {
    WICK_FUZZ_EXPECT(!v.empty(), "'" + key + "': an empty vector was accepted");
    for (float x : v)
      WICK_FUZZ_EXPECT(std::isfinite(x) && x >= 0, "'" + key + "': a value " + std::to_string(x) +
                                                       " was accepted (E[x^2] is finite, >= 0)");
  }
}

void check_quant_config(Bytes in) {
  const quant::QuantConfig c = quant::QuantConfig::from_file_text(as_text(in), "fuzz-config.json");
  const auto& groups = quant::quant_groups();
  for (const auto& [group, bits] : c.bits) {
    WICK_FUZZ_EXPECT(std::find(groups.begin(), groups.end(), group) != groups.end(),
                     "an unknown group '" + group + "' was accepted");
    WICK_FUZZ_EXPECT((bits >= 2 && bits <= 8) || bits == 16,
                     "'" + group + "': bits " + std::to_string(bits) + " were accepted");
  }
  // The config round-trips through its JSON form.
  const quant::QuantConfig again = quant::QuantConfig::from_json(
      nlohmann::json::parse(c.to_json().dump()), "fuzz-config.json (round trip)");
  WICK_FUZZ_EXPECT(again.to_json() == c.to_json(), "the config does not round-trip");
}

}  // namespace wick::fuzz
