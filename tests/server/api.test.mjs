// `wick serve` through the official openai client (npm openai@6): chat and completions, streamed
// and not, the chunk contract, seeded output equal to `wick generate --seed`, batch invariance
// over HTTP, the prefix cache, aborted streams, embeddings, the API key.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startServer, loadOpenAI, cli, metric, waitFor, fixture, skipReason } from "./harness.mjs";

const OpenAI = await loadOpenAI();
const skip = skipReason(OpenAI ? false : "npm package openai is not installed (run npm ci in tests/server)");

describe("wick serve with the openai client", { skip }, () => {
  let srv, client;
  before(async () => {
    srv = await startServer(["--max-tokens-limit", "1000000", "--served-name", "tiny"]);
    client = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "unused", maxRetries: 0 });
  });
  after(async () => {
    const { code } = await srv.stop();
    assert.equal(code, 0, "exit status after SIGTERM:\n" + srv.stderr());
  });

  test("chat completion: shape, usage, timings, any model name answered with the served id", async () => {
    const r = await client.chat.completions.create({
      model: "gpt-4o", messages: [{ role: "user", content: "Hello there" }], max_tokens: 8, seed: 1,
    });
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.object, "chat.completion");
    assert.equal(r.model, "tiny");
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, "assistant");
    assert.equal(typeof r.choices[0].message.content, "string");
    assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    assert.equal(r.usage.prompt_tokens, "User: Hello there\n\nAssistant:".length);  // byte model
    assert.ok(r.timings && typeof r.timings.prompt_n === "number" && "predicted_per_second" in r.timings);
  });

  test("stream chunk contract, with and without include_usage", async () => {
    for (const includeUsage of [false, true]) {
      const stream = await client.chat.completions.create({
        messages: [{ role: "user", content: "Count" }], max_tokens: 12, seed: 3, stream: true,
        ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
      });
      const chunks = [];
      for await (const c of stream) chunks.push(c);
      const ids = new Set(chunks.map((c) => c.id));
      assert.equal(ids.size, 1, "one id for every chunk");
      assert.equal(new Set(chunks.map((c) => c.created)).size, 1);
      assert.equal(chunks[0].choices[0].delta.role, "assistant");
      for (const c of chunks.slice(1)) for (const ch of c.choices) assert.equal(ch.delta.role, undefined);
      const finishes = chunks.flatMap((c) => c.choices.filter((ch) => ch.finish_reason));
      assert.equal(finishes.length, 1, "one finish_reason");
      for (const c of chunks) {
        assert.equal(c.object, "chat.completion.chunk");
        assert.equal(c.model, chunks[0].model);
      }
      // The finish chunk: an empty delta and the finish_reason.
      const fin = chunks.at(includeUsage ? -2 : -1);
      assert.equal(fin.choices.length, 1);
      assert.deepEqual(fin.choices[0].delta, {});
      assert.ok(["stop", "length"].includes(fin.choices[0].finish_reason), JSON.stringify(fin));
      const usageChunks = chunks.filter((c) => c.usage);
      if (includeUsage) {
        assert.equal(usageChunks.length, 1);
        const last = chunks.at(-1);
        assert.deepEqual(last.choices, [], "usage chunk last with empty choices");
        assert.deepEqual(Object.keys(last.usage).sort(),
          ["completion_tokens", "prompt_tokens", "prompt_tokens_details", "total_tokens"]);
        assert.equal(last.usage.total_tokens, last.usage.prompt_tokens + last.usage.completion_tokens);
        assert.ok(last.usage.completion_tokens >= 1 && last.usage.completion_tokens <= 12);
        assert.equal(typeof last.usage.prompt_tokens_details.cached_tokens, "number");
        // Every other chunk carries usage: null (present, not just absent).
        for (const c of chunks.slice(0, -1)) {
          assert.ok(Object.hasOwn(c, "usage"), "usage: null on a non-final chunk: " + JSON.stringify(c));
          assert.equal(c.usage, null);
        }
      } else {
        assert.equal(usageChunks.length, 0, "no usage chunk unless asked");
        for (const c of chunks) {
          assert.ok(c.choices.length > 0);
          assert.ok(!Object.hasOwn(c, "usage"), "no usage key unless asked: " + JSON.stringify(c));
        }
      }
      // The streamed text equals the non-streamed reply of the same seeded request.
      const text = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? "")).join("");
      const whole = await client.chat.completions.create({
        messages: [{ role: "user", content: "Count" }], max_tokens: 12, seed: 3,
      });
      assert.equal(text, whole.choices[0].message.content);
    }
  });

  test("completions: string, strings, token arrays, echo, logprobs, default max_tokens 16", async () => {
    const a = await client.completions.create({ model: "x", prompt: "The cat", seed: 5 });
    assert.equal(a.object, "text_completion");
    assert.equal(a.usage.completion_tokens, 16);
    const b = await client.completions.create({ prompt: ["ab", "cd"], max_tokens: 4, temperature: 0 });
    assert.deepEqual(b.choices.map((c) => c.index), [0, 1]);
    const ids = [...Buffer.from("ab")];
    const c = await client.completions.create({ prompt: ids, max_tokens: 4, temperature: 0 });
    assert.equal(c.choices[0].text, b.choices[0].text, "token ids = the same text");
    const d = await client.completions.create({ prompt: [ids, [...Buffer.from("cd")]], max_tokens: 4, temperature: 0 });
    assert.equal(d.choices[1].text, b.choices[1].text);
    assert.notEqual(b.choices[0].text, b.choices[1].text);
    const e = await client.completions.create({ prompt: "ab", max_tokens: 4, temperature: 0, echo: true });
    assert.equal(e.choices[0].text, "ab" + b.choices[0].text);
    const f = await client.completions.create({ prompt: "ab", max_tokens: 4, temperature: 0, logprobs: 3 });
    const lp = f.choices[0].logprobs;
    assert.equal(lp.tokens.length, 4);
    assert.equal(lp.top_logprobs[0] && Object.keys(lp.top_logprobs[0]).length, 3);
    assert.deepEqual(lp.text_offset, [0, 1, 2, 3]);
    // Greedy: the chosen token is the most probable one.
    for (let i = 0; i < 4; i++) {
      const best = Math.max(...Object.values(lp.top_logprobs[i]));
      assert.equal(lp.token_logprobs[i], best);
    }
    await assert.rejects(client.completions.create({ prompt: ["a", [1, 2]] }), (err) => err.status === 400);
  });

  test("streamed completions: one id, one finish_reason, the non-streamed seeded text", async () => {
    const req = { prompt: "Once upon a time", max_tokens: 20, seed: 11, temperature: 1 };
    for (const includeUsage of [false, true]) {
      const stream = await client.completions.create({
        ...req, stream: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) });
      const chunks = [];
      for await (const c of stream) chunks.push(c);
      assert.ok(chunks.length >= 2, "more than one chunk");
      assert.equal(new Set(chunks.map((c) => c.id)).size, 1, "one id");
      assert.match(chunks[0].id, /^cmpl-/);
      assert.equal(new Set(chunks.map((c) => c.created)).size, 1);
      for (const c of chunks) assert.equal(c.object, "text_completion");
      const withChoices = includeUsage ? chunks.slice(0, -1) : chunks;
      for (const c of withChoices) {
        assert.equal(c.choices.length, 1);
        assert.equal(c.choices[0].index, 0);
        assert.equal(typeof c.choices[0].text, "string");
      }
      const finishes = withChoices.filter((c) => c.choices[0].finish_reason);
      assert.equal(finishes.length, 1, "one finish_reason");
      assert.equal(finishes[0], withChoices.at(-1), "on the last chunk");
      const text = withChoices.map((c) => c.choices[0].text).join("");
      const whole = await client.completions.create(req);
      assert.equal(text, whole.choices[0].text);
      assert.equal(finishes[0].choices[0].finish_reason, whole.choices[0].finish_reason);
      if (includeUsage) {
        const last = chunks.at(-1);
        assert.deepEqual(last.choices, []);
        assert.equal(last.usage.completion_tokens, whole.usage.completion_tokens);
        for (const c of withChoices) assert.equal(c.usage, null);
      }
    }
  });

  test("seeded text over HTTP equals wick generate --seed (completions and chat)", async () => {
    const prompt = "Once upon a time there was";
    const http = async (seed) => (await client.completions.create({
      prompt, seed, temperature: 1, top_p: 1, max_tokens: 24 })).choices[0].text;
    const cliText = (seed) => JSON.parse(cli(["generate", "-p", prompt, "--seed", String(seed),
      "--temperature", "1", "--top-p", "1", "-n", "24", "--json"])).text;
    assert.equal(await http(42), cliText(42));
    assert.notEqual(await http(42), await http(43), "another seed gives another text");
    const chat = (await client.chat.completions.create({
      messages: [{ role: "user", content: "Tell me a story" }], seed: 7, temperature: 1, max_tokens: 32,
    })).choices[0].message.content;
    const ref = JSON.parse(cli(["generate", "-p", "User: Tell me a story\n\nAssistant:", "--seed", "7",
      "--temperature", "1", "--top-p", "1", "-n", "32", "--stop", "\\n\\n", "--stop", "\\nUser:", "--json"])).text;
    assert.equal(chat, ref.startsWith(" ") ? ref.slice(1) : ref);
  });

  test("32 concurrent seeded streams each equal their solo run", async () => {
    const body = (i) => ({ messages: [{ role: "user", content: `Question number ${i}: why?` }],
                           seed: 1000 + i, temperature: 1, max_tokens: 20 });
    const concurrent = await Promise.all(Array.from({ length: 32 }, async (_, i) => {
      const s = await client.chat.completions.create({ ...body(i), stream: true });
      let t = "";
      for await (const c of s) t += c.choices[0]?.delta?.content ?? "";
      return t;
    }));
    for (let i = 0; i < 32; i++) {
      const solo = await client.chat.completions.create(body(i));
      assert.equal(concurrent[i], solo.choices[0].message.content, `stream ${i}`);
    }
    assert.ok(new Set(concurrent).size > 1, "different requests, different texts");
  });

  test("n choices: row i samples with seed + i", async () => {
    const r = await client.completions.create({ prompt: "xyz", n: 3, seed: 10, temperature: 1, max_tokens: 10 });
    assert.equal(r.choices.length, 3);
    for (let i = 0; i < 3; i++) {
      const solo = await client.completions.create({ prompt: "xyz", seed: 10 + i, temperature: 1, max_tokens: 10 });
      assert.equal(r.choices[i].text, solo.choices[0].text);
    }
    assert.ok(new Set(r.choices.map((c) => c.text)).size > 1, "the choices differ (seeds differ)");
  });

  test("a repeated long system prompt reports cached tokens; a wholly cached prompt is answered the same", async () => {
    const system = "You are a careful assistant. ".repeat(20);
    const ask = (q) => client.chat.completions.create({
      messages: [{ role: "system", content: system }, { role: "user", content: q }], seed: 2, max_tokens: 8 });
    const first = await ask("first question");
    const second = await ask("another question");
    const systemBytes = ("System: " + system.trim() + "\n\n").length;
    assert.ok(second.usage.prompt_tokens_details.cached_tokens >= systemBytes,
      `cached ${second.usage.prompt_tokens_details.cached_tokens} of ${second.usage.prompt_tokens}`);
    assert.equal(second.timings.cache_tier, "local");
    const again = await ask("another question");
    assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens);
    assert.equal(again.choices[0].message.content, second.choices[0].message.content);
    assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0, "the first one prefilled all");
    // Another system prompt shares only "System: " with the stored ones: nearly nothing cached.
    const other = await client.chat.completions.create({
      messages: [{ role: "system", content: "Answer in French. ".repeat(20) }, { role: "user", content: "first question" }],
      seed: 2, max_tokens: 8 });
    assert.ok(other.usage.prompt_tokens_details.cached_tokens < systemBytes / 2,
      `another system prompt cached ${other.usage.prompt_tokens_details.cached_tokens}`);
  });

  test("an aborted stream frees its engine row", async () => {
    const stream = await client.chat.completions.create({
      messages: [{ role: "user", content: "go on forever" }], max_tokens: 900000, stream: true });
    let n = 0;
    for await (const c of stream) {
      if (++n === 5) break;  // leaving the loop aborts the request
    }
    assert.ok(await waitFor(async () => (await metric(srv.url, "wick_requests_running")) === 0),
      "wick_requests_running back to 0");
  });

  test("logprobs and top_logprobs on chat", async () => {
    const r = await client.chat.completions.create({
      messages: [{ role: "user", content: "hi" }], max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2 });
    const content = r.choices[0].logprobs.content;
    assert.ok(content.length >= 1);
    for (const t of content) {
      assert.equal(t.top_logprobs.length, 2);
      assert.equal(t.logprob, t.top_logprobs[0].logprob, "greedy: the top token");
      assert.ok(t.logprob <= 0);
    }
    // Streamed, the same entries arrive spread over the chunks (chat and completions).
    const chatReq = { messages: [{ role: "user", content: "hi" }], max_tokens: 6, temperature: 0, logprobs: true, top_logprobs: 2 };
    const whole = (await client.chat.completions.create(chatReq)).choices[0].logprobs.content;
    const streamed = [];
    for await (const c of await client.chat.completions.create({ ...chatReq, stream: true }))
      for (const ch of c.choices) streamed.push(...(ch.logprobs?.content ?? []));
    assert.deepEqual(streamed, whole);
    const textReq = { prompt: "ab\u00e9", max_tokens: 6, temperature: 0, logprobs: 2 };
    const wholeText = (await client.completions.create(textReq)).choices[0].logprobs;
    const parts = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    for await (const c of await client.completions.create({ ...textReq, stream: true }))
      for (const ch of c.choices)
        if (ch.logprobs) for (const k of Object.keys(parts)) parts[k].push(...ch.logprobs[k]);
    assert.deepEqual(parts, wholeText);
  });

  test("fields wick cannot honour are a 400 naming them (an unknown state a 404)", async () => {
    for (const [extra, param, status] of [
      [{ tools: [{ type: "function", function: { name: "f", parameters: {} } }] }, "tools", 400],
      [{ functions: [{ name: "f", parameters: {} }] }, "functions", 400],
      [{ response_format: { type: "json_object" } }, "response_format", 400],
      [{ lora: [{ id: "a", scale: 1 }] }, "lora[0].id", 404],
      [{ lora: { id: "a" } }, "lora", 400],
      [{ speculative: 4 }, "speculative", 400],
      [{ speculative: { n_max: 0 } }, "speculative.n_max", 400],
      [{ temperature: 3 }, "temperature", 400],
      [{ max_tokens: 2000000 }, "max_tokens", 400],
      [{ n: 2, max_tokens: 900000, logprobs: true, top_logprobs: 20 }, "max_tokens", 400],
      [{ state: "nope" }, "state", 404],
    ]) {
      await assert.rejects(client.chat.completions.create({ messages: [{ role: "user", content: "x" }], ...extra }),
        (err) => err.status === status && err.param === param, JSON.stringify(extra));
    }
  });

  test("models, tokenize, detokenize, health", async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ["tiny"]);
    const tok = await (await fetch(srv.url + "/tokenize", { method: "POST", body: JSON.stringify({ content: "hé" }) })).json();
    assert.deepEqual(tok.tokens, [...Buffer.from("hé")]);
    const de = await (await fetch(srv.url + "/detokenize", { method: "POST", body: JSON.stringify({ tokens: tok.tokens }) })).json();
    assert.equal(de.content, "hé");
    assert.equal((await fetch(srv.url + "/health")).status, 200);
    assert.equal((await fetch(srv.url + "/v1/nothing")).status, 404);
    assert.equal((await fetch(srv.url + "/v1/models", { method: "POST" })).status, 405);
  });
});

