// Replicas (README "Scaling out", issue 19): deploy/local-cluster.sh runs Redis, two `wick serve`
// replicas sharing prefix states through it, and nginx in front, on loopback ports. Checked here:
// a conversation alternating between replicas equals one process and reuses states from Redis;
// damaged or foreign values in Redis are refused and recomputed; replicas with another
// --precision never reuse them; a dead Redis costs only recomputation and the tier recovers; 16
// interleaved conversations have no cross-talk; a replica SIGKILLed mid-conversation behind nginx
// is replaced by the other with the same text. Skips when redis-server or nginx is missing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { WICK, startServer, metric, waitFor, skipReason } from "./harness.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const CLUSTER = path.join(here, "../../deploy/local-cluster.sh");
const have = (cmd) => spawnSync("sh", ["-c", `command -v ${cmd} || test -x /usr/sbin/${cmd}`]).status === 0;
const skip = skipReason(!have("redis-server") || !have("nginx")
  ? "redis-server and nginx are needed (Debian: redis-server nginx; scripts/setup.sh installs them)"
  : false);

// A loopback port nobody listens on.
function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}
async function portsFree(base, n) {
  for (let i = 0; i < n; ++i) {
    const ok = await new Promise((resolve) => {
      const s = net.createServer();
      s.once("error", () => resolve(false));
      s.listen(base + i, "127.0.0.1", () => s.close(() => resolve(true)));
    });
    if (!ok) return false;
  }
  return true;
}

// A minimal RESP client: one command, one reply (bulk strings as Buffers).
function redis(port, ...args) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, "127.0.0.1");
    const parts = [Buffer.from(`*${args.length}\r\n`)];
    for (const a of args) {
      const b = Buffer.isBuffer(a) ? a : Buffer.from(String(a));
      parts.push(Buffer.from(`$${b.length}\r\n`), b, Buffer.from("\r\n"));
    }
    let buf = Buffer.alloc(0);
    const parse = (at) => {  // [value, next] or null when incomplete
      const eol = buf.indexOf("\r\n", at);
      if (eol < 0) return null;
      const kind = String.fromCharCode(buf[at]), line = buf.toString("latin1", at + 1, eol);
      if (kind === "+" ) return [line, eol + 2];
      if (kind === "-") return [new Error(line), eol + 2];
      if (kind === ":") return [Number(line), eol + 2];
      if (kind === "$") {
        const n = Number(line);
        if (n < 0) return [null, eol + 2];
        if (buf.length < eol + 2 + n + 2) return null;
        return [buf.subarray(eol + 2, eol + 2 + n), eol + 4 + n];
      }
      if (kind === "*") {
        const n = Number(line), out = [];
        let next = eol + 2;
        for (let i = 0; i < n; ++i) { const r = parse(next); if (!r) return null; out.push(r[0]); next = r[1]; }
        return [out, next];
      }
      return [new Error("bad reply"), buf.length];
    };
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      const r = parse(0);
      if (r) { sock.end(); r[0] instanceof Error ? reject(r[0]) : resolve(r[0]); }
    });
    sock.on("error", reject);
    sock.write(Buffer.concat(parts));
  });
}

let dir, env, nginxPort, redisPort, reference, extra = [];
const writers = [];  // replica URLs whose writes a test waits for
const replica = (i) => `http://127.0.0.1:${nginxPort + i}`;
const cluster = (cmd) => execFileSync(CLUSTER, [cmd], { env, encoding: "utf8" });

before(async () => {
  if (skip) return;
  dir = mkdtempSync(path.join(os.tmpdir(), "wick-cluster-"));
  redisPort = await freePort();
  // Below Linux's ephemeral range (32768+), away from the Redis port.
  do nginxPort = 20000 + Math.floor(Math.random() * 12000);
  while (Math.abs(nginxPort - redisPort) < 4 || !(await portsFree(nginxPort, 3)));
  env = { ...process.env, WICK_BIN: WICK, WICK_CLUSTER_DIR: dir, WICK_NGINX_PORT: String(nginxPort),
          WICK_REDIS_PORT: String(redisPort), WICK_REPLICAS: "2", WICK_ARGS: "--threads 1" };
  cluster("start");
  reference = await startServer(["--cache-mib", "0"]);  // one process, nothing cached
});

after(async () => {
  if (skip) return;
  for (const s of extra) await s.stop();
  if (reference) await reference.stop();
  try { cluster("stop"); } catch (e) { /* reported by the tests */ }
  rmSync(dir, { recursive: true, force: true });
});

