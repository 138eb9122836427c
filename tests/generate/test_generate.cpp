// The generation loop (docs/tasks.md §2, tests G1-G17 of §9): byte utilities, stop tokens and
// strings, streaming, cancellation, the state rule, continuing from a state, chat format.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "generate/row_decoder.h"
#include "generate/stop_search.h"
#include "test_util.h"
#include "wick/chat.h"
#include "wick/errors.h"
#include "wick/generate.h"
#include "wick/model.h"
#include "wick/tokenizer.h"

namespace wick::test {
namespace {

bool valid_utf8(std::string_view s) { return utf8_replace_invalid(s) == s; }

// ---- G1-G3: byte utilities ------------------------------------------------------------------

TEST(Utf8Boundary, NeverCutsACodePointNeverLagsMoreThanThreeBytes) {
  const std::string text = "Привет, мир! 日本語 🚀 ok";
  for (size_t limit = 0; limit <= text.size() + 2; ++limit) {
    const size_t b = utf8_boundary(text, limit);
    const size_t end = std::min(limit, text.size());
    EXPECT_LE(b, end);
    EXPECT_GE(b + 3, end) << limit;
    EXPECT_TRUE(valid_utf8(text.substr(0, b))) << limit;
  }
  const std::string ascii = "plain ascii text";
  for (size_t limit = 0; limit <= ascii.size(); ++limit) EXPECT_EQ(utf8_boundary(ascii, limit), limit);
  // A lone lead byte at the end is held; an invalid byte is not waited on.
  EXPECT_EQ(utf8_boundary("a\xE6\x97", 3), 1u);
  EXPECT_EQ(utf8_boundary("a\xFF", 2), 2u);
}

TEST(Utf8Boundary, ChunksAtEveryTwoBytesConcatenateBack) {
  const std::string text = "ёж 🦔 съел ёлку";
  std::string out;
  size_t emitted = 0;
  for (size_t limit = 2; emitted < text.size(); limit += 2) {
    const size_t end = std::max(emitted, utf8_boundary(text, limit));
    const std::string chunk = text.substr(emitted, end - emitted);
    EXPECT_TRUE(valid_utf8(chunk));
    out += chunk;
    emitted = end;
    if (limit > text.size() + 4) break;
  }
  EXPECT_EQ(out, text);
}

TEST(StopSearch, EarliestOccurrenceWinsAndOverlapsAreFound) {
  using gen::find_stop;
  gen::StopHit h = find_stop("abc STOP def END", 0, {"END", "STOP"});
  ASSERT_TRUE(h.found());
  EXPECT_EQ(h.pos, 4u);
  EXPECT_EQ(h.index, 1u);
  // Equal starts: the string listed first wins.
  h = find_stop("xxABCD", 0, {"ABC", "AB"});
  EXPECT_EQ(h.index, 0u);
  h = find_stop("xxABCD", 0, {"AB", "ABC"});
  EXPECT_EQ(h.index, 0u);
  EXPECT_FALSE(find_stop("abc", 0, {"zzz"}).found());
  EXPECT_FALSE(find_stop("ab", 0, {"abc"}).found());
  EXPECT_FALSE(find_stop("", 0, {"a"}).found());
  EXPECT_FALSE(find_stop("abc", 0, {""}).found());
  // A needle split across two appends is found when searching from hold = len(needle) - 1 bytes
  // before the appended part (what the loop does).
  std::string stream = "hello ST";
  const size_t from = stream.size() - 3;
  stream += "OP!";
  h = find_stop(stream, from, {"STOP"});
  ASSERT_TRUE(h.found());
  EXPECT_EQ(h.pos, 6u);
  // Searching from an offset still finds a match that starts exactly there.
  EXPECT_EQ(find_stop("aaSTOP", 2, {"STOP"}).pos, 2u);
  EXPECT_FALSE(find_stop("aaSTOP", 3, {"STOP"}).found());
  const std::string ru = "текст КОНЕЦ хвост";
  h = find_stop(ru, 0, {"КОНЕЦ"});
  ASSERT_TRUE(h.found());
  EXPECT_EQ(ru.substr(0, h.pos), "текст ");
}

// ---- Generation on the tiny byte-level model --------------------------------------------------

class Generate : public ::testing::Test {
 protected:
  Model model_ = Model::load_default();
  ByteTokenizer tok_;
  const std::string prompt_ = "The quick brown fox jumps over the lazy dog. Once upon a time";

