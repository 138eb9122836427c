// Hostile input with raw sockets: malformed JSON, wrong types, oversize bodies, slowloris, a
// client that never reads its stream, many dropped connections, a body cut mid-way, Expect:
// 100-continue. After each, the server answers the next request normally. SIGTERM with streams
// open: exit 0 (and, in the ASan build, no leak).
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startServer, metric, waitFor, WICK, skipReason } from "./harness.mjs";

// Sends raw bytes, collects everything until the server closes or `ms` passes.
function raw(port, chunks, { ms = 5000, gapMs = 0 } = {}) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    let data = "";
    let closed = false;
    const timer = setTimeout(() => { s.destroy(); resolve({ data, closed }); }, ms);
    s.on("data", (d) => { data += d; });
    s.on("close", () => { closed = true; clearTimeout(timer); resolve({ data, closed }); });
    s.on("error", () => {});
    s.on("connect", async () => {
      for (const c of chunks) {
        if (s.destroyed) break;
        s.write(c);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
  });
}

function post(path, body, extra = "") {
  return `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extra}` +
         `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

const status = (data) => Number((data.match(/^HTTP\/1\.1 (\d{3})/) || [])[1]);

describe("hostile input", () => {
  let srv;
  before(async () => {
    srv = await startServer(["--read-timeout-s", "2", "--idle-timeout-s", "2", "--max-body-bytes", "65536",
                             "--max-tokens-limit", "10000000"]);
  });
  after(async () => { assert.equal((await srv.stop()).code, 0, srv.stderr()); });

  async function healthy() {
    const r = await fetch(srv.url + "/v1/chat/completions", { method: "POST",
      body: JSON.stringify({ messages: [{ role: "user", content: "still there?" }], max_tokens: 3 }) });
    assert.equal(r.status, 200);
    assert.equal((await r.json()).choices.length, 1);
  }

  test("malformed JSON and wrong types are 400s naming the field", async () => {
    const cases = [
      ["{not json", null],
      ["[1,2]", null],
      [JSON.stringify({ messages: "hi" }), "messages"],
      [JSON.stringify({ messages: [123] }), "messages[0]"],
      [JSON.stringify({ messages: [{}] }), "messages[0].role"],
      [JSON.stringify({ messages: [{ role: "wizard", content: "x" }] }), "messages[0].role"],
      [JSON.stringify({ messages: [{ role: "user", content: [{ type: "image_url" }] }] }), "messages[0].content[0].type"],
      [JSON.stringify({ messages: [{ role: "user", content: "x" }], max_tokens: "many" }), "max_tokens"],
      [JSON.stringify({ messages: [{ role: "user", content: "x" }], stop: [1] }), "stop"],
      [JSON.stringify({ messages: [{ role: "user", content: "x" }], logit_bias: { "999999": 1 } }), "logit_bias"],
      [JSON.stringify({ messages: [{ role: "user", content: "x" }], n: 0 }), "n"],
      [JSON.stringify({ messages: [{ role: "user", content: "x" }], tools: [{ type: "function" }] }), "tools"],
    ];
    for (const [body, param] of cases) {
      const r = await fetch(srv.url + "/v1/chat/completions", { method: "POST", body });
      assert.equal(r.status, 400, body);
      const e = (await r.json()).error;
      assert.equal(e.type, "invalid_request_error");
      assert.equal(e.param, param, body);
      assert.ok(e.message.length > 10);
    }
    await healthy();
  });

  test("an oversize body is a 413; Expect: 100-continue is answered", async () => {
    const big = JSON.stringify({ prompt: "x".repeat(70000) });
    const r = await raw(srv.port, [post("/v1/completions", big)]);
    assert.equal(status(r.data), 413);
    const small = JSON.stringify({ prompt: "hello", max_tokens: 2 });
    const head = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: ${small.length}\r\n\r\n`;
    const c = await new Promise((resolve) => {
      const s = net.connect(srv.port, "127.0.0.1");
      let data = "";
      s.on("data", (d) => {
        data += d;
        if (data.startsWith("HTTP/1.1 100") && !s.sentBody) { s.sentBody = true; s.write(small); }
        if (/\r\n\r\n\{.*\}$/s.test(data.split("HTTP/1.1 200")[1] || "")) { s.end(); resolve(data); }
      });
      s.on("connect", () => s.write(head));
      setTimeout(() => { s.destroy(); resolve(data); }, 4000);
    });
    assert.match(c, /^HTTP\/1\.1 100 Continue/);
    assert.match(c, /HTTP\/1\.1 200/);
    // Announced too large: refused before the body is sent.
    const refused = await raw(srv.port, [`POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 999999\r\n\r\n`]);
    assert.equal(status(refused.data), 413);
    await healthy();
  });

  test("slowloris headers and a body cut mid-way are dropped at the read timeout", async () => {
    const t0 = Date.now();
    const slow = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(10);
    const r = await raw(srv.port, [...slow], { ms: 15000, gapMs: 500 });
    assert.ok(r.closed, "connection closed");
    assert.equal(r.data, "", "no response to an unfinished request");
    assert.ok(Date.now() - t0 < 9000, "closed near --read-timeout-s");
    const cut = await raw(srv.port, [post("/v1/completions", JSON.stringify({ prompt: "abc" })).slice(0, -5)], { ms: 8000 });
    assert.ok(cut.closed);
    assert.equal(cut.data, "");
    await healthy();
  });

  test("malformed HTTP is a 400; 200 connections opened and dropped; silent idle ones time out", async () => {
    const bad = await raw(srv.port, ["THIS IS NOT HTTP\r\n\r\n"]);
    assert.equal(status(bad.data), 400);
    const socks = await Promise.all(Array.from({ length: 200 }, () => new Promise((resolve) => {
      const s = net.connect(srv.port, "127.0.0.1", () => resolve(s));
      s.on("error", () => resolve(s));
    })));
    for (const [i, s] of socks.entries()) {
      if (i % 2) s.write("POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro");
      s.destroy();
    }
    await healthy();
    const idle = await raw(srv.port, [], { ms: 8000 });
    assert.ok(idle.closed, "an idle connection is closed at --idle-timeout-s");
  });

  test("a client that never reads its stream is dropped and its row freed", async () => {
    // 90000 x 21 log-probabilities: within the per-request bound of 2^21.
    const body = JSON.stringify({ messages: [{ role: "user", content: "flood" }], max_tokens: 90000,
                                  stream: true, logprobs: true, top_logprobs: 20 });
    const s = net.connect(srv.port, "127.0.0.1");
    await new Promise((r) => s.on("connect", r));
    s.pause();  // never read
    try {
      s.write(post("/v1/chat/completions", body));
      assert.ok(await waitFor(async () => (await metric(srv.url, "wick_requests_running")) === 1, 5000));
      assert.ok(await waitFor(async () => (await metric(srv.url, "wick_requests_running")) === 0, 30000),
        "the unread stream's row is freed");
    } finally {
      s.destroy();  // also when an assertion failed, so the next test starts clean
    }
    await healthy();
  });

  test("a non-streaming request whose client leaves frees its row, also after pipelined bytes", async () => {
    // Chat that cannot stop by itself: no newline (the template's stops) and no id 0.
    const body = JSON.stringify({ messages: [{ role: "user", content: "go" }], max_tokens: 5000000,
                                  logit_bias: { "0": -100, "10": -100 } });
    for (const pipelined of ["", "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", "G"]) {
      const s = net.connect(srv.port, "127.0.0.1");
      s.on("error", () => {});
      await new Promise((r) => s.on("connect", r));
      s.write(post("/v1/chat/completions", body));
      assert.ok(await waitFor(async () => (await metric(srv.url, "wick_requests_running")) === 1, 5000),
        "the request runs");
      if (pipelined) {
        s.write(pipelined);
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(await metric(srv.url, "wick_requests_running"), 1, "still running before the close");
      }
      s.destroy();
      assert.ok(await waitFor(async () => (await metric(srv.url, "wick_requests_running")) === 0, 3000),
        `the row is freed when the client closes (pipelined: ${JSON.stringify(pipelined)})`);
    }
    await healthy();
  });

  test("deeply nested values are refused; HEAD gets headers only and the connection goes on", async () => {
    const deep = '{"messages":[{"role":"user","content":"x"}],"logit_bias":{"0":' + "[".repeat(30000) +
                 "]".repeat(30000) + "}}";
    const r = await fetch(srv.url + "/v1/chat/completions", { method: "POST", body: deep });
    assert.equal(r.status, 400);
    assert.match((await r.json()).error.message, /nests JSON deeper/);
    const two = await raw(srv.port, ["HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"]);
    const answers = two.data.split("HTTP/1.1 ").filter(Boolean);
    assert.equal(answers.length, 2, two.data);
    assert.match(answers[0], /^200 [\s\S]*Content-Length: 15\r\n/);  // GET's length ...
    assert.ok(answers[0].endsWith("\r\n\r\n"), "... and no body after HEAD");
    assert.match(answers[1], /^200 [\s\S]*\{"status":"ok"\}$/);
    await healthy();
  });

  test("a request never crashes the server: junk fields and deep nesting", async () => {
    for (const body of [
      JSON.stringify({ messages: [{ role: "user", content: "x" }], max_tokens: 1, extra: { a: [1, { b: null }] } }),
      "[".repeat(5000) + "]".repeat(5000),
      JSON.stringify({ prompt: [[]] }),
      JSON.stringify({ prompt: [-1] }),
      JSON.stringify({ prompt: "x", seed: -5 }),
      JSON.stringify({ input: 5 }),
    ]) {
      for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/tokenize", "/detokenize"]) {
        const r = await fetch(srv.url + path, { method: "POST", body });
        assert.ok([200, 400, 404].includes(r.status), `${path} ${body.slice(0, 40)}: ${r.status}`);
        await r.arrayBuffer();
      }
    }
    await healthy();
  });
});

