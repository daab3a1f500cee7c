"""Expert parallelism through the real server: greedy text with 2 and 4 device workers and
background re-planning equals the default server's; device load, replica map and re-plan figures
appear in /metrics and GetExpertLoad; the placement in use can be dumped and loaded back;
--expert_placement auto plans the start from a calibration set or the model's own samples;
--replan_itl_budget_ms copies a re-plan between steps in chunks, each recorded."""
import json
import os
import tempfile

import grpc
import pytest
import requests

from conftest import Server

PROMPTS = ["In the beginning", "And the LORD spake unto Moses", "Blessed are they"]


def texts(s):
    return [requests.post(s.url + "/v1/completions", json={"prompt": p, "max_tokens": 16, "temperature": 0,
                                                           "ignore_eos": True}).json()["choices"][0]["text"]
            for p in PROMPTS]


def test_devices_and_replanning_keep_greedy_text(server, grpc_stubs):
    expected = texts(server)
    dump = os.path.join(tempfile.mkdtemp(), "placement.json")
    s = Server("--devices", "4", "--expert_slots", "18", "--replan_interval", "4", "--load_window", "32",
               "--expert_placement_dump", dump)
    try:
        assert texts(s) == expected
        assert texts(s) == expected
        # Re-plans run in the background and switch in before a later step: a slow host can finish
        # the requests first, so keep it stepping until one has switched in (the text stays the same).
        for _ in range(50):
            if s.metric("latentserve_expert_replans_total") >= 1:
                break
            assert texts(s) == expected
        metrics = requests.get(s.url + "/metrics").text
        assert "latentserve_expert_parallel_devices 4" in metrics
        assert "latentserve_device_load_max_over_mean{layer=" in metrics
        assert s.metric("latentserve_expert_replans_total") >= 1
        # Idle now: every switch copied the devices' whole share.
        assert s.metric("latentserve_expert_migration_bytes_total") == \
            s.metric("latentserve_expert_replans_total") * s.metric("latentserve_rank_expert_slot_bytes")
        assert s.metric("latentserve_expert_moved_slots_total") >= 0
        pb2, pb2_grpc = grpc_stubs
        load = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")).GetExpertLoad(
            pb2.GetExpertLoadRequest())
        assert load.num_devices == 4 and load.slots_per_device == 18
        assert len(load.layers[0].slot_expert) == 72 and len(load.layers[0].rows_per_device) == 4
        assert load.replans >= 1
    finally:
        s.stop()
    placement = json.load(open(dump))
    assert placement["num_devices"] == 4
    again = Server("--expert_placement", dump)
    try:
        assert texts(again) == expected
    finally:
        again.stop()


def test_replans_copied_between_steps_under_a_budget(server, grpc_stubs):
    expected = texts(server)
    s = Server("--devices", "4", "--expert_slots", "18", "--replan_interval", "4", "--load_window", "32",
               "--replan_itl_budget_ms", "0.000001")
    try:
        for _ in range(60):  # one slot a step: a switch takes as many steps as the devices have slots
            assert texts(s) == expected
            if s.metric("latentserve_expert_replans_total") >= 1:
                break
        assert s.metric("latentserve_expert_replans_total") >= 1
        s.settle_migration()  # the figures below are compared across several reads
        load = requests.get(s.url + "/v1/expert_load").json()
        slots = 4 * 18 * len(load["layers"])  # every slot of every MoE layer holds an expert
        assert load["replan_events"][0]["chunks"] == slots, "one slot per chunk"
        assert s.metric("latentserve_expert_migration_chunks_total") >= slots * s.metric(
            "latentserve_expert_replans_total")
        assert all(c["slots"] == 1 and c["bytes"] > 0 for c in load["migration_chunks"])
        assert s.metric("latentserve_expert_migration_seconds_total") > 0
        delay = s.metric("latentserve_expert_migration_step_delay_max_seconds")
        assert 0 < delay <= s.metric("latentserve_expert_migration_seconds_total")
        pb2, pb2_grpc = grpc_stubs
        reply = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")).GetExpertLoad(
            pb2.GetExpertLoadRequest())
        assert reply.migration_chunks_total == s.metric("latentserve_expert_migration_chunks_total")
        assert reply.migration_step_delay_max_seconds == pytest.approx(delay)
        assert reply.migration_seconds_total == pytest.approx(s.metric("latentserve_expert_migration_seconds_total"))
    finally:
        s.stop()


