// Cached prefixes as bytes (wick/prefix_codec.h).
#include "wick/prefix_codec.h"

#include <bit>
#include <cstring>

#include "wick/errors.h"
#include "wick/state_file.h"

namespace wick {
namespace {

static_assert(std::endian::native == std::endian::little, "values are written little-endian");

constexpr std::string_view kMagic = "WICKPFX2";
constexpr uint32_t kMaxScope = 65536;
constexpr uint32_t kMaxTokens = uint32_t{1} << 28;
constexpr const char* kWhat = "cached prefix value";

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A cursor over untrusted bytes: every read is checked against what is left.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  template <typename T>
  T get(const char* field) {
    T v;
    std::memcpy(&v, take(sizeof v, field).data(), sizeof v);
    return v;
  }
  std::string_view take(uint64_t n, const char* field) {
    if (n > b_.size() - at_)
      throw FormatError(kWhat, "", std::to_string(n) + " bytes of " + field,
                        std::to_string(b_.size() - at_) + " bytes left of " +
                            std::to_string(b_.size()) + " (truncated or damaged)");
    std::string_view s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  size_t left() const { return b_.size() - at_; }

 private:
  std::string_view b_;
  size_t at_ = 0;
};

}  // namespace

std::string encode_cached_prefix(const CachedPrefix& entry, const Model& model) {
  if (entry.tokens.empty() || entry.tokens.size() > kMaxTokens || entry.scope.size() > kMaxScope)
    throw InputError("encode_cached_prefix: an entry needs 1.." + std::to_string(kMaxTokens) +
                     " token ids and a scope of at most " + std::to_string(kMaxScope) +
                     " bytes; found " + std::to_string(entry.tokens.size()) + " ids and " +
                     std::to_string(entry.scope.size()) + " bytes");
  if (entry.logits.size() != static_cast<size_t>(model.geometry().vocab))
    throw InputError("encode_cached_prefix: expected " + std::to_string(model.geometry().vocab) +
                     " logits (the vocabulary), found " + std::to_string(entry.logits.size()));
  StateFileInfo info;
  info.n_tokens = static_cast<int64_t>(entry.tokens.size());
  info.note = "wick prefix cache";
  info.continuation.logits = entry.logits;
  const std::string state = serialize_state(entry.state, model, info);
  std::string out;
  out.reserve(kMagic.size() + 16 + entry.scope.size() + entry.tokens.size() * 4 + state.size());
  out.append(kMagic);
  put<uint32_t>(out, static_cast<uint32_t>(entry.scope.size()));
  out.append(entry.scope);
  put<uint32_t>(out, static_cast<uint32_t>(entry.tokens.size()));
  out.append(reinterpret_cast<const char*>(entry.tokens.data()), entry.tokens.size() * 4);
  put<uint64_t>(out, state.size());
  out.append(state);
  return out;
}

CachedPrefix decode_cached_prefix(std::string_view bytes, const Model& model,
                                  std::string_view scope, std::span<const int32_t> tokens) {
  Reader r(bytes);
  const std::string_view magic = r.take(kMagic.size(), "magic");
  if (magic != kMagic)
    throw FormatError(kWhat, "", "the magic \"WICKPFX2\"",
                      "other bytes (not a wick prefix value, or another format version)");
  CachedPrefix e;
  const uint32_t S = r.get<uint32_t>("scope length");
  if (S > kMaxScope)
    throw FormatError(kWhat, "", "a scope of at most " + std::to_string(kMaxScope) + " bytes",
                      std::to_string(S));
  e.scope = std::string(r.take(S, "scope"));
  if (e.scope != scope)
    throw StateFileError(kWhat,
                         "it belongs to another cache scope (other weights, precision, "
                         "quantisation, attention options, adapters, initial state or "
                         "kernels): expected '" +
                             std::string(scope) + "', found '" + e.scope + "'");
  const uint32_t n = r.get<uint32_t>("token count");
  if (n == 0 || n != tokens.size())
    throw FormatError(kWhat, "",
                      std::to_string(tokens.size()) + " token ids (the prefix asked for)",
                      std::to_string(n));
  const std::string_view ids = r.take(uint64_t{n} * 4, "token ids");
  e.tokens.resize(n);
  std::memcpy(e.tokens.data(), ids.data(), ids.size());
  if (!std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin()))
    throw StateFileError(kWhat,
                         "its token ids are not the prefix asked for (a key collision or "
                         "a value written under the wrong key)");
  const uint64_t F = r.get<uint64_t>("state file length");
  if (F != r.left())
    throw FormatError(kWhat, "", "a state file of " + std::to_string(F) + " bytes ending the value",
                      std::to_string(r.left()) + " bytes left");
  LoadedState st = parse_state(r.take(F, "state file"), kWhat, model, /*allow_other_base=*/false);
  if (st.info.n_tokens != static_cast<int64_t>(n))
    throw StateFileError(kWhat, "its state says it absorbed " + std::to_string(st.info.n_tokens) +
                                    " tokens, but the value holds " + std::to_string(n) + " ids");
  // The state file checked the logits' shape (the vocabulary) and that they are finite.
  if (!st.info.continuation.has_logits() || st.info.continuation.sampler)
    throw StateFileError(
        kWhat,
        "its state file should carry the logits of the prefix's last "
        "position and no sampler state; found " +
            std::string(st.info.continuation.has_logits() ? "a sampler state" : "no logits"));
  e.state = std::move(st.state);
  e.logits = std::move(st.info.continuation.logits);
  return e;
}

}  // namespace wick
