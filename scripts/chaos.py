"""`make chaos`: every fault test of the suite (marker `chaos`) against a real stack, one
database (PostgreSQL where reachable, as in production; else SQLite), then RELIABILITY.md's
table rewritten from the rows the tests recorded (tests/support/chaos.py).

Extra pytest arguments after `--` narrow it down: `python scripts/chaos.py -- -k redis`;
the rows of the tests run then replace their earlier rows, and the other rows stay (from
var/chaos/rows.jsonl). Without arguments every row is measured afresh.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PY = sys.executable
RELIABILITY = ROOT / "RELIABILITY.md"
RECORD = ROOT / "var" / "chaos" / "rows.jsonl"
START, END = "<!-- chaos-table:start -->", "<!-- chaos-table:end -->"


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def render(rows: list[dict], *, database: str, exit_code: int, fresh: int) -> str:
    kept = len(rows) - fresh
    lines = [
        f"Measured by `make chaos` on {dt.datetime.now(dt.UTC).date().isoformat()}, {os.cpu_count()} CPUs "
        f"({platform.machine()}), {database}; pytest exit code {exit_code}"
        f"{' (all fault tests run passed)' if exit_code == 0 else ' (SOME FAULT TESTS FAILED: see the output)'}"
        + (f"; {fresh} row(s) measured in this run, {kept} kept from an earlier one." if kept else "."),
        "",
        "| fault | when | what the run did | recovery s | steps stored | missing | duplicated "
        "| rollouts duplicated | episodes lost | status | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        audit = row["audit"]
        recover = "" if row["recover_seconds"] is None else f"{row['recover_seconds']:g}"
        lines.append(
            f"| {_cell(row['fault'])} | {_cell(row['when'])} | {_cell(row['outcome'])} | {recover} "
            f"| {audit['steps_stored']} | {audit['steps_missing']} | {audit['steps_duplicated']} "
            f"| {audit['rollouts_duplicated']} | {audit['episodes_lost']} | {audit['status']} "
            f"| {_cell(row['note'])} |"
        )
    return "\n".join(lines)


def write_table(table: str) -> None:
    text = RELIABILITY.read_text() if RELIABILITY.exists() else "# Reliability\n"
    block = f"{START}\n{table}\n{END}"
    if START in text and END in text:
        before, rest = text.split(START, 1)
        text = before + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## The chaos table\n\n" + block + "\n"
    RELIABILITY.write_text(text)


def main(argv: list[str]) -> int:
    from scripts.run_tests import POSTGRES_URL, reachable
    from tests.support.chaos_record import RECORD_ENV, read_rows

    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    database = "postgres" if reachable(POSTGRES_URL) else "sqlite"
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    # This run's rows go to a file of their own, merged into RECORD at the end: a run stopped
    # half-way leaves the earlier rows as they were.
    fresh_path = RECORD.with_name("rows.new.jsonl")
    fresh_path.unlink(missing_ok=True)
    env = {**os.environ, RECORD_ENV: str(fresh_path), "ENVLAB_TEST_DATABASES": database}
    print(f"chaos: the fault tests on {database}; rows in {RECORD}", flush=True)
    code = subprocess.run(
        [PY, str(ROOT / "scripts" / "run_tests.py"), "--", "-m", "chaos", "-p", "no:randomly", "-s", *extra],
        cwd=ROOT, env=env,
    ).returncode
    fresh = read_rows(fresh_path)
    earlier = read_rows(RECORD) if extra else []
    rows = [row for row in earlier if row["test"] not in {r["test"] for r in fresh}] + fresh
    RECORD.write_text("".join(json.dumps(row) + "\n" for row in rows))
    fresh_path.unlink(missing_ok=True)
    if not fresh:
        print("chaos: no rows were recorded; RELIABILITY.md left as it was", file=sys.stderr)
        return code or 1
    write_table(render(
        rows, database="PostgreSQL" if database == "postgres" else "SQLite", exit_code=code, fresh=len(fresh)
    ))
    print(json.dumps({"rows": len(rows), "pytest_exit": code, "table": str(RELIABILITY)}))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
