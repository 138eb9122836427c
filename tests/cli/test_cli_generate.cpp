// `wick generate` sampling / stop / state / batch flags and `wick chat`, as users run them.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_util.h"
#include "wick/chat.h"
#include "wick/generate.h"
#include "wick/state_file.h"

namespace wick::test {
namespace {

nlohmann::json json_of(const CliRun& r) {
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

const std::string kPrompt = "Once upon a time";

TEST(CliGenerate, SamplingFlagsMatchTheLibraryAndSeedsMatter) {
  const std::string flags = " --temperature 1 --top-p 0.9 --top-k 50 --presence-penalty 0.1 "
                            "--frequency-penalty 0.2 --penalty-decay 0.99 --max-tokens 24 --json";
  const nlohmann::json a = json_of(run_wick("generate --prompt " + shell_quote(kPrompt) + flags + " --seed 7"));
  const nlohmann::json b = json_of(run_wick("generate --prompt " + shell_quote(kPrompt) + flags + " --seed 7"));
  const nlohmann::json c = json_of(run_wick("generate --prompt " + shell_quote(kPrompt) + flags + " --seed 8"));
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_NE(a["tokens"], c["tokens"]);
  GenerationConfig cfg;
  cfg.max_tokens = 24;
  cfg.sampling.temperature = 1;
  cfg.sampling.top_p = 0.9f;
  cfg.sampling.top_k = 50;
  cfg.sampling.presence_penalty = 0.1f;
  cfg.sampling.frequency_penalty = 0.2f;
  cfg.sampling.penalty_decay = 0.99f;
  cfg.sampling.seed = 7;
  const GenerationResult lib = generate(Model::load_default(), ByteTokenizer(), kPrompt, cfg);
  EXPECT_EQ(a["tokens"].get<std::vector<int32_t>>(), lib.tokens);
  EXPECT_EQ(a["text"], lib.text);
  EXPECT_EQ(a["generated_tokens"], 24);
  EXPECT_TRUE(a["timings"].contains("sample_ms"));
}

TEST(CliGenerate, StopStringsWithEscapesAndStreaming) {
  const nlohmann::json free_run =
      json_of(run_wick("generate --prompt " + shell_quote(kPrompt) + " --max-tokens 40 --json"));
  const std::string text = free_run["text"];
  ASSERT_GE(text.size(), 10u);
  const std::string stop = text.substr(5, 3);
  const nlohmann::json r = json_of(run_wick("generate --prompt " + shell_quote(kPrompt) +
                                            " --max-tokens 40 --json --stop " + shell_quote(stop)));
  EXPECT_EQ(r["stop_reason"], "stop_string");
  EXPECT_EQ(r["stop_string"], stop);
  EXPECT_EQ(r["text"].get<std::string>(), text.substr(0, text.find(stop)));
  // Streaming text equals the final text; JSON streaming gives chunk lines then the result.
  const CliRun s = run_wick("generate --prompt " + shell_quote(kPrompt) + " --max-tokens 40 --stream --stop " + shell_quote(stop));
  EXPECT_EQ(s.out, r["text"].get<std::string>());  // exactly the text on a pipe
  const CliRun js = run_wick("generate --prompt " + shell_quote(kPrompt) + " --max-tokens 40 --stream --json");
  std::istringstream lines(js.out);
  std::string line, joined;
  nlohmann::json last;
  int n = 0;
  while (std::getline(lines, line)) {
    last = nlohmann::json::parse(line);
    if (last.contains("chunk")) joined += last["chunk"].get<std::string>();
    ++n;
  }
  EXPECT_EQ(n, 41);  // 40 chunk lines and the result
  EXPECT_EQ(joined, last["text"].get<std::string>());
  // "\n\n" written with escapes is a stop string of two newlines.
  const nlohmann::json nl = json_of(run_wick("generate --prompt " + shell_quote(kPrompt) +
                                             " --max-tokens 200 --json --stop '\\n\\n' --stop-token 33"));
  EXPECT_EQ(nl["text"].get<std::string>().find("\n\n"), std::string::npos);
  EXPECT_EQ(nl["text"].get<std::string>().find('!'), std::string::npos);
}

TEST(CliGenerate, SaveStateWithZeroTokensThenContinueEqualsOneRun) {
  const auto dir = scratch_dir();
  const std::string st = (dir / "p.safetensors").string();
  const CliRun fold = run_wick("generate --prompt " + shell_quote("Once upon") +
                               " --max-tokens 0 --save-state " + shell_quote(st) + " --state-note hello");
  ASSERT_EQ(fold.status, 0) << fold.err;
  const LoadedState l = load_state(st, Model::load_default());
  EXPECT_EQ(l.info.note, "hello");
  EXPECT_EQ(l.info.n_tokens, 9);
  const nlohmann::json cont = json_of(run_wick("generate --prompt " + shell_quote(" a time") +
                                               " --max-tokens 16 --json --load-state " + shell_quote(st)));
  const nlohmann::json whole =
      json_of(run_wick("generate --prompt " + shell_quote("Once upon a time") + " --max-tokens 16 --json"));
  EXPECT_EQ(cont["tokens"], whole["tokens"]);
  const CliRun bad = run_wick("generate --prompt x --load-state " +
                              shell_quote(fixture("tiny-rwkv7/tiny-rwkv7-834K.safetensors")));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("not a wick state file"), std::string::npos) << bad.err;
}

// Issue 25 item 4: 10 + 10 tokens through --save-state / --load-state --prompt "" equal one run
// of 20, greedy and seeded; a new --seed starts a fresh sampler instead.
TEST(CliGenerate, TenPlusTenTokensThroughAStateFileEqualTwenty) {
  const auto dir = scratch_dir();
  for (const std::string sampling : {std::string("--presence-penalty 0.6"),
                                     std::string("--temperature 1 --top-p 0.9 --seed 7")}) {
    SCOPED_TRACE(sampling);
    const std::string st = (dir / "ten.safetensors").string();
    const nlohmann::json whole = json_of(
        run_wick("generate --prompt " + shell_quote(kPrompt) + " -n 20 --json " + sampling));
    const nlohmann::json first =
        json_of(run_wick("generate --prompt " + shell_quote(kPrompt) + " -n 10 --json " +
                         sampling + " --save-state " + shell_quote(st)));
    // The second run gives no --seed: the stored sampler resumes.
    std::string rest = sampling;
    if (const size_t at = rest.find(" --seed"); at != std::string::npos) rest.resize(at);
    const nlohmann::json second = json_of(run_wick("generate --prompt \"\" -n 10 --json " + rest +
                                                   " --load-state " + shell_quote(st)));
    std::vector<int> joined = first["tokens"].get<std::vector<int>>();
    for (int t : second["tokens"]) joined.push_back(t);
    EXPECT_EQ(joined, whole["tokens"].get<std::vector<int>>());
    EXPECT_EQ(first["text"].get<std::string>() + second["text"].get<std::string>(), whole["text"]);
    EXPECT_EQ(second["prompt_tokens"], 0);
    if (sampling.find("--seed") != std::string::npos) {
      const nlohmann::json reseeded = json_of(run_wick("generate --prompt \"\" -n 10 --json " +
                                                       sampling + " --load-state " + shell_quote(st)));
      EXPECT_NE(reseeded["tokens"], second["tokens"]);
    }
  }
  // An empty prompt with nothing to continue from is a clear error.
  const CliRun none = run_wick("generate --prompt \"\" -n 3");
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("--prompt is empty"), std::string::npos) << none.err;
}

TEST(CliGenerate, BatchFileGivesOneResultPerLineInOrderEqualToSingleRuns) {
  const auto dir = scratch_dir();
  write_file(dir / "b.jsonl", "{\"prompt\": \"Once upon a time\"}\n\n{\"prompt\": \"The fox\"}\n"
                              "{\"prompt\": \"Once upon a time\"}\n");
  const CliRun r = run_wick("generate --batch-file " + shell_quote((dir / "b.jsonl").string()) +
                            " --max-tokens 12 --temperature 1 --seed 5");
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 3u);
  const char* prompts[] = {"Once upon a time", "The fox", "Once upon a time"};
  for (int i = 0; i < 3; ++i) {
    const nlohmann::json single = json_of(run_wick("generate --prompt " + shell_quote(prompts[i]) +
                                                   " --max-tokens 12 --temperature 1 --json --seed " +
                                                   std::to_string(5 + i)));
    EXPECT_EQ(rows[i]["tokens"], single["tokens"]) << i;
  }
  EXPECT_NE(rows[0]["tokens"], rows[2]["tokens"]);  // same prompt, seeds 5 and 7
  write_file(dir / "bad.jsonl", "{\"text\": \"x\"}\n");
  const CliRun bad = run_wick("generate --batch-file " + shell_quote((dir / "bad.jsonl").string()));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("\"prompt\""), std::string::npos) << bad.err;
}