  std::vector<int32_t> ids(const std::string& s) const { return tok_.encode(s); }

  GenerationConfig sampled(uint64_t seed, int n) const {
    GenerationConfig c;
    c.max_tokens = n;
    c.sampling.temperature = 1.0f;
    c.sampling.top_p = 0.9f;
    c.sampling.seed = seed;
    return c;
  }

  // prefill(prompt) then step(t) for each t: the reference state of the state rule.
  State rebuilt(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                const State* start = nullptr) const {
    State s = start ? *start : model_.new_state();
    model_.forward(prompt, s);
    for (int32_t t : tokens) model_.step(t, s);
    return s;
  }
};

TEST_F(Generate, DefaultsAreGreedyWithoutStops) {
  GenerationConfig c;
  EXPECT_EQ(c.sampling.temperature, 0.f);
  EXPECT_FALSE(c.penalize_prompt);
  EXPECT_TRUE(c.stop_strings.empty());
  EXPECT_TRUE(c.stop_tokens.empty());
  EXPECT_EQ(c.max_tokens, 128);
}

TEST_F(Generate, InvalidInputsAreRefusedBeforeTheStateChanges) {
  State st = model_.new_state();
  const State zero = st;
  GenerationConfig c;
  EXPECT_THROW(generate_tokens(model_, tok_, {}, c, st), InputError);
  c.stop_strings = {""};
  EXPECT_THROW(generate_tokens(model_, tok_, ids("a"), c, st), InputError);
  c = {};
  c.max_tokens = -1;
  EXPECT_THROW(generate_tokens(model_, tok_, ids("a"), c, st), InputError);
  c = {};
  c.sampling.temperature = -0.5f;
  EXPECT_THROW(generate_tokens(model_, tok_, ids("a"), c, st), InputError);
  c = {};
  c.stop_tokens = {256};
  EXPECT_THROW(generate_tokens(model_, tok_, ids("a"), c, st), InputError);
  c = {};
  const std::vector<int32_t> bad = {1, 2, 300};
  EXPECT_THROW(generate_tokens(model_, tok_, bad, c, st), InputError);
  EXPECT_TRUE(st == zero);
  c.max_tokens = -1;
  EXPECT_THROW(generate(model_, tok_, "a", c), InputError);  // the one-shot form, no state
  c = {};
  // Both forms refuse an empty prompt before the engine sees it (whose own message goes on about
  // state files: there is no state here to continue).
  for (int one_shot = 0; one_shot < 2; ++one_shot) {
    try {
      if (one_shot)
        generate(model_, tok_, "", c);
      else
        generate_tokens(model_, tok_, {}, c, st);
      ADD_FAILURE() << "an empty prompt was accepted, one_shot " << one_shot;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("empty prompt"), std::string::npos) << one_shot;
      EXPECT_NE(std::string(e.what()).find("before the first token)"), std::string::npos)
          << one_shot << ": " << e.what();
    }
  }
}

TEST_F(Generate, MaxTokensZeroOnlyAbsorbsThePrompt) {
  GenerationConfig c;
  c.max_tokens = 0;
  State st = model_.new_state();
  const GenerationResult r = generate_tokens(model_, tok_, ids(prompt_), c, st);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.stop_reason, StopReason::kMaxTokens);
  EXPECT_TRUE(st == rebuilt(ids(prompt_), {}));
  EXPECT_FALSE(st == model_.new_state());
}

TEST_F(Generate, GreedyIsReproducibleAndPromptDependent) {
  GenerationConfig c;
  c.max_tokens = 12;
  const GenerationResult a = generate(model_, tok_, "The capital of France is", c);
  const GenerationResult b = generate(model_, tok_, "The capital of France is", c);
  const GenerationResult d = generate(model_, tok_, "Рецепт борща начинается с", c);
  EXPECT_EQ(a.tokens.size(), 12u);
  EXPECT_EQ(a.stop_reason, StopReason::kMaxTokens);
  EXPECT_FALSE(a.text.empty());
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NE(a.tokens, d.tokens);
}

