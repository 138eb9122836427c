"""Bad input raises Python exceptions (TypeError, or wick.Error subclasses with wick's
messages), never a crash."""

import numpy as np
import pytest

import wick


def test_error_hierarchy():
    assert issubclass(wick.InputError, wick.Error) and issubclass(wick.InputError, ValueError)
    assert issubclass(wick.UnsafePickleError, wick.FormatError)
    assert issubclass(wick.ContextFullError, wick.InputError)
    for e in (wick.FileError, wick.CheckpointError, wick.StateFileError, wick.QueueFullError,
              wick.EngineStoppedError, wick.EvaluationError):
        assert issubclass(e, wick.Error)


def test_wrong_types(tiny, tiny_tok):
    with pytest.raises(TypeError):
        tiny.forward("abc")
    with pytest.raises(TypeError):
        tiny.forward([1, 2.5])
    with pytest.raises(TypeError):
        tiny.forward(None)
    with pytest.raises(TypeError):
        tiny.forward([1], state="not a state")
    with pytest.raises(TypeError):
        wick.Model(123)
    with pytest.raises(TypeError):
        wick.generate(tiny, "not a tokenizer", "hi")
    with pytest.raises(TypeError):
        wick.generate(tiny, tiny_tok, 3.5)
    with pytest.raises(TypeError):
        tiny_tok.encode(42)
    with pytest.raises(TypeError):
        wick.generate(tiny, tiny_tok, "hi", stop=5)


def test_wick_errors_carry_wicks_messages(tiny, tiny_tok, world, tmp_path):
    with pytest.raises(wick.FileError) as e:
        wick.Model(str(tmp_path / "missing.pth"))
    assert "missing.pth" in str(e.value) and e.value.path.endswith("missing.pth")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    with pytest.raises(wick.Error):
        wick.Model(str(bad))
    with pytest.raises(wick.InputError, match="vocabulary|outside"):
        tiny.forward([300])
    with pytest.raises(wick.InputError):
        tiny.forward([])
    with pytest.raises(wick.InputError, match="int32"):
        tiny.forward([2**40])
    # A state of another model: refused in a pass and when loading its file.
    with pytest.raises(wick.InputError):
        tiny.forward([1], world.new_state())
    _, ws = world.forward([1, 2])
    path = tmp_path / "world.state"
    ws.save(path)
    with pytest.raises(wick.StateFileError) as e:
        wick.State.load(path, tiny)
    assert str(path) in str(e.value)
    with pytest.raises(wick.InputError, match="top_p"):
        wick.generate(tiny, tiny_tok, "hi", temperature=1, top_p=2)
    with pytest.raises(wick.InputError, match="standard"):
        wick.generate(tiny, tiny_tok, "hi", sampler="nucleus")
    with pytest.raises(wick.InputError, match="seed"):
        wick.generate(tiny, tiny_tok, "hi", seed=-1)
    with pytest.raises(wick.InputError, match="empty prompt"):
        wick.generate(tiny, tiny_tok, "")
    with pytest.raises(wick.InputError):
        wick.Model(None, quantize="int4")
    with pytest.raises(wick.InputError):
        wick.Model(None, threads=0)
    with pytest.raises(wick.InputError, match="layer"):
        tiny.new_state().wkv(99)
    with pytest.raises(wick.InputError):
        wick.State(2, 64, 1, 64).save(tmp_path / "x.state")
    with pytest.raises(wick.Error):
        wick.Tokenizer(str(tmp_path / "no-vocab.txt"))


def test_tokenizer_round_trip(world_tok, tiny_tok):
    text = "Hello, мир! 日本語 🚀"
    assert world_tok.decode(world_tok.encode(text)) == text
    assert tiny_tok.encode("A") == [65] and tiny_tok.decode_bytes([0xE6]) == b"\xe6"
    assert tiny_tok.decode([0xE6]) == "\ufffd"
    assert world_tok.name == "world" and world_tok.vocab_size > 65000


def test_sampler(world):
    logits, _ = world.forward([1, 2, 3])
    greedy = wick.Sampler(world.vocab)
    assert greedy.select(logits) == int(np.argmax(logits))
    a = wick.Sampler(world.vocab, temperature=1.0, top_p=0.9, seed=5)
    b = wick.Sampler(world.vocab, temperature=1.0, top_p=0.9, seed=5)
    assert [a.select(logits) for _ in range(5)] == [b.select(logits) for _ in range(5)]
    with pytest.raises(wick.InputError):
        a.select(logits[:10])
    with pytest.raises(wick.InputError, match="tokenizer"):
        wick.Sampler(world.vocab, sampler="chatrwkv")