def test_bad_placement_flags_fail_clearly():
    import subprocess
    from conftest import BIN, MODEL
    r = subprocess.run([BIN, "--model", MODEL, "--devices", "2", "--expert_slots", "4", "--http_port", "0",
                        "--grpc_port", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "cannot hold 64 experts" in r.stderr
    r = subprocess.run([BIN, "--model", MODEL, "--expert_placement", "/nonexistent.json"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "--expert_placement" in r.stderr
    for flags, message in ((["--replan_itl_budget_ms", "-1", "--devices", "2", "--replan_interval", "4"],
                            "--replan_itl_budget_ms must be 0 or more"),
                           (["--replan_itl_budget_ms", "2", "--devices", "2"], "it needs --replan_interval")):
        r = subprocess.run([BIN, "--model", MODEL, "--http_port", "0", "--grpc_port", "0"] + flags,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and message in r.stderr, r.stderr


def _log_event(s, event):
    for line in s.logs().splitlines():
        if f'"event":"{event}"' in line:
            return json.loads(line)
    raise KeyError(event)


def test_auto_placement_is_planned_before_traffic(server, tmp_path):
    want = texts(server)
    calibration = tmp_path / "calibration.txt"
    calibration.write_text("In the beginning God created the heaven and the earth.\n\n"
                           "And God said, Let there be light: and there was light.\n")
    for extra, source, sequences in [((), "model_samples", 16),
                                     (("--calibration_prompts", str(calibration)), str(calibration), 2)]:
        s = Server("--devices", "2", "--expert_slots", "34", "--expert_placement", "auto", *extra)
        try:
            plan = _log_event(s, "expert_placement_plan")
            assert plan["source"] == source and plan["sequences"] == sequences and plan["tokens"] > sequences
            assert plan["max_tokens"] == 32, plan
            assert 0 < plan["seconds"] < 60, plan
            assert 1 <= plan["expected_device_max_over_mean"] < plan["uniform_expected_device_max_over_mean"], plan
            assert texts(s) == want, "a planned placement serves the same tokens"
            placement = requests.get(s.url + "/v1/expert_load").json()
            assert placement["num_devices"] == 2
        finally:
            s.stop()


def test_auto_placement_flags_fail_clearly(tmp_path):
    import subprocess
    from conftest import BIN, MODEL
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("In the beginning God created the heaven and the earth.\n")
    for args, message in [(("--expert_placement", "auto"), "--expert_placement auto needs --devices"),
                          (("--devices", "2", "--calibration_prompts", "x.txt"),
                           "--calibration_prompts plans the placement of --expert_placement auto only"),
                          (("--devices", "2", "--expert_placement", "auto", "--calibration_prompts",
                            str(tmp_path / "missing.txt")), str(tmp_path / "missing.txt")),
                          (("--devices", "2", "--expert_placement", "auto", "--calibration_max_tokens", "-1"),
                           "--calibration_max_tokens must not be negative"),
                          (("--devices", "2", "--expert_placement", "auto", "--calibration_prompts", str(prompts),
                            "--calibration_max_tokens", "256"),
                           "--calibration_max_tokens 256 leaves no room for a prompt")]:
        r = subprocess.run([BIN, "--model", MODEL, "--http_port", "0", "--grpc_port", "0", *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and message in r.stderr, (args, r.stderr)
