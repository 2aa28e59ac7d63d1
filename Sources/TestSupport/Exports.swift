// The Foundation-only helpers (tshark checks, loopback ports, temporary paths, waits) live in
// TestTools; re-exported so that tests importing TestSupport see them as before.
@_exported import TestTools
