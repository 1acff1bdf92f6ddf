#!/usr/bin/env python3
"""torch_gpt2_step — the PyTorch reference for bench-train --device: one GPT-2 124M training step
(B=16, T=1024, vocab 50257, AdamW) on a CUDA GPU, eager PyTorch with bf16 autocast and
scaled_dot_product_attention (flash attention), median of --steps timed steps after warm-ups.
Also times a bf16 8192^3 matmul (bf16 inputs), the GEMM rate MFU is quoted against.
Prints a table and one JSON line. Needs torch with CUDA; not part of the build or the tests.

  python3 bench/torch_gpt2_step.py [--steps 10]
"""
import argparse, json, math, statistics, time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.nh = nh
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.fc, self.fc_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, layers=12, c=768, nh=12):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(ctx, c)
        self.blocks = nn.ModuleList(Block(c, nh) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head, as GPT-2
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def timed(fn, steps, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        t.append(time.perf_counter() - t0)
    return statistics.median(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    torch.manual_seed(1)
    dev = "cuda"
    n = 8192
    x = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    gemm = 2 * n**3 / timed(lambda: x @ x, 10) / 1e12
    B, T = 16, 1024
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    idx = torch.randint(0, 50257, (B, T), device=dev)
    tgt = torch.randint(0, 50257, (B, T), device=dev)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    s = timed(step, a.steps)
    L, C, V, tokens = 12, 768, 50257, B * T  # bench-train's trainer_flops_per_step, same count
    flops = 6 * (L * 12 * C * C + V * C) * tokens + 3 * L * 4 * T * C * tokens
    print(f"{'bf16 GEMM 8192^3 (bf16 inputs)':44s} {gemm:12.2f} TFLOP/s")
    print(f"{'PyTorch 124M step (B=16, T=1024), bf16':44s} {s:12.4f} s")
    print(f"{'  tokens per second':44s} {B * T / s:12.0f} tok/s")
    print(f"{'  MFU vs that GEMM rate':44s} {flops / s / 1e12 / gemm:12.3f}")
    print(json.dumps({"torch": torch.__version__, "gemm_bf16_tflops": round(gemm, 1),
                      "step_s_bf16": round(s, 6), "tokens_per_s_bf16": round(B * T / s),
                      "mfu_bf16": round(flops / s / 1e12 / gemm, 4)}))


if __name__ == "__main__":
    main()
