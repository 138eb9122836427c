"""Logits and states from Python equal the CLI's bit for bit; forward in pieces equals one call;
state files round-trip."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

import wick

TOKENS = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100]


def cli_logits(cli, tokens, *flags):
    out = json.loads(cli("logits", "--tokens", ",".join(map(str, tokens)), *flags))["logits"]
    return np.array(out, dtype=np.float32)  # the CLI's shortest forms read back as float32


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def test_forward_logits_equal_cli(tiny, cli):
    logits, state = tiny.forward(TOKENS)
    assert logits.dtype == np.float32 and logits.shape == (256,)
    assert np.array_equal(bits(logits), bits(cli_logits(cli, TOKENS)[0]))
    assert state.n_tokens == len(TOKENS)
    other, _ = tiny.forward(TOKENS[:-1] + [33])
    assert not np.array_equal(bits(other), bits(logits))


def test_all_positions_and_step_equal_cli(tiny, cli):
    all_pos, _ = tiny.forward(TOKENS, all_positions=True)
    assert all_pos.shape == (len(TOKENS), 256)
    assert np.array_equal(bits(all_pos), bits(cli_logits(cli, TOKENS, "--all-positions")))
    state = tiny.new_state()
    for i, t in enumerate(TOKENS):
        step_logits, state = tiny.step(t, state)
        assert np.array_equal(bits(step_logits), bits(all_pos[i]))
    assert np.array_equal(bits(step_logits), bits(cli_logits(cli, TOKENS, "--recurrent")[0]))


def test_state_equals_cli_state_file(tiny, tiny_tok, cli, tmp_path):
    prompt = "The quick brown fox"
    path = tmp_path / "cli.state"
    cli("generate", "--prompt", prompt, "--max-tokens", "0", "--save-state", path, "--quiet")
    _, state = tiny.forward(tiny_tok.encode(prompt))
    loaded = wick.State.load(path, tiny)
    assert loaded == state
    for i in range(tiny.geometry["n_layer"]):
        assert np.array_equal(bits(loaded.wkv(i)), bits(state.wkv(i)))
        assert np.array_equal(bits(loaded.att_shift(i)), bits(state.att_shift(i)))
        assert np.array_equal(bits(loaded.ffn_shift(i)), bits(state.ffn_shift(i)))
    _, other = tiny.forward(tiny_tok.encode("The quick brown cat"))
    assert not other == loaded


def test_forward_in_two_calls_equals_one(tiny):
    whole, s1 = tiny.forward(TOKENS)
    part, s2 = tiny.forward(TOKENS[:5])
    same_object = s2
    rest, s2 = tiny.forward(TOKENS[5:], s2)
    assert s2 is same_object  # advanced in place
    assert np.array_equal(bits(rest), bits(whole)) and s1 == s2
    alone, s3 = tiny.forward(TOKENS[5:])
    assert not np.array_equal(bits(alone), bits(whole)) and not s3 == s1


def test_state_copy_views_and_save_load(tiny, tmp_path):
    _, state = tiny.forward(TOKENS[:6])
    snap = state.copy()
    assert snap == state and snap is not state
    state.wkv(0)[0, 0, 0] += 1.0  # views write through
    assert not snap == state
    state = snap.copy()
    path = tmp_path / "s.safetensors"
    state.save(path, note="hello")
    loaded = wick.State.load(path, tiny)
    assert loaded == state and loaded.n_tokens == 6
    a, _ = tiny.forward(TOKENS[6:], state)
    b, _ = tiny.forward(TOKENS[6:], loaded)
    assert np.array_equal(bits(a), bits(b))
    c, _ = tiny.forward([1], tiny.new_state())
    assert not np.array_equal(bits(a), bits(c))


def test_info(tiny):
    info = tiny.info
    assert info["fingerprint"].startswith("sha256:")
    assert info["geometry"]["vocab"] == 256 and info["precision"] == "fp32"
    assert tiny.vocab == 256 and tiny.new_state().n_layer == info["geometry"]["n_layer"]


def test_int8_precision_on_an_rwkvq_file_equals_cli(cli, fixtures_dir):
    if fixtures_dir is None:
        pytest.skip("the shared fixtures are not here (WICK_FIXTURES)")
    path = fixtures_dir + "/rwkvq/tiny_compression.rwkvq"
    int8 = wick.Model(path, precision="int8", threads=2)
    assert int8.info["precision"] == "int8"
    logits, _ = int8.forward(TOKENS, all_positions=True)
    want = cli_logits(cli, TOKENS, "--all-positions", "--model", path, "--precision", "int8")
    assert np.array_equal(bits(logits), bits(want))
    exact, _ = wick.Model(path, threads=2).forward(TOKENS, all_positions=True)
    assert not np.array_equal(bits(exact), bits(logits))
    with pytest.raises(wick.InputError, match='"int8"'):
        wick.Model(path, precision="int4")


def test_version_is_the_clis_and_cmakes(cli):
    assert cli("--version") == "wick %s\n" % wick.__version__
    cmake = Path(__file__).resolve().parents[2] / "CMakeLists.txt"
    m = re.search(r"project\(wick VERSION ([0-9.]+)", cmake.read_text(encoding="utf-8"))
    assert m and m.group(1) == wick.__version__
