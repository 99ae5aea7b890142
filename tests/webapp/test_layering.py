"""Imports point one way (worker -> webapp -> envs): the web app, every module of it loaded
as the web server loads it, imports no worker code. It sends tasks by name through its own
Celery client (webapp/celery.py); `worker` is an installed app only for manage.py's commands,
and registering it loads worker/apps.py alone."""

from __future__ import annotations

from tests.support.processes import fresh_python


def test_the_web_app_imports_no_worker_code_and_no_torch() -> None:
    code = (
        "import os, sys, pkgutil, importlib; os.environ['DJANGO_SETTINGS_MODULE'] = 'webapp.settings.test'; "
        "import django; django.setup(); import webapp; "
        "names = [m.name for m in pkgutil.walk_packages(webapp.__path__, 'webapp.') "
        "if '.tests' not in m.name and '.migrations' not in m.name and '.settings.' not in m.name]; "
        "[importlib.import_module(n) for n in names]; "
        "import webapp.asgi, webapp.urls; "
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'trl', 'peft', 'vllm'}); "
        "print(len(names) > 50, sorted({m for m in sys.modules if m.split('.')[0] == 'worker'}), heavy)"
    )
    run = fresh_python(code, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    # Nor torch and its kin: loading them would cost every web process seconds and gigabytes.
    assert run.stdout == "True ['worker', 'worker.apps'] []\n", run.stdout


def test_catalog_counts_as_active_exactly_the_run_statuses_runs_calls_active() -> None:
    from webapp.catalog.selectors import ACTIVE_RUN_STATUSES
    from webapp.runs.models import Run

    assert set(ACTIVE_RUN_STATUSES) == {str(status) for status in Run.ACTIVE}
