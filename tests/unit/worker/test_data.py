"""Tokenization: the completion-only loss mask on a hand-made example, padding, label ids."""

from __future__ import annotations

import numpy as np
import torch

from autotune.inputs.examples import Examples
from autotune.worker import data as wdata
from autotune.worker.models import tiny_tokenizer


def test_completion_only_loss_mask() -> None:
    rows = [
        {"prompt": "what is two plus two", "completion": "four"},
        {"prompt": "say hi", "completion": "hi there friend"},
    ]
    tok = tiny_tokenizer(rows, ["prompt", "completion"])
    split = wdata.tokenize_split(
        tok,
        rows,
        task="causal-lm",
        text_field="text",
        text_pair_field=None,
        prompt_field="prompt",
        completion_field="completion",
        label_field="label",
        labels=None,
        max_length=32,
    )
    bos, eos = tok.bos_token_id, tok.eos_token_id
    ids0 = [
        bos,
        *tok.convert_tokens_to_ids(["what", "is", "two", "plus", "two"]),
        tok.convert_tokens_to_ids("four"),
        eos,
    ]
    assert split.input_ids[0].tolist() == ids0
    assert split.lengths.tolist() == [8, 7]
    # Loss only on the completion (and EOS): BOS + 5 prompt tokens are ignored.
    assert split.labels[0].tolist() == [-100] * 6 + ids0[6:]
    assert split.labels[1, :7].tolist() == [-100] * 3 + split.input_ids[1, 3:7].tolist()


def test_plain_text_trains_on_every_token_and_truncates() -> None:
    rows = [{"text": "a b c d e f g h"}]
    tok = tiny_tokenizer(rows, ["text"])
    split = wdata.tokenize_split(
        tok,
        rows,
        task="causal-lm",
        text_field="text",
        text_pair_field=None,
        prompt_field=None,
        completion_field=None,
        label_field="label",
        labels=None,
        max_length=5,
    )
    assert split.lengths.tolist() == [5]
    assert split.labels[0].tolist() == split.input_ids[0].tolist()


def test_string_labels_map_to_ids_and_batches_pad_dynamically() -> None:
    train = [{"text": "short", "label": "b"}, {"text": "a much longer text here", "label": "a"}]
    ex = Examples(train=train, validation=train, labels=("a", "b"))
    tok = tiny_tokenizer(train, ["text"])
    data = wdata.tokenize(
        tok,
        ex,
        task="seq-cls",
        text_field="text",
        text_pair_field=None,
        prompt_field=None,
        completion_field=None,
        label_field="label",
        max_length=16,
    )
    assert data.train.labels.tolist() == [1, 0]
    short = wdata.make_batch(data.train, np.array([0]), torch.device("cpu"))
    both = wdata.make_batch(data.train, np.array([0, 1]), torch.device("cpu"))
    assert short.input_ids.shape == (1, 3)  # [CLS] short [SEP]: no padding to max_length
    assert both.input_ids.shape == (2, 7)
    assert both.attention_mask.sum().item() == 3 + 7
    assert both.n_tokens == 10


def test_train_order_covers_the_budget() -> None:
    lengths = np.arange(100) % 7 + 1
    order = wdata.train_order(100, 16, 13, seed=0, lengths=lengths, group_by_length=True)
    assert len(order) == 13
    assert all(len(b) == 16 for b in order)
    flat = np.concatenate(order)
    assert len(set(flat[:100].tolist())) > 50  # drawn from across the data, not one slice
    assert [b.tolist() for b in order] == [
        b.tolist() for b in wdata.train_order(100, 16, 13, 0, lengths, group_by_length=True)
    ]
