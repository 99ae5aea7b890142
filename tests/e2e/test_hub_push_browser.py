"""The "Push rollouts" form on a finished run's page, in headless Chromium: a refusal is shown as
text where the form is, and an accepted push opens its job's page (the job itself is tested in
tests/webapp/test_hub_push.py against a stand-in Hub)."""

from __future__ import annotations

import pytest

from tests.factories import RunFactory
from tests.support.browser import log_in
from webapp.accounts.secrets import user_secret_set
from webapp.jobs.models import Job

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_push_form_says_why_it_was_refused_and_opens_the_job_when_accepted(browser, owner, web):
    run = RunFactory(owner=owner, name="pushed", max_steps=2, step=2, status="succeeded")
    page = browser.new_page()
    log_in(page, web, f"/runs/{run.pk}/")
    page.wait_for_selector("#hub-push-form")

    page.fill("#hub-push-repo", "owner/echo-rollouts")
    page.click("#hub-push-button")
    page.wait_for_function("document.getElementById('hub-push-status').textContent.includes('hf_token')")
    assert page.text_content("#hub-push-status") == (
        "hf_token: store your Hugging Face token (account page) first: the upload uses it"
    )
    assert page.is_enabled("#hub-push-button") and not Job.objects.exists()

    user_secret_set(user=owner, name="hf_token", value="hf_owner_secret_0001")
    page.uncheck("#hub-push-private")
    with page.expect_navigation():
        page.click("#hub-push-button")
    [job] = Job.objects.all()
    assert page.url.endswith(f"/jobs/{job.pk}/")
    assert (job.kind, job.params["repo_id"], job.params["private"]) == ("hub_push", "owner/echo-rollouts", False)
    page.close()
