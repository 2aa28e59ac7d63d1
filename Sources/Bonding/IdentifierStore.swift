import Dispatch
import Foundation
import HCI
import Logging
import Scheduling
import StackLogging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The `identifier` UUIDs Core Bluetooth gives remote devices (a `CBPeripheral`'s, a
/// `CBCentral`'s), kept across runs so that a device keeps its identifier, as iOS remembers it.
///
/// **What has an identifier.** A device gets one when the API first hands out an object for it
/// (``assignIdentifier(for:reusing:)``); a lookup (``identifier(for:)``) never makes one.
/// Identities — public and static random addresses — are kept in the file. Private addresses
/// (resolvable or not), which a device replaces every few minutes, are kept in memory only, for
/// the life of the process: a later run would never meet the same one again. When a peer at a
/// private address bonds and gives its identity address, ``bonded(_:seenAt:)`` gives that
/// identity the identifier the app already holds: the host reports the peer by identity from
/// then on, whatever address it rotates to, and the peer keeps one identifier.
///
/// **Bounded.** Beyond ``capacity`` entries that are not bonded, the least recently seen go;
/// bonded peers stay. Private addresses, in memory, are bounded by ``privateCapacity`` the same
/// way (a busy place shows hundreds of phones, each at a new address every few minutes).
///
/// **Saving.** Lookups and changes answer from memory and never touch the file on the caller's
/// thread (the device's loop). A change queues a write on a background queue; the changes made
/// before that write starts ride along. A write takes an exclusive `flock` on
/// `<file>.lock`, reads the file, merges this process's changes into it, and replaces it
/// atomically ([AtomicFile]): two processes writing at once lose nothing. ``flush()`` waits for
/// the writes; the process flushes at normal exit.
///
/// The file is `$CB_IDENTIFIER_STORE`, else `$XDG_STATE_HOME/corebluetooth-linux/identifiers.json`,
/// else `~/.local/state/corebluetooth-linux/identifiers.json`. A store without a file (a test
/// radio's) keeps everything in memory.
package final class IdentifierStore: Sendable, FlushedAtExit {
    /// A device kept in the file.
    package struct Entry: Equatable, Sendable {
        package var identifier: UUID
        /// When the API last handed out an object for it (to the hour: not every sighting
        /// is a write).
        package var lastSeen: Date
        /// Whether it is bonded (never evicted).
        package var bonded: Bool

        package init(identifier: UUID, lastSeen: Date, bonded: Bool = false) {
            self.identifier = identifier
            self.lastSeen = lastSeen
            self.bonded = bonded
        }
    }

    /// A change not yet written. A sighting (a new entry, or a later `lastSeen`) leaves the
    /// file's identifier alone when the file has one; an assignment (a bond) replaces it.
    private enum Change: Comparable { case seen, assigned }

    private struct Pending {
        var change: Change
        /// Which change this is, to tell after a write whether a newer one came meanwhile.
        var generation: UInt64
    }

    private struct PrivateEntry {
        var identifier: UUID
        /// Use order, for eviction.
        var tick: UInt64
    }

    private struct State {
        var identities: [LEAddress: Entry] = [:]
        var privates: [LEAddress: PrivateEntry] = [:]
        var pending: [LEAddress: Pending] = [:]
        /// The identities by identifier, for `address(for:)` (connecting to 10,000 peripherals
        /// by identifier walked every entry each time): made at the first look-up, kept up to
        /// date as devices are added, and dropped (to be made again) by the rare other changes.
        var byIdentifier: IdentifierIndex?
        var generation: UInt64 = 0
        var tick: UInt64 = 0
        /// A write is queued and has not yet taken its snapshot: later changes ride along.
        var writeQueued = false
        /// Files written, for the tests of coalescing.
        var writes = 0
    }

    /// Identity addresses by identifier: mostly one address each (one entry, no array); an
    /// identity that took the identifier of the address it was seen at shares it.
    struct IdentifierIndex {
        private var first: [UUID: LEAddress] = [:]
        private var others: [UUID: [LEAddress]] = [:]

        init(_ identities: [LEAddress: Entry]) {
            first.reserveCapacity(identities.count)
            for (key, entry) in identities { add(key, entry.identifier) }
        }

        mutating func add(_ key: LEAddress, _ identifier: UUID) {
            if first[identifier] == nil { first[identifier] = key } else { others[identifier, default: []].append(key) }
        }

        func keys(_ identifier: UUID) -> [LEAddress] {
            guard let key = first[identifier] else { return [] }
            return [key] + (others[identifier] ?? [])
        }
    }

    /// The file; nil for a store in memory.
    package let fileURL: URL?
    /// Entries that are not bonded kept at most.
    package let capacity: Int
    /// Private addresses kept (in memory) at most.
    package let privateCapacity: Int
    /// How much later a sighting must be than the one kept to be saved.
    private let seenGranularity: TimeInterval
    private let now: @Sendable () -> Date
    /// `corebluetooth.smp` (the bonds are the Security Manager's): a file that could not be read
    /// or written. Never a key.
    private let logger: Logger
    private let state = Locked(State())
    /// Where writes happen, one at a time; none for a store in memory. Internal for tests,
    /// which hold it to see changes coalesce.
    let writer: DispatchQueue?

    /// Opens the store at `fileURL` (reading it on the calling thread: make the store off a
    /// loop), or makes one in memory when `fileURL` is nil.
    ///
    /// - Parameters:
    ///   - capacity: Entries that are not bonded kept at most (1024 by default).
    ///   - privateCapacity: Private addresses kept in memory at most (256 by default).
    ///   - seenGranularity: How much later than the kept one a sighting must be to be saved.
    ///   - now: The clock of `lastSeen` (tests give their own).
    ///   - logger: Told of a file that could not be read or written, one line each; called on any
    ///     thread, including the writer: it must not call ``flush()``.
    package init(fileURL: URL?, capacity: Int = 1024, privateCapacity: Int = 256, seenGranularity: TimeInterval = 3600,
                 now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = StackLogging.standard.logger(.smp)) {
        self.fileURL = fileURL
        self.capacity = max(0, capacity)
        self.privateCapacity = max(0, privateCapacity)
        self.seenGranularity = seenGranularity
        self.now = now
        self.logger = logger
        guard let fileURL else {
            writer = nil
            return
        }
        writer = DispatchQueue(label: "Bonding.IdentifierStore.writer")
        AtomicFile.removeStaleTemporaryFiles(for: fileURL)
        do {
            if let entries = try readFile() { state.withLock { $0.identities = entries } }
        } catch {
            logger.warning("identifier store: \(fileURL.path) is \(error); it is left alone and nothing is saved")
        }
        FlushAtExit.register(self)
    }

    /// Where the store lives unless told otherwise (see the type's documentation); nil when
    /// neither `CB_IDENTIFIER_STORE`, `XDG_STATE_HOME` nor `HOME` is set.
    package static func defaultFileURL(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        if let path = environment["CB_IDENTIFIER_STORE"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        let base: URL
        if let state = environment["XDG_STATE_HOME"], !state.isEmpty {
            base = URL(fileURLWithPath: state)
        } else if let home = environment["HOME"], !home.isEmpty {
            base = URL(fileURLWithPath: home).appendingPathComponent(".local/state")
        } else {
            return nil
        }
        return base.appendingPathComponent("corebluetooth-linux/identifiers.json")
    }

    /// Whether `address` is one a device replaces (a resolvable or non-resolvable private
    /// address): never written to the file.
    package static func isPrivate(_ address: LEAddress) -> Bool {
        address.type == .randomDevice && address.address.randomSubtype != .staticAddress
    }

    // MARK: Lookups and changes

    /// The identifier of the device at `address`, if one was handed out. Never makes one.
    package func identifier(for address: LEAddress) -> UUID? {
        let key = address.normalized
        return state.withLock { state in
            Self.isPrivate(key) ? state.privates[key]?.identifier : state.identities[key]?.identifier
        }
    }

    /// The identifier to hand out with an object for the device at `address`: the one it has,
    /// else `candidate` (an object the caller still holds for that address, whose entry was
    /// evicted), else a new one. Marks the device seen.
    package func assignIdentifier(for address: LEAddress, reusing candidate: UUID? = nil) -> UUID {
        let key = address.normalized
        let now = self.now()
        return state.withLock { state -> UUID in
            if let identifier = markSeen(key, now: now, &state) { return identifier }
            if Self.isPrivate(key) {
                state.tick += 1
                let identifier = candidate ?? UUID()
                state.privates[key] = PrivateEntry(identifier: identifier, tick: state.tick)
                evictPrivates(&state)
                return identifier
            }
            let identifier = candidate ?? UUID()
            state.identities[key] = Entry(identifier: identifier, lastSeen: now)
            state.byIdentifier?.add(key, identifier)
            note(.seen, of: key, &state)
            let evicted = Self.evict(&state.identities, capacity: capacity, sparing: key)
            for key in evicted { state.pending[key] = nil }
            if !evicted.isEmpty { state.byIdentifier = nil }
            return identifier
        }
    }

    /// The identifier of the device at `address`, marking it seen as
    /// ``assignIdentifier(for:reusing:)`` does, if one was handed out; nil, changing nothing,
    /// if not. One look-up for the API's every report of a device it already knows.
    package func identifierMarkingSeen(for address: LEAddress) -> UUID? {
        let key = address.normalized
        // A private address keeps no date: no clock read for it.
        let now = Self.isPrivate(key) ? Date.distantPast : self.now()
        return state.withLock { markSeen(key, now: now, &$0) }
    }

    /// Under the lock: the identifier `key` has, if any, with its use marked (a private
    /// address's eviction order, an identity's `lastSeen` when later by the granularity).
    private func markSeen(_ key: LEAddress, now: Date, _ state: inout State) -> UUID? {
        if Self.isPrivate(key) {
            guard let entry = state.privates[key] else { return nil }
            state.tick += 1
            state.privates[key]?.tick = state.tick
            return entry.identifier
        }
        guard var entry = state.identities[key] else { return nil }
        if now.timeIntervalSince(entry.lastSeen) >= seenGranularity {
            entry.lastSeen = now
            state.identities[key] = entry
            note(.seen, of: key, &state)
        }
        return entry.identifier
    }

    /// The address to reach the device with `identifier` at: its identity when it has one in
    /// the store (a bonded one first), else the private address it was handed out for.
    package func address(for identifier: UUID) -> LEAddress? {
        state.withLock { state in
            if state.byIdentifier == nil { state.byIdentifier = IdentifierIndex(state.identities) }
            let identities = state.byIdentifier!.keys(identifier).compactMap { key in
                state.identities[key].flatMap { $0.identifier == identifier ? (key: key, value: $0) : nil }
            }
            if let best = identities.max(by: { ($0.value.bonded ? 1 : 0, $0.value.lastSeen) < ($1.value.bonded ? 1 : 0, $1.value.lastSeen) }) {
                return best.key
            }
            return state.privates.first { $0.value.identifier == identifier }?.key
        }
    }

    /// The peer on a link made to `address` bonded and has the identity address `identity`:
    /// the identity takes the identifier handed out for `address` (the one the app holds for
    /// the link), else keeps its own; it is marked bonded (never evicted) and saved. Nothing is
    /// made when neither has an identifier.
    ///
    /// - Returns: The identity's identifier, if it has one now.
    @discardableResult
    package func bonded(_ identity: LEAddress, seenAt address: LEAddress) -> UUID? {
        let key = identity.normalized
        let link = address.normalized
        let now = self.now()
        return state.withLock { state -> UUID? in
            let onLink = Self.isPrivate(link) ? state.privates[link]?.identifier : state.identities[link]?.identifier
            // An identity that is itself private (a peer that gave none) is not kept.
            guard !Self.isPrivate(key) else { return onLink }
            guard let identifier = onLink ?? state.identities[key]?.identifier else { return nil }
            let old = state.identities[key]
            guard old?.identifier != identifier || old?.bonded != true else { return identifier }
            state.identities[key] = Entry(identifier: identifier, lastSeen: max(now, old?.lastSeen ?? now), bonded: true)
            state.byIdentifier = nil
            note(.assigned, of: key, &state)
            return identifier
        }
    }

    /// The bond with `identity` was removed: its entry stays (the identifier is the device's,
    /// as on iOS after "Forget This Device") but may be evicted again.
    package func unbonded(_ identity: LEAddress) {
        let key = identity.normalized
        state.withLock { state in
            guard var entry = state.identities[key], entry.bonded else { return }
            entry.bonded = false
            state.identities[key] = entry
            note(.assigned, of: key, &state)
        }
    }

    /// Every identity entry (tests; tools).
    package var entries: [LEAddress: Entry] { state.withLock { $0.identities } }

    /// How many private addresses are kept (tests).
    package var privateCount: Int { state.withLock { $0.privates.count } }

    /// Files written so far (tests of coalescing).
    package var writeCount: Int { state.withLock { $0.writes } }

    /// Waits until every change made before the call is in the file (or its write failed,
    /// which is logged). For tests and shutdown; not on a loop.
    package func flush() {
        writer?.sync {}
    }

    // MARK: Eviction

    /// Removes the least recently seen entries that are not bonded beyond `capacity` (never
    /// `sparing`, the one just handed out); returns their keys. Evicts an eighth below
    /// `capacity` at once, so that a busy scan sorts once per many new devices, not at each.
    private static func evict(_ entries: inout [LEAddress: Entry], capacity: Int, sparing: LEAddress? = nil) -> [LEAddress] {
        // The count below is at most the number of entries: under capacity there is nothing to
        // evict, and no reason to walk every entry (each new device did, O(N²) for a fleet).
        guard entries.count > capacity else { return [] }
        let candidates = entries.filter { !$0.value.bonded && $0.key != sparing }
        let count = candidates.count + (sparing.flatMap { entries[$0] }.map { $0.bonded ? 0 : 1 } ?? 0)
        guard count > capacity else { return [] }
        let keep = capacity - capacity / 8
        // Oldest first, then by address (random after public): one order in every process.
        let order = candidates.sorted { a, b in
            (a.value.lastSeen, a.key.address, a.key.isRandom ? 1 : 0) < (b.value.lastSeen, b.key.address, b.key.isRandom ? 1 : 0)
        }
        let victims = order.prefix(count - keep).map(\.key)
        for key in victims { entries[key] = nil }
        return victims
    }

    private func evictPrivates(_ state: inout State) {
        guard state.privates.count > privateCapacity else { return }
        let keep = privateCapacity - privateCapacity / 8
        let victims = state.privates.sorted { $0.value.tick < $1.value.tick }.prefix(state.privates.count - keep)
        for (key, _) in victims { state.privates[key] = nil }
    }

    // MARK: Writing

    /// Under the lock: records a change of `key` and queues a write unless one is queued that
    /// has not yet taken its snapshot (it will see this change too).
    private func note(_ change: Change, of key: LEAddress, _ state: inout State) {
        guard let writer else { return }
        state.generation += 1
        state.pending[key] = Pending(change: max(change, state.pending[key]?.change ?? .seen), generation: state.generation)
        guard !state.writeQueued else { return }
        state.writeQueued = true
        writer.async { self.write() }
    }

    /// On `writer`: this process's changes merged into the file, under the file lock.
    private func write() {
        let (changes, entries) = state.withLock { state in
            state.writeQueued = false
            state.writes += 1
            return (state.pending, state.identities)
        }
        guard let fileURL, !changes.isEmpty else { return }
        do {
            try makeDirectory(fileURL.deletingLastPathComponent())
            let merged = try withFileLock {
                var merged = try readFile() ?? [:]
                for (key, pending) in changes {
                    guard let mine = entries[key] else { continue }
                    if pending.change == .assigned {
                        merged[key] = Entry(identifier: mine.identifier, lastSeen: max(mine.lastSeen, merged[key]?.lastSeen ?? mine.lastSeen),
                                            bonded: mine.bonded)
                    } else if var theirs = merged[key] {
                        // Another process handed out an identifier first: the file keeps it
                        // (this process keeps its own in memory for the objects it gave out).
                        theirs.lastSeen = max(theirs.lastSeen, mine.lastSeen)
                        merged[key] = theirs
                    } else {
                        merged[key] = mine
                    }
                }
                _ = Self.evict(&merged, capacity: capacity)
                try AtomicFile.write(try Self.encode(merged), to: fileURL)
                return merged
            }
            state.withLock { state in
                state.byIdentifier = nil
                for (key, pending) in changes where state.pending[key]?.generation == pending.generation {
                    state.pending[key] = nil
                }
                // What other processes saved, this one now knows; what the merge evicted, it
                // forgets (unless changed since). Identifiers it handed out stay as they are.
                for (key, theirs) in merged {
                    if var mine = state.identities[key] {
                        mine.lastSeen = max(mine.lastSeen, theirs.lastSeen)
                        if state.pending[key] == nil { mine.bonded = theirs.bonded }
                        state.identities[key] = mine
                    } else {
                        state.identities[key] = theirs
                    }
                }
                for key in state.identities.keys where merged[key] == nil && state.pending[key] == nil {
                    state.identities[key] = nil
                }
            }
        } catch {
            logger.error("identifier store: could not save \(fileURL.path): \(error)")
        }
    }

    /// Runs `body` holding an exclusive `flock` on `<file>.lock` (a file of its own: the store
    /// itself is replaced by each write, and a lock on a replaced file locks nothing).
    private func withFileLock<T>(_ body: () throws -> T) throws -> T {
        guard let fileURL else { return try body() }
        let path = fileURL.path + ".lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw AtomicFile.Failure(step: "open \(path)", code: errno) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw AtomicFile.Failure(step: "lock \(path)", code: errno) }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    private func makeDirectory(_ directory: URL) throws {
        guard !FileManager.default.fileExists(atPath: directory.path) else { return }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }

    // MARK: The file

    /// The file as written (version 2). Version 1 was a map from "AA:BB:CC:DD:EE:FF/public"
    /// (or "/random") to an identifier, for every address ever seen; it is read, without its
    /// private addresses.
    private struct StoreFile: Codable {
        static let currentVersion = 2
        var version: Int
        var devices: [Device]

        struct Device: Codable {
            var address: String
            var random: Bool
            var identifier: UUID
            var lastSeen: Date
            var bonded: Bool
        }

        struct Version: Decodable { var version: Int }
    }

    private static func encode(_ entries: [LEAddress: Entry]) throws -> Data {
        let devices = entries.sorted { ($0.key.address, $0.key.isRandom ? 1 : 0) < ($1.key.address, $1.key.isRandom ? 1 : 0) }.map { key, entry in
            StoreFile.Device(address: "\(key.address)", random: key.isRandom, identifier: entry.identifier,
                             lastSeen: entry.lastSeen, bonded: entry.bonded)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(StoreFile(version: StoreFile.currentVersion, devices: devices))
    }

    /// The file's entries; nil when there is no file, or it cannot be read (logged: the next
    /// write replaces it).
    /// - Throws: ``UnknownVersion`` for a file a later build wrote, which this one must not
    ///   replace.
    private func readFile() throws -> [LEAddress: Entry]? {
        guard let fileURL, FileManager.default.fileExists(atPath: fileURL.path) else { return nil }
        do {
            return try Self.decode(try Data(contentsOf: fileURL), modified: Self.modificationDate(of: fileURL))
        } catch let error as UnknownVersion {
            throw error
        } catch {
            logger.warning("identifier store: \(fileURL.path) cannot be read (\(error)); the next write replaces it")
            return nil
        }
    }

    struct UnknownVersion: Error, CustomStringConvertible {
        var version: Int
        var description: String { "format version \(version), this build reads \(StoreFile.currentVersion)" }
    }

    static func decode(_ data: Data, modified: Date) throws -> [LEAddress: Entry] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let version = try? decoder.decode(StoreFile.Version.self, from: data).version else {
            // Version 1: every address seen, by "address/kind"; its identities are kept, as
            // seen when the file was last written.
            let legacy = try decoder.decode([String: UUID].self, from: data)
            var entries: [LEAddress: Entry] = [:]
            for (key, identifier) in legacy {
                let parts = key.split(separator: "/")
                guard parts.count == 2, let bits = BluetoothAddress(String(parts[0])) else { continue }
                let address = LEAddress(parts[1] == "public" ? .publicDevice : .randomDevice, bits)
                guard !isPrivate(address) else { continue }
                entries[address] = Entry(identifier: identifier, lastSeen: modified)
            }
            return entries
        }
        guard version == StoreFile.currentVersion else { throw UnknownVersion(version: version) }
        var entries: [LEAddress: Entry] = [:]
        for device in try decoder.decode(StoreFile.self, from: data).devices {
            guard let bits = BluetoothAddress(device.address) else { continue }
            let address = LEAddress(device.random ? .randomDevice : .publicDevice, bits)
            guard !isPrivate(address) else { continue }
            entries[address] = Entry(identifier: device.identifier, lastSeen: device.lastSeen, bonded: device.bonded)
        }
        return entries
    }

    private static func modificationDate(of url: URL) -> Date {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date) ?? Date()
    }
}