describe("embeddings (EmbeddingRWKV fixture)", { skip: skip || skipReason(!fixture("tasks", "er_emb_model.pth") && "fixture tasks/er_emb_model.pth missing") }, () => {
  let srv, client;
  before(async () => {
    srv = await startServer(["--model", fixture("tasks", "er_emb_model.pth")]);
    client = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "unused", maxRetries: 0 });
  });
  after(async () => { assert.equal((await srv.stop()).code, 0); });

  test("float and base64 vectors equal wick embed's", async () => {
    const texts = ["The quick brown fox.", "Как пчёлы делают мёд?"];
    const f = await client.embeddings.create({ model: "m", input: texts, encoding_format: "float" });
    assert.equal(f.object, "list");
    assert.equal(f.data.length, 2);
    const b = await fetch(srv.url + "/v1/embeddings", { method: "POST",
      body: JSON.stringify({ input: texts, encoding_format: "base64" }) }).then((r) => r.json());
    const dir = mkdtempSync(path.join(tmpdir(), "wick-embed-"));
    const file = path.join(dir, "texts.jsonl");
    writeFileSync(file, texts.map((t) => JSON.stringify({ text: t })).join("\n") + "\n");
    const ref = JSON.parse(cli(["embed", "--model", fixture("tasks", "er_emb_model.pth"), "--file", file, "--json"])).embeddings;
    for (let i = 0; i < 2; i++) {
      const fromB64 = Array.from(new Float32Array(new Uint8Array(Buffer.from(b.data[i].embedding, "base64")).buffer));
      assert.deepEqual(f.data[i].embedding.map(Math.fround), ref[i].map(Math.fround));
      assert.deepEqual(fromB64, ref[i].map(Math.fround));
    }
    assert.notDeepEqual(ref[0], ref[1]);
    assert.ok(f.usage.prompt_tokens > 0);
    // No LM head: chat is a 404 saying so.
    await assert.rejects(client.chat.completions.create({ messages: [{ role: "user", content: "x" }] }),
      (err) => err.status === 404);
  });
});

