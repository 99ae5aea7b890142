from collections.abc import Callable
from typing import Any

from django.db import migrations, models

# The rollout search's `q` on PostgreSQL: full-text over the transcript's strings, through a
# GIN index on the very expression webapp/runs/telemetry/search.py ROLLOUT_TEXT_SEARCH filters on
# (the planner uses an expression index only for the same expression). SQLite has no such
# index: the search there scans a bounded number of rows instead.
INDEX = "rollout_messages_fts"
CREATE = (
    f"CREATE INDEX IF NOT EXISTS {INDEX} ON runs_rollout "
    "USING GIN (jsonb_to_tsvector('simple'::regconfig, messages, '[\"string\"]'::jsonb))"
)
DROP = f"DROP INDEX IF EXISTS {INDEX}"


def _on_postgres(sql: str) -> Callable[[Any, Any], None]:
    def run(apps: Any, schema_editor: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0010_run_failure"),
    ]

    operations = [
        migrations.AddField(
            model_name="rollout",
            name="tools",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="rollout",
            name="tool_failures",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(_on_postgres(CREATE), _on_postgres(DROP)),
    ]
