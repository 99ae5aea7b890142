"""Server-rendered pages: access, forms and their errors, the run page's escaped transcript.

Environments are created as rows (no server to probe); the one probe test points at a
closed local port, which answers at once with a refused connection. Live notifications
go nowhere here (notify_run logs and drops them when Redis is absent).
"""

from __future__ import annotations

import gzip
import html
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.envs.servers import free_port
from tests.fixtures.accounts import grant, signed_in
from tests.webapp.pages import field_block, run_form_data
from webapp.catalog.models import Environment
from webapp.runs.config import parse_run_config
from webapp.runs.forms import ALERT_FIELDS, REWARD_INITIAL, RunForm
from webapp.runs.models import MetricPoint, Rollout, Run, RunEvent
from webapp.runs.services import run_mark_stale_interrupted

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_models")]

REPO = Path(__file__).resolve().parents[2]
XSS = "<script>alert(1)</script>"


# --- personas and rows ----------------------------------------------------------------------


def make_run(
    user: User, *, status: str = Run.Status.QUEUED, name: str = "my-run", **fields: Any
) -> Run:
    config = {"name": name, "model": "demo:echo", "note": XSS}
    return Run.objects.create(
        owner=user,
        name=name,
        config=config,
        model="demo:echo",
        max_steps=30,
        status=status,
        **fields,
    )


# --- access -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url_name,args",
    [
        ("home", []),
        ("run-new", []),
        ("environment-list", []),
        ("environment-detail", [1]),
        ("run-detail", [1]),
    ],
)
def test_pages_redirect_anonymous_users_to_login(client: Client, url_name: str, args: list) -> None:
    url = reverse(url_name, args=args)

    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


def test_login_page_signs_in_and_logout_signs_out(client: Client, owner: User) -> None:
    page = client.get(reverse("login"))
    assert page.status_code == 200
    assert 'id="login-form"' in page.content.decode()

    response = client.post(reverse("login"), {"username": "owner", "password": "owner-pw"})

    assert response.status_code == 302
    assert response["Location"] == reverse("home")
    assert client.get(reverse("home")).status_code == 200
    assert client.post(reverse("logout"))["Location"] == reverse("login")
    assert client.get(reverse("home")).status_code == 302


def test_login_with_a_wrong_password_shows_an_error(client: Client, owner: User) -> None:
    response = client.post(reverse("login"), {"username": "owner", "password": "wrong"})

    assert response.status_code == 200
    assert 'class="errors"' in response.content.decode()


# --- home and the demo run --------------------------------------------------------------------


def test_home_lists_the_users_own_runs_with_progress(
    owner_client: Client, owner: User, outsider: User
) -> None:
    mine = make_run(
        owner, name="mine", status=Run.Status.RUNNING, step=12, heartbeat_at=timezone.now()
    )
    make_run(outsider, name="theirs")

    response = owner_client.get(reverse("home"))

    content = response.content.decode()
    assert response.status_code == 200
    assert f'data-run-id="{mine.pk}" data-status="running"' in content
    assert '<progress max="30" value="12">40%</progress>' in content
    assert "12 / 30" in content
    assert "theirs" not in content
    assert 'id="demo-form"' in content and reverse("run-demo") in content


def test_demo_without_echo_environment_or_model_shows_both_errors_and_creates_nothing(
    owner_client: Client,
) -> None:
    response = owner_client.post(reverse("run-demo"))

    content = response.content.decode()
    assert response.status_code == 200
    assert 'id="demo-errors"' in content
    assert (
        html.escape(
            "environments.0.environment: no environment named 'echo' is registered: start the echo "
            "server and register it as 'echo' on the Environments page"
        )
        in content
    )
    assert (
        html.escape(
            "model: demo model 'demo:echo' is not built; run `python manage.py build_demo_model echo`"
        )
        in content
    )
    assert Run.objects.count() == 0


def test_demo_with_echo_environment_but_no_model_reports_the_model_only(
    owner_client: Client, echo_env: Environment
) -> None:
    # The environment is probed during the checks: port 9 on localhost refuses at once.
    response = owner_client.post(reverse("run-demo"))

    errors = re.search(
        r'<div class="errors" id="demo-errors" role="alert">.*?<ul>(.*?)</ul>',
        response.content.decode(),
        re.S,
    )
    assert errors and re.findall(r"<li>(.*?)</li>", errors.group(1)) == [
        html.escape(
            "model: demo model 'demo:echo' is not built; run `python manage.py build_demo_model echo`"
        ),
        html.escape(
            "environments.0.environment: environment 'echo' is unhealthy: the server at "
            "http://127.0.0.1:9 could not be read as an environment server (no answer, refused, "
            "timed out, redirected, too large or not JSON)"
        ),
    ]
    assert Run.objects.count() == 0