const erModel = fixture("tasks", "er_emb_model.pth"), erReranker = fixture("tasks", "er_reranker.pth");
describe("--max-prompt-tokens on embeddings and rerank", { skip: skipReason((!erModel || !erReranker) && "fixtures tasks/er_emb_model.pth, er_reranker.pth missing") }, () => {
  let srv;
  before(async () => { srv = await startServer(["--model", erModel, "--head", erReranker, "--max-prompt-tokens", "32"]); });
  after(async () => { assert.equal((await srv.stop()).code, 0, srv.stderr()); });
  const post = (route, body) => fetch(srv.url + route, { method: "POST", body: JSON.stringify(body) });

  test("token-id inputs and documents past the limit are a 400 naming it", async () => {
    // n token ids, the last EmbeddingRWKV's EOS (65535), where it pools.
    const ids = (n) => [...Array.from({ length: n - 1 }, (_, i) => 100 + i), 65535];
    for (const input of [ids(33), [ids(3), ids(33)]]) {
      const r = await post("/v1/embeddings", { input });
      assert.equal(r.status, 400, JSON.stringify(input).slice(0, 60));
      const e = (await r.json()).error;
      assert.equal(e.param, "input");
      assert.match(e.message, /33 tokens.*limit of 32 \(wick serve --max-prompt-tokens\)/);
    }
    assert.equal((await post("/v1/embeddings", { input: ids(32) })).status, 200);
    assert.equal((await post("/v1/embeddings", { input: "word ".repeat(40) })).status, 400);
    const long = await post("/v1/rerank", { query: "q", documents: ["short", "a long document ".repeat(10)] });
    assert.equal(long.status, 400);
    const e = (await long.json()).error;
    assert.equal(e.param, "documents");
    assert.match(e.message, /documents\[1\].*limit of 32 \(wick serve --max-prompt-tokens\)/);
    // A short document with the query and the reranker's template: 22 tokens.
    const ok = await post("/v1/rerank", { query: "q", documents: ["short", "tiny"] });
    assert.equal(ok.status, 200, await ok.clone().text());
    assert.equal((await ok.json()).results.length, 2);
  });
});

