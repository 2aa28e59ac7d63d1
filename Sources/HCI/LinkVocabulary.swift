// Vocabulary shared by the layers above HCI that talk about one LE link: L2CAP, ATT, GATT and
// the host. It lives here, beside `ConnectionHandle` and `LERole`, so that none of them needs
// L2CAP (or more) just to name a link's security or its parameters.

/// The security an LE link has (Core spec Vol 3 Part C §10.2.1, LE security mode 1). The ATT
/// server checks attribute permissions against it; SMP raises it.
public enum LESecurityLevel: Int, Comparable, Sendable {
    /// Level 1: no security.
    case noSecurity = 1
    /// Level 2: encrypted with an unauthenticated key (Just Works).
    case unauthenticatedEncryption = 2
    /// Level 3: encrypted with an authenticated key (passkey, OOB, numeric comparison).
    case authenticatedEncryption = 3
    /// Level 4: authenticated LE Secure Connections with a 128-bit key.
    case authenticatedSecureConnections = 4

    public static func < (a: LESecurityLevel, b: LESecurityLevel) -> Bool { a.rawValue < b.rawValue }
    public var isEncrypted: Bool { self >= .unauthenticatedEncryption }
}

/// Connection parameters as LE signalling carries them (units: 1.25 ms, events, 10 ms).
public struct ConnectionParameters: Hashable, Sendable {
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var latency: UInt16
    public var timeout: UInt16
    public init(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16) {
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.latency = latency
        self.timeout = timeout
    }

    /// The ranges of Vol 3 Part A §4.20 / Vol 4 Part E §7.8.18, and a timeout longer than
    /// (1 + latency) × interval × 2.
    public var isValid: Bool {
        (0x0006...0x0C80).contains(intervalMin) && (0x0006...0x0C80).contains(intervalMax) && intervalMin <= intervalMax
            && latency <= 0x01F3 && (0x000A...0x0C80).contains(timeout)
            && Int(timeout) * 10_000 > (1 + Int(latency)) * Int(intervalMax) * 1250 * 2
    }
}
