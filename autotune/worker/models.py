"""Base models and tokenizers: a tiny model built from a config in code, or any HF model.

The base model is loaded once per worker process (``BaseModelCache``); each trial wraps it with
fresh LoRA adapters and unloads them afterwards, so the base weights are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from autotune.errors import ModelError
from autotune.inputs.examples import Record

TINY = "tiny"
_SPECIALS = ("[PAD]", "[UNK]", "[BOS]", "[EOS]", "[CLS]", "[SEP]")


def tiny_tokenizer(rows: list[Record], fields: list[str]) -> Any:
    """A word-level tokenizer whose vocabulary is the sorted words of ``rows``: deterministic,
    so every process that builds it from the same data gets the same ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words: set[str] = set()
    pre = pre_tokenizers.Whitespace()
    for r in rows:
        for f in fields:
            words.update(w for w, _ in pre.pre_tokenize_str(str(r[f])))
    vocab = {tok: i for i, tok in enumerate(_SPECIALS)}
    for w in sorted(words):
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        bos_token="[BOS]",
        eos_token="[EOS]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )


def build_tiny(
    task: str,
    vocab_size: int,
    num_labels: int,
    *,
    hidden: int,
    layers: int,
    heads: int,
    intermediate: int,
    pad_id: int,
    seed: int,
) -> torch.nn.Module:
    """A llama-style causal LM or a bert-style classifier, randomly initialised from ``seed``."""
    torch.manual_seed(seed)
    if task == "causal-lm":
        from transformers import LlamaConfig, LlamaForCausalLM

        cfg = LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=hidden,
            intermediate_size=intermediate,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=heads,
            max_position_embeddings=2048,
            pad_token_id=pad_id,
            bos_token_id=2,
            eos_token_id=3,
            tie_word_embeddings=True,
        )
        return LlamaForCausalLM(cfg)
    from transformers import BertConfig, BertForSequenceClassification

    bcfg = BertConfig(  # type: ignore[call-arg]
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        max_position_embeddings=2048,
        pad_token_id=pad_id,
        num_labels=num_labels,
    )
    return BertForSequenceClassification(bcfg)


def token_lengths(name: str, texts: list[str]) -> list[int]:
    """Tokens per text with the model's own tokenizer, special tokens included (`autotune init`)."""
    tok = load_tokenizer(name, None)
    return [len(ids) for ids in tok(texts, add_special_tokens=True)["input_ids"]]


def load_tokenizer(name: str, revision: str | None) -> Any:
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(name, revision=revision)
    except (OSError, ValueError) as err:
        raise ModelError(
            f"model.name: cannot load a tokenizer from '{name}' ({str(err).splitlines()[0][:160]})"
        ) from None
    if tok.pad_token_id is None and tok.eos_token_id is not None:
        tok.pad_token = tok.eos_token
    return tok


def quiet_transformers() -> None:
    # The load report ("classifier.weight MISSING") is expected: the task head is new by design.
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def load_pretrained(
    name: str, task: str, num_labels: int, revision: str | None, dtype: torch.dtype, seed: int
) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    quiet_transformers()
    torch.manual_seed(seed)  # a new classification head is initialised from this seed
    try:
        if task == "causal-lm":
            return AutoModelForCausalLM.from_pretrained(name, revision=revision, dtype=dtype)
        return AutoModelForSequenceClassification.from_pretrained(
            name, revision=revision, dtype=dtype, num_labels=num_labels
        )
    except (OSError, ValueError) as err:
        raise ModelError(f"model.name: cannot load '{name}' ({str(err).splitlines()[0][:160]})") from None


# peft's own per-architecture defaults serve "auto"; these presets name more of the model.
_ATTENTION_NAMES = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "query",
    "key",
    "value",
    "c_attn",
    "qkv_proj",
    "Wqkv",
    "out_proj",
)


