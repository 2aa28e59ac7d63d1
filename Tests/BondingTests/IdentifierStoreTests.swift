@testable import Bonding
import Dispatch
import Foundation
import HCI
import Synchronization
import Testing

/// A clock that moves only when told (the store's `lastSeen`).
private final class TestClock: Sendable {
    private let time = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: @Sendable () -> Date { { self.time.withLock { $0 } } }
    func advance(_ seconds: TimeInterval) { time.withLock { $0 += seconds } }
}

private func address(_ text: String, random: Bool = false) -> LEAddress {
    LEAddress(random ? .randomDevice : .publicDevice, BluetoothAddress(text)!)
}

/// Addresses of each kind (the two top bits of a random address say which).
private enum Addresses {
    static let publicOne = address("00:1B:DC:00:00:01")
    static let staticRandom = address("C3:00:00:00:00:02", random: true)
    static let resolvable = address("4A:00:00:00:00:03", random: true)
    static let nonResolvable = address("0B:00:00:00:00:04", random: true)
    static let identity = address("C5:00:00:00:00:05", random: true)

    /// Static random addresses C0:00:00:00:00:n.
    static func staticRandom(_ n: UInt64) -> LEAddress { LEAddress(.randomDevice, BluetoothAddress(value: 0xC000_0000_0000 | n)) }
    static func publicNumber(_ n: UInt64) -> LEAddress { LEAddress(.publicDevice, BluetoothAddress(value: 0x0000_1B00_0000 | n)) }
    /// Resolvable private addresses 40:00:00:00:00:n.
    static func resolvable(_ n: UInt64) -> LEAddress { LEAddress(.randomDevice, BluetoothAddress(value: 0x4000_0000_0000 | n)) }
}

@Suite("Identifier store")
struct IdentifierStoreTests {
    @Test func aLookupNeverMakesAnEntry() {
        let store = IdentifierStore(fileURL: nil)
        for peer in [Addresses.publicOne, Addresses.staticRandom, Addresses.resolvable, Addresses.nonResolvable] {
            #expect(store.identifier(for: peer) == nil)
        }
        #expect(store.address(for: UUID()) == nil)
        #expect(store.bonded(Addresses.identity, seenAt: Addresses.resolvable) == nil)
        #expect(store.entries.isEmpty && store.privateCount == 0)

        let handedOut = store.assignIdentifier(for: Addresses.publicOne)
        #expect(store.identifier(for: Addresses.publicOne) == handedOut)
        #expect(store.assignIdentifier(for: Addresses.publicOne) == handedOut)
        #expect(store.address(for: handedOut) == Addresses.publicOne)
        // The type a controller reports for a resolved identity is the same device.
        #expect(store.identifier(for: LEAddress(.publicIdentity, Addresses.publicOne.address)) == handedOut)
        // The same 48 bits as a random address are another device.
        #expect(store.identifier(for: LEAddress(.randomDevice, Addresses.publicOne.address)) == nil)
    }

    @Test func identitiesAreKeptInTheFilePrivateAddressesOnlyForTheRun() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("state/identifiers.json")
        let store = IdentifierStore(fileURL: url)
        let ids = [Addresses.publicOne, Addresses.staticRandom, Addresses.resolvable, Addresses.nonResolvable]
            .map { store.assignIdentifier(for: $0) }
        store.flush()

        let again = IdentifierStore(fileURL: url)
        #expect(again.identifier(for: Addresses.publicOne) == ids[0])
        #expect(again.identifier(for: Addresses.staticRandom) == ids[1])
        #expect(again.address(for: ids[1]) == Addresses.staticRandom)
        #expect(again.identifier(for: Addresses.resolvable) == nil)
        #expect(again.identifier(for: Addresses.nonResolvable) == nil)
        let text = try String(contentsOf: url, encoding: .utf8)
        #expect(!text.contains("\(Addresses.resolvable.address)") && !text.contains("\(Addresses.nonResolvable.address)"))
        // Mode 0600, like the bond store's.
        let mode = try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test func aPeerThatBondsKeepsTheIdentifierOfThePrivateAddressItPairedFrom() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("identifiers.json")
        let store = IdentifierStore(fileURL: url)
        // Seen once at its identity long ago, given another identifier then.
        let old = store.assignIdentifier(for: Addresses.identity)
        let held = store.assignIdentifier(for: Addresses.resolvable)
        #expect(store.bonded(LEAddress(.randomIdentity, Addresses.identity.address), seenAt: Addresses.resolvable) == held)
        #expect(held != old)
        #expect(store.identifier(for: Addresses.identity) == held)
        #expect(store.identifier(for: Addresses.resolvable) == held)  // the link made to it
        #expect(store.address(for: held) == Addresses.identity)
        #expect(store.address(for: old) == nil)
        store.flush()

