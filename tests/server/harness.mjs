// Starts `wick serve` on an ephemeral loopback port for a test file and stops it.
// WICK_BIN: the wick binary (ctest sets it); default ../../build/wick. WICK_FIXTURES: the shared
// fixtures folder (default ../../../shared/fixtures).
import { spawn, execFileSync } from "node:child_process";
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const WICK = process.env.WICK_BIN || path.join(here, "../../build/wick");
export const FIXTURES = process.env.WICK_FIXTURES || path.join(here, "../../../shared/fixtures");

// A test's `skip` option: the reason it cannot run (a missing package, tool or fixture), or false.
// In CI (WICK_CI_STRICT=1) everything is installed, so a reason there becomes a failing test
// instead: the suite cannot pass by skipping.
export function skipReason(reason) {
  if (reason && process.env.WICK_CI_STRICT === "1") {
    test(`needed in CI (WICK_CI_STRICT=1): ${reason}`, () => assert.fail(reason));
  }
  return reason;
}

// The openai client, or null (with the reason) when node_modules is missing: tests then skip.
export async function loadOpenAI() {
  try {
    return (await import("openai")).default;
  } catch (e) {
    return null;
  }
}

// `wrap`: a command the server runs under (["prlimit", "--nofile=100:100", "--"]).
export async function startServer(args = [], env = {}, wrap = []) {
  const argv = [...wrap, WICK, "serve", "--port", "0", "--threads", "1", ...args];
  const proc = spawn(argv[0], argv.slice(1), {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr.on("data", (d) => { stderr += d; });
  const url = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error("wick serve did not start:\n" + stderr)), 60000);
    proc.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[^\s]+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`wick serve exited ${code}:\n${stderr}`)); });
  });
  const exited = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
  const port = Number(new URL(url).port);
  return {
    url, port, proc, exited,
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      return exited;
    },
  };
}

export function cli(args) {
  return execFileSync(WICK, args, { encoding: "utf8", maxBuffer: 64 << 20 });
}

// GET /metrics is idempotent: a fetch that fails is retried twice. (undici may reuse a kept-alive
// socket at the moment the server closes it at its idle timeout - the tests exercise that timeout
// - and then fails the request without sending it; a server that is really gone fails all three.)
export async function metric(url, name, headers = {}) {
  let text;
  for (let attempt = 0; ; ++attempt) {
    try {
      text = await (await fetch(url + "/metrics", { headers })).text();
      break;
    } catch (e) {
      if (attempt >= 2) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const line = text.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
  return line ? Number(line.split(" ").pop()) : NaN;
}

export async function waitFor(cond, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

export function fixture(...parts) {
  const p = path.join(FIXTURES, ...parts);
  return existsSync(p) ? p : null;
}