def test_demo_requires_post(owner_client: Client) -> None:
    assert owner_client.get(reverse("run-demo")).status_code == 405


# --- the run form -----------------------------------------------------------------------------


def test_run_form_renders_every_input_with_schema_defaults(
    owner_client: Client, echo_env: Environment
) -> None:
    response = owner_client.get(reverse("run-new"))

    content = response.content.decode()
    assert response.status_code == 200
    for name in [
        "name",
        "model",
        "environment",
        "prompt",
        "rows",
        "num_generations",
        "max_steps",
        "learning_rate",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "max_completion_length",
        "temperature",
        "beta",
        "seed",
    ]:
        assert f'id="field-{name}"' in content, name
    assert f'<option value="{echo_env.pk}" selected>echo (healthy)</option>' in content
    assert 'name="rewards-0-name" value="env_reward"' in content
    assert 'name="num_generations" value="4"' in content
    assert 'id="id_config_json"' in content


def test_run_form_sets_the_run_health_thresholds_and_which_alerts_stop_the_run(
    owner_client: Client, echo_env: Environment
) -> None:
    page = owner_client.get(reverse("run-new")).content.decode()
    for name in ALERT_FIELDS:
        assert f'id="field-{name}"' in page, name
    assert 'name="alert_tool_failure_rate" value="0.5"' in page
    assert re.search(r'<input type="checkbox" name="alert_stop_on" value="nonfinite"[^>]*checked', page)

    def config(data: dict[str, Any]) -> Any:
        form = RunForm(data)
        assert form.is_valid(), form.errors
        return parse_run_config({**form.config_part(), "rewards": REWARD_INITIAL}).alerts

    alerts = config(run_form_data(
        echo_env, alert_tool_failure_rate="0.25", alert_tool_failure_steps="2",
        alert_stop_on=["nonfinite", "tool_failures"],
    ))
    assert (alerts.enabled, alerts.tool_failure_rate, alerts.tool_failure_steps) == (True, 0.25, 2)
    assert alerts.stop_on == ["nonfinite", "tool_failures"]
    assert alerts.zero_variance_frac == 0.9  # left as shown: the default

    data = run_form_data(echo_env, alert_stop_on=[], alert_entropy_min="")
    del data["alerts_enabled"]  # an unticked box is not sent
    alerts = config(data)
    assert (alerts.enabled, alerts.stop_on, alerts.entropy_min) == (False, [], 0.01)


def test_run_form_puts_an_alert_threshold_error_next_to_its_input_and_creates_no_run(
    owner_client: Client, echo_env: Environment
) -> None:
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, alert_zero_variance_frac="2"))
    assert response.status_code == 200
    assert "less than or equal to 1" in field_block(response.content.decode(), "field-alert_zero_variance_frac")
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, alert_stop_on=["launch_the_missiles"]))
    content = response.content.decode()
    stop_on = content[content.index('id="field-alert_stop_on"'):content.index('id="field-alert_stop_on"') + 3000]
    assert "not one of the available choices" in stop_on
    assert Run.objects.count() == 0


def test_run_form_puts_a_schema_error_next_to_num_generations_and_creates_no_run(
    owner_client: Client, echo_env: Environment
) -> None:
    response = owner_client.post(reverse("run-new"), run_form_data(echo_env, num_generations="3"))

    content = response.content.decode()
    assert response.status_code == 200
    expected = html.escape(
        "num_generations (3) must divide the generation batch size per_device_train_batch_size "
        "x gradient_accumulation_steps (4 x 1 = 4)"
    )
    assert f'<p class="field-error">{expected}</p>' in field_block(content, "field-num_generations")
    assert "field-error" not in field_block(content, "field-per_device_train_batch_size")
    assert 'id="run-form-errors"' not in content
    assert Run.objects.count() == 0
    assert RunEvent.objects.count() == 0


def test_run_form_maps_environment_and_reward_errors_and_lists_unknown_keys_at_the_top(
    owner_client: Client, echo_env: Environment
) -> None:
    data = run_form_data(echo_env, prompt="", max_steps="0")
    data["rewards-1-name"] = "Bad Name"

    response = owner_client.post(reverse("run-new"), data)

    content = response.content.decode()
    assert response.status_code == 200
    # prompt is required by the form itself; the schema errors come once the shape is right.
    assert "This field is required." in field_block(content, "field-prompt")
    assert Run.objects.count() == 0

    response = owner_client.post(reverse("run-new"), {**data, "prompt": "Echo 'x'."})

    content = response.content.decode()
    assert "Input should be greater than or equal to 1" in field_block(content, "field-max_steps")
    reward_cell = re.search(
        r'<td class="has-error" id="field-rewards-1-name">(.*?)</td>', content, re.S
    )
    assert reward_cell and html.escape(
        "use lowercase letters, digits and '_', starting with a letter"
    ) in reward_cell.group(1)
    assert Run.objects.count() == 0