// --speculate ngram --draft K: the same tokens as plain decoding, the counters in --json, also in
// batch files; other methods and a --draft out of range are refused.
TEST(CliGenerate, SpeculateNgramEqualsPlainAndReportsCounters) {
  const std::string prompt = shell_quote("Once upon a time, there was a girl. Once upon a time");
  // Greedy: the tiny model repeats itself, so drafts are accepted.
  const std::string flags = " --max-tokens 64 --json";
  const nlohmann::json plain = json_of(run_wick("generate --prompt " + prompt + flags));
  const nlohmann::json spec =
      json_of(run_wick("generate --prompt " + prompt + flags + " --speculate ngram --draft 6"));
  EXPECT_EQ(spec["tokens"], plain["tokens"]);
  EXPECT_EQ(spec["text"], plain["text"]);
  EXPECT_FALSE(plain.contains("speculative"));
  ASSERT_TRUE(spec.contains("speculative")) << spec;
  EXPECT_GT(spec["speculative"]["accepted"].get<int>(), 0);
  EXPECT_LE(spec["speculative"]["accepted"].get<int>(), spec["speculative"]["drafted"].get<int>());
  EXPECT_LT(spec["speculative"]["passes"].get<int>(), 64);
  // Seeded sampling: equal too, and another seed gives other tokens.
  const std::string sampled = " --max-tokens 64 --temperature 0.6 --json --speculate ngram";
  const nlohmann::json s3 = json_of(run_wick("generate --prompt " + prompt + sampled + " --seed 3"));
  const nlohmann::json p3 = json_of(
      run_wick("generate --prompt " + prompt + " --max-tokens 64 --temperature 0.6 --json --seed 3"));
  EXPECT_EQ(s3["tokens"], p3["tokens"]);
  const nlohmann::json s4 = json_of(run_wick("generate --prompt " + prompt + sampled + " --seed 4"));
  EXPECT_NE(s4["tokens"], s3["tokens"]);
  const auto dir = scratch_dir();
  write_file(dir / "b.jsonl", "{\"prompt\": \"Once upon a time, there was a girl. Once\"}\n");
  const CliRun batch = run_wick("generate --batch-file " + shell_quote((dir / "b.jsonl").string()) +
                                " --max-tokens 40 --speculate ngram --draft 4");
  ASSERT_EQ(batch.status, 0) << batch.err;
  const nlohmann::json row = nlohmann::json::parse(batch.out);
  const nlohmann::json single = json_of(
      run_wick("generate --prompt " + shell_quote("Once upon a time, there was a girl. Once") +
               " --max-tokens 40 --json"));
  EXPECT_EQ(row["tokens"], single["tokens"]);
  EXPECT_GT(row["speculative"]["drafted"].get<int>(), 0);
  for (const std::string bad : {" --speculate eagle", " --speculate ngram --draft 0",
                                " --speculate ngram --draft 65", " --draft 4"}) {
    const CliRun r = run_wick("generate --prompt hi" + bad);
    EXPECT_EQ(r.status, 1) << bad << ": " << r.err;
    EXPECT_NE(r.err.find(bad.find("eagle") != std::string::npos ? "ngram" : "draft"),
              std::string::npos)
        << bad << ": " << r.err;
  }
}