TEST_F(Generate, GreedyEqualsAHandWrittenPrefillAndStepLoop) {
  GenerationConfig c;
  c.max_tokens = 10;
  State st = model_.new_state();
  const GenerationResult r = generate_tokens(model_, tok_, ids(prompt_), c, st);
  State ref = model_.new_state();
  std::vector<float> logits = model_.forward(ids(prompt_), ref);
  std::vector<int32_t> hand;
  for (int i = 0; i < 10; ++i) {
    hand.push_back(argmax(logits));
    logits = model_.step(hand.back(), ref);
  }
  EXPECT_EQ(r.tokens, hand);
  EXPECT_TRUE(st == ref);
  // The one-shot form starts from the zero state and copies no state in or out (generate.cpp):
  // the same tokens, and the same logits after the last one (which a start from another state
  // would change even where the greedy tokens agree); another prompt changes them.
  const GenerationResult one_shot = generate(model_, tok_, prompt_, c);
  EXPECT_EQ(one_shot.tokens, hand);
  ASSERT_TRUE(one_shot.continuation.has_logits());
  EXPECT_EQ(one_shot.continuation.logits, r.continuation.logits);
  EXPECT_EQ(one_shot.continuation.logits, logits);
  EXPECT_NE(generate(model_, tok_, "Another prompt entirely", c).continuation.logits, logits);
}

TEST_F(Generate, StateAfterGenerateIsPromptPlusEveryReturnedTokenExactly) {
  for (uint64_t seed : {0u, 5u}) {
    GenerationConfig c = sampled(seed, 16);
    State st = model_.new_state();
    const GenerationResult r = generate_tokens(model_, tok_, ids(prompt_), c, st);
    ASSERT_EQ(r.tokens.size(), 16u);
    EXPECT_TRUE(st == rebuilt(ids(prompt_), r.tokens));
    // Early exit on a stop token: the stop token is absorbed too (the catch-up step).
    c.stop_tokens = {r.tokens[3]};
    State st2 = model_.new_state();
    const GenerationResult s = generate_tokens(model_, tok_, ids(prompt_), c, st2);
    EXPECT_EQ(s.stop_reason, StopReason::kStopToken);
    EXPECT_EQ(s.stop_token, r.tokens[3]);
    EXPECT_LE(s.tokens.size(), 4u);
    EXPECT_TRUE(st2 == rebuilt(ids(prompt_), s.tokens));
    EXPECT_FALSE(st2 == st);
  }
}

TEST_F(Generate, StopTokenEndsAtItsFirstOccurrenceAndItsBytesAreNotText) {
  GenerationConfig c = sampled(3, 24);
  const GenerationResult free_run = generate(model_, tok_, prompt_, c);
  const int32_t stop = free_run.tokens[3];
  size_t first = 0;
  while (free_run.tokens[first] != stop) ++first;
  c.stop_tokens = {stop};
  const GenerationResult r = generate(model_, tok_, prompt_, c);
  EXPECT_EQ(r.stop_reason, StopReason::kStopToken);
  const std::vector<int32_t> expect(free_run.tokens.begin(), free_run.tokens.begin() + first + 1);
  EXPECT_EQ(r.tokens, expect);
  EXPECT_EQ(r.text, utf8_replace_invalid(tok_.decode(std::span(expect).first(first))));
}

TEST_F(Generate, StopStringFromTheUnconstrainedOutputIsCutAndStreamedTextMatches) {
  GenerationConfig c;  // greedy: the tiny model's greedy output is plain ASCII
  c.max_tokens = 40;
  const GenerationResult free_run = generate(model_, tok_, prompt_, c);
  ASSERT_EQ(free_run.text, tok_.decode(free_run.tokens));
  ASSERT_GE(free_run.text.size(), 12u);
  // Two bytes from the middle of the output: the last byte of one token and the first of the next.
  const std::string stop = free_run.text.substr(8, 2);
  c.stop_strings = {"never appears \x01", stop};
  std::string streamed;
  State st = model_.new_state();
  const GenerationResult r = generate_tokens(model_, tok_, ids(prompt_), c, st,
                                             [&](std::string_view chunk, int32_t) {
                                               streamed += chunk;
                                               return true;
                                             });
  EXPECT_EQ(r.stop_reason, StopReason::kStopString);
  EXPECT_EQ(r.stop_string, stop);
  EXPECT_EQ(r.text.find(stop), std::string::npos);
  EXPECT_LT(r.tokens.size(), 40u);
  EXPECT_EQ(r.text, free_run.text.substr(0, free_run.text.find(stop)));
  EXPECT_EQ(streamed, r.text);
  // The tokens that formed the stop string stay in `tokens` and in the state.
  EXPECT_EQ(tok_.decode(r.tokens), free_run.text.substr(0, r.text.size() + 2));
  EXPECT_TRUE(st == rebuilt(ids(prompt_), r.tokens));
}

