"""RootCanal (PyPI rootcanal==1.10.0) on the given loopback TCP ports.

Usage: python rootcanal_server.py HCI_PORT LINK_PORT LE_LINK_PORT TEST_PORT
Every connection to HCI_PORT is a new controller on one shared radio. Prints RootCanal's log
and READY once it has finished initialising (a probe of its ports would not do: a connection
to the HCI port makes a controller, and one to the test port that closes at once kills it).
Runs until killed, taking RootCanal down with it.
"""
import ctypes
import signal
import subprocess
import sys

import rootcanal.binaries

hci, link, le_link, test = sys.argv[1:5]
process = subprocess.Popen([rootcanal.binaries.get_package_binary_resource_path("rootcanal"),
                            f"-hci_port={hci}", f"-link_port={link}", f"-link_ble_port={le_link}",
                            f"-test_port={test}"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           # RootCanal dies with this process, even when it is SIGKILLed.
                           preexec_fn=lambda: ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL))
try:
    for line in process.stdout:
        print(line, end="", flush=True)
        if "initialize: Finished" in line:
            print("READY", flush=True)
    process.wait()
finally:
    process.kill()
