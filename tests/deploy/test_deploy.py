"""Deployment files cannot drift from the server: every manifest and compose file parses (and
passes yamllint); every LATENTSERVE_* variable and every command-line flag they use is one the
binaries accept (read from their --help); ports agree across ConfigMap, containers, probes and
Service; the probe paths answer on a real server started with the ConfigMap's settings; the
grace period covers the drain; the CPU image builds with the README's set-up script; the Grafana
dashboard queries only metrics (and labels) a real server with expert parallelism exports, and
compose provisions it with the data source it expects. The multinode overlay's LeaderWorkerSet
agrees with the server and its launcher, whose group the launcher builds from the
LeaderWorkerSet's environment as the manifest sizes it."""
import json
import glob
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest
import requests
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN_DIR = os.path.dirname(os.environ.get("LATENTSERVE_BIN", os.path.join(ROOT, "build", "bin", "latentserve")))
DEPLOY = os.path.join(ROOT, "deploy")
YAML_FILES = sorted(glob.glob(os.path.join(DEPLOY, "**", "*.yml"), recursive=True) +
                    glob.glob(os.path.join(DEPLOY, "**", "*.yaml"), recursive=True))


def flags_of(binary):
    out = subprocess.run([os.path.join(BIN_DIR, binary), "--help"], capture_output=True, text=True)
    names = set(re.findall(r"--([a-z_0-9]+) \(", out.stdout + out.stderr))
    assert names, f"no flags parsed from {binary} --help"
    return names


SERVER_FLAGS = flags_of("latentserve")
BENCH_FLAGS = flags_of("latentserve-bench")


def docs():
    for path in YAML_FILES:
        with open(path) as f:
            for d in yaml.safe_load_all(f):
                if d:
                    yield path, d


LAUNCHER = os.path.join(ROOT, "tools", "lws_launch.sh")


def launcher_variables():
    """The environment variables tools/lws_launch.sh reads (${NAME:-...} or ${NAME:?...})."""
    with open(LAUNCHER) as f:
        return set(re.findall(r"\$\{([A-Z][A-Z0-9_]*):[-?]", f.read()))


def pod_specs(d):
    spec = d.get("spec", {})
    if d.get("kind") == "LeaderWorkerSet":
        t = spec.get("leaderWorkerTemplate", {})
        return [t.get("leaderTemplate", {}).get("spec", {}), t.get("workerTemplate", {}).get("spec", {})]
    return [spec.get("template", {}).get("spec", {})]


def containers(d):
    return [c for pod in pod_specs(d) for c in pod.get("containers", [])]


def configmap():
    for _, d in docs():
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "latentserve-flags":
            return d["data"]
    raise AssertionError("no latentserve-flags ConfigMap")


def check_env_name(name, container=None):
    # The multinode launcher's own settings and NCCL's pass through it; everything else is a flag.
    if container is not None and container.get("command", [""])[0].endswith("latentserve-lws"):
        if name.startswith("NCCL_") or name in launcher_variables():
            return
    assert name.startswith("LATENTSERVE_"), name
    flag = name[len("LATENTSERVE_"):].lower()
    assert flag in SERVER_FLAGS or name == "LATENTSERVE_API_KEY", f"{name}: no such server flag --{flag}"


def check_args(args, flags):
    for a in args:
        if a.startswith("--"):
            name = a[2:].split("=")[0].replace("-", "_")
            assert name in flags, f"unknown flag {a}"