// World-vocabulary models stop at id 0 (end of text) by default; they used to run on through it
// ([..., 0, 0, 0] with stop_reason max_tokens).
TEST(CliGenerate, WorldModelsStopAtEndOfTextUnlessTold) {
  const auto dir = scratch_dir();
  const std::string model = (dir / "world.safetensors").string();
  ASSERT_EQ(run_wick("synth --geometry 1:64 --dtype fp32 --seed 2 --out " + shell_quote(model)).status, 0);
  const std::string base = "generate --model " + shell_quote(model) + " --prompt hi -n 5 --json";
  // A bias makes id 0 the model's choice at every step.
  const nlohmann::json stop = json_of(run_wick(base + " --logit-bias 0=100"));
  EXPECT_EQ(stop["stop_reason"], "stop_token");
  EXPECT_EQ(stop["tokens"], nlohmann::json::array({0}));
  const nlohmann::json on = json_of(run_wick(base + " --logit-bias 0=100 --no-stop-eot"));
  EXPECT_EQ(on["stop_reason"], "max_tokens");
  EXPECT_EQ(on["tokens"], nlohmann::json::array({0, 0, 0, 0, 0}));
  // Byte-level models have no end-of-text id: nothing changes for them.
  const nlohmann::json bytes = json_of(run_wick("generate --prompt hi -n 5 --json --logit-bias 0=100"));
  EXPECT_EQ(bytes["stop_reason"], "max_tokens");
  EXPECT_EQ(default_stop_tokens(65536), std::vector<int32_t>{0});
  EXPECT_TRUE(default_stop_tokens(256).empty());
  // A negative seed is refused rather than wrapped around.
  const CliRun neg = run_wick("generate --prompt hi -n 2 --temperature 1 --seed -1");
  EXPECT_NE(neg.status, 0);
  EXPECT_NE((neg.err + neg.out).find("unsigned 64-bit"), std::string::npos) << neg.err;
  // detokenize writes exactly the bytes to a pipe.
  const std::vector<int32_t> ids = {104, 105};
  EXPECT_EQ(run_wick("detokenize 104 105").out, default_world_tokenizer()->decode(ids));
}

