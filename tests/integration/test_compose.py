"""The compose stack, checked without a container engine.

Debian's docker-compose 1.29 validates and renders the file (`docker-compose config`)
without talking to Docker; the rendered YAML is what Docker would run, so the checks
below read that rather than the source file (anchors and `${VAR:-default}` resolved).
The init job's script runs for real against a throwaway SQLite Airflow home.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yaml"
AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")

pytestmark = pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")


def _compose_env() -> dict[str, str]:
    """Environment without the stack's override variables, so defaults are what is checked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KAFKA", "SPARK", "DEMO_", "POSTGRES"))}
    env.pop("COMPOSE_FILE", None)
    return env


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    """The stack as docker-compose renders it."""
    out = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config"],
        cwd=ROOT, env=_compose_env(), capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # "KEY=value" form
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """target -> source, for both the short ("src:dst:mode") and the long volume syntax."""
    out = {}
    for v in service.get("volumes") or []:
        if isinstance(v, dict):
            out[v["target"]] = v["source"]
        else:
            src, dst = v.split(":")[:2]
            out[dst] = src
    return out


def _kafka_brokers(config: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        name: _env(svc)
        for name, svc in config["services"].items()
        if "apache/kafka" in svc.get("image", "") and "broker" in _env(svc).get("KAFKA_PROCESS_ROLES", "")
    }