# The feed-forward block's projections, by architecture: llama/mistral/qwen (gate/up/down_proj), OPT
# and Phi (fc1, fc2), GPT-2 (c_fc, mlp.c_proj), Falcon and GPT-NeoX (dense_h_to_4h, dense_4h_to_h),
# BERT (intermediate.dense and the layer's output.dense; suffixes, since "dense" alone is also the
# pooler). The preset "attention+mlp" is the attention projections and these.
_MLP_NAMES = (
    "gate_proj",
    "up_proj",
    "down_proj",
    "fc1",
    "fc2",
    "c_fc",
    "mlp.c_proj",
    "dense_h_to_4h",
    "dense_4h_to_h",
    "intermediate.dense",
    "output.dense",
    "w1",
    "w2",
    "w3",
)


def _linear_names(model: torch.nn.Module, wanted: tuple[str, ...]) -> list[str]:
    """The entries of ``wanted`` (short names or dotted suffixes, as peft matches them) that name
    at least one Linear layer of ``model``."""
    linear = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    return sorted(w for w in wanted if any(n == w or n.endswith("." + w) for n in linear))


def resolve_target_modules(model: torch.nn.Module, preset: str | tuple[str, ...]) -> list[str] | str | None:
    if isinstance(preset, tuple):
        names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
        missing = [t for t in preset if t not in names]
        if missing:
            raise ModelError(f"lora.target_modules: the model has no module named '{missing[0]}'")
        return list(preset)
    if preset == "auto":
        return None
    if preset == "all-linear":
        return "all-linear"
    if preset in ("attention", "attention+mlp"):
        found = _linear_names(model, _ATTENTION_NAMES)
        if not found:
            raise ModelError(f"lora.target_modules: the '{preset}' preset found no attention projections")
        if preset == "attention+mlp":
            mlp = _linear_names(model, _MLP_NAMES)
            if not mlp:
                raise ModelError("lora.target_modules: the 'attention+mlp' preset found no feed-forward projections")
            found = sorted({*found, *mlp})
        return found
    raise ModelError(
        f"lora.target_modules: unknown preset '{preset}' (auto, attention, attention+mlp, all-linear, or a list)"
    )


def wrapped_modules(model: torch.nn.Module) -> list[str]:
    """The names of the modules peft put LoRA adapters on: the resolved form of a preset (for
    "auto", peft's per-architecture default), ready for a user's own ``LoraConfig``. Each is the
    shortest dotted suffix that names wrapped layers only (``output.dense``, not BERT's ``dense``,
    which is also the unwrapped pooler), so the same names wrap the same layers again."""
    from peft.tuners.lora import LoraLayer

    def base(n: str) -> str:  # peft nests the wrapped layer: drop its "base_model.model." prefix
        return n.removeprefix("base_model.model.")

    mods = [(base(n), isinstance(m, LoraLayer)) for n, m in model.named_modules()]
    wrapped = {n for n, w in mods if w}
    others = [n for n, w in mods if not w and not any(n.startswith(x + ".") for x in wrapped)]
    out: set[str] = set()
    for n in wrapped:
        parts = n.split(".")
        for k in range(1, len(parts) + 1):
            suffix = ".".join(parts[-k:])
            if not any(o == suffix or o.endswith("." + suffix) for o in others if o.rsplit(".", 1)[-1] == parts[-1]):
                out.add(suffix)
                break
    return sorted(out)


# The task heads peft trains as a copy for SEQ_CLS (its default modules_to_save).
HEAD_MODULES = ("classifier", "score")


@dataclass
class BaseModelCache:
    """One base model per worker process, keyed by what defines it, with a copy of its freshly
    initialised task head: peft's ``unload()`` leaves the *trained* head copy in the base model,
    so each trial restores the head from this copy to start from the same weights."""

    key: tuple[Any, ...] | None = None
    model: torch.nn.Module | None = None
    head: dict[str, torch.Tensor] | None = None

    def get(self, key: tuple[Any, ...]) -> torch.nn.Module | None:
        return self.model if key == self.key else None

    def put(self, key: tuple[Any, ...], model: torch.nn.Module) -> None:
        self.key, self.model = key, model
        self.head = {n: p.detach().clone() for n, p in model.named_parameters() if n.split(".")[0] in HEAD_MODULES}

    def evict(self) -> None:
        """Forget the model: the next trial loads a clean one."""
        self.key, self.model, self.head = None, None, None

    def restore_head(self) -> None:
        if self.model is None or not self.head:
            return
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, value in self.head.items():
                params[name].copy_(value)