TEST_F(Generate, ImpossibleStopStringHoldsThenFlushesTheTail) {
  GenerationConfig c = sampled(2, 30);
  const GenerationResult plain = generate(model_, tok_, prompt_, c);
  c.stop_strings = {"\x01\x02\x03 never"};
  std::string streamed;
  std::vector<std::string> chunks;
  State st = model_.new_state();
  const GenerationResult r = generate_tokens(model_, tok_, ids(prompt_), c, st,
                                             [&](std::string_view chunk, int32_t) {
                                               streamed += chunk;
                                               chunks.emplace_back(chunk);
                                               return true;
                                             });
  EXPECT_EQ(r.stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(r.tokens, plain.tokens);
  EXPECT_EQ(streamed, r.text);
  // The output never contains \x01: only incomplete UTF-8 is held back, never a stop-string tail
  // (it used to hold the last len - 1 = 9 bytes back throughout).
  const std::string raw = tok_.decode(r.tokens);
  ASSERT_EQ(raw.find('\x01'), std::string::npos);
  std::string so_far;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    so_far += chunks[i];
    const std::string prefix = tok_.decode(std::span(r.tokens).first(i + 1));
    EXPECT_EQ(so_far, utf8_replace_invalid(prefix.substr(0, utf8_boundary(prefix, prefix.size()))))
        << i;
  }
}

// Streaming holds back only a tail that can still become a stop string: with the stop string
// "<c>\x01", a byte <c> is held until the next byte shows it is not followed by \x01; every
// other byte is streamed with its own token (it used to lag by len - 1 bytes throughout).
TEST_F(Generate, StreamingHoldsBackOnlyBytesThatCanStillBecomeAStopString) {
  GenerationConfig c;  // greedy: plain ASCII, one byte per token
  c.max_tokens = 40;
  const GenerationResult free_run = generate(model_, tok_, prompt_, c);
  ASSERT_EQ(free_run.text.size(), 40u);
  const char held = free_run.text[5];
  c.stop_strings = {std::string(1, held) + "\x01"};
  std::vector<std::string> so_far;
  std::vector<int32_t> ids_seen;
  std::string streamed;
  State st = model_.new_state();
  const GenerationResult r = generate_tokens(model_, tok_, ids(prompt_), c, st,
                                             [&](std::string_view chunk, int32_t id) {
                                               streamed += chunk;
                                               so_far.push_back(streamed);
                                               ids_seen.push_back(id);
                                               return true;
                                             });
  EXPECT_EQ(r.text, free_run.text);
  EXPECT_EQ(streamed, r.text);
  // One call per token, and a final flush only when the last byte was held.
  const bool flushed = free_run.text.back() == held;
  ASSERT_EQ(so_far.size(), flushed ? 41u : 40u);
  for (size_t i = 0; i < 40; ++i) {
    const size_t shown = free_run.text[i] == held ? i : i + 1;
    EXPECT_EQ(so_far[i], free_run.text.substr(0, shown)) << i;
    EXPECT_EQ(ids_seen[i], r.tokens[i]) << i;  // `token` is the id generated at that step
  }
  if (flushed) EXPECT_EQ(ids_seen[40], r.tokens.back());
}

TEST_F(Generate, CallbackReturningFalseOnItsFifthCallCancels) {
  GenerationConfig c = sampled(4, 20);
  int calls = 0;
  State st = model_.new_state();
  const GenerationResult r = generate_tokens(model_, tok_, ids(prompt_), c, st,
                                             [&](std::string_view, int32_t) { return ++calls < 5; });
  EXPECT_EQ(r.stop_reason, StopReason::kCancelled);
  EXPECT_EQ(r.tokens.size(), 5u);
  EXPECT_EQ(calls, 5);  // no final flush after a cancel
  EXPECT_TRUE(st == rebuilt(ids(prompt_), r.tokens));
}

TEST_F(Generate, SampledOutputIsReproducibleAndSeedDependent) {
  const GenerationResult a = generate(model_, tok_, prompt_, sampled(1, 24));
  const GenerationResult b = generate(model_, tok_, prompt_, sampled(1, 24));
  const GenerationResult d = generate(model_, tok_, prompt_, sampled(2, 24));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.text, b.text);
  EXPECT_NE(a.tokens, d.tokens);
  // A different prompt with the same seed gives different text.
  const GenerationResult e = generate(model_, tok_, "Another prompt entirely", sampled(1, 24));
  EXPECT_NE(a.text, e.text);
}

