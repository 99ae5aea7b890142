"""Server-rendered pages: who may open them, the home page and the demo button, plotly.js from
the package, and the escaping rules checked over every template and script. The run form,
the environment pages, the run page and the admin have files of their own beside this one.
"""

from __future__ import annotations

import gzip
import html
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.webapp.pages import make_run
from webapp.catalog.models import Environment
from webapp.runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_models")]

REPO = Path(__file__).resolve().parents[2]


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
