"""Checks the LE CoC peers against each other, Bumble to Bumble, so that a failure in the Swift
L2CAP channel interop tests is ours and not the scripts'. No Swift involved.

Usage: .venv/bin/python interop/peers/check_coc_peers.py
Runs each scenario with fresh linked controllers (bumble_controllers.py), a bumble_coc_server.py
and one or more runs of bumble_coc_client.py; prints "ok <scenario>" or the failing step with
the logs, then "<n> passed, <m> failed"; exits non-zero on any failure.
"""
import subprocess
import sys

from check_pairing_peers import Peer, free_port

SERVER_ADDRESS = "F0:C0:C0:C0:C0:81"


def client(port, *options, timeout=60):
    """One run of the client to its end: (exit code, lines)."""
    run = Peer("bumble_coc_client.py", f"tcp-client:127.0.0.1:{port}", *options)
    try:
        code = run.process.wait(timeout)
    except subprocess.TimeoutExpired:
        run.stop()
        raise AssertionError(f"client {' '.join(options)} did not end: {run.lines}") from None
    try:  # the rest of its output: DONE or FAILED is its last line
        run.wait("DONE" if code == 0 else "FAILED", timeout=5)
    except AssertionError:
        pass
    return code, run


def scenario(name, server_options, steps):
    ports = [free_port(), free_port()]
    peers = [Peer("bumble_controllers.py", *map(str, ports))]
    try:
        peers[0].wait("READY")
        server = Peer("bumble_coc_server.py", f"tcp-client:127.0.0.1:{ports[0]}", *server_options)
        peers.append(server)
        assert server.wait("READY") == f"READY {SERVER_ADDRESS}", server.lines

        def run_client(*options):
            code, run = client(ports[1], *options)
            peers.append(run)
            return code, run

        steps(server, run_client)
        print("ok", name, flush=True)
        return True
    except AssertionError as error:
        print("FAILED", name, error, flush=True)
        for peer in peers[1:]:
            print("  ---", " ".join(peer.process.args[2:]), *peer.lines, sep="\n  ")
        return False
    finally:
        for peer in peers:
            peer.stop()


def echoes(server, run, sizes, mtu, mps=64, server_mtu=512, server_mps=64):
    """Both sides saw the channel open with the other's parameters, every SDU, and its close."""
    assert run.lines[-1] == "DONE", run.lines
    assert f"OPENED mtu={server_mtu} mps={server_mps}" in run.lines, run.lines
    assert [line for line in run.lines if line.startswith("ECHO")] == [f"ECHO {size} ok" for size in sizes]
    assert "CLOSED" in run.lines
    server.wait(f"OPENED psm=0x0081 mtu={mtu} mps={mps}")
    server.wait("CLOSED")
    assert [line for line in server.lines if line.startswith("SDU")] == [f"SDU {size}" for size in sizes]
    assert not any(line.startswith("PDU-") for line in run.lines + server.lines)


def plain(server, run_client):
    code, run = run_client()
    assert code == 0, run.lines
    echoes(server, run, [1, 62, 63, 100, 512], mtu=512)
    assert not any(line.startswith("PAIRED") for line in server.lines)


def encrypted_after_pairing(server, run_client):
    code, run = run_client("--pair")
    assert code == 0, run.lines
    assert "PAIRED sc 0" in run.lines and "ENCRYPTED 1" in run.lines, run.lines
    assert server.wait("PAIRED") == "PAIRED sc 0"
    echoes(server, run, [1, 62, 63, 100, 512], mtu=512)


def unpaired_refused(server, run_client):
    code, run = run_client("--expect-refused", "0x0005")
    assert code == 0 and "REFUSED 0x0005" in run.lines, run.lines
    assert server.wait("REFUSED") == "REFUSED psm=0x0081 result=0x0005"
    assert not any(line.startswith("OPENED") for line in server.lines)


def bonded_unencrypted_refused(server, run_client):
    """The server keeps the first run's bond; the second run (a fresh keystore, so it cannot
    encrypt) comes from the same address without pairing: Insufficient Encryption."""
    code, run = run_client("--pair", "--sizes", "1")
    assert code == 0, run.lines
    code, run = run_client("--expect-refused", "0x0008")
    assert code == 0 and "REFUSED 0x0008" in run.lines, run.lines
    assert server.wait("REFUSED") == "REFUSED psm=0x0081 result=0x0008"


def unknown_psm(server, run_client):
    code, run = run_client("--psm", "0x0083", "--expect-refused", "0x0002")
    assert code == 0 and "REFUSED 0x0002" in run.lines, run.lines


def large_sdus_in_a_burst(server, run_client):
    """SDUs up to 3000 bytes (47 PDUs of 64) sent all at once with 3 credits each way."""
    sizes = [1, 100, 700, 3000]
    code, run = run_client("--sizes", ",".join(map(str, sizes)), "--burst", "--credits", "3")
    assert code == 0, run.lines
    echoes(server, run, sizes, mtu=3000, server_mtu=4096)


def too_large_for_the_peer(server, run_client):
    code, run = run_client("--sizes", "513")
    assert code == 1 and run.lines[-1] == "FAILED size 513 above the peer's MTU 512", run.lines
    assert not any(line.startswith("SDU") for line in server.lines)


if __name__ == "__main__":
    results = [
        scenario("plain echo, MTU 512 MPS 64", [], plain),
        scenario("--encrypt after --pair (Just Works, SC)", ["--encrypt"], encrypted_after_pairing),
        scenario("--encrypt, unpaired: refused 0x0005", ["--encrypt"], unpaired_refused),
        scenario("--encrypt, bonded but unencrypted: refused 0x0008", ["--encrypt"], bonded_unencrypted_refused),
        scenario("unknown PSM: refused 0x0002", [], unknown_psm),
        scenario("SDUs up to 3000 bytes in a burst, 3 credits", ["--mtu", "4096", "--credits", "3"],
                 large_sdus_in_a_burst),
        scenario("SDU above the peer's MTU: client fails", [], too_large_for_the_peer),
    ]
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed", flush=True)
    sys.exit(0 if all(results) else 1)
