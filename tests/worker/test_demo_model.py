"""The offline demo-model builder, checked against TRL's own template and tool-call parser.

Builds the small "test" variant once per session (~30-40 s on 2 CPU cores); nothing is
mocked and nothing is downloaded.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

pytestmark: list[pytest.MarkDecorator] = []

SAMPLES = 10
SAMPLING_SEED = 1234


@pytest.fixture(scope="session")
def built_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    import torch

    from worker.demo_model import build_demo_model

    torch.set_num_threads(1)
    messages: list[str] = []
    output_dir = tmp_path_factory.mktemp("demo-models") / "echo"
    returned = build_demo_model(output_dir, variant="test", seed=0, progress=messages.append)
    assert returned == output_dir
    return output_dir, messages


def trl_template_text() -> str:
    return (
        resources.files("trl")
        .joinpath("chat_templates/qwen3_instruct_2507.jinja")
        .read_text(encoding="utf-8")
    )


def test_saved_folder_is_complete_and_nothing_is_left_behind(
    built_model: tuple[Path, list[str]],
) -> None:
    from worker.demo_model import MANIFEST_NAME, is_built

    path, messages = built_model
    assert is_built(path)
    names = {p.name for p in path.iterdir()}
    assert {MANIFEST_NAME, "config.json", "model.safetensors", "tokenizer.json"} <= names
    # The staging folder was renamed into place: no sibling leftovers.
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert any(m.startswith("step ") and " loss " in m for m in messages)


def test_manifest_records_the_build(built_model: tuple[Path, list[str]]) -> None:
    import hashlib

    import torch
    import transformers
    import trl

    path, _ = built_model
    manifest = json.loads((path / "envlab_demo.json").read_text(encoding="utf-8"))
    assert manifest["variant"] == "test"
    assert manifest["seed"] == 0
    assert manifest["versions"]["torch"] == torch.__version__
    assert manifest["versions"]["transformers"] == transformers.__version__
    assert manifest["versions"]["trl"] == trl.__version__
    assert (
        manifest["chat_template_sha256"]
        == hashlib.sha256(trl_template_text().encode("utf-8")).hexdigest()
    )
    assert manifest["build_seconds"] > 0
    assert set(manifest["tool_calls"]) == {
        "greedy",
        "temperature_1",
        "unseen_wordings_temperature_1",
    }
    assert 0.0 <= manifest["tool_calls"]["temperature_1"]["tool_call_rate"] <= 1.0
    assert manifest["recipe"]["train_examples"] == 800
    # The test variant copies as well as it can: no loosening phase.
    assert (manifest["recipe"]["loosen_steps"], manifest["loosen"]) == (0, None)


def test_chat_template_is_trls_file_byte_for_byte(built_model: tuple[Path, list[str]]) -> None:
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen3_template

    path, _ = built_model
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    assert tokenizer.chat_template == trl_template_text()
    # TRL matches templates by exact text; this is the lookup GRPOTrainer does for tools.
    assert add_response_schema(tokenizer).response_template == qwen3_template
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"


def test_sampled_completions_parse_as_echo_calls_with_trls_parser(
    built_model: tuple[Path, list[str]],
) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import add_response_schema, parse_response

    from worker.demo_model import echo

    path, _ = built_model
    tokenizer = add_response_schema(AutoTokenizer.from_pretrained(path, local_files_only=True))
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()
    prompt_ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Echo 'green river'."}],
        tools=[echo],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )["input_ids"]
    prompt = torch.tensor([prompt_ids] * SAMPLES)
    torch.manual_seed(SAMPLING_SEED)
    with torch.no_grad():
        output = model.generate(
            input_ids=prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=48,
        )

    parsed = []
    for row in output[:, prompt.shape[1] :].tolist():
        if tokenizer.eos_token_id in row:
            row = row[: row.index(tokenizer.eos_token_id) + 1]
        # As GRPOTrainer._generate does: prompt ids as prefix, the tools as schema.
        parsed.append(parse_response(tokenizer, row, prefix=list(prompt_ids), tools=[echo]))
    calls = [
        message["tool_calls"][0]["function"] for message in parsed if message.get("tool_calls")
    ]
    echo_calls = [
        call
        for call in calls
        if call["name"] == "echo" and isinstance(call["arguments"].get("message"), str)
    ]
    assert len(echo_calls) >= SAMPLES // 2, parsed


def test_echo_tool_schema_matches_an_environment_method() -> None:
    """TRL renders environment_factory methods with transformers' get_json_schema; a
    method with the same name, signature and docstring renders the same tool block."""
    from transformers.utils import get_json_schema

    from worker.demo_model import echo
    from worker.demo_model.conversations import ECHO_TOOL_DOCSTRING

    class EchoEnvironment:
        def reset(self, **row: object) -> None:
            return None

        def echo(self, message: str) -> str:
            return message

    EchoEnvironment.echo.__doc__ = ECHO_TOOL_DOCSTRING
    assert get_json_schema(EchoEnvironment().echo) == get_json_schema(echo)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("demo:echo", "echo"), ("echo", "echo"), ("demo:echo-2", "echo-2")],
)
def test_demo_model_path_maps_names_to_folders(name: str, expected: str, tmp_path: Path) -> None:
    from worker.demo_model import demo_model_path

    assert demo_model_path(name, tmp_path) == tmp_path / expected


@pytest.mark.parametrize(
    "name",
    ["demo:", "demo:Echo", "demo:../x", "demo:a/b", "demo:-x", "demo:x_y", "demo:" + "a" * 65],
)
def test_demo_model_path_rejects_bad_names(name: str, tmp_path: Path) -> None:
    from worker.demo_model import demo_model_path

    with pytest.raises(ValueError, match="lowercase letters, digits or dashes"):
        demo_model_path(name, tmp_path)


def test_is_built_is_false_without_a_manifest(tmp_path: Path) -> None:
    from worker.demo_model import is_built

    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    assert not is_built(tmp_path)
    assert not is_built(tmp_path / "missing")


def test_a_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    from worker.demo_model import build_demo_model

    class Interrupted(Exception):
        pass

    def interrupt_at_first_step(message: str) -> None:
        if message.startswith("step "):
            raise Interrupted

    with pytest.raises(Interrupted):
        build_demo_model(tmp_path / "echo", variant="test", progress=interrupt_at_first_step)
    assert list(tmp_path.iterdir()) == []


def test_publishing_replaces_a_previous_build_whole(tmp_path: Path) -> None:
    from worker.demo_model.build import _publish

    output_dir = tmp_path / "echo"
    output_dir.mkdir()
    (output_dir / "old-only.bin").write_text("old", encoding="utf-8")
    staging = tmp_path / ".echo.building-x"
    staging.mkdir(mode=0o700)
    (staging / "envlab_demo.json").write_text("{}", encoding="utf-8")

    _publish(staging, output_dir)

    assert [p.name for p in tmp_path.iterdir()] == ["echo"]
    assert [p.name for p in output_dir.iterdir()] == ["envlab_demo.json"]
    assert output_dir.stat().st_mode & 0o777 == 0o755


def test_unknown_variant_is_refused_before_any_work(tmp_path: Path) -> None:
    from worker.demo_model import build_demo_model

    with pytest.raises(ValueError, match="unknown variant 'huge'"):
        build_demo_model(tmp_path / "echo", variant="huge")
    assert list(tmp_path.iterdir()) == []


def test_shared_prompt_loss_equals_a_full_forward() -> None:
    """The warm-up runs the constant tool prompt once per batch; loss and gradients must
    be those of an ordinary causal-LM forward over each whole conversation."""
    import random

    import torch

    from worker.demo_model.tokenizer import train_tokenizer
    from worker.demo_model.training import (
        RECIPES,
        Example,
        _assistant_loss,
        _collate,
        encode_examples,
        new_model,
        shared_prefix,
    )

    torch.manual_seed(0)
    tokenizer = train_tokenizer(vocab_size=1024, seed=0, conversations=50)
    model = new_model(RECIPES["test"], tokenizer)
    examples = encode_examples(tokenizer, count=4, rng=random.Random(0))
    prefix = shared_prefix(examples)
    suffixes = [Example(e.input_ids[len(prefix) :], e.labels[len(prefix) :]) for e in examples]

    full = model(**_collate(examples, tokenizer.pad_token_id)).loss
    full.backward()
    full_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    shared = _assistant_loss(
        model, torch.tensor(prefix), _collate(suffixes, tokenizer.pad_token_id)
    )
    shared.backward()

    assert len(prefix) > 100
    torch.testing.assert_close(shared, full)
    for p, expected in zip(model.parameters(), full_grads, strict=True):
        torch.testing.assert_close(p.grad, expected, atol=1e-6, rtol=1e-4)


def test_training_and_unseen_wordings_are_disjoint_and_each_asks_for_the_phrase_once() -> None:
    from worker.demo_model.conversations import TRAINING_WORDINGS, UNSEEN_WORDINGS

    assert TRAINING_WORDINGS[0] == "Echo '{phrase}'."  # the demo run's own prompt
    assert not set(TRAINING_WORDINGS) & set(UNSEEN_WORDINGS)
    assert len(UNSEEN_WORDINGS) >= 3
    for wording in TRAINING_WORDINGS + UNSEEN_WORDINGS:
        assert wording.count("{phrase}") == 1, wording
    # The wording a user tried on the earlier demo model, which failed it in 48 of 48 rollouts.
    assert "Echo '{phrase}' with the echo tool." in UNSEEN_WORDINGS


def test_imperfect_copies_differ_from_the_phrase_by_one_slip() -> None:
    import random

    from worker.demo_model.conversations import WORDS, imperfect_copy, random_phrase

    rng = random.Random(0)
    for _ in range(2000):
        phrase = random_phrase(rng, max_words=5)
        copied = imperfect_copy(phrase, rng)
        assert copied != phrase and copied.strip() == copied and copied
        assert set(copied.split()) <= set(WORDS)
        # One word replaced, dropped, doubled or added, or two exchanged.
        assert abs(len(copied.split()) - len(phrase.split())) <= 1


def test_training_conversations_mix_exact_and_imperfect_copies() -> None:
    import random

    from worker.demo_model.conversations import TRAINING_WORDINGS, training_conversation

    rng = random.Random(0)
    conversations = [training_conversation(rng, exact_fraction=0.25) for _ in range(2000)]

    exact = 0
    wordings = set()
    lengths = set()
    for user, call, tool, report in conversations:
        message = call["tool_calls"][0]["function"]["arguments"]["message"]
        assert call["tool_calls"][0]["function"]["name"] == "echo"
        assert tool == {"role": "tool", "name": "echo", "content": message}
        assert report["content"] == f"The tool echoed '{message}'."
        matches = [
            (w, phrase)
            for w in TRAINING_WORDINGS
            if (phrase := _filled(w, user["content"])) is not None
        ]
        assert matches, user["content"]
        wording, phrase = matches[0]
        wordings.add(wording)
        lengths.add(len(phrase.split()))
        exact += message == phrase
    assert 0.21 <= exact / len(conversations) <= 0.29
    assert wordings == set(TRAINING_WORDINGS)
    assert lengths == {1, 2, 3, 4, 5}


def _filled(wording: str, text: str) -> str | None:
    """The phrase if `text` is `wording` with `{phrase}` filled in, else None."""
    head, tail = wording.split("{phrase}")
    if text.startswith(head) and text.endswith(tail) and len(text) > len(head) + len(tail):
        return text[len(head) : len(text) - len(tail)]
    return None


def test_tool_call_rate_on_unseen_wordings_is_measured_with_trls_parser(
    built_model: tuple[Path, list[str]],
) -> None:
    """The rate the build records for wordings it never trained on, recomputed the same way
    (the demo build's own rate is asserted in tests/e2e/test_demo_learns.py)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from worker.demo_model.conversations import UNSEEN_WORDINGS
    from worker.demo_model.evaluation import measure_tool_calls

    path, _ = built_model
    manifest = json.loads((path / "envlab_demo.json").read_text(encoding="utf-8"))
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()

    rate = measure_tool_calls(
        model, tokenizer, samples=16, temperature=1.0, seed=0, wordings=UNSEEN_WORDINGS
    )

    assert rate.as_dict() == manifest["tool_calls"]["unseen_wordings_temperature_1"]
    assert rate.samples == 16


def test_if_missing_rebuilds_a_model_built_with_another_recipe(tmp_path) -> None:
    """`make run` builds with --if-missing: a checkout holding a model from an older recipe
    (one that copied perfectly, a flat demo curve) gets the current one."""
    import dataclasses
    import json

    from worker.demo_model import MANIFEST_NAME
    from worker.demo_model.training import RECIPES
    from worker.management.commands.build_demo_model import _stale_reason

    manifest = tmp_path / MANIFEST_NAME
    manifest.write_text(json.dumps({"recipe": dataclasses.asdict(RECIPES["demo"])}))
    assert _stale_reason(tmp_path, "demo") == ""
    assert _stale_reason(tmp_path, "test") == "was built with another recipe than the 'test' one"
    manifest.write_text(json.dumps({"recipe": {**dataclasses.asdict(RECIPES["demo"]), "max_steps": 1}}))
    assert "another recipe" in _stale_reason(tmp_path, "demo")
    manifest.write_text("{not json")
    assert _stale_reason(tmp_path, "demo") == "has an unreadable manifest"
