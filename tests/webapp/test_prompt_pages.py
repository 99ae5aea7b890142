"""The prompt pages: `/runs/<id>/prompts/` (the run's prompts, most repeated first, each
linking to its timeline) and `/runs/<id>/prompts/<key>/` (one column a step, each column the
group's transcripts with rewards, advantage and group statistics), escaped, owner only."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.support.prompt_rows import KEY_A, KEY_B, XSS, legacy_run, prompted_run, running_run

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def run(owner):
    return prompted_run(owner)


def test_the_list_shows_the_most_repeated_prompt_first_linking_to_its_timeline(owner, run):
    response = _client(owner).get(f"/runs/{run.pk}/prompts/")

    assert response.status_code == 200
    html = response.content.decode()
    assert re.findall(r'<tr class="prompt-row" data-key="([0-9a-f]+)">', html) == [KEY_A, KEY_B]
    assert re.findall(r'<a class="prompt-link" href="([^"]+)">([^<]*)</a>', html) == [
        (f"/runs/{run.pk}/prompts/{KEY_A}/", "Echo &#x27;alpha&#x27;."),
        (f"/runs/{run.pk}/prompts/{KEY_B}/", "Echo &#x27;beta&#x27;."),
    ]
    assert re.findall(r'<td class="prompt-steps">(\d+)</td>', html) == ["2", "1"]
    assert '<span class="muted small" id="prompt-count">2 prompts</span>' in html
    assert f'href="/runs/{run.pk}/" id="run-link"' in html
    assert "prompts-next" not in html and "prompts-untracked" not in html


def test_the_list_sorts_by_fewest_steps(owner, run):
    html = _client(owner).get(f"/runs/{run.pk}/prompts/?order=fewest_steps").content.decode()
    assert re.findall(r'<tr class="prompt-row" data-key="([0-9a-f]+)">', html) == [KEY_B, KEY_A]
    assert '<option value="fewest_steps" selected>' in html


def test_the_timeline_shows_one_column_a_step_with_the_groups(owner, run):
    response = _client(owner).get(f"/runs/{run.pk}/prompts/{KEY_A}/")

    assert response.status_code == 200
    html = response.content.decode()
    assert re.findall(r'<section class="card timeline-column" data-step="(\d+)"', html) == ["1", "3"]
    assert re.findall(r'<article class="rollout timeline-rollout" data-seq="(\d+)">', html) == ["1", "2", "5", "6"]
    assert re.findall(r'<a class="rollout-replay" href="([^"]+)">replay</a>', html) == [
        f"/replay/runs/{run.pk}/{seq}/" for seq in (1, 2, 5, 6)
    ]
    assert re.findall(r'<span class="group-mean">mean ([^<]+)</span> · <span class="group-std">std ([^<]+)</span>',
                      html) == [("0.600", "0.707"), ("1.100", "0.000")]
    assert re.findall(r'<span class="rollout-reward">reward ([^<]+)</span>', html) == ["0.100", "1.100", "1.100", "1.100"]
    assert re.findall(r'<span class="rollout-advantage">advantage ([^<]+)</span>', html) == [
        "-0.500", "0.500", "0.500", "0.500"
    ]
    assert html.count('<span class="term">env_reward</span>') == 4
    assert html.count('<li class="tool-call"><span class="tool-name">echo</span><pre class="tool-args">{&quot;message&quot;:&quot;alpha') == 4
    assert html.count("transcript (2 messages, 1 tool call)") == 4
    assert '<dd id="timeline-trained">2 steps: 1, 3</dd>' in html
    assert '<pre class="message-content">Echo &#x27;alpha&#x27;.</pre>' in html
    assert 'id="steps-input" value="" placeholder="1,3"' in html
    assert "steps-default" not in html


def test_the_timeline_at_chosen_steps_says_where_the_prompt_was_not_trained(owner, run):
    html = _client(owner).get(f"/runs/{run.pk}/prompts/{KEY_B}/?steps=1,2").content.decode()

    assert re.findall(r'data-step="(\d+)" id="step-\d+"', html) == ["1", "2"]
    assert html.count("Not trained at this step.") == 1
    assert 'id="steps-input" value="1,2"' in html
    assert f'<a href="/runs/{run.pk}/prompts/{KEY_B}/" id="steps-default">evenly spaced</a>' in html
    # Model and environment text is escaped, never markup.
    assert XSS not in html and "<script>window.__xss" not in html
    assert "&lt;/pre&gt;&lt;script&gt;window.__xss=1&lt;/script&gt;" in html


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("steps=1,x", "steps must be whole step numbers separated by commas, like 1,5,9; got &#x27;x&#x27;"),
        ("steps=" + ",".join(str(s) for s in range(17)), "steps names 17 steps; choose at most 16"),
    ],
)
def test_bad_steps_are_a_400_page_that_says_what_to_fix(owner, run, query, error):
    response = _client(owner).get(f"/runs/{run.pk}/prompts/{KEY_A}/?{query}")
    assert response.status_code == 400
    assert f'<p class="error-text" id="prompt-error" role="alert">{error}</p>' in response.content.decode()


@pytest.mark.parametrize(
    ("query", "error"),
    [("order=x", "order must be one of most_steps, fewest_steps, first_step"),
     ("page=0", "page must be a whole number from 1 to 100000"),
     ("page=1234567", "page must be a whole number from 1 to 100000")],
)
def test_bad_list_parameters_are_a_400_page(owner, run, query, error):
    response = _client(owner).get(f"/runs/{run.pk}/prompts/?{query}")
    assert response.status_code == 400
    assert f'<p class="error-text" id="prompt-error" role="alert">{error}</p>' in response.content.decode()


def test_strangers_get_404_and_anonymous_users_the_login_page(outsider, owner, run, client):
    for url in (f"/runs/{run.pk}/prompts/", f"/runs/{run.pk}/prompts/{KEY_A}/",
                f"/runs/{run.pk}/prompts/{KEY_A}/?steps=bad"):
        assert _client(outsider).get(url).status_code == 404
        assert client.get(url).status_code == 302
    assert _client(owner).get(f"/runs/{run.pk}/prompts/{'0' * 32}/").status_code == 404


def test_a_run_from_before_prompt_tracking_says_so(owner):
    run = legacy_run(owner)
    html = _client(owner).get(f"/runs/{run.pk}/prompts/").content.decode()
    assert ('<p class="muted" id="prompts-untracked">This run predates prompt tracking: its 3 rollouts carry '
            "no prompt key, so they cannot be followed across steps.</p>") in html
    assert "prompts-table" not in html and "no-prompts" not in html


def test_a_run_without_rollouts(owner):
    run = running_run(owner)
    html = _client(owner).get(f"/runs/{run.pk}/prompts/").content.decode()
    assert '<p class="muted" id="no-prompts">No rollouts yet.</p>' in html
