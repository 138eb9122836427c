"""wick.generate equals `wick generate --json` (greedy and seeded, byte-level and World
models); streaming concatenates to the text; Ctrl-C leaves a usable state; threads give their
solo results."""

import _thread
import json
import threading
import time

import numpy as np
import pytest

import wick

SEEDED = dict(temperature=1.0, top_p=0.9, presence_penalty=0.2, frequency_penalty=0.2,
              penalty_decay=0.996, seed=42)
SEEDED_FLAGS = ["--temperature", "1", "--top-p", "0.9", "--presence-penalty", "0.2",
                "--frequency-penalty", "0.2", "--penalty-decay", "0.996", "--seed", "42"]


def cli_generate(cli_json, model_path, prompt, n, *flags):
    args = ["generate", "--prompt", prompt, "--max-tokens", n, "--json"]
    if model_path:
        args += ["--model", model_path]
    return cli_json(*args, *flags)


@pytest.mark.parametrize("seeded", [False, True], ids=["greedy", "seeded"])
def test_generate_equals_cli_tiny(tiny, tiny_tok, cli_json, seeded):
    kw = SEEDED if seeded else {}
    flags = SEEDED_FLAGS if seeded else []
    results = []
    # (The tiny model's greedy text barely depends on its prompt; these two differ.)
    for prompt in ("Once upon a time", "ABCDEFG"):
        r = wick.generate(tiny, tiny_tok, prompt, max_tokens=40, **kw)
        ref = cli_generate(cli_json, None, prompt, 40, *flags)
        assert r.tokens == ref["tokens"] and r.text == ref["text"]
        assert r.stop_reason == ref["stop_reason"] and r.prompt_tokens == ref["prompt_tokens"]
        results.append(r.tokens)
    assert results[0] != results[1]  # a different prompt gives other tokens
    if seeded:  # a different seed gives different text
        a = wick.generate(tiny, tiny_tok, "ABCDEFG", max_tokens=40, **{**SEEDED, "seed": 43})
        assert a.tokens != r.tokens


@pytest.mark.parametrize("seeded", [False, True], ids=["greedy", "seeded"])
def test_generate_equals_cli_world(world, world_tok, world_path, cli_json, seeded):
    kw = SEEDED if seeded else {}
    flags = SEEDED_FLAGS if seeded else []
    results = []
    for prompt in ("The capital of France is", "Рецепт борща начинается с"):
        r = wick.generate(world, world_tok, prompt, max_tokens=24, **kw)
        ref = cli_generate(cli_json, world_path, prompt, 24, *flags)
        assert r.tokens == ref["tokens"] and r.text == ref["text"]
        assert r.stop_reason == ref["stop_reason"]
        results.append(r.tokens)
    assert results[0] != results[1]


def test_chatrwkv_sampler_and_stop_equal_cli(world, world_tok, world_path, cli_json):
    r = wick.generate(world, world_tok, "User: hi\n\nAssistant:", max_tokens=32, sampler="chatrwkv",
                      temperature=1.0, top_p=0.85, presence_penalty=0.2, frequency_penalty=0.2,
                      penalty_decay=0.996, seed=7)
    ref = cli_generate(cli_json, world_path, "User: hi\n\nAssistant:", 32, "--sampler", "chatrwkv",
                       "--seed", "7")
    assert r.tokens == ref["tokens"] and r.text == ref["text"]


def test_default_stop_token_is_end_of_text_on_world(world, world_tok):
    assert wick.default_stop_tokens(65536) == [0] and wick.default_stop_tokens(256) == []
    # Force id 0 with a logit bias: the default stops there, stop_tokens=[] generates through it.
    r = wick.generate(world, world_tok, "Hi", max_tokens=5, logit_bias={0: 1e9})
    assert r.stop_reason == "stop_token" and r.stop_token == 0 and r.tokens == [0]
    r = wick.generate(world, world_tok, "Hi", max_tokens=5, logit_bias={0: 1e9}, stop_tokens=[])
    assert r.stop_reason == "max_tokens" and r.tokens == [0] * 5


def test_stream_concatenation_equals_text(world, world_tok, tiny, tiny_tok):
    for model, tok, prompt in ((world, world_tok, "Привет, мир"), (tiny, tiny_tok, "Once upon")):
        whole = wick.generate(model, tok, prompt, max_tokens=40, **SEEDED)
        stream = wick.generate(model, tok, prompt, max_tokens=40, stream=True, **SEEDED)
        chunks = list(stream)
        assert all(isinstance(c, str) for c in chunks) and len(chunks) > 1
        assert "".join(chunks) == whole.text
        assert stream.result.tokens == whole.tokens
    # A stop string (greedy tiny text is " the the the ..."): never leaks into a chunk.
    whole = wick.generate(tiny, tiny_tok, "Once upon", max_tokens=40, stop="e the t")
    chunks = list(wick.generate(tiny, tiny_tok, "Once upon", max_tokens=40, stop=["e the t"],
                                stream=True))
    assert whole.stop_reason == "stop_string" and whole.stop_string == "e the t"
    assert "".join(chunks) == whole.text == " th"