        let again = IdentifierStore(fileURL: url)
        #expect(again.identifier(for: Addresses.identity) == held)
        #expect(again.entries[Addresses.identity]?.bonded == true)
        #expect(again.address(for: held) == Addresses.identity)

        // A peer that pairs from its identity address is only marked bonded.
        let peer = store.assignIdentifier(for: Addresses.publicOne)
        #expect(store.bonded(Addresses.publicOne, seenAt: Addresses.publicOne) == peer)
        #expect(store.entries[Addresses.publicOne] == IdentifierStore.Entry(identifier: peer, lastSeen: store.entries[Addresses.publicOne]!.lastSeen, bonded: true))
        store.unbonded(Addresses.publicOne)
        #expect(store.entries[Addresses.publicOne]?.bonded == false)
        #expect(store.identifier(for: Addresses.publicOne) == peer)
    }

    @Test func staleDevicesAreEvictedLeastRecentlySeenFirstBondedOnesNever() {
        let clock = TestClock()
        let store = IdentifierStore(fileURL: nil, capacity: 4, privateCapacity: 3, seenGranularity: 1, now: clock.now)
        let bonded = Addresses.staticRandom(100)
        _ = store.assignIdentifier(for: bonded)
        store.bonded(bonded, seenAt: bonded)
        for n in 1...3 as ClosedRange<UInt64> {
            clock.advance(10)
            _ = store.assignIdentifier(for: Addresses.staticRandom(n))
        }
        clock.advance(10)
        _ = store.assignIdentifier(for: Addresses.publicNumber(1))
        #expect(store.entries.count == 5)  // four, and the bonded one
        // Device 1 is seen again: 2 is now the least recently seen.
        clock.advance(10)
        _ = store.assignIdentifier(for: Addresses.staticRandom(1))
        clock.advance(10)
        _ = store.assignIdentifier(for: Addresses.staticRandom(4))
        #expect(Set(store.entries.keys) == [bonded, Addresses.staticRandom(1), Addresses.staticRandom(3), Addresses.publicNumber(1),
                                            Addresses.staticRandom(4)])
        // Public or random, the oldest goes: 3, then the public one.
        clock.advance(10)
        _ = store.assignIdentifier(for: Addresses.staticRandom(5))
        #expect(store.entries[Addresses.staticRandom(3)] == nil && store.entries[Addresses.publicNumber(1)] != nil)
        clock.advance(10)
        _ = store.assignIdentifier(for: Addresses.staticRandom(6))
        #expect(store.entries[Addresses.publicNumber(1)] == nil)
        for n in 7...20 as ClosedRange<UInt64> {
            clock.advance(10)
            _ = store.assignIdentifier(for: Addresses.staticRandom(n))
            #expect(store.entries.filter { !$0.value.bonded }.count <= 4)
        }
        #expect(store.entries[bonded]?.bonded == true)
        // The device just handed out stays, even when the clock stepped back.
        clock.advance(-1000)
        let newest = store.assignIdentifier(for: Addresses.publicNumber(99))
        #expect(store.identifier(for: Addresses.publicNumber(99)) == newest)

        // Private addresses, in memory, by last use.
        for n in 1...3 as ClosedRange<UInt64> { _ = store.assignIdentifier(for: Addresses.resolvable(n)) }
        let first = store.identifier(for: Addresses.resolvable(1))
        #expect(store.assignIdentifier(for: Addresses.resolvable(1)) == first)
        _ = store.assignIdentifier(for: Addresses.resolvable(4))
        #expect(store.privateCount == 3)
        #expect(store.identifier(for: Addresses.resolvable(2)) == nil)
        #expect(store.identifier(for: Addresses.resolvable(1)) == first)
        // An object the caller still holds keeps its identifier when the entry comes back.
        let kept = UUID()
        #expect(store.assignIdentifier(for: Addresses.resolvable(2), reusing: kept) == kept)
    }

    @Test func markingSeenMakesNothingAndCountsAsASighting() {
        let clock = TestClock()
        let store = IdentifierStore(fileURL: nil, capacity: 4, privateCapacity: 2, seenGranularity: 1, now: clock.now)
        // Nothing handed out: nil, and still nothing.
        #expect(store.identifierMarkingSeen(for: Addresses.publicOne) == nil)
        #expect(store.identifierMarkingSeen(for: Addresses.resolvable) == nil)
        #expect(store.entries.isEmpty && store.privateCount == 0)

        let identity = store.assignIdentifier(for: Addresses.publicOne)
        clock.advance(10)
        #expect(store.identifierMarkingSeen(for: LEAddress(.publicIdentity, Addresses.publicOne.address)) == identity)
        #expect(store.entries[Addresses.publicOne]?.lastSeen == clock.now())

        // A private address marked seen is the most recently used: the other one goes first.
        let first = store.assignIdentifier(for: Addresses.resolvable(1))
        _ = store.assignIdentifier(for: Addresses.resolvable(2))
        #expect(store.identifierMarkingSeen(for: Addresses.resolvable(1)) == first)
        _ = store.assignIdentifier(for: Addresses.resolvable(3))
        #expect(store.identifier(for: Addresses.resolvable(1)) == first)
        #expect(store.identifier(for: Addresses.resolvable(2)) == nil)
    }

    @Test func changesInARowAreOneWriteAndSightingsWithinTheGranularityNone() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("identifiers.json")
        let clock = TestClock()
        let store = IdentifierStore(fileURL: url, seenGranularity: 3600, now: clock.now)
        // Hold the writer so that every change below is made before it runs.
        let hold = DispatchSemaphore(value: 0)
        store.writer?.async { hold.wait() }
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for n in 0..<50 { _ = store.assignIdentifier(for: Addresses.publicNumber(UInt64(thread * 50 + n))) }
        }
        hold.signal()
        store.flush()
        #expect(store.writeCount == 1)
        #expect(IdentifierStore(fileURL: url).entries.count == 200)

        // Devices seen again within the hour: no write; an hour later: one.
        for _ in 0..<3 {
            for n in 0..<200 as Range<UInt64> { _ = store.assignIdentifier(for: Addresses.publicNumber(n)) }
        }
        store.flush()
        #expect(store.writeCount == 1)
        clock.advance(3600)
        store.writer?.async { hold.wait() }
        for n in 0..<200 as Range<UInt64> { _ = store.assignIdentifier(for: Addresses.publicNumber(n)) }
        hold.signal()
        store.flush()
        #expect(store.writeCount == 2)
        #expect(IdentifierStore(fileURL: url).entries[Addresses.publicNumber(7)]?.lastSeen == clock.now())
        // Lookups write nothing.
        for n in 0..<200 as Range<UInt64> { _ = store.identifier(for: Addresses.publicNumber(n)) }
        store.flush()
        #expect(store.writeCount == 2)
    }

    @Test func twoStoresOnOneFileMergeTheirChanges() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("identifiers.json")
        let a = IdentifierStore(fileURL: url)
        let b = IdentifierStore(fileURL: url)
        // Both give the same new device an identifier (B has not read A's yet): the first
        // saved stays in the file.
        let fromA = a.assignIdentifier(for: Addresses.publicOne)
        let sameA = a.assignIdentifier(for: Addresses.identity)
        a.flush()
        let fromB = b.assignIdentifier(for: Addresses.staticRandom)
        let sameB = b.assignIdentifier(for: Addresses.identity)
        #expect(sameB != sameA)
        b.flush()
        let merged = IdentifierStore(fileURL: url)
        #expect(merged.identifier(for: Addresses.publicOne) == fromA)
        #expect(merged.identifier(for: Addresses.staticRandom) == fromB)
        #expect(merged.identifier(for: Addresses.identity) == sameA)
        // B keeps what it handed out for the rest of its run, and learned A's device.
        #expect(b.identifier(for: Addresses.identity) == sameB)
        #expect(b.identifier(for: Addresses.publicOne) == fromA)

        // A bond's assignment replaces the file's identifier.
        let held = b.assignIdentifier(for: Addresses.resolvable)
        b.bonded(Addresses.identity, seenAt: Addresses.resolvable)
        b.flush()
        #expect(IdentifierStore(fileURL: url).identifier(for: Addresses.identity) == held)
        // A later sighting in A does not undo it.
        _ = a.assignIdentifier(for: Addresses.staticRandom(9))
        a.flush()
        #expect(IdentifierStore(fileURL: url).identifier(for: Addresses.identity) == held)
        #expect(a.identifier(for: Addresses.identity) == sameA)  // A's objects keep theirs
    }

    @Test func twoProcessesWritingAtOnceLoseNothing() throws {
        let writer = try #require(KillTests.writer, "\(KillTests.writerName) is not built: build every target")
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("identifiers.json")
        let perProcess = 120
        let processes = try (1...2).map { tag -> (Process, Pipe, Pipe) in
            let process = Process()
            process.executableURL = writer
            process.arguments = ["identifiers", url.path, "\(tag)", "\(perProcess)"]
            let (output, errors) = (Pipe(), Pipe())
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            return (process, output, errors)
        }
        var handedOut: [String: String] = [:]
        for (process, output, errors) in processes {
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let problems = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0 && problems.isEmpty, "\(problems)")
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: " ")
                if parts.count == 2 { handedOut[String(parts[0])] = String(parts[1]) }
            }
        }
        #expect(handedOut.count == 2 * perProcess)
        let store = IdentifierStore(fileURL: url)
        #expect(store.entries.count == 2 * perProcess)
        for (text, identifier) in handedOut {
            #expect(store.identifier(for: LEAddress(.publicDevice, BluetoothAddress(text)!))?.uuidString == identifier, "\(text)")
        }
    }

    @Test func aFileOfTheFirstFormatIsReadWithoutItsPrivateAddresses() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("identifiers.json")
        let (p, s, r) = (UUID(), UUID(), UUID())
        let legacy = [
            "\(Addresses.publicOne.address)/public": p.uuidString, "\(Addresses.staticRandom.address)/random": s.uuidString,
            "\(Addresses.resolvable.address)/random": r.uuidString,
        ]
        try JSONSerialization.data(withJSONObject: legacy).write(to: url)
        let store = IdentifierStore(fileURL: url)
        #expect(store.identifier(for: Addresses.publicOne) == p)
        #expect(store.identifier(for: Addresses.staticRandom) == s)
        #expect(store.identifier(for: Addresses.resolvable) == nil)
        _ = store.assignIdentifier(for: Addresses.identity)
        store.flush()
        let text = try String(contentsOf: url, encoding: .utf8)
        #expect(text.contains("\"version\" : 2") && text.contains(p.uuidString) && !text.contains(r.uuidString))
    }

    @Test func aFileALaterBuildWroteIsLeftAlone() throws {
        let dir = try TemporaryDirectory()
        let url = dir.url.appendingPathComponent("identifiers.json")
        let later = Data(#"{"version": 3, "devices": []}"#.utf8)
        try later.write(to: url)
        let log = LogLines()
        let store = IdentifierStore(fileURL: url, logger: log.logger)
        _ = store.assignIdentifier(for: Addresses.publicOne)
        store.flush()
        #expect(try Data(contentsOf: url) == later)
        #expect(log.lines.count == 2 && log.lines.allSatisfy { $0.contains("format version 3") }, "\(log.lines)")

        // A damaged file is replaced by the next write.
        try Data("{\"version\": 2, \"dev".utf8).write(to: url)
        let fresh = IdentifierStore(fileURL: url, logger: log.logger)
        let id = fresh.assignIdentifier(for: Addresses.publicOne)
        fresh.flush()
        #expect(IdentifierStore(fileURL: url).identifier(for: Addresses.publicOne) == id)
    }

    @Test func theFileComesFromTheEnvironment() {
        #expect(IdentifierStore.defaultFileURL(environment: ["CB_IDENTIFIER_STORE": "/x/ids.json", "HOME": "/h"])?.path == "/x/ids.json")
        #expect(IdentifierStore.defaultFileURL(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"])?.path
            == "/s/corebluetooth-linux/identifiers.json")
        #expect(IdentifierStore.defaultFileURL(environment: ["HOME": "/h"])?.path == "/h/.local/state/corebluetooth-linux/identifiers.json")
        #expect(IdentifierStore.defaultFileURL(environment: [:]) == nil)
    }
}
