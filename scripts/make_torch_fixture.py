#!/usr/bin/python3
"""make_torch_fixture — writes tests/fixtures/gpt_tiny.bin, the golden PyTorch reference that
tests/model/test_gpt_torch.c checks wantrain's GPT against.

GPT-2 is written out in plain torch here (no transformers package): token + learned position
embeddings, pre-LN blocks (LayerNorm eps 1e-5, causal multi-head attention, 4x MLP with
tanh-approximated GELU), final LayerNorm, LM head tied to wte, mean cross-entropy. Parameters
use Hugging Face GPT2Model names and layouts (Conv1D weights stored (in, out)).

Run with Debian's python3 (torch 1.13, CPU):  /usr/bin/python3 scripts/make_torch_fixture.py

File layout (little-endian), version 1:
  char[8]     magic "WTGPTFX1"
  int32[12]   version, V, maxT, L, NH, C, B, T, n_steps, n_params, 0, 0
  float32[8]  lr, beta1, beta2, eps, weight_decay, grad_clip, 0, 0
  float32[n_params]  parameters, tensor after tensor in state-dict order (wte, wpe, h.0.ln_1.weight,
                     ..., h.L-1.mlp.c_proj.bias, ln_f.weight, ln_f.bias) — wantrain's flat layout
  int32[B*T]  tokens
  int32[B*T]  targets
  float32[B*T*V]     logits
  float32     loss
  float32[n_params]  gradients of the loss, same layout (wte: both uses summed)
  float32[n_steps]   loss before each of n_steps AdamW steps on the same batch (decay only on
                     2-D tensors, global-norm clipping at grad_clip)
"""
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

V, MAXT, L, NH, C, B, T = 64, 8, 2, 4, 32, 2, 8
N_STEPS = 10
LR, BETA1, BETA2, EPS, WD, CLIP = 1e-2, 0.9, 0.95, 1e-8, 0.1, 1.0


def make_params(gen):
    """Random parameters (not GPT-2's init: LayerNorm weights and biases are perturbed too, so
    every gradient is exercised). Returns an ordered list of (name, tensor)."""
    def normal(*shape, std, mean=0.0):
        return (torch.randn(*shape, generator=gen) * std + mean).requires_grad_()
    ps = [("wte.weight", normal(V, C, std=0.3)), ("wpe.weight", normal(MAXT, C, std=0.1))]
    for l in range(L):
        h = f"h.{l}."
        ps += [(h + "ln_1.weight", normal(C, std=0.1, mean=1.0)), (h + "ln_1.bias", normal(C, std=0.1)),
               (h + "attn.c_attn.weight", normal(C, 3 * C, std=0.2)), (h + "attn.c_attn.bias", normal(3 * C, std=0.05)),
               (h + "attn.c_proj.weight", normal(C, C, std=0.1)), (h + "attn.c_proj.bias", normal(C, std=0.05)),
               (h + "ln_2.weight", normal(C, std=0.1, mean=1.0)), (h + "ln_2.bias", normal(C, std=0.1)),
               (h + "mlp.c_fc.weight", normal(C, 4 * C, std=0.2)), (h + "mlp.c_fc.bias", normal(4 * C, std=0.05)),
               (h + "mlp.c_proj.weight", normal(4 * C, C, std=0.1)), (h + "mlp.c_proj.bias", normal(C, std=0.05))]
    ps += [("ln_f.weight", normal(C, std=0.1, mean=1.0)), ("ln_f.bias", normal(C, std=0.1))]
    return ps


def forward(p, tokens, targets):
    x = p["wte.weight"][tokens] + p["wpe.weight"][: tokens.shape[1]]
    hs = C // NH
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        h = f"h.{l}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + (y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + (m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    logits = x @ p["wte.weight"].t()
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
    return logits, loss


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors]).numpy().astype("<f4").tobytes()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "gpt_tiny.bin")
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    named = make_params(gen)
    p = dict(named)
    params = [t for _, t in named]
    tokens = torch.randint(0, V, (B, T), generator=gen)
    targets = torch.randint(0, V, (B, T), generator=gen)
    n_params = sum(t.numel() for t in params)
    init = flat(params)

    logits, loss = forward(p, tokens, targets)
    loss.backward()
    grads = flat([t.grad for t in params])

    for t in params:
        t.grad = None
    decay = [t for t in params if t.dim() == 2]
    no_decay = [t for t in params if t.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(BETA1, BETA2), eps=EPS)
    losses = []
    for _ in range(N_STEPS):
        opt.zero_grad()
        _, l = forward(p, tokens, targets)
        losses.append(l.item())
        l.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()

    with open(out, "wb") as f:
        f.write(b"WTGPTFX1")
        f.write(struct.pack("<12i", 1, V, MAXT, L, NH, C, B, T, N_STEPS, n_params, 0, 0))
        f.write(struct.pack("<8f", LR, BETA1, BETA2, EPS, WD, CLIP, 0, 0))
        f.write(init)
        f.write(tokens.numpy().astype("<i4").tobytes())
        f.write(targets.numpy().astype("<i4").tobytes())
        f.write(logits.detach().numpy().astype("<f4").tobytes())
        f.write(struct.pack("<f", loss.item()))
        f.write(grads)
        f.write(struct.pack(f"<{N_STEPS}f", *losses))
    print(f"wrote {out}: {n_params} parameters, loss {loss.item():.6f}, "
          f"losses {losses[0]:.4f} .. {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
