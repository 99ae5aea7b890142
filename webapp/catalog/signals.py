"""What the catalog announces to the apps above it (which it may not import).

`environment_unshared` is sent inside the transaction that made an entry private again
(`environment_set_shared`), with `environment_id`. Users other than its owner may no
longer see it, so the runs app stops their queued and running runs on it (security review
N10; webapp.runs.apps connects the receiver, the rule is the runs service's).
"""

from __future__ import annotations

from django.dispatch import Signal

environment_unshared = Signal()