describe("SIGTERM with streams open", () => {
  test("running streams end, /health turns 503, exit 0", async () => {
    const srv = await startServer(["--shutdown-grace-s", "1", "--max-tokens-limit", "10000000"]);
    const streams = Array.from({ length: 3 }, async () => {
      // Completions: no stop strings, so the streams cannot end by themselves within the grace.
      const r = await fetch(srv.url + "/v1/completions", { method: "POST",
        body: JSON.stringify({ prompt: "long", max_tokens: 5000000, stream: true }) });
      const text = await r.text();
      return text;
    });
    assert.ok(await waitFor(async () => (await metric(srv.url, "wick_requests_running")) === 3, 5000),
      "three streams running");
    srv.proc.kill("SIGTERM");
    // While draining (--shutdown-grace-s 1 with streams that do not end), /health answers 503; a
    // refused connection is not an answer.
    let health = null;
    assert.ok(await waitFor(async () => {
      try {
        const r = await fetch(srv.url + "/health");
        health = { status: r.status, retry: r.headers.get("retry-after"), body: await r.json() };
        return r.status === 503;
      } catch {
        return false;
      }
    }, 3000), "/health answered 503 while draining: " + JSON.stringify(health));
    assert.deepEqual(health.body, { status: "draining" });
    assert.ok(health.retry, "Retry-After while draining");
    const { code } = await srv.exited;
    assert.equal(code, 0, srv.stderr());
    for (const t of await Promise.all(streams)) {
      assert.match(t, /data: \[DONE\]\n\n$/, "every stream is closed properly");
      assert.match(t, /shutting down/);
    }
  });
});