TEST_F(Generate, TopKOneAndTinyTemperatureEqualGreedy) {
  GenerationConfig greedy;
  greedy.max_tokens = 16;
  const GenerationResult g = generate(model_, tok_, prompt_, greedy);
  for (uint64_t seed : {0u, 1u, 2u}) {
    GenerationConfig k1 = sampled(seed, 16);
    k1.sampling.top_p = 1.f;
    k1.sampling.top_k = 1;
    EXPECT_EQ(generate(model_, tok_, prompt_, k1).tokens, g.tokens);
    GenerationConfig cold = sampled(seed, 16);
    cold.sampling.top_p = 1.f;
    cold.sampling.temperature = 1e-6f;
    EXPECT_EQ(generate(model_, tok_, prompt_, cold).tokens, g.tokens);
  }
  EXPECT_NE(generate(model_, tok_, prompt_, sampled(0, 16)).tokens, g.tokens);
}

TEST_F(Generate, ContinuingFromAStateEqualsOnePassOverBothPrompts) {
  const std::vector<int32_t> A = ids("The quick brown fox "), B = ids("jumps over the lazy dog");
  std::vector<int32_t> AB = A;
  AB.insert(AB.end(), B.begin(), B.end());
  // Sampled (the tiny model's greedy output is " the the ..." from almost any prompt).
  GenerationConfig c = sampled(21, 12);
  State s = model_.new_state();
  model_.forward(A, s);
  const State after_a = s;
  const GenerationResult cont = generate_tokens(model_, tok_, B, c, s);
  State fresh = model_.new_state();
  const GenerationResult whole = generate_tokens(model_, tok_, AB, c, fresh);
  EXPECT_EQ(cont.tokens, whole.tokens);
  EXPECT_LE(max_abs_diff(std::vector<float>(s.data(), s.data() + s.size()),
                         std::vector<float>(fresh.data(), fresh.data() + fresh.size())),
            1e-5);
  EXPECT_TRUE(s == rebuilt(B, cont.tokens, &after_a));
  State zero = model_.new_state();
  const GenerationResult only_b = generate_tokens(model_, tok_, B, c, zero);
  // The tiny model forgets a 20-byte prefix quickly (same sampled tokens here), but the state
  // still carries it.
  EXPECT_FALSE(zero == s);
  // An explicit zero state equals passing none.
  EXPECT_EQ(generate(model_, tok_, "jumps over the lazy dog", c).tokens, only_b.tokens);
  EXPECT_FALSE(only_b.tokens.empty());
}

// ---- Scripted logits: World tokens the tiny model cannot produce ------------------------------

// Runs the loop body with logits that force the given ids (greedy), as the drivers do.
struct Scripted {
  const Tokenizer& tok;
  GenerationConfig config;
  std::vector<std::string> chunks;
  bool cancel_after_first = false;

  GenerationResult run(const std::vector<int32_t>& script) {
    const int V = 65536;
    const std::vector<int32_t> prompt = {33};
    gen::RowDecoder row(config, tok, V, prompt);
    ChunkCallback cb = [&](std::string_view c, int32_t) {
      chunks.emplace_back(c);
      return !cancel_after_first;
    };
    size_t i = 0;
    while (!row.finished() && i < script.size()) {
      std::vector<float> logits(V, 0.f);
      logits[script[i++]] = 10.f;
      row.next(logits, cb);
    }
    return row.finish(cb);
  }
  std::string streamed() const {
    std::string s;
    for (const auto& c : chunks) s += c;
    return s;
  }
};

TEST(GenerateScripted, StopStringInsideOneTokenWithExtraBytes) {
  auto world = default_world_tokenizer();
  ASSERT_EQ(world->decode(std::vector<int32_t>{3328}), "\n\n\n");
  ASSERT_EQ(world->decode(std::vector<int32_t>{3329}), "\n\n ");
  ASSERT_EQ(world->decode(std::vector<int32_t>{3336}), " \n\n");
  const int32_t hello = world->encode("Hello")[0];
  for (int32_t id : {3328, 3329, 3336}) {
    Scripted s{*world, {}};
    s.config.max_tokens = 10;
    s.config.stop_strings = {"\n\n"};
    const GenerationResult r = s.run({hello, id, hello, hello});
    EXPECT_EQ(r.stop_reason, StopReason::kStopString) << id;
    EXPECT_EQ(r.tokens, (std::vector<int32_t>{hello, id})) << id;
    EXPECT_EQ(r.text, id == 3336 ? "Hello " : "Hello") << id;
    EXPECT_EQ(s.streamed(), r.text) << id;
  }
  // Without the stop string the bytes pass through.
  Scripted plain{*world, {}};
  plain.config.max_tokens = 2;
  EXPECT_EQ(plain.run({hello, 3336}).text, "Hello \n\n");
}

