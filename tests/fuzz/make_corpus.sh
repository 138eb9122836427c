#!/bin/sh
# Writes the seed corpora tests/fuzz/corpus/<target>/ (committed; under 5 MiB in all) from wick's
# own tools and the shared fixtures. Run from anywhere after building:
#   tests/fuzz/make_corpus.sh [BUILD_DIR]      (default: build)
# Seeds are small on purpose: the fuzzers mutate them, and small inputs run fast.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
wick="$build/wick"
replay="$build/tests/fuzz/wick_fuzz_replay"
fixtures="${WICK_FIXTURES:-$root/../shared/fixtures}"
corpus="$here/corpus"
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

seed() { mkdir -p "$corpus/$1"; cp "$2" "$corpus/$1/$3"; }

# Checkpoints: a 1-layer synthetic model (C 64, vocabulary 32) as safetensors, .pth and .rwkvq.
"$wick" synth -g 1:64:32 --dtype bf16 -o "$tmp/s.safetensors" >/dev/null
"$wick" synth -g 1:64:32 --dtype fp32 --seed 1 -o "$tmp/s32.safetensors" >/dev/null
"$py" "$here/tools/safetensors_to_pth.py" "$tmp/s.safetensors" "$tmp/s.pth"
# (sb6 and sym blocks need 256 columns: C 256 for that seed; at C 64 everything is rtn@8.)
"$wick" synth -g 1:256:32 --dtype fp32 --seed 2 -o "$tmp/w256.safetensors" >/dev/null
"$wick" quantize "$tmp/w256.safetensors" "$tmp/sb6.rwkvq" --plain --layout sb6:4 >/dev/null 2>&1
"$wick" quantize "$tmp/s32.safetensors" "$tmp/sym.rwkvq" --plain --layout sym:8 >/dev/null 2>&1
seed safetensors "$tmp/s.safetensors" synth-1-64-32-bf16.safetensors
seed pth "$tmp/s.pth" synth-1-64-32-bf16.pth
seed zip "$tmp/s.pth" synth-1-64-32-bf16.pth
seed rwkvq "$tmp/sb6.rwkvq" synth-1-256-32-sb6-4.rwkvq
seed rwkvq "$tmp/sym.rwkvq" synth-1-64-32-rtn-8.rwkvq
# The pickle inside the .pth, and a few plain pickles (memo, nesting, every scalar kind).
"$py" - "$tmp/s.pth" "$corpus/pickle" <<'PY'
import pickle, sys, zipfile, collections, os
z = zipfile.ZipFile(sys.argv[1])
out = sys.argv[2]
os.makedirs(out, exist_ok=True)
open(os.path.join(out, "checkpoint-data.pkl"), "wb").write(z.read("archive/data.pkl"))
shared = [1, 2.5, "x"]
values = {"scalars": [None, True, False, 0, -1, 2**40, 1.5, "text", b"bytes"],
          "nested": collections.OrderedDict(a=(1, (2, [3, {"b": shared}])), c=shared)}
for proto in (2, 3, 4):
    open(os.path.join(out, f"values-p{proto}.pkl"), "wb").write(pickle.dumps(values, protocol=proto))
PY
# Tokenizers: a small BPE tokenizer.json, two refused ones, and the head of the World vocabulary
# (its first 400 lines hold every single byte).
seed tokenizer_json "$fixtures/tokenizers/vocab/tiny_bpe_1k.json" tiny_bpe_1k.json
seed tokenizer_json "$fixtures/tokenizers/bpe/reject/reject_merge_token_not_in_vocab.json" reject_merge.json
seed tokenizer_json "$fixtures/tokenizers/bpe/reject/reject_added_token_id_collision.json" reject_added.json
mkdir -p "$corpus/world_vocab"
head -n 400 "$root/models/rwkv_vocab_v20230424.txt" > "$corpus/world_vocab/world-400.txt"
# State files: the tiny model after a generation (format 2: logits and sampler), after a prompt
# only, and an RWKV-X state with its KV caches (the synthetic model fuzz_models.cpp builds).
"$wick" generate --prompt "Once upon a time" -n 4 --temperature 1 --presence-penalty 0.3 \
  --save-state "$tmp/gen.st" -q >/dev/null