// A RWKV-PEFT state-tuning file (safetensors, written here): blocks.{i}.att.time_state
// [H, N, N] for the model `wick info --json` describes, filled with fixed non-zero values.
// A safetensors file of F32 tensors [{ name, shape, data: Float32Array }].
function writeSafetensors(file, tensors) {
  const header = {};
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: "F32", shape: t.shape, data_offsets: [offset, offset + t.data.length * 4] };
    offset += t.data.length * 4;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(file, Buffer.concat([len, Buffer.from(json), ...tensors.map((t) => Buffer.from(t.data.buffer))]));
}

function writeTimeState(file) {
  const g = JSON.parse(cli(["info", "--json"])).geometry;
  const per = g.n_head * g.head_size * g.head_size;
  const tensors = [];
  for (let i = 0; i < g.n_layer; i++)
    tensors.push({ name: `blocks.${i}.att.time_state`, shape: [g.n_head, g.head_size, g.head_size],
      data: new Float32Array(per).map((_, k) => 0.3 * Math.sin(0.7 * (k + i * per) + 1)) });
  writeSafetensors(file, tensors);
}

// An RWKV-PEFT LoRA adapter of rank r for the served model: every adapted matrix of every layer,
// deterministic factors from `seed`.
function writeLora(file, r, seed) {
  const g = JSON.parse(cli(["info", "--json"])).geometry;
  const C = g.n_embd, F = g.ffn_dim;
  const targets = [["att.receptance", C, C], ["att.key", C, C], ["att.value", C, C],
    ["att.output", C, C], ["ffn.key", F, C], ["ffn.value", C, F]];
  const tensors = [];
  let k = seed;
  const values = (n) => new Float32Array(n).map(() => 0.2 * Math.sin(1.3 * ++k));
  for (let i = 0; i < g.n_layer; i++)
    for (const [name, out, inp] of targets) {
      tensors.push({ name: `blocks.${i}.${name}.lora_A`, shape: [r, inp], data: values(r * inp) });
      tensors.push({ name: `blocks.${i}.${name}.lora_B`, shape: [out, r], data: values(out * r) });
    }
  writeSafetensors(file, tensors);
}

