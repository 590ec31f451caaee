"""The daemon through a client that is not ours (Python grpcio, stubs generated
from crates/daemon/proto by grpcio-tools): starts `cuzk serve` with the synthetic
kind on a Unix socket and on a loopback port, calls every RPC, kills a client in
the middle of a Prove, and stops the daemon with SIGTERM (it must exit 0).

Usage: python grpc_client_test.py path/to/cuzk  (scripts/ci-python-grpc.sh runs it)
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import grpc
from cuzk.v1 import proving_pb2 as pb
from cuzk.v1 import proving_pb2_grpc as rpc
from grpc_checks import FAILED, PASSED, check

CUZK = sys.argv[1]



def synthetic(log, partitions, seed, **kw):
    spec = {"circuit": "mul", "log": log, "partitions": partitions, "seed": seed}
    return pb.SubmitProofRequest(
        proof_kind=pb.SYNTHETIC, vanilla_proof=json.dumps(spec).encode(), **kw
    )


def start_daemon(listen, workdir):
    cfg = os.path.join(workdir, "cuzk.toml")
    params = os.path.join(tempfile.gettempdir(), "cuzk-daemon-test-params")
    with open(cfg, "w") as f:
        f.write(
            "[engine]\nsynth_jobs = 2\nsynth_threads = 2\ngpu_threads = 1\n"
            "memory_budget_gib = 1.0\n"
            f'[daemon]\nlisten = "{listen}"\nsynthetic = true\nparam_cache = "{params}"\n'
        )
    p = subprocess.Popen(
        [CUZK, "serve", "--config", cfg], stdout=subprocess.PIPE, text=True
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        line = p.stdout.readline()
        if line.startswith("listening on "):
            return p, line.split(" ", 2)[2].strip()
        if not line and p.poll() is not None:
            raise RuntimeError(f"cuzk serve exited with {p.returncode}")
    raise RuntimeError("cuzk serve did not report its address")


def target(addr):
    """grpcio takes `unix:///path` and `host:port` as they are."""
    return addr


def channel_options(addr):
    """grpcio (C-core) sends the socket path as HTTP/2 :authority on a Unix socket,
    which the daemon's HTTP/2 stack (h2) rejects as malformed; grpc-go (Curio)
    sends `localhost`, as does every tonic client. Say `localhost` here too."""
    opts = [("grpc.max_send_message_length", 256 << 20), ("grpc.max_receive_message_length", 256 << 20)]
    if addr.startswith("unix://"):
        opts.append(("grpc.default_authority", "localhost"))
    return opts


def status(stub):
    return stub.GetStatus(pb.GetStatusRequest(), timeout=30)


def wait_until(stub, what, pred, limit=300):
    deadline = time.time() + limit
    while time.time() < deadline:
        s = status(stub)
        if pred(s):
            return s
        time.sleep(0.05)
    raise AssertionError(f"status never showed {what}: {s}")


def idle(s):
    return all(q.pending == 0 and q.in_progress == 0 for q in s.queues) and s.pinned_memory_bytes == 0


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no metric {name}")


def suite(listen, label):
    work = tempfile.mkdtemp()
    daemon, addr = start_daemon(listen, work)
    try:
        channel = grpc.insecure_channel(target(addr), options=channel_options(addr))
        stub = rpc.ProvingEngineStub(channel)

        def prove():
            r = stub.Prove(pb.ProveRequest(submit=synthetic(10, 2, 11)), timeout=300).result
            assert r.status == pb.AwaitProofResponse.COMPLETED, r
            assert len(r.proof) == 2 * 192, len(r.proof)
            assert r.total_ms >= 0 and r.job_id

        def submit_await():
            s = stub.SubmitProof(synthetic(10, 1, 12, request_id=f"py-{label}"), timeout=60)
            assert s.job_id == f"py-{label}", s
            r = stub.AwaitProof(pb.AwaitProofRequest(job_id=s.job_id, timeout_ms=0), timeout=300)
            assert r.status == pb.AwaitProofResponse.COMPLETED, r
            assert len(r.proof) == 192

        def errors():
            for req, code in [
                (pb.SubmitProofRequest(), grpc.StatusCode.INVALID_ARGUMENT),
                (synthetic(40, 1, 1), grpc.StatusCode.INVALID_ARGUMENT),
                # A WinningPoSt without randomness or vanilla proofs.
                (pb.SubmitProofRequest(proof_kind=pb.WINNING_POST), grpc.StatusCode.INVALID_ARGUMENT),
            ]:
                try:
                    stub.SubmitProof(req, timeout=30)
                    raise AssertionError(f"{req} was accepted")
                except grpc.RpcError as e:
                    assert e.code() == code, (e.code(), e.details())
            try:
                stub.AwaitProof(pb.AwaitProofRequest(job_id="nope"), timeout=30)
                raise AssertionError("unknown job awaited")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.NOT_FOUND, e.code()
            raw = channel.unary_unary("/cuzk.v1.ProvingEngine/SubmitProof")
            try:
                raw(b"\xff" * 64, timeout=30)
                raise AssertionError("random bytes accepted")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()

        def winning_post():
            # A real 2 KiB WinningPoSt: vanilla proof made by `cuzk post winning inputs`
            # (a sector sealed and challenged by filecoin-proofs), proven through Prove
            # as Curio sends it, checked by filecoin-proofs (`verify`).
            params = os.path.join(tempfile.gettempdir(), "cuzk-daemon-test-params")
            subprocess.run([CUZK, "params", "gen", "--kind", "winning", "--proof", "0",
                            "--param-cache", params], check=True, stdout=subprocess.DEVNULL)
            inp = os.path.join(work, "winning.json")
            subprocess.run([CUZK, "post", "winning", "inputs", "-o", inp], check=True,
                           stdout=subprocess.DEVNULL)
            with open(inp) as f:
                w = json.load(f)
            req = pb.SubmitProofRequest(
                proof_kind=pb.WINNING_POST, registered_proof=0, miner_id=w["miner_id"],
                randomness=bytes.fromhex(w["randomness"]),
                vanilla_proofs=[bytes.fromhex(v) for v in w["vanilla_proofs"]])
            r = stub.Prove(pb.ProveRequest(submit=req), timeout=300).result
            assert r.status == pb.AwaitProofResponse.COMPLETED, r
            assert len(r.proof) == 192, len(r.proof)
            proof = os.path.join(work, "winning.proof")
            with open(proof, "wb") as f:
                f.write(r.proof)
            subprocess.run([CUZK, "post", "winning", "verify", "-i", inp, "--proof-file", proof,
                            "--param-cache", params], check=True, stdout=subprocess.DEVNULL)
            bad = pb.SubmitProofRequest(
                proof_kind=pb.WINNING_POST, registered_proof=0, miner_id=w["miner_id"],
                randomness=bytes.fromhex(w["randomness"]), vanilla_proofs=[b"\x01" * 50])
            try:
                stub.SubmitProof(bad, timeout=30)
                raise AssertionError("undecodable vanilla proof accepted")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (e.code(), e.details())

        def killed_client():
            # A separate process calls Prove and is killed mid-call; the daemon
            # must end with no job and no memory held (cancelled, or finished and
            # freed), and keep serving.
            code = (
                "import sys, json, grpc\n"
                "from cuzk.v1 import proving_pb2 as pb, proving_pb2_grpc as rpc\n"
                f"stub = rpc.ProvingEngineStub(grpc.insecure_channel({target(addr)!r}, options={channel_options(addr)!r}))\n"
                "spec = json.dumps({'circuit':'mul','log':14,'partitions':4,'seed':5}).encode()\n"
                "stub.Prove(pb.ProveRequest(submit=pb.SubmitProofRequest(proof_kind=pb.SYNTHETIC, vanilla_proof=spec)))\n"
            )
            child = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ))
            wait_until(stub, "the job admitted", lambda s: any(q.in_progress for q in s.queues) or child.poll() is not None)
            child.kill()
            child.wait()
            s = wait_until(stub, "an idle daemon", idle)
            m = stub.GetMetrics(pb.GetMetricsRequest(), timeout=30).prometheus_text
            assert metric(m, "cuzk_results_waiting") == 0, m
            assert s.pinned_memory_bytes == 0

        def status_and_metrics():
            s = wait_until(stub, "an idle daemon", idle)
            assert s.total_proofs_completed >= 2, s
            assert any(p.circuit_id == "synthetic-mul-10" and p.size_bytes > 0 for p in s.loaded_srs), s
            m = stub.GetMetrics(pb.GetMetricsRequest(), timeout=30).prometheus_text
            for name in ["cuzk_proofs_completed_total", "cuzk_proofs_failed_total", "cuzk_uptime_seconds",
                         "cuzk_queue_depth", "cuzk_running_jobs", "cuzk_gpu_workers"]:
                metric(m, name)
            assert 'cuzk_stage_seconds_count{stage="gpu"}' in m

        def preload_evict():
            r = stub.PreloadSRS(pb.PreloadSRSRequest(circuit_id="synthetic-mul-10"), timeout=120)
            assert r.already_loaded
            e = stub.EvictSRS(pb.EvictSRSRequest(circuit_id="synthetic-mul-10"), timeout=30)
            assert e.was_loaded and e.freed_bytes > 0, e
            e = stub.EvictSRS(pb.EvictSRSRequest(circuit_id="synthetic-mul-10"), timeout=30)
            assert not e.was_loaded and e.freed_bytes == 0, e

        for name, fn in [("prove", prove), ("submit+await", submit_await), ("errors", errors),
                         ("winning post", winning_post),
                         ("killed client", killed_client), ("status+metrics", status_and_metrics),
                         ("preload+evict", preload_evict)]:
            check(f"{label}: {name}", fn)
        channel.close()
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            rc = daemon.wait(timeout=300)
        except subprocess.TimeoutExpired:
            daemon.kill()
            rc = "killed after 300 s"
    def exited_cleanly():
        assert rc == 0, f"cuzk serve exited with {rc}"

    check(f"{label}: SIGTERM exits 0", exited_cleanly)


suite("unix://" + os.path.join(tempfile.mkdtemp(), "cuzk.sock"), "unix")
suite("127.0.0.1:0", "tcp")
print(f"python grpc client: {len(PASSED)} passed, {len(FAILED)} failed")
sys.exit(1 if FAILED else 0)