// Ctrl-C used to kill `wick generate`: no result, no state file. Now the first SIGINT cancels the
// generation, which prints its result (stop_reason "cancelled") and saves the state.
TEST(CliGenerate, InterruptCancelsAndStillPrintsAndSaves) {
  const auto dir = scratch_dir();
  const std::string state = (dir / "s.state").string(), out = (dir / "out.json").string();
  const std::string cmd = std::string(WICK_CLI_PATH) + " generate --prompt " + shell_quote(kPrompt) +
                          " -n 100000000 --json --stream --save-state " + shell_quote(state) +
                          " >" + shell_quote(out) +
                          " 2>/dev/null & p=$!; while [ ! -s " + shell_quote(out) +
                          " ]; do sleep 0.05; done; kill -INT $p; wait $p";
  const int st = std::system(("sh -c " + shell_quote(cmd)).c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  // Streamed chunk lines, then the result on the last line.
  const std::string text = read_file(out);
  const size_t last = text.rfind('\n', text.size() - 2);
  const nlohmann::json r = nlohmann::json::parse(text.substr(last == std::string::npos ? 0 : last + 1));
  EXPECT_EQ(r["stop_reason"], "cancelled");
  const int generated = r["generated_tokens"].get<int>();
  EXPECT_GT(generated, 0);
  EXPECT_LT(generated, 100000000);
  // The saved state is the prompt and every returned token (the state rule).
  const Model model = Model::load_default();
  State expect = model.new_state();
  std::vector<int32_t> all = ByteTokenizer().encode(kPrompt);
  const auto gen = r["tokens"].get<std::vector<int32_t>>();
  all.insert(all.end(), gen.begin(), gen.end());
  model.forward(all, expect);
  EXPECT_TRUE(load_state(state, model).state == expect);
}

TEST(CliGenerate, InvalidValuesAreClearErrors) {
  for (const std::string& f : {"--temperature -1", "--top-p 0", "--top-p 1.5", "--top-k -2",
                               "--repetition-penalty 0", "--penalty-decay 2", "--stop ''",
                               "--logit-bias 5", "--ban 999"}) {
    const CliRun r = run_wick("generate --prompt hi " + f);
    EXPECT_EQ(r.status, 1) << f << ": " << r.err;
    EXPECT_FALSE(r.err.empty()) << f;
    EXPECT_TRUE(r.out.empty()) << f;
  }
  EXPECT_EQ(run_wick("generate --prompt ''").status, 1);
  EXPECT_EQ(run_wick("generate --prompt hi --max-tokens 3").status, 0);
}

TEST(CliChat, RepliesCommandsAndStateFiles) {
  const auto dir = scratch_dir();
  const std::string saved = (dir / "chat.safetensors").string();
  const std::string script = "Hello there\n/save " + saved + "\n/regenerate\n/reset\n/load " +
                             saved + "\n/bogus\nSecond question\n";
  const CliRun r = run_wick("chat --max-tokens 24 --seed 3", script);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("unknown command"), std::string::npos);
  // The same conversation through the library: reply k samples with seed 3 + k.
  const Model model = Model::load_default();
  const ByteTokenizer tok;
  auto reply = [&](State& st, const std::string& message, uint64_t seed) {
    GenerationConfig cfg;
    cfg.max_tokens = 24;
    cfg.sampling = SamplingConfig::chatrwkv_chat();
    cfg.sampling.seed = seed;
    cfg.stop_strings = {std::string(kChatStopString)};
    const GenerationResult g = generate(model, tok, chat_user_turn(message), cfg, st);
    if (g.stop_reason == StopReason::kMaxTokens) model.forward(tok.encode("\n\n"), st);  // turn closed
    return g.text;
  };
  State first = model.new_state();
  const std::string r0 = reply(first, "Hello there", 3);
  EXPECT_TRUE(load_state(saved, model).state == first);
  State zero = model.new_state();
  const std::string r1 = reply(zero, "Hello there", 4);  // /regenerate: from before the turn
  State loaded = first;
  const std::string r2 = reply(loaded, "Second question", 5);
  EXPECT_EQ(r.out, r0 + "\n" + r1 + "\n" + r2 + "\n");
  EXPECT_NE(r0, r1);
}

}  // namespace
}  // namespace wick::test

