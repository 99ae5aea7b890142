"""factory_boy factories for the rows tests build most: users, environments, runs and their
rollouts, evaluations, background jobs and reward recipes.

Defaults are the plain case (a healthy environment without a server behind it, a queued echo
run of three steps); a test passes what its situation is about, so that it reads in the test."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model

from webapp.catalog.models import Environment
from webapp.evaluations.models import Evaluation, EvaluationEpisode
from webapp.jobs.models import Job
from webapp.rewards.models import RewardRecipe, RewardRecipeVersion
from webapp.runs.models import Rollout, Run


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")

    @factory.post_generation
    def password(user: Any, create: bool, extracted: str | None, **kwargs: Any) -> None:
        # create_user's hashing; without a password given the user cannot log in with one.
        if extracted is None:
            user.set_unusable_password()
        else:
            user.set_password(extracted)
        if create:
            user.save(update_fields=["password"])


class EnvironmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Environment

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"env{n}")
    # The discard port: nothing answers there, so a test that needs a server says so.
    base_url = "http://127.0.0.1:9"
    status = Environment.Status.HEALTHY


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"run{n}")
    config = factory.LazyFunction(dict)
    model = "demo:echo"
    max_steps = 3


def _next_seq(rollout: Any) -> int:
    seqs = Rollout.objects.filter(run=rollout.run).order_by("-seq").values_list("seq", flat=True)
    return (seqs.first() or 0) + 1


class RolloutFactory(factory.django.DjangoModelFactory):
    """An empty rollout at step 1, numbered after the run's last one (1, 2, ... as a test adds
    them): a test passes the transcript, rewards and env it reads, and seq or step where the
    order or the step is what it checks."""

    class Meta:
        model = Rollout

    run = factory.SubFactory(RunFactory)
    seq = factory.LazyAttribute(_next_seq)
    step = 1


class EvaluationFactory(factory.django.DjangoModelFactory):
    """A finished evaluation of the solver on an echo entry that is not (or no longer) in the
    catalog: its episodes are what a test adds."""

    class Meta:
        model = Evaluation

    owner = factory.SubFactory(UserFactory)
    environment_name = "echo"
    environment_key = "echo"
    prompt = "Echo 'x'."
    model_specs = factory.LazyFunction(lambda: [{"spec": "solver", "label": "solver", "kind": "solver"}])
    episodes = 1
    seed = 1
    total = factory.SelfAttribute("episodes")
    status = Evaluation.Status.SUCCEEDED


class EvaluationEpisodeFactory(factory.django.DjangoModelFactory):
    """The first model's first episode, won with reward 1.0: a test passes its evaluation (or
    evaluation_id), the seed it was played on and the transcript it shows."""

    class Meta:
        model = EvaluationEpisode

    model_index = 0
    model = "solver"
    index = 0
    reward = 1.0
    won = True


class JobFactory(factory.django.DjangoModelFactory):
    """A queued background job of `kind` with no params: a test gives the params its page reads."""

    class Meta:
        model = Job

    owner = factory.SubFactory(UserFactory)
    kind = "dry_run"
    params = factory.LazyFunction(dict)
    progress_total = 1


class RewardRecipeFactory(factory.django.DjangoModelFactory):
    """A recipe with its first version: `terms` (default: the environment's reward alone)."""

    class Meta:
        model = RewardRecipe
        skip_postgeneration_save = True

    owner = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"recipe{n}")

    @factory.post_generation
    def terms(recipe: Any, create: bool, extracted: list[dict[str, Any]] | None, **kwargs: Any) -> None:
        if create:
            RewardRecipeVersion.objects.create(
                recipe=recipe, number=1,
                terms=extracted or [{"name": "env_reward", "kind": "env_reward", "weight": 1.0}],
            )