def test_run_form_raw_json_reports_bad_json_and_each_dotted_error(
    owner_client: Client, echo_env: Environment
) -> None:
    bad_json = owner_client.post(reverse("run-new"), {"mode": "json", "config_json": "{nope"})
    assert (
        "not valid JSON: Expecting property name enclosed in double quotes at line 1, column 2"
        in (bad_json.content.decode())
    )

    config = {
        "name": "json-run",
        "model": "demo:echo",
        "environments": [{"environment": echo_env.pk, "prompt": "Echo 'a'."}],
        "grpo": {"num_generations": 3, "per_device_train_batch_size": 4},
        "surprise": 1,
    }
    response = owner_client.post(
        reverse("run-new"), {"mode": "json", "config_json": json.dumps(config)}
    )

    content = response.content.decode()
    errors = re.search(
        r'<ul class="errors" id="run-json-errors" role="alert">(.*?)</ul>', content, re.S
    )
    assert errors
    items = re.findall(r"<li>(.*?)</li>", errors.group(1))
    assert items == [
        html.escape(
            "grpo.num_generations: num_generations (3) must divide the generation batch size "
            "per_device_train_batch_size x gradient_accumulation_steps (4 x 1 = 4)"
        ),
        "surprise: Extra inputs are not permitted",
    ]
    assert 'id="json-section" open' in content
    assert Run.objects.count() == 0


# --- environments -----------------------------------------------------------------------------


def test_environment_list_shows_each_environment(
    owner_client: Client, echo_env: Environment
) -> None:
    response = owner_client.get(reverse("environment-list"))

    content = response.content.decode()
    assert response.status_code == 200
    row = re.search(
        rf'<tr class="environment-row" data-environment-id="{echo_env.pk}">(.*?)</tr>',
        content,
        re.S,
    )
    assert row
    cells = [
        re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row.group(1), re.S)
    ]
    assert cells[:5] == ["echo", "OpenEnv", "healthy", "16", "echo"]
    assert cells[5] == timezone.localtime(echo_env.checked_at).strftime("%Y-%m-%d %H:%M:%S")


def test_register_form_shows_service_errors_next_to_fields_and_stores_nothing(
    owner_client: Client, echo_env: Environment
) -> None:
    response = owner_client.post(
        reverse("environment-list"),
        {"name": "echo", "base_url": "ftp://example.org", "capacity": ""},
    )

    content = response.content.decode()
    assert response.status_code == 200
    assert html.escape("'echo' is reserved for the bundled environments (echo, wordle,") in field_block(
        content, "field-name"
    )
    assert "base_url must be an http:// or https:// URL with a host" in field_block(
        content, "field-base_url"
    )
    assert Environment.objects.count() == 1


def test_register_form_offers_every_argument_of_the_service(owner_client: Client) -> None:
    content = owner_client.get(reverse("environment-list")).content.decode()

    for name in [
        "name",
        "kind",
        "base_url",
        "image",
        "ors_catalog",
        "ors_env",
        "api_key_env",
        "capacity",
        "measure_capacity",
        "shared",
    ]:
        assert f'id="field-{name}"' in content, name
    assert '<option value="" selected>detect</option>' in field_block(content, "field-kind")
    assert 'type="checkbox" name="measure_capacity"' in field_block(
        content, "field-measure_capacity"
    )


def test_register_form_maps_errors_of_the_new_fields_and_stores_nothing(
    owner_client: Client,
) -> None:
    response = owner_client.post(
        reverse("environment-list"),
        {
            "name": "x",
            "kind": "ors",
            "image": "Not An Image",
            "api_key_env": "lower",
            "capacity": "",
        },
    )

    content = response.content.decode()
    assert "not a container image reference like &#x27;registry/name:tag&#x27;" in field_block(
        content, "field-image"
    )
    assert "api_key_env is accepted only with ors_catalog (the Open Reward catalog)" in field_block(
        content, "field-api_key_env"
    )
    assert Environment.objects.count() == 0


def test_register_form_reports_an_unreachable_server(owner_client: Client) -> None:
    port = free_port()

    response = owner_client.post(
        reverse("environment-list"), {"name": "nothing", "base_url": f"http://127.0.0.1:{port}"}
    )

    assert html.escape(
        f"the server at http://127.0.0.1:{port} could not be read as an environment server "
        "(no answer, refused, timed out, redirected, too large or not JSON)"
    ) in (field_block(response.content.decode(), "field-base_url"))
    assert Environment.objects.count() == 0