const prlimit = ["/usr/bin/prlimit", "/bin/prlimit"].find((p) => existsSync(p));
const hardText = execFileSync("sh", ["-c", "ulimit -Hn"], { encoding: "utf8" }).trim();
const hardLimit = hardText === "unlimited" ? Infinity : Number(hardText);
describe("descriptor limits", {
  skip: skipReason((!prlimit && "prlimit (util-linux) not found") ||
        (!(hardLimit >= 300) && `the hard descriptor limit (${hardLimit}) is below 300`)),
}, () => {
  test("the soft limit is raised to the hard one; connections past the limit less 64 are closed, the others served", async () => {
    const raised = await startServer([], {}, [prlimit, "--nofile=200:300", "--"]);
    assert.match(raised.stderr(), /open-descriptor limit raised from 200 to 300; up to 236 connections/);
    assert.equal((await raised.stop()).code, 0);

    const srv = await startServer(["--idle-timeout-s", "30"], {}, [prlimit, "--nofile=100:100", "--"]);
    try {
      assert.match(srv.stderr(), /up to 36 connections \(--max-connections 4096 within the descriptor limit less 64\)/);
      const socks = await Promise.all(Array.from({ length: 50 }, () => new Promise((resolve) => {
        const s = net.connect(srv.port, "127.0.0.1", () => resolve(s));
        s.closedByServer = false;
        s.on("close", () => { s.closedByServer = true; });
        s.on("error", () => {});
      })));
      assert.ok(await waitFor(() => socks.filter((s) => s.closedByServer).length >= 14, 5000),
        `connections past 36 are closed: ${socks.filter((s) => s.closedByServer).length} of 50`);
      // The held ones are served (each is one of the 36).
      const held = socks.filter((s) => !s.closedByServer);
      assert.equal(held.length, 36);
      const answer = await new Promise((resolve) => {
        let data = "";
        held[0].on("data", (d) => { data += d; if (data.includes('{"status":"ok"}')) resolve(data); });
        held[0].write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        setTimeout(() => resolve(data), 3000);
      });
      assert.match(answer, /^HTTP\/1\.1 200/);
      for (const s of socks) s.destroy();
      assert.ok(await waitFor(async () => {
        try { return (await fetch(srv.url + "/health")).status === 200; } catch { return false; }
      }, 5000), "new connections are served once the others closed");
    } finally {
      assert.equal((await srv.stop()).code, 0, srv.stderr());
    }
  });
});