def test_generate_continues_and_updates_state(tiny, tiny_tok):
    state = tiny.new_state()
    r = wick.generate(tiny, tiny_tok, "Once upon", max_tokens=10, state=state)
    # The state rule: prompt and every returned token absorbed.
    _, ref = tiny.forward(tiny_tok.encode("Once upon") + r.tokens)
    assert state == ref and state.n_tokens == 9 + 10


@pytest.mark.parametrize("seeded", [False, True], ids=["greedy", "seeded"])
def test_ten_plus_ten_tokens_equal_twenty(tiny, tiny_tok, cli, cli_json, tmp_path, seeded):
    """A State carries the logits and sampler of its generation (state files v2): an empty
    prompt continues it, in memory, through State.save/load, and from a file `wick generate
    --save-state` wrote - each equal to one run of 20 tokens, and to the CLI's continuation."""
    kw = SEEDED if seeded else dict(presence_penalty=0.5)
    flags = SEEDED_FLAGS if seeded else ["--presence-penalty", "0.5"]
    whole = wick.generate(tiny, tiny_tok, "Once upon a time", max_tokens=20, **kw)
    state = tiny.new_state()
    first = wick.generate(tiny, tiny_tok, "Once upon a time", max_tokens=10, state=state, **kw)
    assert state.logits is not None and state.has_sampler
    saved = tmp_path / "ten.safetensors"
    state.save(str(saved))
    rest = {k: v for k, v in kw.items() if k != "seed"}  # no new seed: the sampler resumes
    second = wick.generate(tiny, tiny_tok, "", max_tokens=10, state=state, **rest)
    assert first.tokens + second.tokens == whole.tokens
    assert first.text + second.text == whole.text
    loaded = wick.State.load(str(saved), tiny)
    again = wick.generate(tiny, tiny_tok, [], max_tokens=10, state=loaded, **rest)
    assert again.tokens == second.tokens and loaded == state
    # The CLI's continuation of the same file gives the same tokens.
    no_seed = flags[:-2] if seeded else flags
    from_cli = cli_json("generate", "--prompt", "", "--max-tokens", 10, "--json",
                        "--load-state", saved, *no_seed)
    assert from_cli["tokens"] == second.tokens
    if seeded:
        # A new seed starts a fresh sampler: other draws.
        fresh = wick.generate(tiny, tiny_tok, "", max_tokens=10, state=wick.State.load(str(saved), tiny),
                              **kw)
        assert fresh.tokens != second.tokens
    # A zero state has nothing to continue from.
    with pytest.raises(wick.InputError, match="no logits before the first token"):
        wick.generate(tiny, tiny_tok, "", max_tokens=3, state=tiny.new_state())


def test_forward_leaves_the_logits_for_an_empty_prompt(tiny, tiny_tok):
    state = tiny.new_state()
    logits, _ = tiny.forward(tiny_tok.encode("Once upon"), state)
    assert np.array_equal(np.asarray(state.logits), np.asarray(logits))
    assert not state.has_sampler
    r = wick.generate(tiny, tiny_tok, "", max_tokens=5, state=state)
    assert r.tokens == wick.generate(tiny, tiny_tok, "Once upon", max_tokens=5).tokens


def test_keyboard_interrupt_leaves_a_usable_state(tiny, tiny_tok):
    prompt = tiny_tok.encode("Once upon a time")
    state = tiny.new_state()
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        wick.generate(tiny, tiny_tok, prompt, max_tokens=1_000_000, state=state)
    timer.join()
    assert time.monotonic() - t0 < 30
    # Usable: not busy, and exactly the prompt plus a greedy continuation of some length.
    logits, ref = tiny.forward(prompt)
    steps = 0
    while not ref == state:
        assert steps < 200_000
        logits, ref = tiny.step(int(np.argmax(logits)), ref)
        steps += 1
    assert steps > 0
    wick.generate(tiny, tiny_tok, "more", max_tokens=3, state=state)

    # The same while streaming.
    stream = wick.generate(tiny, tiny_tok, prompt, max_tokens=1_000_000, stream=True)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in stream:
            pass
    timer.join()


def test_two_threads_give_their_solo_results(world, world_tok):
    jobs = [("The capital of France is", 1), ("Once upon a time", 2)]
    solo = [wick.generate(world, world_tok, p, max_tokens=48, **{**SEEDED, "seed": s})
            for p, s in jobs]
    got = [None, None]

    def run(i):
        p, s = jobs[i]
        state = world.new_state()
        chunks = list(wick.generate(world, world_tok, p, max_tokens=48, state=state, stream=True,
                                    **{**SEEDED, "seed": s}))
        got[i] = ("".join(chunks), state)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        assert got[i][0] == solo[i].text
        _, ref = world.forward(world_tok.encode(jobs[i][0]) + solo[i].tokens)
        assert got[i][1] == ref
    assert solo[0].text != solo[1].text


