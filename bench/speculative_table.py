#!/usr/bin/python3
"""Plain decoding against exact n-gram speculative decoding, side by side (README "Speculative
decoding"): for each case, alternating runs of `wick generate ... --json` without and with
`--speculate ngram --draft K`, checking that every pair returns the same tokens, then the medians
of the decode tokens/s, their ratio, the median of the pairwise ratios and the draft counters.

usage: bench/speculative_table.py [--wick build/wick] [--runs 9] [--synth FILE] [--draft 8]
  --synth FILE  also the synthetic 0.1B rows (make one with `wick synth -g 0.1b -o FILE`)
"""
import argparse
import json
import statistics
import subprocess
import sys

STORY = ("The lighthouse keeper climbed the stairs every evening. He lit the lamp, wound the "
         "clock and wrote one line in the log: all ships safe. ")


def cases(synth):
    tiny = []
    tiny.append(("tiny, \"Once upon a time\", greedy (repeats itself)", 512,
                 ["--prompt", "Once upon a time"]))
    tiny.append(("tiny, a story + \"Repeat the story.\" + its first words, greedy", 512,
                 ["--prompt", STORY + "\nRepeat the story.\n" + STORY[:40]]))
    for seed in (1, 2, 3):
        tiny.append((f"tiny, \"Once upon a time\", T 1, top-p 0.9, seed {seed} (non-repetitive)",
                     512, ["--prompt", "Once upon a time", "--temperature", "1", "--top-p", "0.9",
                           "--seed", str(seed)]))
    if not synth:
        return tiny
    big = [
        ("synth 0.1B bf16, a document + \"Repeat the document.\", greedy", 64,
         ["--model", synth, "--prompt", STORY * 2 + "\nRepeat the document.\n" + STORY[:40]]),
        ("synth 0.1B, \"The history of the city\", T 1, seed 1 (non-repetitive)", 64,
         ["--model", synth, "--prompt", "The history of the city", "--temperature", "1",
          "--seed", "1"]),
    ]
    return tiny + big


def run(wick, args, n, spec):
    cmd = [wick, "generate", *args, "-n", str(n), "--no-stop-eot", "--json", *spec]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wick", default="build/wick")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--synth", default="")
    ap.add_argument("--draft", type=int, default=8)
    a = ap.parse_args()
    spec = ["--speculate", "ngram", "--draft", str(a.draft)]
    print("| case | N, runs | plain tok/s | speculative tok/s | ratio of medians | median of "
          "pair ratios | drafted / accepted / passes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, n, args in cases(a.synth):
        plain, fast, ratios, counters = [], [], [], None
        for _ in range(a.runs):
            p = run(a.wick, args, n, [])
            s = run(a.wick, args, n, spec)
            if p["tokens"] != s["tokens"]:
                sys.exit(f"{name}: speculative tokens differ from plain decoding")
            plain.append(p["timings"]["decode_tokens_per_s"])
            fast.append(s["timings"]["decode_tokens_per_s"])
            ratios.append(fast[-1] / plain[-1])
            counters = s["speculative"]
        mp, ms = statistics.median(plain), statistics.median(fast)
        c = counters
        print(f"| {name} | {n}, {a.runs} | {mp:.1f} | {ms:.1f} | {ms / mp:.3f}x | "
              f"{statistics.median(ratios):.3f}x | {c['drafted']} / {c['accepted']} / "
              f"{c['passes']} |", flush=True)


if __name__ == "__main__":
    main()