def test_environment_detail_shows_metadata_tools_parameters_and_last_error(
    owner_client: Client, echo_env: Environment
) -> None:
    echo_env.last_error = XSS
    echo_env.save()

    response = owner_client.get(reverse("environment-detail", args=[echo_env.pk]))

    content = response.content.decode()
    assert response.status_code == 200
    assert '<h1 id="environment-name">echo</h1>' in content
    assert '<dd class="metadata-name">EchoEnvironment</dd>' in content
    assert '<article class="tool" data-tool="echo">' in content
    assert "<td><code>message</code></td>" in content and "What to echo." in content
    assert (
        f'<pre class="error-text" id="environment-last-error">{html.escape(XSS)}</pre>' in content
    )
    assert XSS not in content
    assert f'action="{reverse("environment-probe", args=[echo_env.pk])}"' in content
    assert f'action="{reverse("environment-measure-capacity", args=[echo_env.pk])}"' in content
    assert '<dd id="environment-capacity">16</dd>' in content
    assert 'id="environment-splits"' not in content


def test_environment_detail_shows_ors_splits_and_the_capacity_source(
    owner_client: Client, owner: User
) -> None:
    environment = Environment.objects.create(
        owner=owner,
        name="ors-echo",
        kind=Environment.Kind.ORS,
        base_url="http://127.0.0.1:9",
        status=Environment.Status.UNHEALTHY,
        last_error="cannot connect",
        capacity=8,
        metadata={
            "ors_env": "echo",
            "splits": {"train": 32, XSS: None},
            "capacity_source": "declared",
        },
        checked_at=timezone.now(),
    )

    content = owner_client.get(
        reverse("environment-detail", args=[environment.pk])
    ).content.decode()

    assert re.findall(
        r'<tr class="split-row"><td><code>(.*?)</code></td><td>(.*?)</td></tr>', content
    ) == [
        ("train", "32"),
        (html.escape(XSS), "unknown"),
    ]
    assert (
        '<dd id="environment-capacity">8 <span class="muted capacity-source">(declared)</span></dd>'
        in content
    )
    assert '<span class="badge status-unhealthy">unhealthy</span>' in content
    assert 'id="measure-capacity-form"' not in content  # OpenEnv servers only
    assert XSS not in content


def test_measure_capacity_of_an_ors_environment_is_refused_with_a_message(
    owner_client: Client, owner: User
) -> None:
    environment = Environment.objects.create(
        owner=owner, name="ors-echo", kind=Environment.Kind.ORS, base_url="http://127.0.0.1:9"
    )

    response = owner_client.post(
        reverse("environment-measure-capacity", args=[environment.pk]), follow=True
    )

    assert (
        html.escape("Cannot measure 'ors-echo': capacity can be measured on OpenEnv and Harbor servers only")
        in response.content.decode()
    )
    environment.refresh_from_db()
    assert environment.capacity is None


def test_probe_now_stores_what_the_server_says(owner_client: Client, echo_env: Environment) -> None:
    port = free_port()
    echo_env.base_url = f"http://127.0.0.1:{port}"
    echo_env.save()

    response = owner_client.post(reverse("environment-probe", args=[echo_env.pk]), follow=True)

    echo_env.refresh_from_db()
    assert echo_env.status == Environment.Status.UNHEALTHY
    assert (
        echo_env.last_error
        == f"the server at http://127.0.0.1:{port} could not be read as an environment server "
        "(no answer, refused, timed out, redirected, too large or not JSON)"
    )
    assert html.escape(f"'echo' is unhealthy: {echo_env.last_error}") in response.content.decode()
    assert owner_client.get(reverse("environment-probe", args=[echo_env.pk])).status_code == 405


# --- who may see and act on an environment -----------------------------------------------------

REFUSAL = html.escape(
    "'shared' is owned by 'owner': only its owner, or a user with the permission "
    "catalog.change_environment, may probe it, measure it, open its console or change it"
)


@pytest.fixture
def shared_env(owner: User) -> Environment:
    return Environment.objects.create(
        owner=owner, name="shared", base_url="http://127.0.0.1:9", shared=True, capacity=4
    )


def _listed(client: Client) -> list[str]:
    content = client.get(reverse("environment-list")).content.decode()
    return re.findall(r'<tr class="environment-row" data-environment-id="\d+">\s*<td><a [^>]*>(.*?)</a>', content)


def _forbidden_reason(response: Any) -> str:
    found = re.search(r'<p id="forbidden-reason">(.*?)</p>', response.content.decode())
    return found.group(1) if found else ""


def test_environment_list_shows_own_shared_or_all_with_the_permission(
    owner_client: Client,
    outsider_client: Client,
    staff: User,
    operator: User,
    echo_env: Environment,
    shared_env: Environment,
) -> None:
    assert _listed(owner_client) == ["echo", "shared"]
    assert _listed(outsider_client) == ["shared"]
    assert _listed(signed_in(staff)) == ["shared"]
    assert _listed(signed_in(operator)) == ["echo", "shared"]


