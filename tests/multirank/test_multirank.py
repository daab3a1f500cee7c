"""A rank group serves like one process: latentserve under `mpirun -np 2` and `-np 4` on this
machine gives the single-process server's greedy text over HTTP (plain and streamed) and gRPC, on
the shipped tiny model (also with a draft model speculating) and on the Kimi-Linear fixture (KDA
state and MLA cache on every rank, eight experts over the ranks; also speculating, the recurrent
state taken back after rejections) and on DeepSeek-V3 with its MTP layer drafting from every rank's
hidden rows, with hot experts replicated into spare slots and re-plans
switched in while requests run; /metrics shows the ranks and each rank's expert memory."""
import concurrent.futures
import json
import os

import grpc
import pytest
import requests

from conftest import MODEL, ROOT, RankGroupServer, Server

PROMPTS = ["In the beginning", "And the LORD spake unto Moses", "Blessed are they", "Who made the heaven?"]
KIMI = os.path.join(ROOT, "tests", "data", "hf", "kimi_linear_bf16")
DSV3_MTP = os.path.join(ROOT, "tests", "data", "hf", "deepseek_v3_mtp_f32")
ID_PROMPTS = [[5, 17, 200, 3], [9, 9, 41, 250, 7, 77, 1], [100], [33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43]]


