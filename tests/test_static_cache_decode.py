"""Greedy decoding with a static KV cache, one token per call: the step is one graph, the
cache position a tensor input (no guard on its value, no recompile from token to token),
the tokens those of eager. With mode="cudagraphs" the step's fresh inputs (token ids,
cache position) are staged into buffers of the recording and the cache is written in place.

Two models: a hand-written decoder (no dependencies: the cache written by `index_copy_` or
by slice assignment at the cache-position tensor) and, where transformers is installed,
a small random `LlamaForCausalLM` with its `StaticCache`.
"""
import importlib
import inspect
import os
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minidynamo
from minidynamo.cudagraphs import CudaGraphRunner

_needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def gpu(test):
    """GPU-only: selected by `pytest -m gpu`, skipped without CUDA."""
    return pytest.mark.gpu(_needs_cuda(test))


# --- a hand-written decoder with a static KV cache ------------------------------------

class StaticKV:
    """Keys and values of every layer at fixed addresses, written at `cache_position`."""

    def __init__(self, layers, heads, max_len, head_dim, write, device="cpu"):
        shape = (1, heads, max_len, head_dim)
        self.keys = [torch.zeros(shape, device=device) for _ in range(layers)]
        self.values = [torch.zeros(shape, device=device) for _ in range(layers)]
        self.write = write

    def update(self, i, k, v, cache_position):
        if self.write == "index_copy":
            self.keys[i].index_copy_(2, cache_position, k)
            self.values[i].index_copy_(2, cache_position, v)
        else:
            self.keys[i][:, :, cache_position] = k
            self.values[i][:, :, cache_position] = v
        return self.keys[i], self.values[i]