def test_environment_detail_hides_or_refuses_controls_by_persona(
    owner_client: Client,
    outsider_client: Client,
    staff: User,
    operator: User,
    echo_env: Environment,
    shared_env: Environment,
) -> None:
    def detail(client: Client, environment: Environment) -> tuple[int, bool]:
        response = client.get(reverse("environment-detail", args=[environment.pk]))
        return response.status_code, 'id="probe-form"' in response.content.decode()

    assert detail(owner_client, echo_env) == (200, True)
    assert detail(signed_in(operator), echo_env) == (200, True)
    assert detail(outsider_client, echo_env) == (404, False)
    assert detail(signed_in(staff), echo_env) == (404, False)
    assert detail(outsider_client, shared_env) == (200, False)
    assert detail(signed_in(staff), shared_env) == (200, False)
    content = outsider_client.get(reverse("environment-detail", args=[shared_env.pk])).content.decode()
    assert '<dd id="environment-shared">yes: every user sees it and may train on it</dd>' in content
    assert 'id="no-control"' in content and 'id="share-form"' not in content


@pytest.mark.parametrize(
    "action", ["environment-probe", "environment-measure-capacity", "environment-share", "environment-container-stop"]
)
def test_environment_actions_are_404_or_403_for_others_and_change_nothing(
    outsider_client: Client, staff: User, echo_env: Environment, shared_env: Environment, action: str
) -> None:
    def row(environment: Environment) -> tuple[Any, ...]:
        environment.refresh_from_db()
        return (environment.status, environment.checked_at, environment.capacity, environment.shared)

    before = (row(echo_env), row(shared_env))
    for client in (outsider_client, signed_in(staff)):
        hidden = client.post(reverse(action, args=[echo_env.pk]), {"shared": "0"})
        seen = client.post(reverse(action, args=[shared_env.pk]), {"shared": "0"})

        assert hidden.status_code == 404
        assert (seen.status_code, _forbidden_reason(seen)) == (403, REFUSAL)
    assert (row(echo_env), row(shared_env)) == before


def test_operator_probes_another_users_environment(operator: User, echo_env: Environment) -> None:
    response = signed_in(operator).post(reverse("environment-probe", args=[echo_env.pk]))

    assert response.status_code == 302
    echo_env.refresh_from_db()
    assert echo_env.status == Environment.Status.UNHEALTHY  # nothing listens on port 9


def test_owner_shares_and_unshares_an_environment(
    owner_client: Client, outsider_client: Client, echo_env: Environment
) -> None:
    url = reverse("environment-share", args=[echo_env.pk])

    shared = owner_client.post(url, {"shared": "1"}, follow=True)
    seen = outsider_client.get(reverse("environment-detail", args=[echo_env.pk])).status_code
    private = owner_client.post(url, {"shared": "0"}, follow=True)

    assert html.escape("'echo' is shared: every user sees it and may train on it.") in shared.content.decode()
    assert seen == 200
    assert html.escape("'echo' is private again.") in private.content.decode()
    echo_env.refresh_from_db()
    assert echo_env.shared is False
    assert outsider_client.get(reverse("environment-detail", args=[echo_env.pk])).status_code == 404
    assert owner_client.get(url).status_code == 405


def test_stop_container_without_one_says_so(owner_client: Client, echo_env: Environment) -> None:
    response = owner_client.post(reverse("environment-container-stop", args=[echo_env.pk]), follow=True)

    assert (
        html.escape("Cannot stop the container of 'echo': 'echo' has no container started here")
        in response.content.decode()
    )


def test_run_form_offers_only_visible_environments(
    outsider_client: Client, echo_env: Environment, shared_env: Environment
) -> None:
    content = outsider_client.get(reverse("run-new")).content.decode()

    options = re.findall(r'<option value="(\d+)"', field_block(content, "field-environment"))
    assert options == [str(shared_env.pk)]


def test_demo_does_not_use_another_users_private_echo(outsider_client: Client, echo_env: Environment) -> None:
    response = outsider_client.post(reverse("run-demo"))

    assert "no environment named &#x27;echo&#x27; is registered" in response.content.decode()
    assert Run.objects.count() == 0


# --- the run page -----------------------------------------------------------------------------