def test_every_file_parses_and_passes_yamllint():
    assert len(YAML_FILES) >= 10
    for path, d in docs():
        assert isinstance(d, dict), path
    if shutil.which("yamllint"):
        cfg = "{extends: default, rules: {line-length: {max: 130}, document-start: disable, truthy: disable}}"
        r = subprocess.run(["yamllint", "-d", cfg, *YAML_FILES], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout


def test_env_and_flags_exist():
    for path, d in docs():  # the base's ConfigMap and every overlay's patch of it
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == "latentserve-flags":
            for name in d["data"]:
                check_env_name(name)
    for path, d in docs():
        for c in containers(d):
            for e in c.get("env", []):
                check_env_name(e["name"], c)
            if "latentserve-bench" in " ".join(c.get("command", [])):
                check_args(c.get("args", []), BENCH_FLAGS)
            else:
                check_args(c.get("args", []), SERVER_FLAGS)
        if "services" in d:  # compose: the server's and the load generator's settings (not Prometheus' or Grafana's)
            for name, svc in d["services"].items():
                if not svc.get("image", "").startswith("latentserve"):
                    continue
                for env in svc.get("environment", {}):
                    check_env_name(env)
                entry = " ".join(svc.get("entrypoint", []))
                check_args(svc.get("command", []), BENCH_FLAGS if "bench" in entry else SERVER_FLAGS)
    with open(os.path.join(DEPLOY, "docker", "Dockerfile.cpu")) as f:
        for name in re.findall(r"^(?:ENV)?\s+(LATENTSERVE_[A-Z_]+)=", f.read(), re.MULTILINE):
            check_env_name(name)


def test_ports_probes_and_grace_period_agree():
    cm = configmap()
    http, grpc_port = int(cm["LATENTSERVE_HTTP_PORT"]), int(cm["LATENTSERVE_GRPC_PORT"])
    drain = int(cm["LATENTSERVE_DRAIN_TIMEOUT_S"])
    seen_deployment = False
    for path, d in docs():
        if d.get("kind") == "Deployment" and "base" in path:
            seen_deployment = True
            pod = d["spec"]["template"]["spec"]
            c = pod["containers"][0]
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            assert ports == {"http": http, "grpc": grpc_port}
            assert c["livenessProbe"]["grpc"]["port"] == grpc_port
            assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
            assert c["readinessProbe"]["httpGet"]["port"] in ("http", http)
            assert c["startupProbe"]["httpGet"]["path"] == "/health"
            pre_stop = int(c["lifecycle"]["preStop"]["exec"]["command"][-1])
            assert pod["terminationGracePeriodSeconds"] > drain + pre_stop
        if d.get("kind") == "Service":
            names = {p["name"]: p for p in d["spec"]["ports"]}
            assert names["http"]["port"] == http and names["grpc"]["port"] == grpc_port
            assert names["http"]["targetPort"] == "http" and names["grpc"]["targetPort"] == "grpc"
        if "services" in d:
            env = d["services"]["latentserve"]["environment"]
            mapped = {int(p.split(":")[1]) for p in d["services"]["latentserve"]["ports"]}
            assert mapped == {int(env["LATENTSERVE_HTTP_PORT"]), int(env["LATENTSERVE_GRPC_PORT"])}
            grace = int(d["services"]["latentserve"]["stop_grace_period"].rstrip("s"))
            assert grace > int(env["LATENTSERVE_DRAIN_TIMEOUT_S"])
    assert seen_deployment


def test_probe_paths_answer_on_a_server_run_with_the_configmap():
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from conftest_ports import free_port
    env = dict(os.environ)
    env.update(configmap())
    http, grpc_port = free_port(), free_port()
    env.update({"LATENTSERVE_MODEL": os.path.join(ROOT, "models", "tiny"), "LATENTSERVE_HOST": "127.0.0.1",
                "LATENTSERVE_HTTP_PORT": str(http), "LATENTSERVE_GRPC_PORT": str(grpc_port),
                "LATENTSERVE_KV_CACHE_MB": "64"})
    proc = subprocess.Popen([os.path.join(BIN_DIR, "latentserve")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{http}"
        for _ in range(300):
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        for path, d in docs():
            for c in containers(d):
                for probe in ("startupProbe", "readinessProbe"):
                    if probe in c:
                        assert requests.get(url + c[probe]["httpGet"]["path"]).status_code == 200, probe
        health = health_pb2_grpc.HealthStub(grpc.insecure_channel(f"127.0.0.1:{grpc_port}"))
        assert health.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING
        assert requests.get(url + "/metrics").text.count("latentserve_num_requests_waiting") >= 1, \
            "the HPA's metric is exported"
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0


def test_cpu_image_builds_with_the_readme_setup_script():
    with open(os.path.join(DEPLOY, "docker", "Dockerfile.cpu")) as f:
        dockerfile = f.read()
    assert "RUN tools/setup.sh" in dockerfile
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    assert "tools/setup.sh" in readme
    with open(os.path.join(ROOT, "tools", "run.sh")) as f:
        assert "tools/setup.sh" in f.read()


GRAFANA = os.path.join(DEPLOY, "grafana")


def grafana_queries(dashboard):
    """(expr, legendFormat) of every panel target, annotation and template variable."""
    out = []
    for panel in dashboard["panels"]:
        for t in panel.get("targets", []):
            out.append((t["expr"], t.get("legendFormat", "")))
    for a in dashboard["annotations"]["list"]:
        if "expr" in a:
            out.append((a["expr"], a.get("textFormat", "")))
    for v in dashboard["templating"]["list"]:
        if v["type"] == "query":
            out.append((v["query"]["query"] if isinstance(v["query"], dict) else v["query"], ""))
    return out


def exported_metrics(text):
    """{sample name: set of label names} from Prometheus text."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? ", line)
        if m and not line.startswith("#"):
            out.setdefault(m.group(1), set()).update(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2) or ""))
    return out


def test_grafana_dashboard_queries_only_what_the_server_exports():
    with open(os.path.join(GRAFANA, "latentserve.json")) as f:
        dashboard = json.load(f)
    from conftest_ports import free_port
    http, grpc_port = free_port(), free_port()
    proc = subprocess.Popen([os.path.join(BIN_DIR, "latentserve"), "--model", os.path.join(ROOT, "models", "tiny"),
                             "--host", "127.0.0.1", "--http_port", str(http), "--grpc_port", str(grpc_port),
                             "--kv_cache_mb", "64", "--devices", "2", "--expert_slots", "40", "--replan_interval", "8"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{http}"
        for _ in range(300):
            try:
                if requests.get(url + "/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.1)
        r = requests.post(url + "/v1/completions", json={"prompt": "In the beginning", "max_tokens": 24,
                                                         "ignore_eos": True})
        assert r.status_code == 200, r.text
        exported = exported_metrics(requests.get(url + "/metrics").text)
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0
    queried = set()
    for expr, legend in grafana_queries(dashboard):
        names = set(re.findall(r"\b(latentserve_[a-z0-9_]+)", expr))
        assert names, f"a query names no LatentServe metric: {expr}"
        for name in names:
            assert name in exported, f"the Grafana dashboard queries {name}, which /metrics does not export"
        labels = set().union(*(exported[n] for n in names)) | {"instance", "job"}
        used = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
        for group in re.findall(r"\bby \(([^)]*)\)", expr):
            used |= {g.strip() for g in group.split(",") if g.strip()}
        assert used <= labels, f"{expr}: labels {used - labels} are not on {names}"
        queried |= names
    # What the dashboard is for: requests, latency percentiles from the histograms, KV cache,
    # expert and device balance per layer, re-plans.
    for name in ("latentserve_requests_total", "latentserve_time_to_first_token_seconds_bucket",
                 "latentserve_inter_token_latency_seconds_bucket", "latentserve_kv_cache_usage_ratio",
                 "latentserve_expert_load_window_max_over_mean", "latentserve_device_load_max_over_mean",
                 "latentserve_expert_replans_total"):
        assert name in queried, name
    # Panels reach Prometheus through the data source variable, whose default is the provisioned one.
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
    with open(os.path.join(GRAFANA, "provisioning", "datasources", "prometheus.yaml")) as f:
        source = yaml.safe_load(f)["datasources"][0]
    assert variables["datasource"]["current"]["value"] == source["uid"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"


def test_compose_provisions_prometheus_and_grafana():
    with open(os.path.join(DEPLOY, "docker", "docker-compose.yml")) as f:
        compose = yaml.safe_load(f)
    services = compose["services"]
    with open(os.path.join(GRAFANA, "provisioning", "dashboards", "latentserve.yaml")) as f:
        provider = yaml.safe_load(f)["providers"][0]
    with open(os.path.join(GRAFANA, "provisioning", "datasources", "prometheus.yaml")) as f:
        source = yaml.safe_load(f)["datasources"][0]
    mounts = {}
    for name in ("prometheus", "grafana"):
        for volume in services[name]["volumes"]:
            src, dst = volume.split(":")[:2]
            path = os.path.normpath(os.path.join(DEPLOY, "docker", src))
            assert os.path.exists(path), f"{name} mounts {src}, which is not in the repository"
            mounts[dst] = path
    assert mounts["/var/lib/grafana/dashboards/latentserve.json"] == os.path.join(GRAFANA, "latentserve.json")
    assert os.path.dirname("/var/lib/grafana/dashboards/latentserve.json") == provider["options"]["path"]
    assert mounts["/etc/grafana/provisioning"] == os.path.join(GRAFANA, "provisioning")
    prometheus_port = int(services["prometheus"]["ports"][0].split(":")[1])
    assert source["url"] == f"http://prometheus:{prometheus_port}"
    with open(mounts["/etc/prometheus/prometheus.yml"]) as f:
        scrape = yaml.safe_load(f)["scrape_configs"][0]
    server_port = services["latentserve"]["environment"]["LATENTSERVE_HTTP_PORT"]
    assert scrape["static_configs"][0]["targets"] == [f"latentserve:{server_port}"]
    assert scrape["metrics_path"] == "/metrics"
MULTINODE = os.path.join(DEPLOY, "k8s", "overlays", "multinode")


def multinode_docs():
    out = {}
    for name in os.listdir(MULTINODE):
        with open(os.path.join(MULTINODE, name)) as f:
            out[name] = list(yaml.safe_load_all(f))[0]
    return out


def overlay_flags():
    data = dict(configmap())
    data.update(multinode_docs()["configmap-patch.yaml"]["data"])
    return data


def test_multinode_overlay_is_a_leader_worker_set_with_readiness_on_the_leader():
    files = multinode_docs()
    kust = files["kustomization.yaml"]
    for entry in kust["resources"] + [p["path"] for p in kust["patches"]]:
        assert os.path.exists(os.path.join(MULTINODE, entry)), entry
    deleted = {(d["kind"], d["metadata"]["name"]) for d in files.values() if d.get("$patch") == "delete"}
    assert deleted == {("Deployment", "latentserve"), ("HorizontalPodAutoscaler", "latentserve")}
    lws = files["leaderworkerset.yaml"]
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and lws["kind"] == "LeaderWorkerSet"
    t = lws["spec"]["leaderWorkerTemplate"]
    assert t["size"] >= 2 and t["restartPolicy"] == "RecreateGroupOnPodRestart"
    leader_pod, worker_pod = t["leaderTemplate"]["spec"], t["workerTemplate"]["spec"]
    leader, worker = leader_pod["containers"][0], worker_pod["containers"][0]
    flags = overlay_flags()
    http, grpc_port = int(flags["LATENTSERVE_HTTP_PORT"]), int(flags["LATENTSERVE_GRPC_PORT"])
    # Readiness on the leader only; the Service (and the budget) select leaders only.
    assert leader["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert leader["readinessProbe"]["httpGet"]["port"] in ("http", http)
    assert leader["startupProbe"]["httpGet"]["path"] == "/health"
    assert leader["livenessProbe"]["grpc"]["port"] == grpc_port
    assert "readinessProbe" not in worker and "startupProbe" not in worker
    assert {p["name"]: p["containerPort"] for p in leader["ports"]} == {"http": http, "grpc": grpc_port}
    for path, d in docs():
        if d.get("kind") == "Service" and "base" in path:
            selector = d["spec"]["selector"]
            assert all(t["leaderTemplate"]["metadata"]["labels"].get(k) == v for k, v in selector.items())
            assert not all(t["workerTemplate"]["metadata"]["labels"].get(k) == v for k, v in selector.items())
    # Both roles run the launcher the CUDA image installs; the workers get their ranks over ssh.
    with open(os.path.join(DEPLOY, "docker", "Dockerfile.cuda")) as f:
        dockerfile = f.read()
    assert "COPY tools/lws_launch.sh /usr/local/bin/latentserve-lws" in dockerfile
    assert "openmpi-bin" in dockerfile and "openssh-server" in dockerfile
    for c in (leader, worker):
        assert c["command"] == ["/usr/local/bin/latentserve-lws"]
        assert c["image"] == "latentserve:cuda"
    ssh_port = next(int(e["value"]) for e in worker["env"] if e["name"] == "SSH_PORT")
    assert worker["ports"][0]["containerPort"] == ssh_port
    # One rank per GPU; the deadlines fit inside each other: heartbeat < rank deadline, and Open
    # MPI signals a broken group's ranks only after rank 0 has noticed and answered.
    env = {e["name"]: e["value"] for e in leader["env"]}
    gpus = int(leader["resources"]["limits"]["nvidia.com/gpu"])
    assert int(env["RANKS_PER_POD"]) == gpus == int(worker["resources"]["limits"]["nvidia.com/gpu"])
    timeout = int(flags["LATENTSERVE_RANK_TIMEOUT_S"])
    drain = int(flags["LATENTSERVE_DRAIN_TIMEOUT_S"])
    assert int(flags["LATENTSERVE_RANK_HEARTBEAT_MS"]) < 1000 * timeout
    assert int(env["MPI_KILL_TIMEOUT_S"]) > timeout + 5
    pre_stop = int(leader["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert leader_pod["terminationGracePeriodSeconds"] > drain + pre_stop
    # The ssh Secret both pods mount is the one docs/deploy.md tells how to make.
    with open(os.path.join(ROOT, "docs", "deploy.md")) as f:
        deploy_doc = f.read()
    for pod in (leader_pod, worker_pod):
        secrets = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
        assert secrets == ["latentserve-mpi-ssh"] and "latentserve-mpi-ssh" in deploy_doc


def test_lws_launcher_builds_the_group_from_the_leader_worker_set_environment():
    assert subprocess.run(["bash", "-n", LAUNCHER]).returncode == 0
    t = multinode_docs()["leaderworkerset.yaml"]["spec"]["leaderWorkerTemplate"]
    size = t["size"]
    env = {e["name"]: e["value"] for e in t["leaderTemplate"]["spec"]["containers"][0]["env"]}
    per_pod = int(env["RANKS_PER_POD"])
    run_env = {"PATH": os.environ["PATH"], "LWS_WORKER_INDEX": "0", "LWS_GROUP_SIZE": str(size),
               "LWS_LEADER_ADDRESS": "latentserve-3.latentserve.inference", "LWS_LAUNCH_DRY_RUN": "1",
               "TMPDIR": tempfile.mkdtemp(), "RANKS_PER_POD": str(per_pod), "LATENTSERVE_KV_CACHE_MB": "1024",
               "NCCL_DEBUG": "WARN", "UNRELATED": "x"}
    r = subprocess.run(["bash", LAUNCHER], env=run_env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    hosts = lines[:size]
    assert hosts[0] == f"latentserve-3.latentserve.inference slots={per_pod}"
    for i in range(1, size):
        assert hosts[i] == f"latentserve-3-{i}.latentserve.inference slots={per_pod}"
    cmd = lines[size]
    assert f"-np {size * per_pod}" in cmd and f"ppr:{per_pod}:node" in cmd
    assert "-x LATENTSERVE_KV_CACHE_MB" in cmd and "-x NCCL_DEBUG" in cmd and "UNRELATED" not in cmd
    assert cmd.rstrip().endswith("/usr/local/bin/latentserve")
    if shutil.which("ompi_info"):  # the Open MPI parameters it sets are real ones
        params = subprocess.run(["ompi_info", "--param", "all", "all", "--level", "9"], capture_output=True,
                                text=True).stdout
        for name in re.findall(r"--mca (\w+)", cmd):
            assert f'"{name}"' in params, name
    # A worker pod without the LeaderWorkerSet's environment is told what is missing.
    r = subprocess.run(["bash", LAUNCHER], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True)
    assert r.returncode != 0 and "LWS_WORKER_INDEX" in r.stderr