class TinyDecoder(nn.Module):
    def __init__(self, vocab=40, dim=32, heads=2, layers=2, max_len=24):
        super().__init__()
        self.heads, self.max_len = heads, max_len
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.qkv = nn.ModuleList(nn.Linear(dim, 3 * dim) for _ in range(layers))
        self.out = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
                                 for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def new_cache(self, write, device="cpu"):
        dim = self.tok.embedding_dim
        return StaticKV(len(self.qkv), self.heads, self.max_len, dim // self.heads, write, device)

    def forward(self, ids, cache, cache_position):
        b, t = ids.shape
        x = self.tok(ids) + self.pos(cache_position)
        # Query at position p sees the cache up to p: a mask over the whole static length.
        mask = torch.arange(self.max_len, device=ids.device) <= cache_position[:, None]
        for i, (qkv, out, mlp) in enumerate(zip(self.qkv, self.out, self.mlp)):
            q, k, v = qkv(x).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            keys, values = cache.update(i, k, v, cache_position)
            a = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            x = x + out(a.transpose(1, 2).reshape(b, t, -1))
            x = x + mlp(x)
        return self.head(self.norm(x))


def greedy(model, step, prompt, new_tokens, cache):
    """Prefill eagerly, then `new_tokens - 1` decode steps through `step`: the tokens."""
    device = prompt.device
    with torch.no_grad():
        logits = model(prompt, cache, torch.arange(prompt.shape[1], device=device))
        tok = logits[:, -1:].argmax(-1)
        tokens = [tok.item()]
        for p in range(prompt.shape[1], prompt.shape[1] + new_tokens - 1):
            logits = step(tok, cache, torch.tensor([p], device=device))  # held into the next call
            tok = logits[:, -1:].argmax(-1)
            tokens.append(tok.item())
    return tokens


def tiny(device="cpu"):
    torch.manual_seed(0)
    return TinyDecoder().to(device).eval(), torch.tensor([[3, 1, 4, 1, 5]], device=device)


def assert_one_graph_no_recompile(opt):
    entries = opt.cache_entries()
    assert [e.kind for e in entries] == ["graph"], [(e.kind, e.reason) for e in entries]
    assert opt.guard_failures() == []
    return entries[0]


@pytest.mark.parametrize("write", ["index_copy", "slice"])
def test_tiny_decoder_one_graph_tokens_equal_eager(write):
    model, prompt = tiny()
    want = greedy(model, model, prompt, 12, model.new_cache(write))
    opt = minidynamo.optimize(model)
    assert greedy(model, opt, prompt, 12, model.new_cache(write)) == want
    entry = assert_one_graph_no_recompile(opt)
    assert entry.hit_count >= 10
    # The ids and the position are the graph's integer tensor inputs, read at run time.
    ints = [n for n in entry.gm.graph.nodes if n.op == "placeholder" and n.meta["val"].dtype == torch.int64]
    assert len(ints) == 2


@pytest.fixture
def cuda_graph_stand_in(monkeypatch):
    """Where there is no GPU: a 'capture' that runs the graph on clones of the inputs (a
    real capture runs nothing, so it must not write the cache) and a 'replay' that runs
    it on the recording's inputs and writes the static outputs (as a replay does)."""
    class Replay:
        def __init__(self, compiled, inputs, outputs):
            self.compiled, self.inputs, self.outputs = compiled, inputs, outputs

        def replay(self):
            for static, new in zip(self.outputs, self.compiled(*self.inputs)):
                static.copy_(new)

    def capture(self, rec):
        outputs = tuple(self.compiled(*[t.clone() for t in rec.inputs]))
        return Replay(self.compiled, rec.inputs, outputs), outputs
    monkeypatch.setattr(CudaGraphRunner, "_capture", capture)
    monkeypatch.setattr(CudaGraphRunner, "_static_reason", staticmethod(lambda gm, ex: None))


def check_staged_replays(opt, steps, staged=2):
    """The step replayed from one staged recording: fresh ids and position copied in
    (`staged` inputs, None: some; transformers 5 reads the position off the cache's own counter, so
    its graph takes only the ids), the cache (written) read in place, no plain runs for
    held outputs."""
    runner = assert_one_graph_no_recompile(opt).compiled
    assert isinstance(runner, CudaGraphRunner) and runner.fallback_reason is None
    assert runner.recordings == [] and len(runner.copy_recordings) == 1
    rec = runner.copy_recording
    assert len(rec.staged) == staged if staged is not None else len(rec.staged) >= 1
    assert not set(rec.staged) & runner.written
    assert runner.replays == steps - 2 and runner.held_fallbacks == 0
    assert len(rec.slots) == 2  # the previous logits are alive during a call


@pytest.mark.parametrize("write", ["index_copy", "slice"])
def test_tiny_decoder_cudagraphs_stages_moving_inputs(cuda_graph_stand_in, write):
    model, prompt = tiny()
    want = greedy(model, model, prompt, 12, model.new_cache(write))
    opt = minidynamo.optimize(model, mode="cudagraphs")
    assert greedy(model, opt, prompt, 12, model.new_cache(write)) == want
    check_staged_replays(opt, 11)


@gpu
@pytest.mark.parametrize("write", ["index_copy", "slice"])
def test_tiny_decoder_cudagraphs_on_gpu(write):
    model, prompt = tiny("cuda")
    want = greedy(model, model, prompt, 12, model.new_cache(write, "cuda"))
    opt = minidynamo.optimize(model, mode="cudagraphs")
    assert greedy(model, opt, prompt, 12, model.new_cache(write, "cuda")) == want
    check_staged_replays(opt, 11)


# --- a HuggingFace Llama with its StaticCache ------------------------------------------

def import_transformers():
    """transformers, its Llama imported with this directory's `kernels` (the tests' Triton
    kernels) out of the way: transformers imports the hub's `kernels` package by that name
    where it is installed."""
    here = os.path.dirname(os.path.abspath(__file__))
    ours = {k: v for k, v in sys.modules.items() if k == "kernels" or k.startswith("kernels.")}
    path = list(sys.path)
    for k in ours:
        del sys.modules[k]
    sys.path[:] = [p for p in path if os.path.abspath(p or ".") != here]
    try:
        transformers = pytest.importorskip("transformers")
        importlib.import_module("transformers.models.llama.modeling_llama")
    finally:
        sys.path[:] = path
        for k in [k for k in sys.modules if k == "kernels" or k.startswith("kernels.")]:
            del sys.modules[k]
        sys.modules.update(ours)
    return transformers


def llama(device="cpu"):
    transformers = import_transformers()
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=128, max_position_embeddings=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(device).eval()
    # transformers 5.2x names the cache argument `cache` (`past_key_values` is deprecated)
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def call(fn):
        def step(ids, cache, cache_position):
            return fn(input_ids=ids, cache_position=cache_position, use_cache=True, **{name: cache}).logits
        return step

    def new_cache():
        return transformers.StaticCache(config=config, max_cache_len=32)
    return model, call, new_cache, torch.tensor([[1, 5, 7, 9]], device=device)


def test_llama_static_cache_decode_one_graph():
    model, call, new_cache, prompt = llama()
    want = greedy(call(model), call(model), prompt, 10, new_cache())
    opt = minidynamo.optimize(model)
    assert greedy(call(model), call(opt), prompt, 10, new_cache()) == want
    entry = assert_one_graph_no_recompile(opt)
    assert entry.hit_count >= 8
    # The cache is written in place inside the graph; the position is a tensor.
    assert sum("index_copy_" in str(n.target) for n in entry.gm.graph.nodes) == 4


def test_llama_static_cache_cudagraphs_stand_in(cuda_graph_stand_in):
    model, call, new_cache, prompt = llama()
    want = greedy(call(model), call(model), prompt, 10, new_cache())
    opt = minidynamo.optimize(model, mode="cudagraphs")
    assert greedy(call(model), call(opt), prompt, 10, new_cache()) == want
    check_staged_replays(opt, 9, staged=None)


@gpu
def test_llama_static_cache_cudagraphs_on_gpu():
    model, call, new_cache, prompt = llama("cuda")
    want = greedy(call(model), call(model), prompt, 10, new_cache())
    opt = minidynamo.optimize(model, mode="cudagraphs")
    assert greedy(call(model), call(opt), prompt, 10, new_cache()) == want
    check_staged_replays(opt, 9, staged=None)
