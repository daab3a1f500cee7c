"""Starts latentserve as a rank group under mpirun for the multi-rank integration tests.

Environment: LATENTSERVE_MPIRUN (mpirun; the tests skip without it, e.g. in a build without MPI),
LATENTSERVE_BIN, LATENTSERVE_TEST_MODEL, LATENTSERVE_PROTO_DIR as for tests/server. All ranks run
on this machine (oversubscribed: CI has two cores), one CPU thread each; as root in CI's container,
which Open MPI refuses unless told.
"""
import importlib.util
import os
import signal
import subprocess
import sys

import pytest

# The server tests' helpers (Server, the gRPC stubs fixture), loaded under a name of their own.
_spec = importlib.util.spec_from_file_location(
    "server_conftest", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server", "conftest.py"))
_server = importlib.util.module_from_spec(_spec)
sys.modules["server_conftest"] = _server
_spec.loader.exec_module(_server)
BIN, MODEL, ROOT, Server, grpc_stubs = _server.BIN, _server.MODEL, _server.ROOT, _server.Server, _server.grpc_stubs

MPIRUN = os.environ.get("LATENTSERVE_MPIRUN", "")
pytestmark = pytest.mark.skipif(not MPIRUN, reason="no mpirun: this build has no MPI (LATENTSERVE_MPIRUN unset)")


def mpi_env(extra=None):
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1",
                # A stopped group's ranks get SIGTERM only after this long (Open MPI waits it out
                # before signalling): longer than any deadline here, so the ranks end themselves.
                "OMPI_MCA_odls_base_sigkill_timeout": "15"})
    env.update(extra or {})
    return env


def launcher(ranks):
    # Under the guard (tools/mpirun_guard.sh): a group whose rank 0 dies cannot leave mpirun behind.
    guard = [os.environ["LATENTSERVE_MPIRUN_GUARD"]] if os.environ.get("LATENTSERVE_MPIRUN_GUARD") else []
    return guard + [MPIRUN, "--oversubscribe", "-np", str(ranks)]


class RankGroupServer(Server):
    """A server of `ranks` processes under mpirun; rank 0 writes the ready line (with its pid and
    the workers' pids). Stopped the way an orchestrator's launcher does: SIGTERM to rank 0, which
    drains, stops the workers and exits; mpirun then ends."""

    def __init__(self, ranks, *extra, model=None, env=None):
        # env: variables to add to mpi_env()'s.
        super().__init__("--threads", "1", *extra, launcher=launcher(ranks), env=mpi_env(env), model=model)
        self.ranks = ranks
        self.leader_pid = self.ready["pid"]
        self.worker_pids = {int(r): w["pid"] for r, w in self.ready["workers"].items()}

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.leader_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        super().stop()