@pytest.fixture
def recorded_run(owner: User, echo_env: Environment) -> Run:
    run = make_run(
        owner, status=Run.Status.RUNNING, step=2, heartbeat_at=timezone.now(), last_seq=4
    )
    run.started_at = timezone.now() - timedelta(seconds=20)
    run.save()
    for step, seq in [(1, 1), (2, 3)]:
        MetricPoint.objects.create(run=run, step=step, key="reward", value=0.25 * step, seq=seq)
        MetricPoint.objects.create(
            run=run, step=step, key="rewards/env_reward/mean", value=0.5, seq=seq
        )
        MetricPoint.objects.create(
            run=run, step=step, key="tools/failure_frequency", value=0.0, seq=seq
        )
    Rollout.objects.create(
        run=run,
        seq=2,
        step=1,
        env="echo",
        prompt=[{"role": "user", "content": "Echo 'hello'."}],
        messages=[{"role": "assistant", "content": "plain"}],
        rewards={"env_reward": 1.0},
        reward=1.0,
        advantage=0.5,
    )
    Rollout.objects.create(
        run=run,
        seq=4,
        step=2,
        env="echo",
        prompt=[{"role": "user", "content": "Echo 'x'."}],
        messages=[
            {
                "role": "assistant",
                "content": XSS,
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "echo", "arguments": {"message": XSS}},
                    }
                ],
            },
            {"role": "tool", "name": "echo", "content": f"echoed {XSS}"},
        ],
        rewards={"env_reward": 0.0, "tool_called": None},
        reward=0.0,
        advantage=-0.5,
    )
    RunEvent.objects.create(run=run, kind="claimed", message="host:1 claimed the run (attempt 1).")
    return run


def test_run_page_shows_progress_charts_events_and_the_escaped_transcript(
    owner_client: Client, recorded_run: Run
) -> None:
    response = owner_client.get(reverse("run-detail", args=[recorded_run.pk]))

    content = response.content.decode()
    assert response.status_code == 200
    assert XSS not in content
    escaped = html.escape(XSS)
    assert f'<pre class="message-content">{escaped}</pre>' in content
    assert (
        f'<pre class="tool-args">{html.escape(json.dumps({"message": XSS}, separators=(",", ":")))}</pre>'
        in content
    )
    assert f'<pre class="message-content">echoed {escaped}</pre>' in content
    assert '<div class="message-role">tool · echo</div>' in content
    assert '<span class="rollout-advantage">advantage -0.500</span>' in content
    assert '<li><span class="term">tool_called</span> <span class="value">—</span></li>' in content
    # Newest first, each with its seq.
    assert re.findall(r'<article class="rollout" data-seq="(\d+)" data-step="(\d+)"', content) == [
        ("4", "2"),
        ("2", "1"),
    ]
    assert (
        f'id="run-page" data-run-id="{recorded_run.pk}" data-last-seq="4" data-status="running"'
        in content
    )
    assert '<span class="badge status-running" id="run-status">running</span>' in content
    assert '<progress id="run-progress" max="30" value="2">7%</progress>' in content
    assert 'id="chart-reward" data-chart="reward" data-points="2"' in content
    assert 'id="chart-tool-calls" data-chart="tool-calls" data-points="0"' in content
    assert 'id="chart-tool-failures" data-chart="tool-failures" data-points="2"' in content
    assert "host:1 claimed the run (attempt 1)." in content
    config = re.search(r'<pre class="code" id="run-config">(.*?)</pre>', content, re.S)
    assert config and html.unescape(config.group(1)) == json.dumps(
        recorded_run.config, indent=2, sort_keys=True
    )
    assert f"&quot;note&quot;: &quot;{escaped}&quot;" in config.group(1)
    assert 'id="cancel-form">' in content
    assert 'id="resume-form" hidden' in content
    assert f'src="{reverse("plotly-js")}?v=' in content


def test_run_page_embeds_chart_and_live_json_safely(
    owner_client: Client, recorded_run: Run
) -> None:
    response = owner_client.get(reverse("run-detail", args=[recorded_run.pk]))

    content = response.content.decode()
    charts = json.loads(
        re.search(
            r'<script id="run-charts" type="application/json">(.*?)</script>', content, re.S
        ).group(1)
    )
    live = json.loads(
        re.search(
            r'<script id="run-live-config" type="application/json">(.*?)</script>', content, re.S
        ).group(1)
    )
    assert [c["id"] for c in charts] == [
        "reward",
        "tool-calls",
        "tool-failures",
        "loss",
        "time",
        "completion-length",
    ]
    assert charts[0]["keys"] == ["reward", "rewards/env_reward/mean"]
    assert charts[0]["figure"]["data"][0]["x"] == [1, 2]
    assert charts[0]["figure"]["data"][0]["y"] == [0.25, 0.5]
    assert live["run"] == recorded_run.pk
    assert live["last_seq"] == 4
    assert live["ws_path"] == f"/ws/runs/{recorded_run.pk}/"
    assert live["api_metrics"] == f"/api/runs/{recorded_run.pk}/metrics/"
    assert live["api_rollouts"] == f"/api/runs/{recorded_run.pk}/rollouts/"
    assert 19 <= live["elapsed_seconds"] <= 30
    assert re.search(r'<span id="run-elapsed">(\d+)s</span>', content)
    assert re.search(r'<span id="run-eta">(\d+m \d\ds|\d+s)</span>', content)
    assert live["eta_seconds"] == pytest.approx(live["elapsed_seconds"] / 2 * 28)


