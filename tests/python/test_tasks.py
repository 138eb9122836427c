"""wick.embed, wick.rerank and wick.perplexity equal `wick embed`, `wick rerank` and `wick ppl`."""

import json
import os

import numpy as np
import pytest

import wick


def write_jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return str(path)


def test_perplexity_equals_cli(tiny, tiny_tok, cli_json, tmp_path):
    text = ("Once upon a time there was a little model that read every byte of its input and "
            "tried to guess the next one. ") * 8
    f = tmp_path / "t.txt"
    f.write_text(text)
    ref = cli_json("ppl", "--text", f, "--ctx", "128", "--json")
    got = wick.perplexity(tiny, tiny_tok, text, ctx=128)
    assert got["ppl"] == ref["ppl"] and got["windows"] == ref["windows"]
    assert got["tokens_scored"] == ref["tokens_scored"]
    other = wick.perplexity(tiny, tiny_tok, text[::-1], ctx=128)
    assert other["ppl"] != got["ppl"]
    with pytest.raises(wick.InputError):
        wick.perplexity(tiny, tiny_tok, "short", ctx=128)


@pytest.fixture(scope="module")
def er_model(fixtures_dir):
    path = fixtures_dir and os.path.join(fixtures_dir, "tasks", "er_emb_model.pth")
    if not path or not os.path.exists(path):
        pytest.skip("fixture tasks/er_emb_model.pth not found (WICK_FIXTURES)")
    return path


def test_embed_equals_cli(er_model, cli_json, tmp_path):
    texts = ["The quick brown fox", "Как пчёлы делают мёд?", "hello"]
    ref = np.array(cli_json("embed", "--model", er_model, "--file",
                            write_jsonl(tmp_path / "t.jsonl", texts), "--json")["embeddings"],
                   dtype=np.float32)
    model = wick.Model(er_model, threads=2)
    got = wick.embed(model, None, texts)
    assert got.shape == ref.shape and np.array_equal(got, ref)
    assert not np.array_equal(got[0], got[1])


def test_rerank_equals_cli(er_model, cli_json, tmp_path):
    head = os.path.join(os.path.dirname(er_model), "er_reranker.pth")
    docs = ["a recurrent model", "a fruit", "the RWKV language model"]
    ref = cli_json("rerank", "--model", er_model, "--head", head, "--query", "what is RWKV?",
                   "--docs", write_jsonl(tmp_path / "d.jsonl", docs), "--json")["results"]
    model = wick.Model(er_model, threads=2)
    got = wick.rerank(model, None, head, "what is RWKV?", docs)
    assert [r["index"] for r in got] == [r["index"] for r in ref]
    assert [np.float32(r["logit"]) for r in got] == [np.float32(r["logit"]) for r in ref]
    assert len(wick.rerank(model, None, head, "what is RWKV?", docs, top_n=1)) == 1
