import Bonding
import Foundation
import HCI
import Logging
import LogTesting
import SMP

/// A fresh directory under the system's temporary directory, removed with its contents when
/// released. Stores go in `store`, a subdirectory they make themselves.
final class TemporaryDirectory {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("bonding-tests-\(UUID().uuidString)")
    var store: URL { url.appendingPathComponent("store") }

    init() throws { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false) }

    deinit { try? FileManager.default.removeItem(at: url) }
}

/// Lines a store logged, through a capturing log handler.
final class LogLines: Sendable {
    let capture = LogCapture()
    var lines: [String] { capture.records.map(\.message) }
    /// The store's logger (`corebluetooth.smp`), recording here.
    var logger: Logger { capture.logger(.smp) }
}

enum Fixture {
    static let controller = LEAddress(.publicDevice, BluetoothAddress("C0:FF:EE:00:00:01")!)
    static let peer = LEAddress(.publicDevice, BluetoothAddress("00:1B:DC:00:00:02")!)
    static let randomPeer = LEAddress(.randomDevice, BluetoothAddress("D0:00:00:00:00:03")!)

    static func randomKey() -> [UInt8] { (0..<16).map { _ in UInt8.random(in: 0...255) } }

    static func ltk(authenticated: Bool = true, secureConnections: Bool = true, keySize: Int = 16) -> SMPLongTermKey {
        SMPLongTermKey(key: randomKey(), ediv: secureConnections ? 0 : 0x1234,
                       rand: secureConnections ? 0 : 0xFEDC_BA98_7654_3210, keySize: keySize,
                       authenticated: authenticated, secureConnections: secureConnections)
    }

    /// A bonded pairing's outcome with `ltk` both ways, as LE Secure Connections gives it.
    static func outcome(_ ltk: SMPLongTermKey, identity: LEAddress? = nil, irk: [UInt8]? = nil) -> PairingOutcome {
        var outcome = PairingOutcome(method: ltk.authenticated ? .numericComparison : .justWorks,
                                     linkKeySecurity: ltk.securityLevel, keySize: ltk.keySize, bonded: true)
        outcome.centralLTK = ltk
        outcome.peripheralLTK = ltk
        outcome.peerIdentityAddress = identity
        outcome.peerIRK = irk
        return outcome
    }

    /// A bond with every field set.
    static func fullBond(_ peer: LEAddress = peer) -> Bond {
        var bond = Bond(peerIdentity: peer)
        bond.peerIRK = randomKey()
        bond.centralLTK = ltk()
        bond.peripheralLTK = ltk(authenticated: false, secureConnections: false, keySize: 7)
        bond.peerCSRK = randomKey()
        bond.peerSignCounter = 41
        bond.localCSRK = randomKey()
        bond.localSignCounter = 0xFFFF_FFFE
        bond.cccdValues = [0x0012: 0x0001, 0x002A: 0x0002, 0xFFFF: 0x0003]
        bond.serviceChangedPending = true
        bond.peerDatabaseHash = randomKey()
        return bond
    }
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
