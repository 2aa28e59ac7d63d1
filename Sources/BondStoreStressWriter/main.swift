import Bonding
import Foundation
import HCI
import SMP
import StackLogging

// BondStoreStressWriter <directory> [<versions>]
//
// Rewrites the bond store of controller 00:11:22:33:44:55 in <directory> as fast as it can,
// each version complete before the next, until killed (or after <versions> versions), for
// BondingTests' kill -9 test. Version g stores one bond, with peer 00:00:00:00:00:0(g % 3),
// every field of which follows from g (the test checks each bond it loads against the same
// rule), and a CCCD count that varies with g so that the file's length changes. It continues
// from the highest version in the store it finds.

// BondStoreStressWriter identifiers <file> <tag> <count>
//
// Gives <count> devices identifiers in the identifier store <file>, devices
// <tag>:00:00:00:HI:LO (public; <tag> 0–255 tells the writers apart), writing after every
// few, for BondingTests' test of two processes writing one store at once. Prints each device's
// address and identifier, one per line, at the end.

let arguments = CommandLine.arguments
// The stores' warnings and errors on standard error, whatever CB_LOG says.
StackLogging.bootstrapStandardError()
let storeLogger = StackLogging(level: .warning).logger(.smp)
if arguments.count == 5, arguments[1] == "identifiers", let tag = UInt64(arguments[3]), tag < 256, let count = Int(arguments[4]) {
    let store = IdentifierStore(fileURL: URL(fileURLWithPath: arguments[2]), logger: storeLogger)
    var lines: [String] = []
    for n in 0..<UInt64(count) {
        let address = LEAddress(.publicDevice, BluetoothAddress(value: tag << 40 | n))
        lines.append("\(address.address) \(store.assignIdentifier(for: address).uuidString)")
        if n % 4 == 3 { store.flush() }
    }
    store.flush()
    print(lines.joined(separator: "\n"))
    exit(0)
}
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: BondStoreStressWriter <directory> [<versions>]\n".utf8))
    exit(2)
}
let limit = arguments.count >= 3 ? Int(arguments[2]) ?? .max : .max

let controller = LEAddress(.publicDevice, BluetoothAddress("00:11:22:33:44:55")!)
let store = try BondStore(controllerIdentity: controller, directory: URL(fileURLWithPath: arguments[1]), logger: storeLogger)
_ = store.localIRK

func bond(version g: UInt32) -> Bond {
    var bond = Bond(peerIdentity: LEAddress(.publicDevice, BluetoothAddress(value: UInt64(g % 3))))
    bond.peerSignCounter = g
    bond.localSignCounter = g &* 2_654_435_761
    bond.serviceChangedPending = g % 2 == 1
    bond.peerDatabaseHash = (0..<16).map { UInt8(truncatingIfNeeded: g >> ($0 % 4 * 8)) }
    for h in 0..<UInt16(g % 40) { bond.cccdValues[0x100 + h] = UInt16(truncatingIfNeeded: g) &+ h }
    bond.centralLTK = SMPLongTermKey(key: [UInt8](repeating: 0x5A, count: 16), ediv: 0, rand: 0, keySize: 16,
                                     authenticated: true, secureConnections: true)
    return bond
}

var version = store.bonds.map(\.peerSignCounter).max() ?? 0
for _ in 0..<limit {
    version += 1
    try store.store(bond(version: version))
    store.flush()
}
print(version)