TEST(GenerateScripted, ACharacterSplitOverTokensNeverReachesTheCallbackHalfDone) {
  auto world = default_world_tokenizer();
  // "日" = E6 97 A5 and "🦔" = F0 9F A6 94 fed one byte token at a time.
  const std::string text = "a日b🦔c";
  std::vector<int32_t> script;
  for (unsigned char ch : text) {
    const std::vector<int32_t> one = world->encode(std::string(1, static_cast<char>(ch)));
    ASSERT_EQ(one.size(), 1u);
    script.push_back(one[0]);
  }
  Scripted s{*world, {}};
  s.config.max_tokens = static_cast<int>(script.size());
  const GenerationResult r = s.run(script);
  EXPECT_EQ(r.text, text);
  EXPECT_EQ(s.streamed(), text);
  for (const std::string& c : s.chunks) EXPECT_TRUE(valid_utf8(c)) << c.size();
  EXPECT_GT(std::count(s.chunks.begin(), s.chunks.end(), std::string()), 0);
  // Cut off inside a character: the final flush passes the incomplete bytes as U+FFFD.
  Scripted cut{*world, {}};
  cut.config.max_tokens = 2;
  const GenerationResult rc = cut.run({script[0], script[1]});
  EXPECT_EQ(rc.text, "a\xEF\xBF\xBD");
  EXPECT_EQ(cut.streamed(), rc.text);
}

TEST(GenerateScripted, CancelledTextKeepsTheHeldTailThatWasNeverStreamed) {
  auto world = default_world_tokenizer();
  const std::vector<int32_t> ab = world->encode("ab");
  Scripted s{*world, {}};
  s.config.max_tokens = 5;
  s.config.stop_strings = {"xyz"};
  s.cancel_after_first = true;
  const GenerationResult r = s.run(ab);
  EXPECT_EQ(r.stop_reason, StopReason::kCancelled);
  EXPECT_EQ(r.tokens.size(), 1u);
  EXPECT_EQ(r.text, world->decode(std::vector<int32_t>{ab[0]}));
  EXPECT_EQ(s.chunks.size(), 1u);
}

// ---- Chat format (C1, C2) --------------------------------------------------------------------

TEST(ChatFormat, MessageCleaningAndWorldIds) {
  EXPECT_EQ(chat_user_turn("  a\r\n\r\nb  "), "User: a\nb\n\nAssistant:");
  auto world = default_world_tokenizer();
  EXPECT_EQ(world->encode(chat_user_turn("  a\r\n\r\nb  ")),
            (std::vector<int32_t>{24281, 59, 332, 11, 99, 261, 5585, 41693, 59}));
  EXPECT_EQ(chat_clean_message(" \n\t "), "");
  EXPECT_EQ(chat_clean_message("x\n\n\ny"), "x\ny");
  EXPECT_NE(chat_user_turn("a"), chat_user_turn("b"));
}

TEST_F(Generate, TwoChatTurnsThroughTheStateEqualOnePassOverTheTranscript) {
  GenerationConfig c;
  c.max_tokens = 16;
  c.stop_strings = {std::string(kChatStopString)};
  State s = model_.new_state();
  const std::string t1 = chat_user_turn("hello"), t2 = chat_user_turn("and then?");
  const GenerationResult r1 = generate(model_, tok_, t1, c, s);
  const std::vector<float> logits_turn2 = model_.forward(ids(t2), s);
  // One pass over the transcript: turn 1, the reply tokens, turn 2.
  std::vector<int32_t> all = ids(t1);
  all.insert(all.end(), r1.tokens.begin(), r1.tokens.end());
  const std::vector<int32_t> i2 = ids(t2);
  all.insert(all.end(), i2.begin(), i2.end());
  State ref = model_.new_state();
  const std::vector<float> logits_ref = model_.forward(all, ref);
  EXPECT_LE(max_abs_diff(logits_turn2, logits_ref), 1e-5);
  EXPECT_LE(max_abs_diff(std::vector<float>(s.data(), s.data() + s.size()),
                         std::vector<float>(ref.data(), ref.data() + ref.size())),
            1e-5);
}

}  // namespace
}  // namespace wick::test
