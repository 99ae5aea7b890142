"""The environment pages: the list, the register form and its errors, an entry's details,
probing, and who may see and act on an entry.

Environments are created as rows (no server to probe); the one probe test points at a
closed local port, which answers at once with a refused connection.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.envs.servers import free_port
from tests.factories import EnvironmentFactory
from tests.fixtures.accounts import signed_in
from tests.webapp.pages import REFUSAL as OWNED_REFUSAL
from tests.webapp.pages import XSS, field_block
from webapp.catalog.models import Environment
from webapp.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_models")]


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
    environment = EnvironmentFactory(
        owner=owner,
        name="ors-echo",
        kind=Environment.Kind.ORS,
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
    environment = EnvironmentFactory(
        owner=owner, name="ors-echo", kind=Environment.Kind.ORS, status=Environment.Status.UNKNOWN,
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

REFUSAL = html.escape(OWNED_REFUSAL.format(name="shared"))


@pytest.fixture
def shared_env(owner: User) -> Environment:
    return EnvironmentFactory(
        owner=owner, name="shared", shared=True, capacity=4, status=Environment.Status.UNKNOWN,
    )


def _listed(client: Client) -> list[str]:
    content = client.get(reverse("environment-list")).content.decode()
    return re.findall(r'<tr class="environment-row" data-environment-id="\d+">\s*<td><a [^>]*>(.*?)</a>', content)


def _forbidden_reason(response: Any) -> str:
    found = re.search(r'<p id="forbidden-reason">(.*?)</p>', response.content.decode())
    return found.group(1) if found else ""


@pytest.fixture
def persona(owner_client: Client, outsider_client: Client, staff: User, operator: User) -> dict[str, Client]:
    """A signed-in client of each persona, by name: the pages below differ by who asks."""
    return {"owner": owner_client, "outsider": outsider_client, "staff": signed_in(staff), "operator": signed_in(operator)}


def test_environment_list_shows_own_shared_or_all_with_the_permission(
    persona: dict[str, Client], echo_env: Environment, shared_env: Environment
) -> None:
    assert _listed(persona["owner"]) == ["echo", "shared"]
    assert _listed(persona["outsider"]) == ["shared"]
    assert _listed(persona["staff"]) == ["shared"]
    assert _listed(persona["operator"]) == ["echo", "shared"]


def test_environment_detail_hides_or_refuses_controls_by_persona(
    persona: dict[str, Client], echo_env: Environment, shared_env: Environment
) -> None:
    def detail(client: Client, environment: Environment) -> tuple[int, bool]:
        response = client.get(reverse("environment-detail", args=[environment.pk]))
        return response.status_code, 'id="probe-form"' in response.content.decode()

    assert detail(persona["owner"], echo_env) == (200, True)
    assert detail(persona["operator"], echo_env) == (200, True)
    assert detail(persona["outsider"], echo_env) == (404, False)
    assert detail(persona["staff"], echo_env) == (404, False)
    assert detail(persona["outsider"], shared_env) == (200, False)
    assert detail(persona["staff"], shared_env) == (200, False)
    content = persona["outsider"].get(reverse("environment-detail", args=[shared_env.pk])).content.decode()
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
