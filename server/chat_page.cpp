#include "server/chat_page.h"

namespace wick::server {

namespace {

// Element ids are part of the browser test (tests/server/page.test.mjs): #key, #system, #input,
// #send, #stop, #messages (one .msg per turn, .assistant for replies), #rate, #status.
constexpr std::string_view kPage = R"WICKPAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>wick chat</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; display: flex; flex-direction: column;
         height: 100vh; background: #fafafa; color: #222; }
  header { padding: 8px 14px; background: #20313b; color: #eee; display: flex; gap: 14px;
           align-items: center; flex-wrap: wrap; }
  header input { width: 7em; }
  #messages { flex: 1; overflow-y: auto; padding: 12px 14px; }
  .msg { white-space: pre-wrap; margin: 6px 0; padding: 8px 10px; border-radius: 6px;
         max-width: 80ch; }
  .user { background: #dfeaf3; margin-left: auto; }
  .assistant { background: #fff; border: 1px solid #ddd; }
  .error { background: #fbe3e3; }
  form { display: flex; gap: 8px; padding: 10px 14px; border-top: 1px solid #ddd; }
  textarea { flex: 1; height: 3.2em; font: inherit; }
  #status { opacity: .8; }
</style>
</head>
<body>
<header>
  <strong id="model">wick</strong>
  <label>key <input id="key" type="password" placeholder="API key"></label>
  <label>system <input id="system" style="width:16em" placeholder="optional system prompt"></label>
  <label>max tokens <input id="max" type="number" value="256" min="1"></label>
  <label>temperature <input id="temp" type="number" value="1" step="0.1" min="0" max="2"></label>
  <span id="rate"></span><span id="status"></span>
</header>
<div id="messages"></div>
<form id="form">
  <textarea id="input" placeholder="Message (Enter sends, Shift+Enter: new line)"></textarea>
  <button id="send" type="submit">Send</button>
  <button id="stop" type="button" disabled>Stop</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const history = [];
let controller = null;
$("key").value = sessionStorage.getItem("wick-key") || "";
$("key").addEventListener("change", () => { sessionStorage.setItem("wick-key", $("key").value); loadModel(); });

function headers() {
  const h = { "Content-Type": "application/json" };
  const k = $("key").value.trim();
  if (k) h["Authorization"] = "Bearer " + k;
  return h;
}
function bubble(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  d.textContent = text;
  $("messages").appendChild(d);
  $("messages").scrollTop = $("messages").scrollHeight;
  return d;
}
async function loadModel() {
  try {
    const r = await fetch("/v1/models", { headers: headers() });
    if (r.status === 401) { $("status").textContent = "this server needs an API key"; $("key").focus(); return; }
    const j = await r.json();
    $("model").textContent = j.data[0].id;
    $("status").textContent = "";
  } catch (e) { $("status").textContent = String(e); }
}

async function send(text) {
  history.push({ role: "user", content: text });
  bubble("user", text);
  const out = bubble("assistant", "");
  const messages = [];
  if ($("system").value.trim()) messages.push({ role: "system", content: $("system").value.trim() });
  messages.push(...history);
  controller = new AbortController();
  $("send").disabled = true; $("stop").disabled = false; $("status").textContent = "";
  const t0 = performance.now();
  let first = 0, tokens = 0, chunks = 0, reply = "", drawing = false;
  // One DOM update per frame, however fast the tokens arrive.
  const render = () => {
    if (drawing) return;
    drawing = true;
    requestAnimationFrame(() => {
      drawing = false;
      out.textContent = reply;
      $("messages").scrollTop = $("messages").scrollHeight;
      const s = (performance.now() - (first || t0)) / 1000;
      const n = tokens || chunks;
      if (s > 0 && first) $("rate").textContent = (n / s).toFixed(1) + " tokens/s";
    });
  };
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), signal: controller.signal,
      body: JSON.stringify({ messages, stream: true, stream_options: { include_usage: true },
                             max_tokens: Number($("max").value) || 256,
                             temperature: Number($("temp").value) }),
    });
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      throw new Error((j.error && j.error.message) || ("HTTP " + r.status));
    }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let at;
      while ((at = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, at); buf = buf.slice(at + 2);
        for (const line of event.split("\n")) {
          if (!line.startsWith("data: ")) continue;  // ": ping" comments and the like
          const data = line.slice(6);
          if (data === "[DONE]") continue;
          const j = JSON.parse(data);
          if (j.error) throw new Error(j.error.message);
          if (j.usage) tokens = j.usage.completion_tokens;
          for (const c of j.choices || []) {
            if (c.delta && c.delta.content) {
              if (!first) first = performance.now();
              reply += c.delta.content; chunks++;
            }
          }
          render();
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") { $("status").textContent = "stopped"; out.textContent = reply; }
    else { out.classList.add("error"); out.textContent = reply + (reply ? "\n" : "") + "error: " + e.message; }
  } finally {
    history.push({ role: "assistant", content: reply });
    controller = null;
    $("send").disabled = false; $("stop").disabled = true;
  }
}

$("form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value.trim();
  if (!text || controller) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("form").requestSubmit(); }
});
$("stop").addEventListener("click", () => { if (controller) controller.abort(); });
loadModel();
</script>
</body>
</html>
)WICKPAGE";

}  // namespace

std::string_view chat_page_html() { return kPage; }

}  // namespace wick::server
