@testable import Bonding
import Foundation
import HCI
import LECrypto
import SMP
import Testing

#if canImport(Glibc)
import Glibc
#endif

struct BondStoreTests {
    @Test func bondsAndTheLocalIRKSurviveAReload() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        let bond = Fixture.fullBond()
        let other = Fixture.fullBond(Fixture.randomPeer)
        try store.store(bond)
        try store.store(other)
        let irk = store.localIRK
        store.flush()

        let reloaded = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        #expect(reloaded.bonds.count == 2)
        #expect(reloaded.bond(for: Fixture.peer) == bond)
        #expect(reloaded.bond(for: Fixture.randomPeer) == other)
        #expect(reloaded.localIRK == irk)
        #expect(reloaded.fileURL!.lastPathComponent == "bonds-C0FFEE000001.json")
    }

    @Test func theFileIs0600InA0700Directory() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        try store.store(Fixture.fullBond())
        store.flush()
        var info = stat()
        #expect(stat(store.fileURL!.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(stat(dir.store.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        // Only the store: no temporary file left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.store.path) == [store.fileURL!.lastPathComponent])
    }

    @Test func theLocalIRKIsMadeOnFirstUseNonZeroAndKept() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        // Lookups make nothing, not even the file.
        #expect(store.bond(for: Fixture.peer) == nil)
        #expect(!store.update(peer: Fixture.peer) { $0.serviceChangedPending = true })
        #expect(!store.removeBond(for: Fixture.peer))
        store.removeAll()
        store.flush()
        #expect(!FileManager.default.fileExists(atPath: store.fileURL!.path))

        let irk = store.localIRK
        #expect(irk.count == 16)
        #expect(irk.contains { $0 != 0 })
        #expect(store.localIRK == irk)
        store.flush()
        #expect(try BondStore(controllerIdentity: Fixture.controller, directory: dir.store).localIRK == irk)
        // Another controller identity has its own store and IRK.
        let random = LEAddress(.randomDevice, Fixture.controller.address)
        let other = try BondStore(controllerIdentity: random, directory: dir.store)
        #expect(other.fileURL!.lastPathComponent == "bonds-C0FFEE000001-random.json")
        #expect(other.localIRK != irk)
    }

    @Test func aResolvablePrivateAddressFindsItsBondThroughThePeerIRK() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        let bond = Fixture.fullBond(Fixture.randomPeer)
        try store.store(bond)
        try store.store(Fixture.fullBond())
        // LECrypto takes the IRK most significant octet first; the bond keeps it as SMP carries it.
        let rpa = LEAddress(.randomDevice,
                            BluetoothAddress(value: LECrypto.makeResolvablePrivateAddress(irk: bond.peerIRK!.reversed())))
        #expect(rpa.address.randomSubtype == .resolvablePrivate)
        #expect(store.bond(for: rpa) == bond)
        // The controller resolved it already: the identity with a resolved type.
        #expect(store.bond(for: LEAddress(.randomIdentity, Fixture.randomPeer.address)) == bond)
        #expect(store.bond(for: LEAddress(.publicIdentity, Fixture.peer.address))?.peerIdentity == Fixture.peer)
        // The IRK in the order LECrypto takes it does not resolve: the byte order matters.
        let wrongOrder = LEAddress(.randomDevice,
                                   BluetoothAddress(value: LECrypto.makeResolvablePrivateAddress(irk: bond.peerIRK!)))
        #expect(store.bond(for: wrongOrder) == nil)
        let stranger = LEAddress(.randomDevice,
                                 BluetoothAddress(value: LECrypto.makeResolvablePrivateAddress(irk: Fixture.randomKey())))
        #expect(store.bond(for: stranger) == nil)
        // A public address with the same bits is another device.
        #expect(store.bond(for: LEAddress(.publicDevice, rpa.address)) == nil)

        #expect(store.update(peer: rpa) { $0.cccdValues[0x0050] = 0x0002 })
        #expect(store.bond(for: Fixture.randomPeer)?.cccdValues[0x0050] == 0x0002)
        #expect(store.removeBond(for: rpa))
        #expect(store.bond(for: Fixture.randomPeer) == nil)
        #expect(store.bonds.map(\.peerIdentity) == [Fixture.peer])
    }

    @Test func rePairingNeverReplacesAKeyWithAWeakerOne() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        let strong = Fixture.ltk()
        try #require(try store.save(Fixture.outcome(strong), peer: Fixture.peer) != nil)
        let weaker = [
            Fixture.ltk(authenticated: false),
            Fixture.ltk(secureConnections: false),
            Fixture.ltk(keySize: 15),
        ]
        for key in weaker {
            #expect(key.isWeaker(than: strong))
            #expect(throws: BondStoreError.weakerKey) { try store.save(Fixture.outcome(key), peer: Fixture.peer) }
            var bond = try #require(store.bond(for: Fixture.peer))
            bond.centralLTK = key
            #expect(throws: BondStoreError.weakerKey) { try store.store(bond) }
            #expect(store.bond(for: Fixture.peer)?.centralLTK == strong)
            #expect(store.bond(for: Fixture.peer)?.peripheralLTK == strong)
        }
        // MITM protection counts before Secure Connections, which counts before key size.
        #expect(Fixture.ltk(authenticated: false).isWeaker(than: Fixture.ltk(secureConnections: false, keySize: 7)))
        #expect(Fixture.ltk(secureConnections: false).isWeaker(than: Fixture.ltk(keySize: 7)))

        // An equal or stronger key replaces it.
        let same = Fixture.ltk()
        try store.save(Fixture.outcome(same), peer: Fixture.peer)
        #expect(store.bond(for: Fixture.peer)?.centralLTK == same)
        let weakStore = try BondStore(controllerIdentity: Fixture.controller, directory: dir.url.appendingPathComponent("b"))
        try weakStore.save(Fixture.outcome(Fixture.ltk(authenticated: false, secureConnections: false, keySize: 7)),
                           peer: Fixture.peer)
        try weakStore.save(Fixture.outcome(same), peer: Fixture.peer)
        #expect(weakStore.bond(for: Fixture.peer)?.centralLTK == same)
    }

    @Test func aPairingOutcomeMakesAndMergesTheBondUnderThePeersIdentity() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        let irk = Fixture.randomKey()
        let rpa = LEAddress(.randomDevice, BluetoothAddress(value: LECrypto.makeResolvablePrivateAddress(irk: irk.reversed())))

        var notBonded = Fixture.outcome(Fixture.ltk())
        notBonded.bonded = false
        #expect(try store.save(notBonded, peer: rpa) == nil)
        #expect(store.bonds.isEmpty)

        var first = Fixture.outcome(Fixture.ltk(authenticated: false), identity: Fixture.peer, irk: irk)
        first.peerCSRK = Fixture.randomKey()
        let made = try #require(try store.save(first, peer: rpa))
        #expect(made.peerIdentity == Fixture.peer)
        #expect(made.peerIRK == irk)
        #expect(made.peerCSRK == first.peerCSRK)
        #expect(store.update(peer: rpa) {
            $0.cccdValues[0x0010] = 1
            $0.peerSignCounter = 7
        })

        // Re-pairing from another RPA, stronger, without redistributing IRK or CSRK.
        let later = LEAddress(.randomDevice, BluetoothAddress(value: LECrypto.makeResolvablePrivateAddress(irk: irk.reversed())))
        let second = Fixture.outcome(Fixture.ltk())
        let merged = try #require(try store.save(second, peer: later))
        #expect(merged.peerIdentity == Fixture.peer)
        #expect(merged.centralLTK == second.centralLTK)
        #expect(merged.peerIRK == irk)
        #expect(merged.peerCSRK == first.peerCSRK)
        #expect(merged.peerSignCounter == 7)
        #expect(merged.cccdValues == [0x0010: 1])
        #expect(merged.createdAt == made.createdAt)
        #expect(store.bonds.count == 1)
        #expect(Bond(outcome: first, peer: rpa).peerIdentity == Fixture.peer)
        #expect(Bond(outcome: second, peer: rpa).peerIdentity == rpa)
    }

    @Test func aMalformedBondIsRefusedAndAMalformedUpdateDropped() throws {
        let dir = try TemporaryDirectory()
        let log = LogLines()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store, logger: log.logger)
        var bond = Fixture.fullBond()
        bond.peerIRK = [1, 2, 3]
        #expect(throws: BondStoreError.malformedBond) { try store.store(bond) }
        try store.store(Fixture.fullBond())
        let before = store.bond(for: Fixture.peer)
        #expect(store.update(peer: Fixture.peer) { $0.peerDatabaseHash = [0xAB] })
        #expect(store.bond(for: Fixture.peer) == before)
        #expect(log.lines.count == 1)
    }

    @Test func updatesKeepTheIdentityAndStampTheTime() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        var bond = Fixture.fullBond()
        bond.createdAt = Date(timeIntervalSince1970: 1_000_000)
        bond.updatedAt = bond.createdAt
        try store.store(bond)
        #expect(store.update(peer: Fixture.peer) {
            $0.peerIdentity = Fixture.randomPeer
            $0.serviceChangedPending = false
        })
        let updated = try #require(store.bond(for: Fixture.peer))
        #expect(!updated.serviceChangedPending)
        #expect(updated.createdAt == bond.createdAt)
        #expect(updated.updatedAt > bond.updatedAt)
        #expect(store.bond(for: Fixture.randomPeer) == nil)
        store.removeAll()
        #expect(store.bonds.isEmpty)
        store.flush()
        #expect(try BondStore(controllerIdentity: Fixture.controller, directory: dir.store).bonds.isEmpty)
    }

    @Test func anUnreadableStoreIsMovedAsideAndTheStoreStartsEmpty() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        let bond = Fixture.fullBond()
        try store.store(bond)
        store.flush()
        let good = try Data(contentsOf: store.fileURL!)

        let laterVersion = String(decoding: good, as: UTF8.self)
            .replacingOccurrences(of: "\"version\" : 1", with: "\"version\" : 2")
        // Each damage, and what the log says it is.
        let damages: [(Data, String)] = [
            (good.prefix(good.count / 2), "not a bond store"),  // a torn write, as a non-atomic writer leaves
            (Data(), "not a bond store"),
            (Data("{\"version\": 1}".utf8), "not a bond store"),
            (Data(laterVersion.utf8), "format version 2"),
            (Data([0xFF, 0xFE, 0x00]), "not a bond store"),
        ]
        for (damaged, reason) in damages {
            try damaged.write(to: store.fileURL!)
            let log = LogLines()
            let reopened = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store, logger: log.logger)
            #expect(reopened.bonds.isEmpty)
            #expect(log.lines.count == 1)
            #expect(log.lines.first?.contains("moved it to") == true, "\(log.lines)")
            #expect(log.lines.first?.contains(reason) == true, "\(log.lines)")
            // Never a key in the log, even from a file full of them.
            for key in [bond.peerIRK!, bond.peerCSRK!, bond.localCSRK!, bond.centralLTK!.key] {
                #expect(!log.lines.joined().lowercased().contains(hex(key)))
            }
            let names = try FileManager.default.contentsOfDirectory(atPath: dir.store.path)
            let aside = try #require(names.first { $0.hasPrefix(store.fileURL!.lastPathComponent + ".corrupt-") })
            #expect(try Data(contentsOf: dir.store.appendingPathComponent(aside)) == damaged)
            try FileManager.default.removeItem(at: dir.store.appendingPathComponent(aside))
            #expect(!names.contains(store.fileURL!.lastPathComponent))

            // It works from there.
            try reopened.store(bond)
            reopened.flush()
            #expect(try BondStore(controllerIdentity: Fixture.controller, directory: dir.store).bonds == [bond])
        }

        // Another controller's file under this one's name is not believed either.
        let otherController = LEAddress(.publicDevice, BluetoothAddress("C0:FF:EE:00:00:09")!)
        let other = try BondStore(controllerIdentity: otherController, directory: dir.store)
        try other.store(bond)
        other.flush()
        try FileManager.default.removeItem(at: store.fileURL!)
        try FileManager.default.moveItem(at: other.fileURL!, to: store.fileURL!)
        let log = LogLines()
        #expect(try BondStore(controllerIdentity: Fixture.controller, directory: dir.store, logger: log.logger).bonds.isEmpty)
        #expect(log.lines.first?.contains("another controller's") == true, "\(log.lines)")
    }

    @Test func aStaleTemporaryFileOfADeadWriterIsRemoved() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        try store.store(Fixture.fullBond())
        store.flush()
        // pid_max is at most 2^22 on Linux: this pid is never alive.
        let stale = dir.store.appendingPathComponent(".\(store.fileURL!.lastPathComponent).tmp-2147483646-1")
        try Data("{".utf8).write(to: stale)
        #expect(try BondStore(controllerIdentity: Fixture.controller, directory: dir.store).bonds.count == 1)
        #expect(!FileManager.default.fileExists(atPath: stale.path))
    }

    @Test func changesInARowAreCoalescedIntoOneWrite() throws {
        let dir = try TemporaryDirectory()
        let store = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        try store.store(Fixture.fullBond())
        store.flush()
        #expect(store.writeCount == 1)

        // Hold the writer so that every change below is made before it runs.
        let hold = DispatchSemaphore(value: 0)
        store.writer?.async { hold.wait() }
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for i in 0..<250 {
                store.update(peer: Fixture.peer) { $0.cccdValues[UInt16(0x1000 + thread * 250 + i)] = UInt16(i) }
            }
        }
        hold.signal()
        store.flush()
        #expect(store.writeCount == 2)
        let reopened = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        let reloaded = try #require(reopened.bond(for: Fixture.peer))
        #expect(reloaded == store.bond(for: Fixture.peer))
        #expect(reloaded.cccdValues.count == 1000 + 3)

        // Unheld, a burst still ends consistent on disk after flush.
        for i in 0..<500 { store.update(peer: Fixture.peer) { $0.peerSignCounter = UInt32(i) } }
        store.flush()
        #expect(store.writeCount < 2 + 500)
        let final = try BondStore(controllerIdentity: Fixture.controller, directory: dir.store)
        #expect(final.bond(for: Fixture.peer)?.peerSignCounter == 499)
    }

    @Test func theDirectoryComesFromTheArgumentThenTheEnvironment() {
        let home = ["HOME": "/home/u"]
        #expect(BondStore.defaultDirectory(environment: home)?.path == "/home/u/.local/state/corebluetooth-linux")
        #expect(BondStore.defaultDirectory(environment: home.merging(["XDG_STATE_HOME": "/s"]) { $1 })?.path
            == "/s/corebluetooth-linux")
        let all = ["CB_BOND_DIR": "/b", "XDG_STATE_HOME": "/s", "HOME": "/h"]
        #expect(BondStore.defaultDirectory(environment: all)?.path == "/b")
        #expect(BondStore.defaultDirectory(environment: ["CB_BOND_DIR": "", "XDG_STATE_HOME": ""]) == nil)
    }

    @Test func aBondsDescriptionShowsNoKey() {
        let bond = Fixture.fullBond()
        let text = "\(bond) \(String(reflecting: bond))".lowercased()
        for key in [bond.peerIRK!, bond.peerCSRK!, bond.localCSRK!, bond.centralLTK!.key] {
            #expect(!text.contains(hex(key)))
            #expect(!text.contains(key.map(String.init).joined(separator: ", ")))
        }
        #expect(text.contains("central ltk"))
    }
}
