"""factory_boy factories for the rows tests build most: users, environments, runs.

Defaults are the plain case (a healthy environment without a server behind it, a queued echo
run of three steps); a test passes what its situation is about, so that it reads in the test."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model

from webapp.catalog.models import Environment
from webapp.runs.models import Run


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
