"""Per-token decode cost of the Python bindings against the CLI (issue 22). Measures; checks
nothing.

For one model and prompt, greedy decode of N tokens, median of R runs each (the modes take
turns within each repetition):
  cli        `wick generate --json`: timings.decode_ms / decode_steps (the engine's own loop)
  generate   wick.generate(...).timings, the same engine loop called from Python
  generate_wall  wall time of wick.generate over the decode steps only (total minus the
             prefill the result reports): adds the worker thread and the Python call
  step       a Python loop: logits, state = model.step(id, state); id = argmax(logits)
  compat     the rwkv pip API loop: out, state = RWKV.forward([id], state) on the 3L-array list
             (state copied in and out of wick on every call)
The overhead of a mode is its ms/token minus the CLI's.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py --model M [--tokens 64]
        [--reps 5] [--threads 2] [--wick build/wick]
"""

import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

import wick
from wick.compat.model import RWKV

PROMPT = "The Eiffel tower is"


def interleaved_medians(modes, reps):
    """Runs every mode once per repetition, in turn, so that load on a shared machine falls on
    all of them alike; returns the median ms/token of each."""
    samples = {name: [] for name, _ in modes}
    for _ in range(reps):
        for name, fn in modes:
            samples[name].append(fn())
    return [(name, statistics.median(samples[name])) for name, _ in modes]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--wick", default=os.path.join(os.path.dirname(__file__), "..", "build", "wick"))
    a = ap.parse_args()
    n = a.tokens
    gen_args = dict(max_tokens=n, stop_tokens=[])

    def cli():
        out = subprocess.run([a.wick, "generate", "--model", a.model, "--prompt", PROMPT,
                              "--max-tokens", str(n), "--no-stop-eot", "--json"],
                             capture_output=True, check=True,
                             env={**os.environ, "WICK_THREADS": str(a.threads)}).stdout
        t = json.loads(out)["timings"]
        return t["decode_ms"] / n

    model = wick.Model(a.model, threads=a.threads)
    tok = wick.Tokenizer.for_model(model)
    ids = tok.encode(PROMPT)

    def gen():
        r = wick.generate(model, tok, PROMPT, **gen_args)
        return r.timings["decode_ms"] / r.timings["decode_steps"]

    def gen_wall():
        t0 = time.perf_counter()
        r = wick.generate(model, tok, PROMPT, **gen_args)
        return ((time.perf_counter() - t0) * 1e3 - r.timings["prefill_ms"]) / n

    def step():
        logits, state = model.forward(ids)
        t0 = time.perf_counter()
        for _ in range(n):
            logits, state = model.step(int(np.argmax(logits)), state)
        return (time.perf_counter() - t0) * 1e3 / n

    compat_model = RWKV(a.model, "cpu fp32")

    def compat():
        out, state = compat_model.forward(ids, None)
        t0 = time.perf_counter()
        for _ in range(n):
            out, state = compat_model.forward([int(np.argmax(out))], state)
        return (time.perf_counter() - t0) * 1e3 / n

    for f in (cli, gen, step, compat):  # warm-up (page cache, runtime threads)
        f()
    rows = interleaved_medians([("cli", cli), ("generate", gen), ("generate_wall", gen_wall),
                                ("step", step), ("compat", compat)], a.reps)
    base = rows[0][1]
    info = model.info
    print("model %s (L=%d C=%d V=%d), %d tokens, %d threads, median of %d, isa %s" % (
        os.path.basename(a.model), info["geometry"]["n_layer"], info["geometry"]["n_embd"],
        info["geometry"]["vocab"], n, a.threads, a.reps, wick.kernel_isa()))
    print("| mode | ms/token | overhead vs CLI, us/token |")
    print("|---|---|---|")
    for name, ms in rows:
        print("| %s | %.3f | %+.0f |" % (name, ms, (ms - base) * 1e3))


if __name__ == "__main__":
    main()
