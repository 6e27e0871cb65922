"""Static checks of docker/compose.yaml and docker/Dockerfile (no Docker engine needed).

The compose file is read with PyYAML, so ``${VAR}`` references stay as text: that is what lets us
check that the password is always a variable reference and never a literal.
"""

from __future__ import annotations

import pathlib
import re
from typing import Any
from urllib.parse import SplitResult, urlsplit

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
WORKER_IMAGE = "autotune-worker:latest"


# ---------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    assert COMPOSE.is_file(), f"missing {COMPOSE}"
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict), f"{COMPOSE} is not a mapping: {type(data).__name__}"
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    found = compose.get("services")
    assert isinstance(found, dict), f"services is not a mapping: {found!r}"
    return found


@pytest.fixture(scope="module")
def worker(services: dict[str, Any]) -> dict[str, Any]:
    return services["worker"]


@pytest.fixture(scope="module")
def postgres(services: dict[str, Any]) -> dict[str, Any]:
    return services["postgres"]


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a dict, whether written as a mapping or as a KEY=VALUE list."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


VAR_REF = re.compile(r"\$\{[^}]*\}")
MASK = "VARREF"


def split_url(url: str) -> tuple[SplitResult, list[str]]:
    """urlsplit with each ``${...}`` reference replaced by MASK first (their ``:?`` would end the netloc)."""
    return urlsplit(VAR_REF.sub(MASK, url)), VAR_REF.findall(url)


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile as (INSTRUCTION, arguments): comments dropped, continuation lines joined."""
    assert DOCKERFILE.is_file(), f"missing {DOCKERFILE}"
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        keyword, _, rest = full.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, f"Dockerfile ends in a continuation line: {pending!r}"
    return out


# ---------------------------------------------------------------- compose.yaml


def test_services_exist(services: dict[str, Any]) -> None:
    assert {"postgres", "worker"} <= set(services), f"services found: {sorted(services)}"


def test_worker_image_and_build(worker: dict[str, Any]) -> None:
    assert worker.get("image") == WORKER_IMAGE, f"worker image is {worker.get('image')!r}"
    build = worker.get("build")
    assert isinstance(build, dict), f"worker build is {build!r}, expected a mapping with context and dockerfile"
    assert build.get("dockerfile") == "docker/Dockerfile", f"worker build.dockerfile is {build.get('dockerfile')!r}"
    context = (COMPOSE.parent / str(build.get("context"))).resolve()
    assert context == ROOT, f"worker build.context {build.get('context')!r} resolves to {context}, not {ROOT}"
    assert (context / build["dockerfile"]).is_file(), f"{context / build['dockerfile']} does not exist"


def test_worker_gets_the_study_name_from_a_variable(worker: dict[str, Any]) -> None:
    command = worker.get("command")
    text = " ".join(command) if isinstance(command, list) else str(command)
    assert "${AUTOTUNE_STUDY" in text, f"worker command is {command!r}, expected a ${{AUTOTUNE_STUDY}} reference"
    assert "--storage" not in text, f"worker command passes --storage (a password on the command line): {command!r}"


def test_worker_storage_url_points_at_postgres_with_a_variable_password(worker: dict[str, Any]) -> None:
    env = environment(worker)
    assert "AUTOTUNE_STORAGE" in env, f"worker environment keys: {sorted(env)}"
    url = env["AUTOTUNE_STORAGE"]
    parts, refs = split_url(url)
    assert parts.scheme in ("postgresql", "postgresql+psycopg"), f"AUTOTUNE_STORAGE {url!r}: scheme {parts.scheme!r}"
    assert parts.hostname == "postgres", (
        f"AUTOTUNE_STORAGE {url!r}: host {parts.hostname!r}, expected the compose service 'postgres'"
    )
    assert parts.password == MASK and any("PASSWORD" in r for r in refs), (
        f"AUTOTUNE_STORAGE {url!r}: the password must be one ${{..._PASSWORD...}} reference, never a literal"
    )
    assert "${" in url, f"AUTOTUNE_STORAGE {url!r} holds no variable reference"
    assert parts.path.strip("/"), f"AUTOTUNE_STORAGE {url!r} names no database"


def test_no_literal_password_anywhere_in_compose(services: dict[str, Any]) -> None:
    for name, service in services.items():
        for key, value in environment(service).items():
            if "PASSWORD" in key:
                assert "${" in value, f"{name}.environment.{key} is a literal {value!r}, expected a ${{...}} reference"
            if "://" in value:
                secret = split_url(value)[0].password
                assert secret in (None, MASK), f"{name}.environment.{key} holds a literal password: {value!r}"


def test_worker_reserves_a_gpu(worker: dict[str, Any]) -> None:
    devices = worker.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices")
    assert isinstance(devices, list), f"worker deploy.resources.reservations.devices is {devices!r}"
    assert devices, f"worker deploy.resources.reservations.devices is {devices!r}"
    gpu = [d for d in devices if "gpu" in (d.get("capabilities") or [])]
    assert gpu, f"no device reservation with capabilities [gpu]: {devices!r}"
    for d in gpu:
        assert d.get("driver", "nvidia") == "nvidia", f"GPU reservation driver is {d.get('driver')!r}"


def test_worker_can_scale(worker: dict[str, Any]) -> None:
    for key in ("container_name", "ports", "hostname"):
        # container_name and host ports clash between replicas; a fixed hostname would make every
        # replica the same "host" to autotune, which tells its workers apart by hostname:pid.
        assert key not in worker, f"worker sets {key}={worker[key]!r}, which breaks `--scale worker=N`"


def test_worker_waits_for_healthy_postgres(worker: dict[str, Any]) -> None:
    depends = worker.get("depends_on")
    assert isinstance(depends, dict), f"worker depends_on is {depends!r}, expected a mapping with conditions"
    cond = (depends.get("postgres") or {}).get("condition")
    assert cond == "service_healthy", f"worker depends_on.postgres.condition is {cond!r}"


def test_postgres_has_a_healthcheck(postgres: dict[str, Any]) -> None:
    check = postgres.get("healthcheck")
    assert isinstance(check, dict), f"postgres healthcheck is {check!r}"
    assert check.get("test"), f"postgres healthcheck is {check!r}"
    test = check["test"]
    text = " ".join(test) if isinstance(test, list) else str(test)
    assert "pg_isready" in text, f"postgres healthcheck test is {test!r}, expected pg_isready"


def test_postgres_credentials(postgres: dict[str, Any]) -> None:
    env = environment(postgres)
    assert env.get("POSTGRES_USER") == "autotune", f"POSTGRES_USER is {env.get('POSTGRES_USER')!r}"
    assert env.get("POSTGRES_DB") == "autotune", f"POSTGRES_DB is {env.get('POSTGRES_DB')!r}"
    assert env.get("POSTGRES_PASSWORD", "").startswith("${POSTGRES_PASSWORD"), (
        f"POSTGRES_PASSWORD is {env.get('POSTGRES_PASSWORD')!r}, expected ${{POSTGRES_PASSWORD...}}"
    )
    volumes = postgres.get("volumes") or []
    data = [v for v in volumes if str(v).endswith(":/var/lib/postgresql/data")]
    assert data, f"postgres volumes {volumes!r} keep no data directory"


# ---------------------------------------------------------------- Dockerfile


def test_dockerfile_base_is_nvidia_cuda_runtime() -> None:
    froms = [args for kw, args in instructions() if kw == "FROM"]
    assert froms, "Dockerfile has no FROM"
    image = froms[-1].split()[0]
    assert image.startswith("nvidia/cuda:") and "runtime" in image, (
        f"final FROM is {image!r}, expected an nvidia/cuda:*runtime* image"
    )


def test_dockerfile_entrypoint_is_autotune_worker() -> None:
    entry = [args for kw, args in instructions() if kw == "ENTRYPOINT"]
    assert entry, "Dockerfile has no ENTRYPOINT"
    found = yaml.safe_load(entry[-1])  # the exec form is a JSON list, and JSON is YAML
    assert found == ["autotune", "worker"], f"ENTRYPOINT is {entry[-1]!r}"


def test_dockerfile_installs_torch_before_the_project() -> None:
    runs = [args for kw, args in instructions() if kw == "RUN"]
    torch = [i for i, r in enumerate(runs) if "pip install" in r and "torch==" in r]
    project = [i for i, r in enumerate(runs) if re.search(r"pip install\s+(\S+\s+)*/app(\s|$|\[)", r)]
    assert torch, f"no RUN pip install torch==...: RUN lines {runs!r}"
    assert project, f"no RUN pip install /app: RUN lines {runs!r}"
    assert torch[0] < project[0], f"torch is installed in RUN #{torch[0]}, after the project in RUN #{project[0]}"


def test_dockerfile_sets_no_storage_url() -> None:
    for kw, args in instructions():
        if kw in ("ENV", "ARG", "LABEL"):
            assert "AUTOTUNE_STORAGE" not in args, (
                f"Dockerfile {kw} sets AUTOTUNE_STORAGE ({args!r}): it must come from the environment at run time"
            )
        urls = re.findall(r"\w+(?:\+\w+)?://[^\s\"']+@[^\s\"']+", args)
        assert not urls, f"Dockerfile {kw} holds a URL with credentials: {urls!r}"
        if kw in ("ENTRYPOINT", "CMD"):
            assert "--storage" not in args, f"Dockerfile {kw} passes --storage on the command line: {args!r}"


def test_dockerfile_environment() -> None:
    env = " ".join(args for kw, args in instructions() if kw == "ENV")
    for want in ("PYTHONUNBUFFERED=1", "HF_HOME=/cache/hf", "AUTOTUNE_CACHE_DIR=/cache/autotune"):
        assert want in env, f"Dockerfile ENV lacks {want}: ENV is {env!r}"


def test_dockerignore_keeps_databases_and_git_out() -> None:
    ignore = ROOT / ".dockerignore"
    assert ignore.is_file(), f"missing {ignore}"
    lines = {line.strip() for line in ignore.read_text().splitlines() if line.strip() and not line.startswith("#")}
    for want in (".git", "*.db", ".venv", "bench/results"):
        assert want in lines, f".dockerignore lacks {want}: it holds {sorted(lines)}"