// One chat turn: the whole history, seeded sampling (the text depends on the context).
async function turn(url, history, seed, headers = {}) {
  const res = await fetch(url + "/v1/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: JSON.stringify({ messages: history, max_tokens: 12, temperature: 1, seed }),
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return { text: body.choices[0].message.content, timings: body.timings,
           cached: body.usage.prompt_tokens_details.cached_tokens,
           replica: res.headers.get("x-wick-replica") };
}

// A conversation of `n` turns; turn t goes to pick(t). Returns each turn's reply.
async function conversation(name, n, pick, headers = {}) {
  const history = [{ role: "system", content: `You are assistant ${name}.` }];
  const out = [];
  for (let t = 0; t < n; ++t) {
    history.push({ role: "user", content: `Turn ${t} of ${name}: go on.` });
    const r = await turn(pick(t), history, 1000 + t, headers);
    out.push(r);
    history.push({ role: "assistant", content: r.text });
  }
  return out;
}

// Waits until every replica's Redis writer is idle (a turn's states are queued before its reply).
async function settle() {
  for (const url of [replica(1), replica(2), ...writers]) {
    const idle = await waitFor(async () => {
      try { return (await metric(url, "wick_cache_l2_write_queue")) === 0; } catch { return true; }
    }, 5000);
    assert.ok(idle, `${url}: states still queued for Redis after 5 s`);
  }
}

test("a conversation alternating between replicas equals one process and reuses Redis states", { skip }, async () => {
  const solo = await conversation("alt", 6, () => reference.url);
  const got = [];
  const history = [{ role: "system", content: "You are assistant alt." }];
  for (let t = 0; t < 6; ++t) {
    history.push({ role: "user", content: `Turn ${t} of alt: go on.` });
    const r = await turn(replica(1 + (t % 2)), history, 1000 + t);
    got.push(r);
    history.push({ role: "assistant", content: r.text });
    assert.equal(r.replica, `r${1 + (t % 2)}`);
    await settle();
  }
  assert.deepEqual(got.map((r) => r.text), solo.map((r) => r.text));
  assert.notEqual(solo[0].text, solo[1].text);  // the texts depend on the turn
  assert.equal(got[0].timings.cache_tier, "none");
  for (let t = 1; t < 6; ++t) {
    assert.equal(got[t].timings.cache_tier, "redis", `turn ${t}: ${JSON.stringify(got[t].timings)}`);
    assert.ok(got[t].cached > 0, `turn ${t}`);
  }
  assert.ok(await metric(replica(2), "wick_cache_l2_hits_total") >= 3);
});

test("damaged and foreign values are refused, recomputed and counted", { skip }, async () => {
  // Replicas with no local tier, so every reuse would come from Redis: fp32 and bf16.
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const c = await startServer(["--redis", redisUrl, "--cache-mib", "0", "--replica-name", "c"]);
  const d = await startServer(["--redis", redisUrl, "--cache-mib", "0", "--replica-name", "d", "--precision", "bf16"]);
  extra.push(c, d);
  writers.push(c.url, d.url);
  const history = [{ role: "system", content: "You are assistant dmg." },
                   { role: "user", content: "Turn 0 of dmg: go on." }];
  const first = await turn(replica(1), history, 7);
  await settle();
  history.push({ role: "assistant", content: first.text }, { role: "user", content: "Turn 1 of dmg: more." });
  const solo = await turn(reference.url, history, 8);
  // bf16 on the same Redis never reuses fp32 states.
  const bf = await turn(d.url, history, 8);
  assert.equal(bf.timings.cache_tier, "none");
  assert.equal(bf.cached, 0);
  assert.equal(await metric(d.url, "wick_cache_l2_hits_total"), 0);
  assert.ok(await metric(d.url, "wick_cache_l2_misses_total") >= 1);
  await settle();
  const keys = (await redis(redisPort, "KEYS", "wick:*")).map((k) => k.toString("latin1"));
  const good = new Map();
  for (const k of keys) good.set(k, await redis(redisPort, "GET", k));
  // A value of the bf16 replica (another scope) stands in for another model's state.
  const foreign = [...good.values()].find((v) => v.toString("latin1").includes("precision=bf16"));
  assert.ok(foreign, "the bf16 replica wrote its states");
  // Sanity: the intact values serve c from Redis.
  const ok = await turn(c.url, history, 8);
  assert.equal(ok.timings.cache_tier, "redis");
  assert.equal(ok.text, solo.text);
  let errors = await metric(c.url, "wick_cache_l2_errors_total");
  for (const kind of ["garbage", "truncated", "foreign"]) {
    // Every value now in Redis (c writes back what it recomputes, so list them each time, once
    // its writes of the previous turn have landed: one written after the listing would be a
    // valid value the next turn reuses).
    await settle();
    for (const k of (await redis(redisPort, "KEYS", "wick:*")).map((b) => b.toString("latin1"))) {
      const v = good.get(k) ?? await redis(redisPort, "GET", k);
      const bad = kind === "garbage" ? Buffer.alloc(999, 0x67)
                : kind === "truncated" ? v.subarray(0, Math.floor(v.length / 3)) : foreign;
      await redis(redisPort, "SET", k, bad);
    }
    const r = await turn(c.url, history, 8);
    assert.equal(r.text, solo.text, kind);
    assert.equal(r.timings.cache_tier, "none", kind);
    assert.equal(r.cached, 0, kind);
    const now = await metric(c.url, "wick_cache_l2_errors_total");
    assert.ok(now > errors, `${kind}: errors ${errors} -> ${now}`);
    errors = now;
  }
  assert.match(c.stderr(), /refused the value/);
});

test("a dead Redis costs only recomputation; the tier recovers without a restart", { skip }, async () => {
  cluster("redis-stop");
  const solo = await conversation("down", 2, () => reference.url);
  const got = await conversation("down", 2, (t) => replica(1 + t));
  assert.deepEqual(got.map((r) => r.text), solo.map((r) => r.text));
  assert.notEqual(got[1].timings.cache_tier, "redis");
  assert.ok(await metric(replica(2), "wick_cache_l2_errors_total") >= 1);
  cluster("redis-start");
  let back = false;
  for (let i = 0; i < 40 && !back; ++i) {
    const r = await conversation(`up${i}`, 2, (t) => replica(1 + t));
    back = r[1].timings.cache_tier === "redis";
    if (!back) await new Promise((res) => setTimeout(res, 500));
  }
  assert.ok(back, "the replicas did not use Redis again within 20 s");
});

test("16 conversations interleaved across 2 replicas: each equals its solo run", { skip }, async () => {
  const names = Array.from({ length: 16 }, (_, i) => `c${i}`);
  const solo = [];
  for (const n of names) solo.push(await conversation(n, 3, () => reference.url));
  const histories = names.map((n) => [{ role: "system", content: `You are assistant ${n}.` }]);
  const got = names.map(() => []);
  for (let t = 0; t < 3; ++t) {
    await Promise.all(names.map(async (n, i) => {
      histories[i].push({ role: "user", content: `Turn ${t} of ${n}: go on.` });
      const r = await turn(replica(1 + ((i + t) % 2)), histories[i], 1000 + t);
      got[i].push(r.text);
      histories[i].push({ role: "assistant", content: r.text });
    }));
    await settle();
  }
  for (let i = 0; i < names.length; ++i) assert.deepEqual(got[i], solo[i].map((r) => r.text), names[i]);
  assert.notDeepEqual(got[0], got[1]);
});

test("behind nginx: requests without a session id are spread over the replicas", { skip }, async () => {
  const front = `http://127.0.0.1:${nginxPort}`;
  const seen = new Set();
  for (let i = 0; i < 24; ++i) {
    const r = await fetch(front + "/v1/models");
    assert.equal(r.status, 200);
    seen.add(r.headers.get("x-wick-replica"));
  }
  assert.deepEqual([...seen].sort(), ["r1", "r2"]);
  // With one: always the same replica.
  const one = new Set();
  for (let i = 0; i < 8; ++i)
    one.add((await fetch(front + "/v1/models", { headers: { "X-Session-Id": "s-7" } })).headers.get("x-wick-replica"));
  assert.equal(one.size, 1);
});

test("behind nginx: a session sticks to one replica and survives its SIGKILL", { skip }, async () => {
  const front = `http://127.0.0.1:${nginxPort}`;
  const headers = { "X-Session-Id": "conversation-42" };
  const solo = await conversation("fail", 4, () => reference.url);
  const history = [{ role: "system", content: "You are assistant fail." }];
  const got = [];
  for (let t = 0; t < 4; ++t) {
    history.push({ role: "user", content: `Turn ${t} of fail: go on.` });
    if (t === 2) {  // kill the replica holding the conversation
      const holder = got[1].replica;
      assert.equal(got[0].replica, holder, "one session, one replica");
      const pid = Number(readFileSync(path.join(dir, `${holder}.pid`), "utf8"));
      process.kill(pid, "SIGKILL");
      await waitFor(async () => { try { process.kill(pid, 0); return false; } catch { return true; } }, 5000);
    }
    const r = await turn(front, history, 1000 + t, headers);
    got.push(r);
    history.push({ role: "assistant", content: r.text });
    await settle();
  }
  assert.deepEqual(got.map((r) => r.text), solo.map((r) => r.text));
  assert.notEqual(got[2].replica, got[1].replica);
  assert.equal(got[2].timings.cache_tier, "redis");
  assert.ok(got[2].cached > 0);
});
