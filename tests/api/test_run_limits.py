"""What one request or one account may ask for (security review M1, M2): each attack as the
review writes it is refused with a 4xx that says what to fix, and writes nothing."""

from __future__ import annotations

import json

import pytest

from tests.factories import EnvironmentFactory, RunFactory
from tests.support.run_launch import launch_config as config
from tests.support.run_launch import launch_refused as refused
from webapp.runs.models import Run, RunEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def echo_env(echo_url, owner):
    """The suite's echo_env with room for every run these tests launch at once."""
    return EnvironmentFactory(
        owner=owner, name="echo", base_url=echo_url, capacity=1024, metadata={"name": "echo"}
    )


@pytest.fixture
def models_dir(settings, tmp_path):
    """MODELS_DIR with a built-looking demo model (a config.json: the check is for presence)."""
    root = tmp_path / "models"
    (root / "echo").mkdir(parents=True)
    (root / "echo" / "config.json").write_text("{}")
    settings.MODELS_DIR = root
    settings.RUNS_DIR = tmp_path / "runs"
    settings.ENVLAB_MODEL_ROOTS = []
    return root


# --- M1: sizes -------------------------------------------------------------------------------


def test_eight_environments_of_100k_rows_with_4000_character_prompts_are_refused(api, echo_env, models_dir):
    environments = [
        {"environment": echo_env.pk, "name": f"e{i}", "prompt": "x" * 4000, "rows": 100_000} for i in range(8)
    ]
    errors = refused(api, config(echo_env.pk, environments=environments))
    assert errors == {
        f"environments.{i}.rows": ["Input should be less than or equal to 50000"] for i in range(8)
    }


def test_rows_summed_over_environments_are_bounded(api, echo_env, models_dir):
    environments = [
        {"environment": echo_env.pk, "name": f"e{i}", "prompt": "Echo 'hi'.", "rows": 50_000} for i in range(2)
    ]
    errors = refused(api, config(echo_env.pk, environments=environments))
    assert errors == {
        "environments": [
            "the run's environments ask for 100000 rows (rows, or ORS num_tasks/indices) in all; at most 50000"
        ]
    }


def test_rows_times_prompt_length_is_bounded(api, echo_env, models_dir):
    environments = [{"environment": echo_env.pk, "name": "echo", "prompt": "x" * 4000, "rows": 50_000}]
    errors = refused(api, config(echo_env.pk, environments=environments))
    assert errors == {
        "environments": [
            "rows x prompt length is 200000000 characters in all; at most 20000000 (fewer rows or a shorter prompt)"
        ]
    }


def test_a_generation_batch_of_1024_x_1024_is_refused(api, echo_env, models_dir):
    errors = refused(
        api, config(echo_env.pk, grpo={"per_device_train_batch_size": 1024, "gradient_accumulation_steps": 1024})
    )
    assert errors == {
        "grpo.per_device_train_batch_size": ["Input should be less than or equal to 256"],
        "grpo.gradient_accumulation_steps": ["Input should be less than or equal to 256"],
    }


def test_the_generation_batch_product_is_bounded(api, echo_env, models_dir):
    errors = refused(
        api, config(echo_env.pk, grpo={"per_device_train_batch_size": 128, "gradient_accumulation_steps": 4})
    )
    assert errors == {
        "grpo.per_device_train_batch_size": [
            "the generation batch per_device_train_batch_size x gradient_accumulation_steps (128 x 4 = 512) "
            "is at most 256"
        ]
    }


def test_100k_steps_and_32k_completions_on_cpu_are_refused(api, echo_env, models_dir):
    errors = refused(api, config(echo_env.pk, grpo={"max_steps": 100_000}))
    assert errors == {"grpo.max_steps": ["Input should be less than or equal to 10000"]}
    errors = refused(api, config(echo_env.pk, grpo={"max_completion_length": 32_768}))
    assert errors == {"grpo.max_completion_length": ["Input should be less than or equal to 16384"]}
    errors = refused(api, config(echo_env.pk, grpo={"max_completion_length": 4096}))
    assert errors == {"grpo.max_completion_length": ["max_completion_length is at most 2048 tokens on device 'cpu'"]}


