"""The console's reset sends its options to a server written elsewhere, and its environment
page says what the episode reward is there and where to try a reset."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.envs.servers import run_env_server
from webapp.catalog.console import ConsoleSession
from webapp.catalog.models import Environment
from webapp.catalog.services import environment_register

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def quiz_url() -> Iterator[str]:
    with run_env_server("tests.support.option_servers:classic_app", {"ENABLE_WEB_INTERFACE": "false"}) as url:
        yield url


def test_a_console_reset_sends_every_option_and_shows_the_first_observation(owner, quiz_url) -> None:
    environment = environment_register(owner=owner, name="quiz", base_url=quiz_url, capacity=4)
    session = ConsoleSession(environment=environment, user=owner)
    try:
        answer = session.reset(row={"seed": 3, "topic": "arithmetic", "size": 20})
        assert answer["observation"] == "\nquestion: arithmetic question 3 of 20"
        with pytest.raises(RuntimeError, match=r"^environment 'quiz' refused the reset \(seed=3, topic='x'\): unknown topic 'x'"):
            session.reset(row={"seed": 3, "topic": "x"})
    finally:
        session.close()


def test_the_environment_page_names_its_episode_reward(owner, owner_client, quiz_url) -> None:
    environment = environment_register(owner=owner, name="quiz", base_url=quiz_url, capacity=4)
    page = owner_client.get(f"/environments/{environment.pk}/").content.decode()
    assert (
        '<dd id="environment-episode-reward">the sum of the episode&#x27;s step rewards (negative included)'
    ) in page
    assert 'try a reset with options</a> to see the first observation' in page
    assert Environment.objects.count() == 1
