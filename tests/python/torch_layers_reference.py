#!/usr/bin/env python3
"""Reference outputs and gradients of PyTorch layers for tests/test_nn_torch.cpp.

Run with a python that has torch (checked with 1.13):
    /usr/bin/python3 tests/python/torch_layers_reference.py tests/data/torch_layers.safetensors

For each case, built with a fixed seed, the file holds under "<case>.":
  param.<state_dict key>    the layer's parameters (random, not the init)
  input.<i>                 forward inputs (float ones get gradients;
                            integer ones are indices or masks, 1 = true)
  output.<j>                forward outputs
  grad_output.<j>           the upstream gradient: loss = sum_j (output_j * grad_output_j).sum()
  grad_input.<i>            d loss / d input_i (float inputs)
  grad_param.<key>          d loss / d parameter
A new layer is one entry in CASES here and one row in the C++ table.
"""
import json
import struct
import sys

import torch

nn = torch.nn


def bool_mask(t):
    return t.to(torch.int64)


def case_layernorm():
    m = nn.LayerNorm([4, 6])
    return m, [torch.randn(2, 3, 4, 6)], lambda m, x: [m(x[0])]


def case_batchnorm2d():
    # Training: the batch's statistics, and the running ones they update.
    m = nn.BatchNorm2d(3)
    return m, [torch.randn(4, 3, 5, 6)], lambda m, x: [m(x[0]), m.running_mean.clone(), m.running_var.clone()]


def case_batchnorm1d_eval():
    # Evaluation over [N, C, L]: the running statistics, set away from 0 and 1.
    m = nn.BatchNorm1d(4)
    with torch.no_grad():
        m.running_mean.copy_(torch.randn(4))
        m.running_var.copy_(torch.rand(4) + 0.5)
    m.eval()
    return m, [torch.randn(5, 4, 7)], lambda m, x: [m(x[0])]


def case_embedding():
    m = nn.Embedding(10, 5)
    return m, [torch.tensor([[1, 9, 1, 0], [3, 3, 7, 1], [2, 0, 9, 9]])], lambda m, x: [m(x[0])]


def case_rnn_tanh():
    m = nn.RNN(4, 6, num_layers=2)
    return m, [torch.randn(5, 3, 4), torch.randn(2, 3, 6)], lambda m, x: list(m(x[0], x[1]))


def case_rnn_relu_batch_first():
    m = nn.RNN(4, 5, nonlinearity="relu", batch_first=True)
    return m, [torch.randn(3, 5, 4)], lambda m, x: list(m(x[0]))


def case_gru():
    m = nn.GRU(4, 6, num_layers=2, batch_first=True)
    return m, [torch.randn(3, 5, 4), torch.randn(2, 3, 6)], lambda m, x: list(m(x[0], x[1]))


def case_gru_unbatched():
    m = nn.GRU(3, 4)
    return m, [torch.randn(5, 3)], lambda m, x: list(m(x[0]))


def case_lstm():
    m = nn.LSTM(4, 6, num_layers=2)
    inputs = [torch.randn(5, 3, 4), torch.randn(2, 3, 6), torch.randn(2, 3, 6)]

    def run(m, x):
        y, (h, c) = m(x[0], (x[1], x[2]))
        return [y, h, c]

    return m, inputs, run


def case_lstm_nobias_batch_first():
    m = nn.LSTM(3, 5, bias=False, batch_first=True)

    def run(m, x):
        y, (h, c) = m(x[0])
        return [y, h, c]

    return m, [torch.randn(2, 4, 3)], run


def case_mha():
    m = nn.MultiheadAttention(8, 2)
    padding = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]], dtype=torch.bool)
    inputs = [torch.randn(4, 3, 8), torch.randn(6, 3, 8), torch.randn(6, 3, 8), bool_mask(padding)]
    return m, inputs, lambda m, x: list(m(x[0], x[1], x[2], key_padding_mask=x[3].bool()))


def case_mha_batch_first_float_mask():
    m = nn.MultiheadAttention(8, 4, batch_first=True)
    inputs = [torch.randn(2, 5, 8), torch.randn(5, 5)]
    return m, inputs, lambda m, x: list(m(x[0], x[0], x[0], attn_mask=x[1], average_attn_weights=False))


def case_encoder_relu():
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)  # true = not allowed
    return m, [torch.randn(5, 3, 8), bool_mask(causal)], lambda m, x: [m(x[0], src_mask=x[1].bool())]


def case_encoder_gelu_norm_first():
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu", batch_first=True,
                                   norm_first=True)
    return m, [torch.randn(3, 4, 8)], lambda m, x: [m(x[0])]


CASES = {
    "layernorm": case_layernorm,
    "batchnorm2d": case_batchnorm2d,
    "batchnorm1d_eval": case_batchnorm1d_eval,
    "embedding": case_embedding,
    "rnn_tanh": case_rnn_tanh,
    "rnn_relu_batch_first": case_rnn_relu_batch_first,
    "gru": case_gru,
    "gru_unbatched": case_gru_unbatched,
    "lstm": case_lstm,
    "lstm_nobias_batch_first": case_lstm_nobias_batch_first,
    "mha": case_mha,
    "mha_batch_first_float_mask": case_mha_batch_first_float_mask,
    "encoder_relu": case_encoder_relu,
    "encoder_gelu_norm_first": case_encoder_gelu_norm_first,
}


def build(name, fn):
    torch.manual_seed(sum(map(ord, name)))
    m, inputs, run = fn()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    out = {}
    for k, v in m.state_dict().items():
        out[f"{name}.param.{k}"] = v.clone()  # before the forward pass moves the running statistics
    for i, x in enumerate(inputs):
        if x.is_floating_point():
            x.requires_grad_()
        out[f"{name}.input.{i}"] = x
    outputs = run(m, inputs)
    loss = 0
    for j, y in enumerate(outputs):
        g = torch.randn_like(y)
        out[f"{name}.output.{j}"] = y
        out[f"{name}.grad_output.{j}"] = g
        loss = loss + (y * g).sum()
    loss.backward()
    for i, x in enumerate(inputs):
        if x.is_floating_point():
            out[f"{name}.grad_input.{i}"] = x.grad
    for k, p in m.named_parameters():
        out[f"{name}.grad_param.{k}"] = p.grad
    return out


def write_safetensors(path, tensors):
    names = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, offset = {}, [], 0
    for key in sorted(tensors):
        t = tensors[key].detach().contiguous().cpu()
        data = t.numpy().tobytes()
        header[key] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    tensors = {}
    for name, fn in CASES.items():
        tensors.update(build(name, fn))
    write_safetensors(sys.argv[1], tensors)


if __name__ == "__main__":
    main()
