"""worker/play/rescore.py reads a run's rollouts in keyset pages on seq: every row once, in order,
only the columns the scores need, and only that run's."""

from __future__ import annotations

import pytest

from tests.factories import RolloutFactory, RunFactory
from worker.play.rescore import FIELDS, rollout_pages

pytestmark = pytest.mark.django_db


def test_pages_cover_every_rollout_of_the_run_once_in_seq_order(owner):
    run = RunFactory(owner=owner, name="r", max_steps=1, status="succeeded")
    other = RunFactory(owner=owner, name="o", max_steps=1, status="succeeded")
    for seq in (5, 1, 3, 2, 4):
        RolloutFactory(run=run, seq=seq, messages=[{"role": "assistant", "content": "long"}])
    RolloutFactory(run=other, seq=6)
    pages = list(rollout_pages(run.pk, page=2))
    assert [[row["seq"] for row in page] for page in pages] == [[1, 2], [3, 4], [5]]
    assert set(pages[0][0]) == set(FIELDS)  # no transcript, no prompt
    assert list(rollout_pages(999999, page=2)) == []