def test_config_quiet_passes() -> None:
    out = subprocess.run(
        ["docker-compose", "-f", str(COMPOSE), "config", "-q"],
        cwd=ROOT, env=_compose_env(), capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""


def test_services_present(config: dict[str, Any]) -> None:
    services = set(config["services"])
    for name in (*AIRFLOW_SERVICES, "airflow-init", "postgres", "spark-master", "spark-worker"):
        assert name in services, f"missing service {name}"
    assert len(_kafka_brokers(config)) >= 3


def test_airflow_image_built_from_project(config: dict[str, Any]) -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM apache/airflow:3\.3\.\d+-python3\.11\s*$", dockerfile, re.M)
    assert "requirements.txt" in dockerfile
    images = set()
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        svc = config["services"][name]
        assert Path(svc["build"]["context"]).resolve() == ROOT, name
        images.add(svc["image"])
        env = _env(svc)
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
        assert "@postgres:5432/" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        # Shared secrets: task JWTs issued by one component are checked by another.
        assert env["AIRFLOW__API_AUTH__JWT_SECRET"]
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
    assert len(images) == 1, f"Airflow services run different images: {images}"
    # The Spark services run the same image, so driver and executors share one Spark.
    for name in ("spark-master", "spark-worker"):
        assert config["services"][name]["image"] in images


def test_airflow_commands_and_init_ordering(config: dict[str, Any]) -> None:
    svcs = config["services"]
    commands = {name: svcs[name]["command"] for name in AIRFLOW_SERVICES}
    flat = {name: cmd if isinstance(cmd, str) else " ".join(cmd) for name, cmd in commands.items()}
    assert flat == {
        "airflow-apiserver": "api-server",
        "airflow-scheduler": "scheduler",
        "airflow-dag-processor": "dag-processor",
        "airflow-triggerer": "triggerer",
    }
    for name in AIRFLOW_SERVICES:
        deps = svcs[name]["depends_on"]
        assert deps["airflow-init"]["condition"] == "service_completed_successfully", name
        assert deps["postgres"]["condition"] == "service_healthy", name
    init = svcs["airflow-init"]
    assert init["entrypoint"][-1].endswith("airflow-init.sh")
    script = ROOT / "docker" / Path(init["entrypoint"][-1]).name
    assert script.is_file()
    assert "airflow db migrate" in script.read_text()
    # The api-server reads the password file the init job writes: same volume, same path.
    auth_file = _env(init)["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
    mounts = _mounts(svcs["airflow-apiserver"])
    init_mounts = _mounts(init)
    auth_dir = str(Path(auth_file).parent)
    assert mounts[auth_dir] == init_mounts[auth_dir]
    assert svcs["airflow-apiserver"]["ports"][0]["target"] == 8080


def test_every_service_has_a_healthcheck_or_is_a_job(config: dict[str, Any]) -> None:
    jobs = {"airflow-init", "kafka-init"}
    for name, svc in config["services"].items():
        if name in jobs:
            assert svc.get("restart", "no") == "no", name
            continue
        hc = svc.get("healthcheck")
        assert hc and hc.get("test") and not hc.get("disable"), f"{name} has no healthcheck"
    # Conditions that wait for health must point at services that have a healthcheck.
    for name, svc in config["services"].items():
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in config["services"], f"{name} depends on unknown {dep}"
            if cond.get("condition") == "service_healthy":
                assert config["services"][dep].get("healthcheck"), f"{name} waits on {dep}'s health"


def test_kafka_kraft_quorum_and_racks(config: dict[str, Any]) -> None:
    brokers = _kafka_brokers(config)
    node_ids = {name: int(env["KAFKA_NODE_ID"]) for name, env in brokers.items()}
    assert len(set(node_ids.values())) == len(node_ids), "duplicate node ids"
    cluster_ids = {env["CLUSTER_ID"] for env in brokers.values()}
    assert len(cluster_ids) == 1 and len(next(iter(cluster_ids))) == 22
    racks = {name: env["KAFKA_BROKER_RACK"] for name, env in brokers.items()}
    assert len(set(racks.values())) >= 3, f"brokers on fewer than 3 racks: {racks}"

    voters_values = {env["KAFKA_CONTROLLER_QUORUM_VOTERS"] for env in brokers.values()}
    assert len(voters_values) == 1, "brokers disagree on the controller quorum"
    voters = {}
    for entry in next(iter(voters_values)).split(","):
        node, hostport = entry.split("@")
        voters[int(node)] = hostport
    assert len(voters) >= 3 and len(voters) % 2 == 1, "controller quorum must be an odd number >= 3"
    by_id = {v: k for k, v in node_ids.items()}
    for node, hostport in voters.items():
        host, port = hostport.rsplit(":", 1)
        service = by_id[node]
        env = brokers[service]
        assert "controller" in env["KAFKA_PROCESS_ROLES"]
        assert config["services"][service]["hostname"] == host == service
        assert f"CONTROLLER://:{port}" in env["KAFKA_LISTENERS"]
    for name, env in brokers.items():
        assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] == "CONTROLLER"
        protocol_map = dict(p.split(":") for p in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
        listeners = {l.split("://")[0] for l in env["KAFKA_LISTENERS"].split(",")}
        assert listeners <= set(protocol_map), name
        assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] in listeners
        # In-network clients (Airflow, Spark) reach every broker by its service name.
        advertised = dict(l.split("://") for l in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
        assert advertised["PLAINTEXT"] == f"{name}:9092"
        assert "CONTROLLER" not in advertised
        # The host listener is published on the same port it advertises.
        ext_port = advertised["EXTERNAL"].rsplit(":", 1)[1]
        published = {str(p["published"]) for p in config["services"][name]["ports"]}
        assert ext_port in published, name


def test_connections_preset(config: dict[str, Any]) -> None:
    brokers = _kafka_brokers(config)
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        env = _env(config["services"][name])
        kafka = json.loads(env["AIRFLOW_CONN_KAFKA_DEFAULT"])
        assert kafka["conn_type"] == "kafka"
        servers = kafka["extra"]["bootstrap.servers"].split(",")
        assert {s.split(":")[0] for s in servers} == set(brokers), "kafka_default must list every broker"
        for s in servers:
            host = s.split(":")[0]
            advertised = dict(l.split("://") for l in brokers[host]["KAFKA_ADVERTISED_LISTENERS"].split(","))
            assert advertised["PLAINTEXT"] == s
        spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
        assert spark["conn_type"] == "spark"
        assert (spark["host"], spark["port"]) == ("spark://spark-master", 7077)
    master_cmd = " ".join(config["services"]["spark-master"]["command"])
    worker_cmd = " ".join(config["services"]["spark-worker"]["command"])
    assert "deploy.master.Master" in master_cmd and "--port 7077" in master_cmd
    assert "deploy.worker.Worker spark://spark-master:7077" in worker_cmd


def test_kafka_init_script_matches_racks(config: dict[str, Any]) -> None:
    """The demo topics' replica lists name real brokers and never repeat a broker."""
    script = (ROOT / "docker" / "kafka-init.sh").read_text()
    subprocess.run(["bash", "-n", str(ROOT / "docker" / "kafka-init.sh")], check=True)
    ids = {int(env["KAFKA_NODE_ID"]) for env in _kafka_brokers(config).values()}
    assignments = re.findall(r'^create \S+ "([\d:,]+)"', script, re.M)
    assert assignments
    for assignment in assignments:
        for replicas in assignment.split(","):
            rs = [int(r) for r in replicas.split(":")]
            assert set(rs) <= ids and len(set(rs)) == len(rs), replicas


@pytest.mark.slow
@pytest.mark.airflow
def test_airflow_init_script_runs(tmp_path: Path, config: dict[str, Any]) -> None:
    """Run docker/airflow-init.sh with the stack's settings, SQLite instead of PostgreSQL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    for key, value in _env(config["services"]["airflow-init"]).items():
        if key.startswith("AIRFLOW_CONN_") or key in ("AIRFLOW_ADMIN_USER", "AIRFLOW_ADMIN_PASSWORD"):
            env[key] = value
    env.update(
        AIRFLOW_HOME=str(tmp_path / "home"),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{tmp_path / 'airflow.db'}",
        AIRFLOW__CORE__LOAD_EXAMPLES="false",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(tmp_path / "auth" / "passwords.json"),
        AIRFLOW_ADMIN_PASSWORD="s3cret-for-test",
        PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    )
    out = subprocess.run(
        ["bash", str(ROOT / "docker" / "airflow-init.sh")],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "connections kafka_default and spark_default present" in out.stdout
    passwords = json.loads((tmp_path / "auth" / "passwords.json").read_text())
    assert passwords == {"admin": "s3cret-for-test"}
    # Running it again (a restarted stack) keeps working and keeps the password.
    out = subprocess.run(
        ["bash", str(ROOT / "docker" / "airflow-init.sh")],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads((tmp_path / "auth" / "passwords.json").read_text()) == {"admin": "s3cret-for-test"}


def _dockerfile_writable_dirs() -> tuple[set[str], str]:
    """The directories the Dockerfile makes writable for uid 50000 / gid 0, and the RUN line doing it.

    Checks statically that the list is created, owned by 50000:0 and group-writable by a RUN
    executed as root (the USER in force at that line).
    """
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n\s*", " ", text)  # join continued lines
    dirs = set(re.search(r'^ENV KAFKA_REASSIGN_WRITABLE_DIRS="([^"]+)"', text, re.M).group(1).split())
    user, run_line = None, None
    for line in text.splitlines():
        if m := re.match(r"^USER (\S+)", line):
            user = m.group(1)
        if line.startswith("RUN ") and "mkdir -p $KAFKA_REASSIGN_WRITABLE_DIRS" in line:
            assert user == "root", "the writable directories must be created as root (to chown them)"
            run_line = line
    assert run_line, "no RUN creating $KAFKA_REASSIGN_WRITABLE_DIRS"
    assert re.search(r"chown (50000|airflow):(0|root) \$KAFKA_REASSIGN_WRITABLE_DIRS", run_line)
    mode = re.search(r"chmod ([0-7]{3,4}) \$KAFKA_REASSIGN_WRITABLE_DIRS", run_line).group(1)
    assert int(mode[-3], 8) & 0o7 == 0o7 and int(mode[-2], 8) & 0o3 == 0o3, f"mode {mode}: owner rwx, group wx"
    return dirs, run_line


def test_every_written_path_is_writable_for_uid_50000_gid_0(config: dict[str, Any]) -> None:
    """docker compose would fail when a container writes where the image left root 755."""
    writable, _ = _dockerfile_writable_dirs()
    named_volumes = set(config.get("volumes") or {})
    checked = 0
    for name, svc in config["services"].items():
        if svc.get("user") is None or "apache/kafka" in svc.get("image", "") or name == "postgres":
            continue  # images with their own user and directories
        assert svc["user"] == "50000:0", f"{name} runs as {svc['user']}"
        env = _env(svc)
        written = {env.get("AIRFLOW_HOME", "/opt/airflow")}
        for key in ("AIRFLOW__KAFKA_REASSIGN__WORK_DIR", "SPARK_WORKER_DIR", "AIRFLOW__LOGGING__BASE_LOG_FOLDER"):
            if env.get(key):
                written.add(env[key])
        if env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"):
            written.add(str(Path(env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]).parent))
        for v in svc.get("volumes") or []:
            source, target, mode = (v.split(":") + ["rw"])[:3] if isinstance(v, str) else \
                (v["source"], v["target"], "ro" if v.get("read_only") else "rw")
            if not source.startswith(("/", ".")):
                assert source in named_volumes, f"{name}: volume {source} not declared"
                written.add(target)
            else:  # bind mounts: read-only, from the repository
                assert mode == "ro", f"{name}: bind mount {target} must be read-only"
                assert Path(source).exists(), f"{name}: {source} does not exist"
        missing = sorted(p for p in written if p not in writable)
        assert not missing, f"{name} writes {missing}, which the Dockerfile does not create writable for 50000:0"
        checked += 1
    assert checked >= 7  # init, api-server, scheduler, dag-processor, triggerer, spark master and worker


def test_image_applies_the_makefile_s_pyspark_fix() -> None:
    """pyspark-client (pulled in by the Spark provider) overwrites pyspark's Python files."""
    dockerfile = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())  # join continued lines
    fix = re.search(r'--force-reinstall\s+"\$\(grep -E \'\^pyspark==\' (\S+)\)"', dockerfile)
    assert fix and fix.group(1).endswith("requirements.txt")
    assert "--force-reinstall \"$$(grep -E '^pyspark==' requirements.txt)\"" in (ROOT / "Makefile").read_text()
