"""Push to the Hub: a run's rollouts or an evaluation's episodes uploaded as a Parquet dataset
to a Hugging Face repository the user names, with their own stored `hf_token`, by a job on the
worker (worker/play/hub_push.py), with progress on the job's page. The dataset card lists the
run config, the reward recipe and the environments (names and kinds, never their addresses).

`ENVLAB_HF_ENDPOINT` (default https://huggingface.co) is the Hub the worker talks to: an
operator's setting, never a user's."""

from __future__ import annotations

import re
from typing import Any, Literal

from django.contrib.auth.models import User
from pydantic import BaseModel, ConfigDict, Field

from webapp.accounts.secrets import user_secret_status
from webapp.core.errors import InvalidInput
from webapp.evaluations.models import Evaluation
from webapp.evaluations.selectors import evaluations_visible_to
from webapp.jobs.models import Job
from webapp.jobs.services import job_create
from webapp.runs.models import Run
from webapp.runs.selectors import runs_visible_to
from webapp.workbench.payload import parse_body

HUB_PUSH_KIND = "hub_push"
PUSH_STEPS = 3  # write the Parquet, make the repository, commit the files
# A Hub repository id: "namespace/name" (the hub's own rule is wider in names, never in form).
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


class PushRejected(InvalidInput):
    pass


class HubPushIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    repo_id: str = Field(min_length=3, max_length=193, description='The dataset repository, "namespace/name".')
    private: bool = Field(default=True, description="Make the repository private when it is created.")


def _request(data: Any) -> HubPushIn:
    request = parse_body(HubPushIn, data, PushRejected)
    if not REPO_ID_RE.fullmatch(request.repo_id) or ".." in request.repo_id or request.repo_id.endswith(".git"):
        raise PushRejected({"repo_id": ['give a Hub dataset repository as "namespace/name"']})
    return request


def hub_push_create(
    *, user: User, what: Literal["run", "evaluation"], target_id: int, data: Any
) -> Job:
    """Queue the upload of run `target_id`'s rollouts or evaluation `target_id`'s episodes (one
    the user can see). Refused, writing nothing: a bad repository id, no stored `hf_token`, an
    unknown target (the same 400 for one that exists but is not the user's)."""
    request = _request(data)
    target: Run | Evaluation | None
    if what == "run":
        target = runs_visible_to(user=user).filter(pk=target_id).first()
    else:
        target = evaluations_visible_to(user=user).filter(pk=target_id).first()
    if target is None:
        raise PushRejected({what: [f"no {what} with id {target_id}"]})
    if not user_secret_status(user=user, name="hf_token").is_set:
        raise PushRejected({"hf_token": ["store your Hugging Face token (account page) first: the upload uses it"]})
    name = target.name if isinstance(target, Run) else f"evaluation {target.pk} on {target.environment_name}"
    params = {"what": what, "id": target.pk, "name": name, "repo_id": request.repo_id, "private": request.private}
    return job_create(owner=user, kind=HUB_PUSH_KIND, params=params, total=PUSH_STEPS)
