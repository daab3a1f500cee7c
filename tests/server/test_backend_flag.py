"""The --backend switch of the server: unknown names and backends this build or machine cannot
provide fail at start with a message naming the backend."""
import subprocess

from conftest import BIN, MODEL


def start(*flags):
    return subprocess.run([BIN, "--model", MODEL, "--http_port", "0", "--grpc_port", "0", *flags],
                          capture_output=True, text=True, timeout=60)


def test_unknown_backend_is_named():
    r = start("--backend", "tpu")
    assert r.returncode != 0
    assert "unknown --backend 'tpu'" in r.stderr and "cpu" in r.stderr


def test_cuda_backend_fails_clearly_without_kernels_or_device():
    p = subprocess.Popen([BIN, "--model", MODEL, "--http_port", "0", "--grpc_port", "0", "--backend", "cuda"],
                         stderr=subprocess.PIPE, text=True)
    try:
        _, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # a CUDA build with a device serves: that is the other outcome
        p.terminate()
        p.communicate(timeout=30)
        return
    assert p.returncode != 0
    assert "--backend cuda" in err and ("no CUDA kernels" in err or "device" in err), err


def test_activation_types_the_cuda_backend_lacks_are_refused_by_name():
    # Checked before any device is looked for, so the message is the same with and without one.
    for dtype in ("float32", "int8"):
        r = start("--backend", "cuda", "--activation_dtype", dtype)
        assert r.returncode != 0
        assert f"--activation_dtype {dtype} is not available on --backend cuda" in r.stderr, r.stderr