def test_engine_streams_from_threads(world, world_tok):
    prompts = ["The capital of France is", "Once upon a time", "Привет", "1, 2, 3,"]
    solo = [wick.generate(world, world_tok, p, max_tokens=20, **{**SEEDED, "seed": i})
            for i, p in enumerate(prompts)]
    with wick.Engine(world, world_tok, max_rows=4) as engine:
        texts = [None] * len(prompts)

        def run(i):
            req = engine.submit(prompts[i], max_tokens=20, **{**SEEDED, "seed": i})
            texts[i] = "".join(req)
            res = req.result()
            assert res.tokens == solo[i].tokens
            _, ref = world.forward(world_tok.encode(prompts[i]) + res.tokens)
            assert res.state == ref

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert texts == [s.text for s in solo]


def _write_safetensors(path, tensors):
    """A safetensors file written by hand: tensors is a list of (name, float32 array)."""
    header, blobs, offset = {}, [], 0
    for name, m in tensors:
        b = np.ascontiguousarray(m, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(m.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def _write_time_state(path, state, transpose=False):
    """A RWKV-PEFT state-tuning file: blocks.{i}.att.time_state."""
    tensors = []
    for i in range(state.n_layer):
        m = np.array(state.wkv(i), dtype=np.float32)
        if transpose:
            m = np.transpose(m, (0, 2, 1))
        tensors.append(("blocks.%d.att.time_state" % i, m))
    _write_safetensors(path, tensors)


def test_state_tuned_initial_state(tiny, tiny_tok, cli_json, tmp_path):
    """State.load_tuned takes the WKV matrices as stored (no transpose), zero shifts; Python and
    `wick generate --init-state` start from the same state and give the same tokens."""
    _, trained = tiny.forward(tiny_tok.encode("Hello, world"))
    path = tmp_path / "tuned.safetensors"
    _write_time_state(str(path), trained)
    tuned = wick.State.load_tuned(str(path), tiny)
    for i in range(trained.n_layer):
        assert np.array_equal(tuned.wkv(i), trained.wkv(i))
        assert not np.any(tuned.att_shift(i)) and not np.any(tuned.ffn_shift(i))
    r = wick.generate(tiny, tiny_tok, "Once", max_tokens=12, state=tuned)
    from_cli = cli_json("generate", "--prompt", "Once", "--max-tokens", 12, "--json",
                        "--init-state", path)
    assert from_cli["tokens"] == r.tokens
    # (the tiny model's greedy text is the same from both states; its logits are not)
    ids = tiny_tok.encode("Once")
    assert not np.array_equal(np.asarray(tiny.forward(ids, tuned.copy())[0]),
                              np.asarray(tiny.forward(ids)[0]))
    transposed = tmp_path / "x060.safetensors"
    _write_time_state(str(transposed), trained, transpose=True)
    assert wick.State.load_tuned(str(transposed), tiny) != tuned
    with pytest.raises(wick.StateFileError, match="--load-state"):
        saved = tmp_path / "wick.state"
        trained.save(str(saved))
        wick.State.load_tuned(str(saved), tiny)


def _write_lora(path, model, rank, seed):
    """A RWKV-PEFT LoRA adapter for every adapted matrix."""
    g = model.info["geometry"]
    C, F = g["n_embd"], g["ffn_dim"]
    targets = [("att.receptance", C, C), ("att.key", C, C), ("att.value", C, C),
               ("att.output", C, C), ("ffn.key", F, C), ("ffn.value", C, F)]
    rng = np.random.default_rng(seed)
    tensors = []
    for i in range(g["n_layer"]):
        for name, out, inp in targets:
            for suffix, shape in (("lora_A", (rank, inp)), ("lora_B", (out, rank))):
                tensors.append(("blocks.%d.%s.%s" % (i, name, suffix),
                                (0.2 * rng.standard_normal(shape)).astype(np.float32)))
    _write_safetensors(path, tensors)


def test_lora_adapter_at_load(tiny, tiny_tok, cli_json, tmp_path):
    """Model(..., lora=, lora_alpha=, lora_scale=) runs the adapter as `wick generate --lora`."""
    path = tmp_path / "adapter.safetensors"
    _write_lora(str(path), tiny, 4, 3)
    adapted = wick.Model(None, lora=str(path), lora_alpha=16)
    assert "adapter.safetensors" in adapted.info["adapter"]
    assert adapted.info["fingerprint"] != tiny.info["fingerprint"]
    ids = tiny_tok.encode("Once upon")
    assert not np.array_equal(np.asarray(adapted.forward(ids)[0]), np.asarray(tiny.forward(ids)[0]))
    for scale in (1.0, 0.5):
        m = wick.Model(None, lora=str(path), lora_alpha=16, lora_scale=scale)
        r = wick.generate(m, tiny_tok, "Once upon", max_tokens=16)
        from_cli = cli_json("generate", "--prompt", "Once upon", "--max-tokens", 16, "--json",
                            "--lora", path, "--lora-alpha", 16, "--lora-scale", scale)
        assert from_cli["tokens"] == r.tokens
    with pytest.raises(wick.InputError, match="alpha"):
        wick.Model(None, lora=str(path))
    with pytest.raises(wick.InputError, match="lora=PATH"):
        wick.Model(None, lora_alpha=16)
