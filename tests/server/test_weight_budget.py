"""latentserve --weight_budget_ranks: the weights each GPU of a planned rank group would hold, from
the checkpoint's shapes alone — the same figures from a shapes-only copy (every safetensors file cut
after its header) as from the full checkpoint, tensor parallelism dividing the split weights, and a
layout that cannot be built refused by name."""
import json
import os
import shutil
import struct
import subprocess

from conftest import BIN, MODEL


def budget(model, *flags):
    r = subprocess.run([BIN, "--model", model, *flags], capture_output=True, text=True, timeout=120)
    return r


def shapes_only_copy(src, dst):
    shutil.copytree(src, dst)
    for name in os.listdir(dst):
        if name.endswith(".safetensors"):
            path = os.path.join(dst, name)
            with open(path, "rb") as f:
                (header,) = struct.unpack("<Q", f.read(8))
            os.truncate(path, 8 + header)
    return dst


def test_budget_from_shapes_alone_splits_over_tensor_parallel_ranks(tmp_path):
    shapes = shapes_only_copy(MODEL, str(tmp_path / "tiny_shapes"))
    whole = budget(MODEL, "--weight_budget_ranks", "4")
    assert whole.returncode == 0, whole.stderr
    one = json.loads(whole.stdout)
    assert one["event"] == "weight_budget" and one["ranks"] == 4 and one["tensor_parallel_size"] == 1
    assert one["expert_slots"] == 16  # 64 experts over 4 ranks
    assert len(one["gpus"]) == 1
    split = budget(shapes, "--weight_budget_ranks", "4", "--tensor_parallel_size", "2", "--expert_slots", "18")
    assert split.returncode == 0, split.stderr
    two = json.loads(split.stdout)
    assert two["checkpoint_gb"] == one["checkpoint_gb"] and two["routed_experts_gb"] == one["routed_experts_gb"]
    assert [g["tensor_parallel_rank"] for g in two["gpus"]] == [0, 1]
    g0, g1 = two["gpus"]
    assert g0["non_expert_gb"] == g1["non_expert_gb"] < one["gpus"][0]["non_expert_gb"]
    # 18 slots per MoE layer instead of 16.
    assert abs(g0["expert_gb"] - 18 / 16 * one["gpus"][0]["expert_gb"]) < 1e-9
    assert abs(g0["total_gb"] - g0["non_expert_gb"] - g0["expert_gb"]) < 1e-9


def test_a_layout_that_cannot_be_built_is_refused_by_name():
    r = budget(MODEL, "--weight_budget_ranks", "3", "--tensor_parallel_size", "2")
    assert r.returncode != 0 and "--weight_budget_ranks 3 must be a positive multiple of --tensor_parallel_size 2" in r.stderr
    r = budget(MODEL, "--weight_budget_ranks", "2", "--expert_slots", "8")
    assert r.returncode != 0 and "--expert_slots 8 over 2 ranks hold 16 of the 64 experts" in r.stderr
    r = budget(MODEL, "--weight_budget_ranks", "3", "--tensor_parallel_size", "3")
    assert r.returncode != 0 and "--tensor_parallel_size 3: num_attention_heads 4 is not a multiple" in r.stderr
