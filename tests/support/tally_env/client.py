"""The tally client: the typed client every bundled server shares."""

from __future__ import annotations

from envs.typed_client import TypedEnvClient
from tests.support.tally_env.models import TallyAction, TallyObservation, TallyState


class TallyEnv(TypedEnvClient[TallyAction, TallyObservation, TallyState]):
    observation_cls = TallyObservation
    state_cls = TallyState