"$wick" generate --prompt "abc" -n 0 --save-state "$tmp/fold.st" -q >/dev/null
seed state_file "$tmp/gen.st" generated.safetensors
seed state_file "$tmp/fold.st" folded.safetensors
"$wick" synth -g 2:64:256 --attention-blocks 1 --dtype fp32 --seed 3 -o "$tmp/x.safetensors" >/dev/null
"$wick" generate --model "$tmp/x.safetensors" --prompt "KV" -n 2 --save-state "$tmp/x.st" -q >/dev/null
seed state_file_rwkvx "$tmp/x.st" rwkvx-4-tokens.safetensors
# Task heads: the fixtures' embedding heads (tiny model width) and one reranker head, and the
# library-made synthetic head and document index.
seed embed_head "$fixtures/tasks/rm_embed_head_swift.safetensors" rm_embed_head_swift.safetensors
seed embed_head "$fixtures/tasks/rm_embed_head_py.safetensors" rm_embed_head_py.safetensors
"$replay" --write-seeds "$corpus"
# Activation statistics: the fixture's and wick's own.
printf 'The quick brown fox jumps over the lazy dog. ' > "$tmp/text.txt"
"$wick" synth -g 1:64:256 --dtype fp32 -o "$tmp/b.safetensors" >/dev/null
"$wick" act-stats --model "$tmp/b.safetensors" --text "$tmp/text.txt" --ctx 8 -o "$tmp/act.safetensors" >/dev/null 2>&1
seed act_stats "$fixtures/rwkvq/tiny_act_stats.safetensors" tiny_act_stats.safetensors
seed act_stats "$tmp/act.safetensors" wick-act-stats.safetensors
# Quantiser configs: a manifest (config under "config") and small config objects.
seed quant_config "$fixtures/rwkvq/tiny_compression.manifest.json" tiny_compression.manifest.json
mkdir -p "$corpus/quant_config"
printf '{"bits": {"proj": 6, "cmix": 5, "emb": 8, "head": 6}, "group_scale": {"proj": 64}}\n' \
  > "$corpus/quant_config/bits.json"
printf '{"config": {"bits": {"proj": 8}, "group_scale_mode": {"proj": "sym"}}}\n' \
  > "$corpus/quant_config/wrapped.json"
# HTTP: one request per route (and a streamed one, a bad body, an unknown route).
mkdir -p "$corpus/http"
req() {  # req NAME METHOD PATH [BODY]
  body=${4:-}
  printf '%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' \
    "$2" "$3" "$(printf '%s' "$body" | wc -c)" "$body" > "$corpus/http/$1.http"
}
req chat POST /v1/chat/completions '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":1,"seed":3,"stop":["\n"],"logprobs":true,"top_logprobs":2}'
req chat-stream POST /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}'
req completion POST /v1/completions '{"prompt":"Once upon","max_tokens":4,"n":2,"top_p":0.9,"presence_penalty":0.5,"state":"warm","logit_bias":{"10":-100}}'
req completion-tokens POST /v1/completions '{"prompt":[72,105],"max_tokens":2,"echo":true,"temperature":0.5}'
req embeddings POST /v1/embeddings '{"input":["hello","world"],"encoding_format":"base64"}'
req rerank POST /v1/rerank '{"query":"dragons","documents":["a dragon","a cat"],"top_n":1,"return_documents":true}'
req tokenize POST /tokenize '{"content":"Hello","with_pieces":true}'
req detokenize POST /detokenize '{"tokens":[72,105]}'
req models GET /v1/models
req states GET /v1/states
req health GET /health
req metrics GET /metrics
req bad-json POST /v1/chat/completions '{"messages": [}'
req unknown GET /v1/nothing
echo "corpus written: $(du -sh "$corpus" | cut -f1) in $(find "$corpus" -type f | wc -l) files"