describe("state-tuned initial states (--state NAME=FILE)", { skip }, () => {
  let srv, client, file;
  before(async () => {
    file = path.join(mkdtempSync(path.join(tmpdir(), "wick-tuned-")), "tuned.safetensors");
    writeTimeState(file);
    srv = await startServer(["--state", "tuned=" + file]);
    client = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "unused", maxRetries: 0 });
  });
  after(async () => { assert.equal((await srv.stop()).code, 0); });

  test("a request from the tuned state equals wick generate --init-state", async () => {
    const prompt = "Once upon a time";
    const http = async (extra) => (await client.completions.create({
      prompt, seed: 9, temperature: 1, top_p: 1, max_tokens: 24, ...extra })).choices[0].text;
    const ref = JSON.parse(cli(["generate", "-p", prompt, "--seed", "9", "--temperature", "1",
      "--top-p", "1", "-n", "24", "--json", "--init-state", file])).text;
    assert.equal(await http({ state: "tuned" }), ref);
    assert.notEqual(await http({}), ref, "the zero state gives another text");
    const states = await (await fetch(srv.url + "/v1/states")).json();
    assert.ok(JSON.stringify(states).includes("tuned"), JSON.stringify(states));
  });
});

describe("LoRA adapters (--adapter NAME=FILE:ALPHA, lora per request)", { skip }, () => {
  let srv, client, dir, fileA, fileB;
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "wick-lora-"));
    fileA = path.join(dir, "a.safetensors");
    fileB = path.join(dir, "b.safetensors");
    writeLora(fileA, 4, 1);
    writeLora(fileB, 8, 500);
    srv = await startServer(["--adapter", "style=" + fileA + ":16", "--adapter", "other=" + fileB + ":8"]);
    client = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "unused", maxRetries: 0 });
  });
  after(async () => { assert.equal((await srv.stop()).code, 0); });

  const prompt = "Once upon a time";
  const req = (extra) => ({ prompt, seed: 5, temperature: 1, top_p: 1, max_tokens: 24, ...extra });
  const ref = (file, alpha, scale = 1) => JSON.parse(cli(["generate", "-p", prompt, "--seed", "5",
    "--temperature", "1", "--top-p", "1", "-n", "24", "--json", "--lora", file, "--lora-alpha",
    String(alpha), "--lora-scale", String(scale)])).text;

  test("GET /v1/adapters lists them in order", async () => {
    const list = await (await fetch(srv.url + "/v1/adapters")).json();
    assert.equal(list.object, "list");
    assert.deepEqual(list.data.map((a) => [a.id, a.index, a.source, a.rank, a.alpha]),
      [["style", 0, "a.safetensors", 4, 16], ["other", 1, "b.safetensors", 8, 8]]);
    assert.equal(list.data[0].adapted, 6 * JSON.parse(cli(["info", "--json"])).geometry.n_layer);
    assert.match(list.data[0].fingerprint, /^sha256:[0-9a-f]{64}$/);
  });

  test("a request with lora equals wick generate --lora; by name, index and scale", async () => {
    const text = async (extra) => (await client.completions.create(req(extra))).choices[0].text;
    const base = await text({});
    const style = ref(fileA, 16);
    assert.notEqual(style, base, "the adapter changes the text");
    assert.equal(await text({ lora: [{ id: "style", scale: 1 }] }), style);
    assert.equal(await text({ lora: [{ id: 0 }] }), style);
    assert.equal(await text({ lora: [{ id: "style", scale: 1 }, { id: "other", scale: 0 }] }), style);
    assert.equal(await text({ lora: [{ id: "style", scale: 0 }] }), base);
    assert.equal(await text({ lora: [] }), base);
    assert.equal(await text({ lora: [{ id: "style", scale: 0.5 }] }), ref(fileA, 16, 0.5));
    assert.equal(await text({ lora: [{ id: 1, scale: 1 }] }), ref(fileB, 8));
  });

  test("requests with different adapters at once each equal their solo text", async () => {
    const variants = [{}, { lora: [{ id: "style" }] }, { lora: [{ id: "other" }] }, { lora: [{ id: "style", scale: 2 }] }];
    const solo = [];
    for (const v of variants) solo.push((await client.completions.create(req(v))).choices[0].text);
    const together = await Promise.all(variants.map((v) => client.completions.create(req(v))));
    assert.deepEqual(together.map((r) => r.choices[0].text), solo);
    assert.equal(new Set(solo).size, variants.length, "four different texts");
  });

  test("bad lora fields are a 400 naming them; an unknown adapter a 404", async () => {
    for (const [lora, param, status] of [
      [[{ id: "nope" }], "lora[0].id", 404],
      [[{ id: 7 }], "lora[0].id", 404],
      [[{ id: true }], "lora[0].id", 400],
      [["style"], "lora[0]", 400],
      [[{ id: "style", scale: "x" }], "lora[0].scale", 400],
      [[{ id: "style" }, { id: "style" }], "lora[1].id", 400],
      [[{ id: "style" }, { id: "other" }], "lora[1]", 400],
    ]) {
      await assert.rejects(client.chat.completions.create({ messages: [{ role: "user", content: "x" }], lora }),
        (err) => err.status === status && err.param === param, JSON.stringify(lora));
    }
    // A number beyond a double is a 400 too (the JSON parser's range error), not a 500.
    const huge = await fetch(srv.url + "/v1/completions", { method: "POST",
      body: '{"prompt":"x","max_tokens":2,"lora":[{"id":"style","scale":1e400}]}' });
    assert.equal(huge.status, 400);
    assert.match((await huge.json()).error.message, /out of range/);
  });
});

describe("API key", { skip }, () => {
  let srv;
  before(async () => { srv = await startServer([], { WICK_API_KEY: "s3cret-key" }); });
  after(async () => { assert.equal((await srv.stop()).code, 0); });

  test("401 without or with a wrong key; /health needs none; the right key works", async () => {
    const body = JSON.stringify({ messages: [{ role: "user", content: "x" }], max_tokens: 2 });
    const none = await fetch(srv.url + "/v1/chat/completions", { method: "POST", body });
    assert.equal(none.status, 401);
    assert.equal((await none.json()).error.type, "authentication_error");
    const wrong = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "s3cret-kez", maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => e.status === 401);
    assert.equal((await fetch(srv.url + "/metrics")).status, 401);
    assert.equal((await fetch(srv.url + "/health")).status, 200);
    const right = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "s3cret-key", maxRetries: 0 });
    assert.equal((await right.chat.completions.create({ messages: [{ role: "user", content: "x" }], max_tokens: 2 })).choices.length, 1);
  });
});