def test_another_users_run_is_not_found_even_by_staff_without_the_permission(
    outsider_client: Client, recorded_run: Run, staff: User, operator: User
) -> None:
    staff_client = signed_in(staff)
    for client in (outsider_client, staff_client):
        assert client.get(reverse("run-detail", args=[recorded_run.pk])).status_code == 404
        assert client.post(reverse("run-cancel", args=[recorded_run.pk])).status_code == 404
        assert client.post(reverse("run-resume", args=[recorded_run.pk])).status_code == 404
    recorded_run.refresh_from_db()
    assert (recorded_run.status, recorded_run.cancel_requested) == (Run.Status.RUNNING, False)

    assert signed_in(operator).get(reverse("run-detail", args=[recorded_run.pk])).status_code == 200


def test_a_viewer_sees_a_run_but_may_not_cancel_it(recorded_run: Run) -> None:
    viewer = grant(User.objects.create_user("viewer", is_staff=True), "runs.view_run")
    client = signed_in(viewer)

    page = client.get(reverse("run-detail", args=[recorded_run.pk]))
    cancel = client.post(reverse("run-cancel", args=[recorded_run.pk]))
    resume = client.post(reverse("run-resume", args=[recorded_run.pk]))

    assert page.status_code == 200
    assert 'id="cancel-form"' not in page.content.decode()
    assert (cancel.status_code, resume.status_code) == (403, 403)
    assert (
        '<p id="forbidden-reason">only the run&#x27;s owner, or a user with the permission '
        "runs.change_run, may cancel or resume it</p>"
    ) in cancel.content.decode()
    recorded_run.refresh_from_db()
    assert (recorded_run.status, recorded_run.cancel_requested) == (Run.Status.RUNNING, False)


def test_reading_a_run_page_writes_nothing_and_shows_the_sweep_s_verdict(
    owner_client: Client, owner: User
) -> None:
    """Reads never write: a stale run stays running until beat's sweep (every 30 s) marks it;
    the page then shows it interrupted, with resume offered."""
    run = make_run(
        owner, status=Run.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(hours=1)
    )

    before = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert '<span class="badge status-running" id="run-status">running</span>' in before

    assert run_mark_stale_interrupted() == 1  # what beat's sweep_stale_runs calls
    content = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()

    run.refresh_from_db()
    assert run.status == Run.Status.INTERRUPTED
    assert '<span class="badge status-interrupted" id="run-status">interrupted</span>' in content
    assert 'id="cancel-form" hidden' in content
    assert 'id="resume-form">' in content


def test_cancel_a_queued_run_then_resume_it(owner_client: Client, owner: User) -> None:
    run = make_run(owner)

    cancelled = owner_client.post(reverse("run-cancel", args=[run.pk]), follow=True)

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert "Run cancelled." in cancelled.content.decode()

    resumed = owner_client.post(reverse("run-resume", args=[run.pk]), follow=True)

    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert "Resume queued." in resumed.content.decode()
    assert list(run.events.order_by("id").values_list("kind", flat=True)) == [
        "cancelled",
        "resumed",
    ]


def test_resume_of_a_running_run_is_refused_with_a_message(
    owner_client: Client, recorded_run: Run
) -> None:
    response = owner_client.post(reverse("run-resume", args=[recorded_run.pk]), follow=True)

    recorded_run.refresh_from_db()
    assert recorded_run.status == Run.Status.RUNNING
    assert "Cannot resume: only interrupted, cancelled or infrastructure-failed runs resume; this one is running." in (
        response.content.decode()
    )


def test_cancel_a_running_run_requests_a_cooperative_stop(
    owner_client: Client, recorded_run: Run
) -> None:
    response = owner_client.post(reverse("run-cancel", args=[recorded_run.pk]), follow=True)

    recorded_run.refresh_from_db()
    content = response.content.decode()
    assert (recorded_run.status, recorded_run.cancel_requested) == (Run.Status.RUNNING, True)
    assert "Cancel requested" in content
    assert 'id="cancel-form" hidden' in content


# --- plotly.js from the installed package -----------------------------------------------------