describe("a full queue", () => {
  let srv;
  before(async () => {
    srv = await startServer(["--queue", "1", "--max-rows", "1", "--max-tokens-limit", "10000000"]);
  });
  after(async () => { assert.equal((await srv.stop()).code, 0, srv.stderr()); });

  test("is a 503 with Retry-After, and the server goes on once it empties", async () => {
    const long = JSON.stringify({ prompt: "long", max_tokens: 5000000, stream: true });
    const aborts = [new AbortController(), new AbortController()];
    const running = fetch(srv.url + "/v1/completions", { method: "POST", body: long, signal: aborts[0].signal });
    assert.ok(await waitFor(async () => (await metric(srv.url, "wick_requests_running")) === 1, 5000),
      "one row running");
    const queued = fetch(srv.url + "/v1/completions", { method: "POST", body: long, signal: aborts[1].signal });
    assert.ok(await waitFor(async () => (await metric(srv.url, "wick_requests_queued")) === 1, 5000),
      "one request queued");
    const r = await fetch(srv.url + "/v1/completions", { method: "POST",
      body: JSON.stringify({ prompt: "one more", max_tokens: 2 }) });
    assert.equal(r.status, 503);
    assert.match(r.headers.get("retry-after") ?? "", /^\d+$/, "Retry-After in seconds");
    const e = (await r.json()).error;
    assert.equal(e.type, "service_unavailable_error");
    assert.match(e.message, /busy/);
    for (const a of aborts) a.abort();
    await Promise.allSettled([running, queued]);
    assert.ok(await waitFor(async () => (await metric(srv.url, "wick_requests_running")) === 0 &&
                                        (await metric(srv.url, "wick_requests_queued")) === 0, 5000));
    const ok = await fetch(srv.url + "/v1/completions", { method: "POST",
      body: JSON.stringify({ prompt: "again", max_tokens: 2 }) });
    assert.equal(ok.status, 200);
  });
});

describe("SIGTERM while the model loads", () => {
  test("exits 0 at once", async () => {
    // A model file that never finishes loading: a FIFO nobody writes.
    const fifo = path.join(mkdtempSync(path.join(tmpdir(), "wick-load-")), "model.safetensors");
    execFileSync("mkfifo", [fifo]);
    const proc = spawn(WICK, ["serve", "--port", "0", "--threads", "1", "--model", fifo],
                       { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    proc.stderr.on("data", (d) => { stderr += d; });
    const exited = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
    try {
      assert.ok(await waitFor(() => /loading/.test(stderr), 10000), "the load began:\n" + stderr);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(proc.exitCode, null, "still loading:\n" + stderr);
      const t0 = Date.now();
      proc.kill("SIGTERM");
      const timeout = new Promise((resolve) => setTimeout(() => resolve(null), 5000));
      const result = await Promise.race([exited, timeout]);
      assert.ok(result, "no exit within 5 s of SIGTERM during the load:\n" + stderr);
      assert.deepEqual(result, { code: 0, signal: null }, stderr);
      assert.ok(Date.now() - t0 < 5000);
      assert.match(stderr, /SIGTERM while loading the model/);
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill("SIGKILL");
        await exited;
      }
    }
  });
});