def test_reward_params_are_bounded_in_size_and_depth(api, echo_env, models_dir):
    big = [{"name": "env_reward", "kind": "env_reward", "params": {"blob": "x" * 5000}}]
    errors = refused(api, config(echo_env.pk, rewards=big))
    assert errors == {"rewards.0.params": ["params take at most 4096 bytes as JSON, not 5011"]}
    nested: dict = {}
    for _ in range(40):
        nested = {"n": nested}
    deep = [{"name": "env_reward", "kind": "env_reward", "params": nested}]
    errors = refused(api, config(echo_env.pk, rewards=deep))
    assert errors == {"rewards.0.params": ["params nest at most 6 levels deep"]}


def test_a_chat_template_in_chat_template_kwargs_is_refused(api, echo_env, models_dir):
    burn = "{% for i in range(10**9) %}{% for j in range(10**9) %}x{% endfor %}{% endfor %}"
    errors = refused(api, config(echo_env.pk, grpo={"chat_template_kwargs": {"chat_template": burn}}))
    assert errors == {
        "grpo.chat_template_kwargs": [
            "'chat_template' is not a chat template switch envlab passes on; allowed keys: "
            "enable_thinking, reasoning_effort, thinking"
        ]
    }
    errors = refused(api, config(echo_env.pk, grpo={"chat_template_kwargs": {"enable_thinking": 1}}))
    assert errors == {"grpo.chat_template_kwargs": ["'enable_thinking' takes one of true, false"]}


def test_ors_task_counts_are_capped(api, echo_env, models_dir):
    environments = [{"environment": echo_env.pk, "name": "echo", "num_tasks": 100_000}]
    errors = refused(api, config(echo_env.pk, environments=environments))
    assert errors == {"environments.0.num_tasks": ["Input should be less than or equal to 10000"]}
    environments = [{"environment": echo_env.pk, "name": "echo", "indices": list(range(10_001))}]
    errors = refused(api, config(echo_env.pk, environments=environments))
    assert errors == {"environments.0.indices": ["List should have at most 10000 items after validation, not 10001"]}


