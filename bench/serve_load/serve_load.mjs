#!/usr/bin/env node
// Load benchmark of `wick serve`: N concurrent streaming chat clients on loopback for T seconds,
// each sending its next request as soon as the previous one ends. Reports aggregate generated
// tokens/s, TTFT p50/p99, inter-token latency p50/p99 (gaps between content chunks of one
// stream), requests and errors, and from the server's /metrics the share of the wall time the
// engine was busy and spent inside model passes. Node's built-in fetch only (no npm packages).
//
//   node bench/serve_load/serve_load.mjs --url http://127.0.0.1:8080 --clients 4 --seconds 20 \
//        [--max-tokens 64] [--prompt-words 40] [--api-key K] [--json]
//
// With --spawn WICK_BINARY [--model M] it starts `wick serve` itself on a free port, runs each
// --clients value given as a comma list (e.g. 1,4,16) and stops it.
import { spawn } from "node:child_process";

function args() {
  const a = { url: "", clients: "4", seconds: 20, maxTokens: 64, promptWords: 40, apiKey: "",
              json: false, spawn: "", model: "", threads: "" };
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i++) {
    const k = v[i];
    const next = () => v[++i];
    if (k === "--url") a.url = next();
    else if (k === "--clients") a.clients = next();
    else if (k === "--seconds") a.seconds = Number(next());
    else if (k === "--max-tokens") a.maxTokens = Number(next());
    else if (k === "--prompt-words") a.promptWords = Number(next());
    else if (k === "--api-key") a.apiKey = next();
    else if (k === "--spawn") a.spawn = next();
    else if (k === "--model") a.model = next();
    else if (k === "--threads") a.threads = next();
    else if (k === "--json") a.json = true;
    else { console.error(`unknown option ${k}`); process.exit(2); }
  }
  if (!a.url && !a.spawn) { console.error("give --url or --spawn"); process.exit(2); }
  return a;
}

const pct = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function oneStream(url, headers, body, stats) {
  const t0 = performance.now();
  let last = 0, tokens = 0;
  const r = await fetch(url + "/v1/chat/completions", { method: "POST", headers, body });
  if (!r.ok) { stats.errors++; await r.arrayBuffer(); return; }
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "", failed = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, at); buf = buf.slice(at + 2);
      if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
      const j = JSON.parse(ev.slice(6));
      if (j.error) { failed = true; continue; }
      if (j.usage) tokens = j.usage.completion_tokens;
      const c = j.choices && j.choices[0];
      if (c && c.delta && c.delta.content) {
        const now = performance.now();
        if (!last) stats.ttft.push(now - t0); else stats.itl.push(now - last);
        last = now;
      }
    }
  }
  if (failed) stats.errors++;
  stats.requests++;
  stats.tokens += tokens;
}

// The engine's own time counters (/metrics), to tell the server's limit from the model's.
async function engineSeconds(url, headers) {
  try {
    const text = await (await fetch(url + "/metrics", { headers })).text();
    const get = (name) => Number((text.match(new RegExp("^" + name + " (\\S+)", "m")) || [])[1]);
    return { pass: get("wick_engine_pass_seconds_total"), busy: get("wick_engine_busy_seconds_total") };
  } catch { return { pass: NaN, busy: NaN }; }
}

async function run(url, apiKey, clients, seconds, maxTokens, promptWords) {
  const headers = { "Content-Type": "application/json" };
  if (apiKey) headers.Authorization = "Bearer " + apiKey;
  const e0 = await engineSeconds(url, headers);
  const stats = { ttft: [], itl: [], tokens: 0, requests: 0, errors: 0 };
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  let n = 0;
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    while (performance.now() < end) {
      const words = Array.from({ length: promptWords }, (_, i) => `w${(c * 7919 + n * 31 + i) % 997}`).join(" ");
      const body = JSON.stringify({
        messages: [{ role: "user", content: `Request ${n++} from client ${c}: ${words}` }],
        max_tokens: maxTokens, temperature: 1, seed: n, stream: true,
        stream_options: { include_usage: true },
      });
      try { await oneStream(url, headers, body, stats); } catch { stats.errors++; }
    }
  }));
  const elapsed = (performance.now() - t0) / 1000;
  const e1 = await engineSeconds(url, headers);
  return {
    engine_busy_pct: (100 * (e1.busy - e0.busy)) / elapsed,
    in_passes_pct: (100 * (e1.pass - e0.pass)) / elapsed,
    clients, seconds: elapsed, requests: stats.requests, errors: stats.errors,
    tokens_per_s: stats.tokens / elapsed,
    ttft_ms_p50: pct(stats.ttft, 50), ttft_ms_p99: pct(stats.ttft, 99),
    itl_ms_p50: pct(stats.itl, 50), itl_ms_p99: pct(stats.itl, 99),
  };
}

async function startWick(bin, model, threads) {
  const argv = ["serve", "--port", "0", "--max-tokens-limit", "100000"];
  if (model) argv.push("--model", model);
  if (threads) argv.push("--threads", threads);
  const proc = spawn(bin, argv, { stdio: ["ignore", "pipe", "inherit"] });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    proc.on("exit", (c) => reject(new Error("wick serve exited " + c)));
  });
  return { url, stop: () => new Promise((r) => { proc.on("exit", r); proc.kill("SIGTERM"); }) };
}

const a = args();
const server = a.spawn ? await startWick(a.spawn, a.model, a.threads) : null;
const url = server ? server.url : a.url;
const rows = [];
for (const c of a.clients.split(",").map(Number)) {
  rows.push(await run(url, a.apiKey, c, a.seconds, a.maxTokens, a.promptWords));
}
if (server) await server.stop();
if (a.json) {
  console.log(JSON.stringify(rows, null, 1));
} else {
  const f = (x) => (Number.isFinite(x) ? x.toFixed(1) : "-");
  console.log("| clients | tokens/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms | requests | errors | engine busy | in passes |");
  console.log("|---|---|---|---|---|---|---|---|---|---|");
  for (const r of rows)
    console.log(`| ${r.clients} | ${f(r.tokens_per_s)} | ${f(r.ttft_ms_p50)} | ${f(r.ttft_ms_p99)} | ` +
                `${f(r.itl_ms_p50)} | ${f(r.itl_ms_p99)} | ${r.requests} | ${r.errors} | ` +
                `${f(r.engine_busy_pct)} % | ${f(r.in_passes_pct)} % |`);
}
