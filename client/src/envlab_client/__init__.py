"""envlab's Python client: `Client(url, token)` for the lab's REST API, and the `envlab`
command line (envlab_client.cli). Needs requests, typer, platformdirs and websockets; no
Django, no torch. Parquet tables in memory need the `parquet` extra (pyarrow)."""

from envlab_client.client import (
    Client,
    Environment,
    EnvlabError,
    Evaluation,
    Job,
    Recipe,
    Rollout,
    Run,
    Sweep,
)

__all__ = ["Client", "Environment", "EnvlabError", "Evaluation", "Job", "Recipe", "Rollout", "Run", "Sweep", "read_parquet"]
__version__ = "0.1.0"


def read_parquet(source: object) -> object:
    """A downloaded Parquet export (a path or a binary file) as a pyarrow Table."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise EnvlabError(
            "reading Parquet needs pyarrow: pip install 'envlab-client[parquet]' (downloads need nothing more)"
        ) from None
    return pq.read_table(source)
