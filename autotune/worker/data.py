"""Tokenize examples once, then serve dynamically padded batches.

A split is held as one padded int tensor plus a lengths array on the host: a batch is a gather
and a slice to the longest row in it (dynamic padding), with no Python loop over examples.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from autotune.inputs.examples import Examples, Record

IGNORE_INDEX = -100  # the label value torch's cross-entropy skips


@dataclass(frozen=True)
class TokenizedSplit:
    input_ids: torch.Tensor  # [N, L] int64, right-padded with pad_id
    lengths: np.ndarray  # [N] int64, true lengths
    labels: torch.Tensor  # causal-lm: [N, L] with IGNORE_INDEX; seq-cls: [N]
    token_type_ids: torch.Tensor | None  # [N, L] for text pairs on BERT-style models

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])


@dataclass(frozen=True)
class TokenizedData:
    train: TokenizedSplit
    validation: TokenizedSplit
    pad_id: int
    labels: tuple[str, ...] | None


def _encode_lm(
    tokenizer: Any,
    rows: list[Record],
    text_field: str,
    prompt_field: str | None,
    completion_field: str | None,
    max_length: int,
) -> tuple[list[list[int]], list[list[int]]]:
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    ids_out: list[list[int]] = []
    lab_out: list[list[int]] = []
    if prompt_field is not None and completion_field is not None:
        prompts = tokenizer([str(r[prompt_field]) for r in rows], add_special_tokens=False)["input_ids"]
        comps = tokenizer([str(r[completion_field]) for r in rows], add_special_tokens=False)["input_ids"]
        for p, c in zip(prompts, comps, strict=True):
            ids = (bos + p + c + eos)[:max_length]
            n_prompt = min(len(bos) + len(p), len(ids))
            # Loss on the completion only: prompt positions are ignored (instruction tuning).
            ids_out.append(ids)
            lab_out.append([IGNORE_INDEX] * n_prompt + ids[n_prompt:])
    else:
        texts = tokenizer([str(r[text_field]) for r in rows], add_special_tokens=False)["input_ids"]
        for t in texts:
            ids = (bos + t + eos)[:max_length]
            ids_out.append(ids)
            lab_out.append(list(ids))
    return ids_out, lab_out


def _pad(seqs: list[list[int]], value: int) -> torch.Tensor:
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def tokenize_split(
    tokenizer: Any,
    rows: list[Record],
    *,
    task: str,
    text_field: str,
    text_pair_field: str | None,
    prompt_field: str | None,
    completion_field: str | None,
    label_field: str,
    labels: tuple[str, ...] | None,
    max_length: int,
) -> TokenizedSplit:
    pad_id = pad_token_id(tokenizer)
    if task == "causal-lm":
        ids, labs = _encode_lm(tokenizer, rows, text_field, prompt_field, completion_field, max_length)
        lengths = np.array([len(s) for s in ids], dtype=np.int64)
        return TokenizedSplit(_pad(ids, pad_id), lengths, _pad(labs, IGNORE_INDEX), None)
    assert labels is not None
    label_id = {name: i for i, name in enumerate(labels)}
    texts = [str(r[text_field]) for r in rows]
    pairs = [str(r[text_pair_field]) for r in rows] if text_pair_field else None
    enc = tokenizer(texts, pairs, truncation=True, max_length=max_length)
    ids = enc["input_ids"]
    lengths = np.array([len(s) for s in ids], dtype=np.int64)
    tt = _pad(enc["token_type_ids"], 0) if pairs is not None and "token_type_ids" in enc else None
    y = torch.tensor([label_id[str(r[label_field])] for r in rows], dtype=torch.long)
    return TokenizedSplit(_pad(ids, pad_id), lengths, y, tt)


def pad_token_id(tokenizer: Any) -> int:
    for tid in (tokenizer.pad_token_id, tokenizer.eos_token_id, 0):
        if tid is not None:
            return int(tid)
    return 0


def tokenize(
    tokenizer: Any,
    examples: Examples,
    *,
    task: str,
    text_field: str,
    text_pair_field: str | None,
    prompt_field: str | None,
    completion_field: str | None,
    label_field: str,
    max_length: int,
) -> TokenizedData:
    kw: dict[str, Any] = dict(
        task=task,
        text_field=text_field,
        text_pair_field=text_pair_field,
        prompt_field=prompt_field,
        completion_field=completion_field,
        label_field=label_field,
        labels=examples.labels,
        max_length=max_length,
    )
    return TokenizedData(
        train=tokenize_split(tokenizer, examples.train, **kw),
        validation=tokenize_split(tokenizer, examples.validation, **kw),
        pad_id=pad_token_id(tokenizer),
        labels=examples.labels,
    )


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    token_type_ids: torch.Tensor | None
    n_tokens: int  # real (non-pad) tokens, known on the host without a device sync


def make_batch(split: TokenizedSplit, idx: np.ndarray, device: torch.device) -> Batch:
    """Gather rows ``idx`` and cut the padding to the longest of them (dynamic padding)."""
    lens = split.lengths[idx]
    width = int(lens.max())
    t_idx = torch.from_numpy(idx)
    ids = split.input_ids.index_select(0, t_idx)[:, :width]
    mask = (torch.arange(width).unsqueeze(0) < torch.from_numpy(lens).unsqueeze(1)).long()
    labels = split.labels.index_select(0, t_idx)
    if labels.dim() == 2:
        labels = labels[:, :width]
    tt = split.token_type_ids.index_select(0, t_idx)[:, :width] if split.token_type_ids is not None else None
    return Batch(
        input_ids=to_device(ids, device),
        attention_mask=to_device(mask, device),
        labels=to_device(labels, device),
        token_type_ids=to_device(tt, device) if tt is not None else None,
        n_tokens=int(lens.sum()),
    )


# A copy to the GPU from pageable host memory is staged through a pinned buffer and waits for it;
# from pinned memory it is a DMA that overlaps the step before it (non_blocking). AUTOTUNE_PIN=0
# turns it off, for bench/gpu_check.sh's pinned-vs-pageable figure. On a CPU nothing is copied.
PIN = os.environ.get("AUTOTUNE_PIN", "1") != "0"


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    if device.type != "cuda":
        return t
    return (t.pin_memory() if PIN else t).to(device, non_blocking=True)


def train_order(
    n_examples: int, batch_size: int, n_steps: int, seed: int, lengths: np.ndarray, group_by_length: bool
) -> list[np.ndarray]:
    """Index batches for a fixed number of steps: seeded epochs over the data, and (optionally)
    batches grouped by length within windows of 50 batches, so padding stays small without
    giving up randomness between windows."""
    rng = np.random.default_rng(seed)
    need = n_steps * batch_size
    chunks: list[np.ndarray] = []
    while sum(len(c) for c in chunks) < need:
        chunks.append(rng.permutation(n_examples))
    flat = np.concatenate(chunks)[:need]
    if group_by_length:
        window = batch_size * 50
        for start in range(0, need, window):
            seg = flat[start : start + window]
            flat[start : start + window] = seg[np.argsort(lengths[seg], kind="stable")]
        batches = [flat[i * batch_size : (i + 1) * batch_size] for i in range(n_steps)]
        # Shuffle the batch order so that short and long batches interleave.
        perm = rng.permutation(n_steps)
        return [batches[i] for i in perm]
    return [flat[i * batch_size : (i + 1) * batch_size] for i in range(n_steps)]


def eval_batches(split: TokenizedSplit, batch_size: int, limit: int | None) -> list[np.ndarray]:
    """Validation batches, sorted by length to minimise padding; the order does not change the mean."""
    n = len(split) if limit is None else min(limit, len(split))
    order = np.argsort(split.lengths[:n], kind="stable")
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]