def test_the_documented_example_config_is_still_valid():
    from webapp.runs.config import parse_run_config

    example = {
        "name": "echo-demo",
        "model": "demo:echo",
        "environments": [{"environment": 1, "name": "echo", "prompt": "Echo 'hello world'.", "rows": 64}],
        "rewards": [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
        "grpo": {"num_generations": 4, "max_steps": 20, "learning_rate": 1e-5,
                 "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1,
                 "max_completion_length": 256, "max_tool_calling_iterations": 4,
                 "beta": 0.0, "temperature": 1.0, "seed": 0,
                 "chat_template_kwargs": {"enable_thinking": False}},
        "generation": {"backend": "transformers"},
        "device": "cpu",
    }  # fmt: skip
    assert parse_run_config(example).grpo.chat_template_kwargs == {"enable_thinking": False}
    assert parse_run_config({**example, "grpo": {}}).grpo.chat_template_kwargs == {"enable_thinking": False}


# --- M1: the per-account quota -----------------------------------------------------------------


def _active_runs(owner, count: int) -> list[Run]:
    statuses = [Run.Status.QUEUED, Run.Status.RUNNING]
    return [
        RunFactory(owner=owner, name=f"r{i}", status=statuses[i % 2])
        for i in range(count)
    ]


def test_a_fifth_active_run_is_refused(api, owner, echo_env, models_dir, settings):
    settings.ENVLAB_MAX_ACTIVE_RUNS = 4
    existing = _active_runs(owner, 4)
    response = api.post("/api/runs/", config(echo_env.pk), format="json")
    assert response.status_code == 400
    assert response.json() == {
        "non_field_errors": [
            "you have 4 queued or running runs, and one account may have at most 4 at once: wait for one "
            "to finish, or cancel one"
        ]
    }
    assert list(Run.objects.order_by("pk")) == existing
    assert RunEvent.objects.count() == 0


def test_finished_runs_and_other_accounts_do_not_count(
    api, owner, outsider, echo_env, models_dir, settings, broker, django_capture_on_commit_callbacks
):
    settings.ENVLAB_MAX_ACTIVE_RUNS = 2
    _active_runs(outsider, 2)
    RunFactory(owner=owner, name="old", status="succeeded")
    _active_runs(owner, 1)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/runs/", config(echo_env.pk), format="json")
    assert response.status_code == 201, response.json()
    assert Run.objects.filter(owner=owner, status__in=Run.ACTIVE).count() == 2


def test_resume_past_the_quota_is_refused(api, owner, models_dir, settings):
    settings.ENVLAB_MAX_ACTIVE_RUNS = 1
    _active_runs(owner, 1)
    stopped = RunFactory(
        owner=owner,
        name="stopped",
        status="interrupted",
        error="The worker stopped sending heartbeats.",
    )
    response = api.post(f"/api/runs/{stopped.pk}/resume/")
    assert response.status_code == 409
    assert response.json() == {
        "detail": "you have 1 queued or running runs, and one account may have at most 1 at once: wait for "
        "one to finish, or cancel one"
    }
    stopped.refresh_from_db()
    assert (stopped.status, stopped.error, stopped.sent_at) == (
        "interrupted", "The worker stopped sending heartbeats.", None,
    )
    assert RunEvent.objects.count() == 0


# --- M2: local model folders -------------------------------------------------------------------


def test_any_absolute_folder_is_refused_without_saying_whether_it_exists(api, echo_env, models_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "config.json").write_text("{}")
    answers = [
        refused(api, config(echo_env.pk, model=model))
        for model in (str(elsewhere), "/etc", "/no/such/folder", f"{models_dir}/../elsewhere")
    ]
    expected = {"model": [f"local model folders must be under {models_dir}"]}
    assert answers == [expected] * 4


def test_another_users_checkpoint_is_refused(api, owner, outsider, echo_env, models_dir, settings):
    theirs = RunFactory(owner=outsider, name="theirs")
    checkpoint = settings.RUNS_DIR / str(theirs.pk) / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    settings.ENVLAB_MODEL_ROOTS = [str(settings.RUNS_DIR.parent)]  # a root wide enough to hold runs
    response = api.post("/api/runs/", config(echo_env.pk, model=str(checkpoint)), format="json")
    assert response.status_code == 400
    assert response.json() == {
        "model": [f"local model folders must be under {models_dir}, {settings.RUNS_DIR.parent}"]
    }
    assert list(Run.objects.values_list("name", flat=True)) == ["theirs"]


def test_a_symlink_out_of_the_models_folder_is_refused(api, echo_env, models_dir, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    (models_dir / "link").symlink_to(outside, target_is_directory=True)
    errors = refused(api, config(echo_env.pk, model=str(models_dir / "link")))
    assert errors == {"model": [f"local model folders must be under {models_dir}"]}


def test_folders_under_the_configured_roots_are_accepted(
    api, echo_env, models_dir, tmp_path, settings, broker, django_capture_on_commit_callbacks
):
    extra = tmp_path / "shared-models"
    (extra / "tiny").mkdir(parents=True)
    (extra / "tiny" / "config.json").write_text("{}")
    settings.ENVLAB_MODEL_ROOTS = [str(extra)]
    missing = refused(api, config(echo_env.pk, model=str(extra / "absent")))
    assert missing == {"model": [f"no model folder with a config.json at {extra / 'absent'}"]}
    with django_capture_on_commit_callbacks(execute=True):
        first = api.post("/api/runs/", config(echo_env.pk, model=str(extra / "tiny")), format="json")
        second = api.post("/api/runs/", config(echo_env.pk, model=str(models_dir / "echo")), format="json")
    assert (first.status_code, second.status_code) == (201, 201)
    assert list(Run.objects.order_by("pk").values_list("model", flat=True)) == [
        str(extra / "tiny"), str(models_dir / "echo"),
    ]
    sent = [json.loads(m)["headers"]["argsrepr"] for m in broker.lrange("train", 0, -1)]
    assert sorted(sent) == sorted(f"({pk},)" for pk in Run.objects.values_list("pk", flat=True))


# --- H2 (the run config's outbound URL): generation.vllm_server_base_url ---------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://169.254.169.254/latest/meta-data", "vllm_server_base_url is refused: addresses in 169.254.0.0/16 "
         "(link-local, cloud metadata) are never allowed"),
        ("http://10.0.0.5:8000", "vllm_server_base_url is refused: private/loopback addresses need "
         "ENVLAB_ALLOWED_ENV_NETWORKS (this one is not listed there)"),
        ("http://user:secret@127.0.0.1:8000", "vllm_server_base_url must not carry a user name or password "
         "(user:password@host)"),
        ("file:///etc/passwd", "vllm_server_base_url must be an http:// or https:// URL with a host"),
    ],
)  # fmt: skip
def test_a_vllm_server_url_is_held_to_the_outbound_rules(api, echo_env, models_dir, url, message):
    errors = refused(api, config(
        echo_env.pk, device="cuda", generation={"backend": "vllm", "vllm_mode": "server", "vllm_server_base_url": url},
    ))
    assert errors == {"generation.vllm_server_base_url": [message]}