namespace wick::test {
namespace {

// A pasted multi-line message (lines ending in a backslash) is one turn, not one per line.
TEST(CliChat, BackslashContinuesAMessage) {
  const CliRun one = run_wick("chat -n 4", "first line \\\nsecond line\n");
  ASSERT_EQ(one.status, 0) << one.err;
  const CliRun two = run_wick("chat -n 4", "first line\nsecond line\n");
  ASSERT_EQ(two.status, 0) << two.err;
  auto lines = [](const std::string& t) { return std::count(t.begin(), t.end(), '\n'); };
  EXPECT_EQ(lines(two.out), lines(one.out) + 1) << one.out << "\n--\n" << two.out;  // a reply less
}

// Ctrl-C at the User: prompt used to end wick chat (and the conversation). On a terminal (a pty
// from util-linux `script`) it now says how to leave; the chat goes on until /quit.
TEST(CliChat, CtrlCAtThePromptKeepsTheConversation) {
  if (std::system("command -v script >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "util-linux `script` (a pty) is not installed";
  const auto dir = scratch_dir();
  const std::string out = (dir / "pty.txt").string();
  // Each keystroke waits until the chat has printed what comes before it (up to 60 s), so a
  // slow machine cannot turn the prompt's Ctrl-C into a cancelled reply.
  const std::string q = shell_quote(out);
  auto until = [&](const std::string& text, int count) {
    return "i=0; while [ \"$(grep -o " + shell_quote(text) + " " + q + " 2>/dev/null | wc -l)\" -lt " +
           std::to_string(count) + " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; ";
  };
  const std::string feed = "(printf 'hello\\n'; " + until("reply cut", 1) + "printf '\\003'; " +
                           until("Ctrl-C: the conversation", 1) + "printf 'again\\n'; " +
                           until("reply cut", 2) + "printf '/quit\\n')";
  // `script -c` runs its command through $SHELL; dash (Debian's /bin/sh) does not exec it, so the
  // pty's Ctrl-C would also kill that shell and `script -e` would report 130. exec puts wick alone
  // in the pty's foreground process group, whatever the shell.
  const std::string cmd = feed + " | SHELL=/bin/sh script -qfec " +
                          shell_quote("exec " + shell_quote(WICK_CLI_PATH) + " chat -n 3") +
                          " /dev/null >" + shell_quote(out);
  const int st = std::system(("sh -c " + shell_quote(cmd)).c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << read_file(out);
  const std::string text = read_file(out);
  EXPECT_NE(text.find("/help lists the commands"), std::string::npos) << text;
  EXPECT_NE(text.find("[Ctrl-C: the conversation is kept"), std::string::npos) << text;
  // The message after Ctrl-C got its reply: two "[reply cut" notes, one per reply.
  size_t n = 0;
  for (size_t p = text.find("[reply cut"); p != std::string::npos; p = text.find("[reply cut", p + 1)) ++n;
  EXPECT_EQ(n, 2u) << text;
}

}  // namespace
}  // namespace wick::test

namespace wick::test {
namespace {

// A bad --save-state path used to fail only after the whole generation; a text file named .pth
// got a safetensors error.
TEST(CliGenerate, BadPathsAreNamedBeforeAnyWork) {
  const CliRun r = run_wick("generate --prompt hi -n 1000 --save-state /nonexistent-wick-dir/s.state");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "") << "refused before generating";
  EXPECT_NE(r.err.find("/nonexistent-wick-dir does not exist"), std::string::npos) << r.err;
  const auto dir = scratch_dir();
  const std::string fake = (dir / "model.pth").string();
  write_file(fake, "these are notes, not weights\n");
  // --quiet drops the summary line (stderr then holds nothing for a plain run).
  EXPECT_NE(run_wick("generate --prompt hi -n 2").err.find("[wick]"), std::string::npos);
  EXPECT_EQ(run_wick("generate --prompt hi -n 2 --quiet").err, "");
  const CliRun f = run_wick("info --model " + shell_quote(fake));
  EXPECT_EQ(f.status, 1);
  EXPECT_NE(f.err.find("not a PyTorch zip archive"), std::string::npos) << f.err;
}

}  // namespace
}  // namespace wick::test