def test_plotly_js_is_served_from_the_package_with_long_caching(client: Client) -> None:
    import plotly

    raw = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()

    plain = client.get(reverse("plotly-js"))
    zipped = client.get(reverse("plotly-js"), HTTP_ACCEPT_ENCODING="gzip, br")
    again = client.get(reverse("plotly-js"), HTTP_IF_NONE_MATCH=plain["ETag"])

    assert plain.status_code == 200
    assert plain.content == raw
    assert plain["Content-Type"] == "application/javascript; charset=utf-8"
    assert plain["Cache-Control"] == "public, max-age=31536000, immutable"
    assert plain["ETag"] == f'"plotly-{plotly.__version__}"'
    assert zipped["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.content) == raw
    assert again.status_code == 304


# --- escaping rules, checked over the sources ------------------------------------------------


def test_templates_and_scripts_never_bypass_escaping() -> None:
    templates = list((REPO / "webapp" / "templates").rglob("*.html"))
    scripts = list((REPO / "webapp" / "static").rglob("*.js"))
    assert templates and scripts
    for path in templates:
        text = path.read_text()
        assert "|safe" not in text and "autoescape off" not in text, path
    for path in scripts:
        text = path.read_text()
        assert (
            "innerHTML" not in text and "outerHTML" not in text and "insertAdjacentHTML" not in text
        ), path


@pytest.mark.parametrize(
    "seconds,text", [(None, "—"), (0, "0s"), (44.6, "45s"), (125, "2m 05s"), (3723, "1h 02m 03s")]
)
def test_durations_read_as_the_live_page_writes_them(seconds: float | None, text: str) -> None:
    from webapp.runs.views import duration

    assert duration(seconds) == text


# --- admin ------------------------------------------------------------------------------------


@pytest.fixture
def admin_client_logged_in(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw-root-123"))
    return client


def test_admin_lists_render_with_rows(
    admin_client_logged_in: Client, recorded_run: Run, echo_env: Environment
) -> None:
    from webapp.runs.models import WorkerHeartbeat

    WorkerHeartbeat.objects.create(
        name="w1",
        capabilities={"cuda_devices": 1, "vllm": False},
        heartbeat_at=timezone.now(),
        current_run=recorded_run,
    )
    for model in [
        "runs/run",
        "runs/metricpoint",
        "runs/rollout",
        "runs/runevent",
        "runs/workerheartbeat",
        "catalog/environment",
        "catalog/bundledserver",
    ]:
        response = admin_client_logged_in.get(f"/admin/{model}/?q=my")
        assert response.status_code == 200, model
    run_page = admin_client_logged_in.get(f"/admin/runs/run/{recorded_run.pk}/change/")
    assert run_page.status_code == 200
    assert XSS not in run_page.content.decode()
    rollout = recorded_run.rollouts.first()
    assert (
        admin_client_logged_in.get(f"/admin/runs/rollout/{rollout.pk}/change/").status_code == 200
    )
    assert admin_client_logged_in.get("/admin/runs/rollout/add/").status_code == 403


def test_admin_action_cancels_selected_runs(
    admin_client_logged_in: Client, owner: User, recorded_run: Run
) -> None:
    queued = make_run(owner, name="queued")
    finished = make_run(owner, name="done", status=Run.Status.SUCCEEDED)

    response = admin_client_logged_in.post(
        "/admin/runs/run/",
        {
            "action": "cancel_selected",
            "_selected_action": [queued.pk, recorded_run.pk, finished.pk],
        },
        follow=True,
    )

    assert (
        "1 queued run(s) cancelled; cancel requested for 1 running run(s)."
        in response.content.decode()
    )
    queued.refresh_from_db()
    recorded_run.refresh_from_db()
    finished.refresh_from_db()
    assert queued.status == Run.Status.CANCELLED
    assert (recorded_run.status, recorded_run.cancel_requested) == (Run.Status.RUNNING, True)
    assert (finished.status, finished.cancel_requested) == (Run.Status.SUCCEEDED, False)


def test_admin_actions_need_the_change_permission(
    owner: User, recorded_run: Run, echo_env: Environment
) -> None:
    viewer = grant(
        User.objects.create_user("viewer", password="pw-viewer-123", is_staff=True),
        "runs.view_run",
        "catalog.view_environment",
    )
    client = signed_in(viewer)
    queued = make_run(owner, name="queued")

    runs = client.get("/admin/runs/run/")
    environments = client.get("/admin/catalog/environment/")
    cancel = client.post("/admin/runs/run/", {"action": "cancel_selected", "_selected_action": [queued.pk]})
    probe = client.post(
        "/admin/catalog/environment/", {"action": "probe_selected", "_selected_action": [echo_env.pk]}
    )

    assert (runs.status_code, environments.status_code, cancel.status_code, probe.status_code) == (200,) * 4
    assert 'value="cancel_selected"' not in runs.content.decode()
    assert 'value="probe_selected"' not in environments.content.decode()
    assert 'value="stop_containers"' not in environments.content.decode()
    queued.refresh_from_db()
    echo_env.refresh_from_db()
    assert (queued.status, echo_env.status) == (Run.Status.QUEUED, Environment.Status.HEALTHY)