def complete(s, prompt, max_tokens=16):
    r = requests.post(s.url + "/v1/completions", json={"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                                                       "ignore_eos": True}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["text"]


def complete_ids(s, prompt, max_tokens=12):
    r = requests.post(s.url + "/v1/completions", json={"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                                                       "ignore_eos": True, "return_tokens_as_token_ids": True,
                                                       "logprobs": 0}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["logprobs"]["tokens"]


def streamed(s, prompt):
    text = ""
    with requests.post(s.url + "/v1/completions", json={"prompt": prompt, "max_tokens": 16, "temperature": 0,
                                                        "ignore_eos": True, "stream": True},
                       stream=True, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                text += json.loads(line[6:])["choices"][0]["text"]
    return text


def grpc_text(s, stubs, prompt):
    pb2, pb2_grpc = stubs
    stub = pb2_grpc.GenerationServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
    req = pb2.GenerateRequest(text=prompt, sampling=pb2.SamplingParams(max_tokens=16, temperature=0, ignore_eos=True))
    return "".join(r.text for r in stub.Generate(req, timeout=120))


def all_texts(s, stubs):
    return {"http": [complete(s, p) for p in PROMPTS], "stream": [streamed(s, p) for p in PROMPTS[:2]],
            "grpc": [grpc_text(s, stubs, p) for p in PROMPTS[:2]]}


@pytest.fixture(scope="module")
def expected(grpc_stubs):
    s = Server()
    try:
        return all_texts(s, grpc_stubs)
    finally:
        s.stop()


def _log_event(s, event):
    for line in s.logs().splitlines():
        if f'"event":"{event}"' in line:
            return json.loads(line)
    raise KeyError(event)


def test_auto_placement_of_a_rank_group_is_planned_before_it_serves(expected, grpc_stubs, tmp_path):
    # --expert_placement auto over two ranks: the calibration set (the model's own samples, or a
    # file) runs through the group before the ready line, the group switches to the placement
    # planned from its load, the window starts afresh, and the text is the single process's.
    calibration = tmp_path / "calibration.txt"
    calibration.write_text("In the beginning God created the heaven and the earth.\n\n"
                           "And God said, Let there be light: and there was light.\n")
    for extra, source, sequences in [((), "model_samples", 16),
                                     (("--calibration_prompts", str(calibration)), str(calibration), 2)]:
        s = RankGroupServer(2, "--expert_slots", "34", "--expert_placement", "auto", *extra)
        try:
            plan = _log_event(s, "expert_placement_plan")
            assert plan["source"] == source and plan["sequences"] == sequences and plan["tokens"] > sequences, plan
            assert plan["max_tokens"] == 32, plan
            assert 0 < plan["seconds"] < 120, plan
            assert 1 <= plan["expected_device_max_over_mean"] < plan["uniform_expected_device_max_over_mean"], plan
            assert s.metric("latentserve_expert_replans_total") == 1, "the planned placement switched in"
            assert requests.get(s.url + "/v1/expert_load").json()["window"]["steps"] == 0, "the window starts afresh"
            assert all_texts(s, grpc_stubs) == expected
        finally:
            s.stop()
        assert s.proc.returncode == 0


@pytest.mark.parametrize("ranks", [2, 4])
def test_rank_group_serves_the_single_process_greedy_text(ranks, expected, grpc_stubs):
    # 64 experts over the ranks with two spare slots per rank (hot experts replicated), re-planned
    # every 3 steps from the last 8 steps' load: re-plans switch in while these requests run.
    slots = 64 // ranks + 2
    s = RankGroupServer(ranks, "--expert_slots", str(slots), "--replan_interval", "3", "--load_window", "8")
    try:
        assert s.ready["ranks"] == ranks and len(s.worker_pids) == ranks - 1
        assert len(s.ready["rank_expert_slot_bytes"]) == ranks and min(s.ready["rank_expert_slot_bytes"]) > 0
        assert all_texts(s, grpc_stubs) == expected
        # Re-plans switch in before a later step; a slow host may finish the requests first.
        for _ in range(20):
            if s.metric("latentserve_expert_replans_total") >= 1:
                break
            assert all_texts(s, grpc_stubs) == expected
        assert s.metric("latentserve_expert_replans_total") >= 1, "a re-plan switched in mid-run"
        assert all_texts(s, grpc_stubs) == expected, "the same after re-planning"
        assert s.metric("latentserve_ranks") == ranks
        assert s.metric("latentserve_expert_parallel_devices") == ranks
        metrics = requests.get(s.url + "/metrics").text
        held = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                if line.startswith("latentserve_rank_expert_slot_bytes{")]
        redundant = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                     if line.startswith("latentserve_rank_redundant_expert_slot_bytes{")]
        assert len(held) == ranks and min(held) > 0, "every rank holds experts"
        assert len(redundant) == ranks and sum(redundant) > 0, "the spare slots hold replicas"
        assert max(redundant) < max(held)
    finally:
        s.stop()
    assert s.proc.returncode == 0, "an orderly stop of the leader stops the group cleanly"


def test_rank_group_with_a_draft_model_serves_the_single_process_greedy_text(expected, grpc_stubs):
    # The draft model runs on the leader beside the scheduler; the verifying steps run on every rank.
    spec = {"method": "draft_model", "model": MODEL, "num_speculative_tokens": 3}
    s = RankGroupServer(2, "--expert_slots", "33", "--speculative_config", json.dumps(spec))
    try:
        assert s.ready["ranks"] == 2 and s.ready["speculative"]["method"] == "draft_model"
        assert all_texts(s, grpc_stubs) == expected
        assert s.metric("latentserve_spec_decode_num_accepted_tokens_total") > 0
    finally:
        s.stop()
    assert s.proc.returncode == 0


@pytest.fixture(scope="module")
def kimi_expected():
    s = Server(model=KIMI)
    try:
        return [complete_ids(s, p) for p in ID_PROMPTS]
    finally:
        s.stop()


def test_kimi_linear_over_ranks_speculates_with_the_single_process_tokens(kimi_expected):
    # Each rank keeps its sequences' spare state slots; the state copies travel with the steps.
    s = RankGroupServer(2, "--expert_slots", "5", "--speculative_config",
                        '{"method": "ngram", "num_speculative_tokens": 3}', model=KIMI)
    try:
        assert [complete_ids(s, p) for p in ID_PROMPTS] == kimi_expected
        assert s.metric("latentserve_spec_decode_num_draft_tokens_total") > 0
    finally:
        s.stop()


@pytest.mark.parametrize("ranks", [2, 4])
def test_kimi_linear_over_ranks_gives_the_single_process_tokens(ranks, kimi_expected):
    s = RankGroupServer(ranks, "--expert_slots", str(8 // ranks + 1), "--replan_interval", "2", "--load_window",
                        "4", model=KIMI)
    try:
        assert [complete_ids(s, p) for p in ID_PROMPTS] == kimi_expected
        for _ in range(20):  # until a re-plan has switched in (a slow host may finish first)
            if s.metric("latentserve_expert_replans_total") >= 1:
                break
            assert [complete_ids(s, p) for p in ID_PROMPTS] == kimi_expected
        assert s.metric("latentserve_expert_replans_total") >= 1
        assert [complete_ids(s, p) for p in ID_PROMPTS] == kimi_expected
    finally:
        s.stop()


def test_mtp_over_ranks_drafts_from_every_ranks_hidden_rows():
    # The MTP layer drafts on the leader from the hidden rows each rank sends back with its logits.
    plain = Server(model=DSV3_MTP)
    try:
        want = [complete_ids(plain, p) for p in ID_PROMPTS]
    finally:
        plain.stop()
    s = RankGroupServer(2, "--expert_slots", "5", "--speculative_config",
                        '{"method": "mtp", "num_speculative_tokens": 3}', model=DSV3_MTP)
    try:
        assert s.ready["speculative"]["method"] == "mtp"
        with concurrent.futures.ThreadPoolExecutor(len(ID_PROMPTS)) as pool:  # together: over both ranks
            assert list(pool.map(lambda p: complete_ids(s, p), ID_PROMPTS)) == want
        assert s.metric("latentserve_spec_decode_num_draft_tokens_total") > 0
    finally:
        s.stop()
    assert s.proc.returncode == 0



@pytest.mark.parametrize("ranks", [2, 4])
def test_tensor_parallel_groups_serve_the_single_process_greedy_text(ranks, expected, grpc_stubs):
    # Groups of two ranks split the heads, the shared experts' width and the vocabulary; with four
    # ranks two such groups take sequences side by side. The experts stay placed over every rank.
    s = RankGroupServer(ranks, "--tensor_parallel_size", "2", "--expert_slots", str(64 // ranks + 2))
    try:
        assert s.ready["tensor_parallel_size"] == 2 and s.ready["ranks"] == ranks // 2
        assert len(s.worker_pids) == ranks - 1
        assert len(s.ready["rank_expert_slot_bytes"]) == ranks and min(s.ready["rank_expert_slot_bytes"]) > 0
        with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:  # together: over both groups
            texts = list(pool.map(lambda p: complete(s, p), PROMPTS))
        assert texts == expected["http"]
        assert all_texts(s, grpc_stubs) == expected
        assert s.metric("latentserve_ranks") == ranks // 2
    finally:
        s.stop()
    assert s.proc.returncode == 0


def test_tensor_parallel_size_that_does_not_divide_the_group_is_refused():
    # Every rank refuses the flag and exits at once, so mpirun need not wait for any to end itself.
    with pytest.raises(Exception) as failed:
        RankGroupServer(2, "--tensor_parallel_size", "4", env={"OMPI_MCA_odls_base_sigkill_timeout": "0"})
    assert "--tensor_parallel_size 4 does not divide the group's 2 ranks" in str(failed.value)


def test_tensor_parallel_kimi_linear_gives_the_single_process_tokens(kimi_expected):
    # KDA heads (and each sequence's recurrent state) and MLA heads split over two ranks; the MLA
    # latent cache whole on both.
    s = RankGroupServer(2, "--tensor_parallel_size", "2", "--expert_slots", "5", model=KIMI)
    try:
        assert s.ready["tensor_parallel_size"] == 2
        assert [complete_ids(s, p) for p in ID_PROMPTS] == kimi_expected
    finally:
        s.stop()
    assert s.proc.returncode == 0


def test_tensor_parallel_group_with_an_mtp_layer_gives_the_single_process_tokens():
    # DeepSeek-V3's MLA heads split over two ranks; its MTP layer drafts whole on the leader from
    # the hidden rows the group returns.
    plain = Server(model=DSV3_MTP)
    try:
        want = [complete_ids(plain, p) for p in ID_PROMPTS]
    finally:
        plain.stop()
    s = RankGroupServer(2, "--tensor_parallel_size", "2", "--expert_slots", "5", "--speculative_config",
                        '{"method": "mtp", "num_speculative_tokens": 3}', model=DSV3_MTP)
    try:
        assert s.ready["tensor_parallel_size"] == 2 and s.ready["speculative"]["method"] == "mtp"
        assert [complete_ids(s, p) for p in ID_PROMPTS] == want
        assert s.metric("latentserve_spec_decode_num_draft_tokens_total") > 0
    finally:
        s.stop()
    assert s.proc.returncode == 0
