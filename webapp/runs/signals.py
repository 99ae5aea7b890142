"""What the runs app announces to the apps above it (which it may not import).

`run_ended` is sent once the transaction that ended a run has committed (finished, failed,
cancelled before it started, interrupted), with `run_id` and `owner_id`: a slot of the owner's
quota may be free, and webapp.sweeps releases the next of its pending members (the rule is the
sweeps service's; beat releases too, so a receiver that missed one is caught up).
"""

from __future__ import annotations

from django.dispatch import Signal

run_ended = Signal()
