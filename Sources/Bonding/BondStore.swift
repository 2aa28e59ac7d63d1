import Dispatch
import Foundation
import HCI
import Logging
import SMP
import Scheduling
import StackLogging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the bond store refused a change.
public enum BondStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Re-pairing never replaces a key with a weaker one: the bond kept the key it had.
    case weakerKey
    /// A key (LTK, IRK, CSRK) is not 16 octets, a Database Hash not 16 octets, or an
    /// encryption key size not 7–16.
    case malformedBond
    /// No directory was given and none could be derived (`CB_BOND_DIR`, `XDG_STATE_HOME` and
    /// `HOME` all unset).
    case noDirectory
    /// The store's directory could not be made or opened.
    case directory(path: String, errno: Int32)

    public var description: String {
        switch self {
        case .weakerKey: "the bond has a stronger key than the new pairing's; kept it"
        case .malformedBond: "a key, Database Hash or key size in the bond has the wrong length"
        case .noDirectory: "no directory for the bond store (set CB_BOND_DIR, XDG_STATE_HOME or HOME)"
        case .directory(let path, let code): "bond store directory \(path): \(String(cString: strerror(code)))"
        }
    }
}

/// The Security Manager's bonds on one controller identity, kept across runs.
///
/// One JSON file per controller identity in ``directory``, mode 0600 in a 0700 directory. The
/// store answers from memory; every change is saved off the caller's thread, changes in a row
/// coalesced into one write. A write is atomic (a temporary file fsynced, renamed over the
/// store, the directory fsynced), so a process killed at any moment leaves the previous or the
/// next complete store. A store that cannot be read is moved aside and the store starts empty.
///
/// Thread-safe. Not for several processes on one file at once: each would overwrite the
/// other's changes.
public final class BondStore: @unchecked Sendable, FlushedAtExit {
    // @unchecked: the mutable state is only touched under `state`'s lock, and file writes only
    // on the serial `writer` queue; everything else is immutable.

    /// The controller's identity address whose bonds these are.
    public let controllerIdentity: LEAddress
    /// The store's file; nil for a store kept in memory only.
    public let fileURL: URL?
    /// The directory holding the store's file; nil in memory.
    public var directory: URL? { fileURL?.deletingLastPathComponent() }

    private struct State {
        var bonds: [LEAddress: Bond] = [:]
        var localIRK: [UInt8]?
        /// A write is queued and has not yet taken its snapshot: later changes ride along.
        var writeQueued = false
        /// Files written, for the tests of coalescing.
        var writes = 0
    }

    private let state = Locked(State())
    /// Internal for tests, which hold it to see changes coalesce. None for a store in memory
    /// (one per simulated device, and fleets have thousands).
    let writer: DispatchQueue?
    /// `corebluetooth.smp` (the bonds are the Security Manager's): a file that could not be read
    /// or written. Never a key.
    private let logger: Logger

    /// Opens (or starts) the store of the controller with identity address
    /// `controllerIdentity`.
    ///
    /// - Parameters:
    ///   - controllerIdentity: The controller's public or static random address.
    ///   - directory: Where the store lives; nil for ``defaultDirectory(environment:)``.
    ///     Created (mode 0700) when missing.
    ///   - logger: Told, in one line each, about a store that could not be read (and where it
    ///     was moved) and about failed writes. Never given a key. Called on any thread,
    ///     including the store's writer: it must not call ``flush()``.
    /// - Throws: ``BondStoreError/noDirectory`` or ``BondStoreError/directory(path:errno:)``
    ///   when there is no usable directory. A damaged store is not an error.
    public init(controllerIdentity: LEAddress, directory: URL? = nil, logger: Logger = StackLogging.standard.logger(.smp)) throws {
        self.controllerIdentity = Bond.identity(of: controllerIdentity)
        self.logger = logger
        let isDefault = directory == nil
        guard let directory = directory ?? Self.defaultDirectory() else { throw BondStoreError.noDirectory }
        fileURL = directory.appendingPathComponent(Self.fileName(for: self.controllerIdentity))
        writer = DispatchQueue(label: "Bonding.BondStore.writer")
        try Self.makeDirectory(directory, tighten: isDefault)
        removeStaleTemporaryFiles()
        load()
        FlushAtExit.register(self)
    }

    /// A store that keeps its bonds in memory only, for the life of the process: what a
    /// simulated controller, whose identity does not outlive the process, is given.
    public init(inMemoryFor controllerIdentity: LEAddress, logger: Logger = StackLogging.standard.logger(.smp)) {
        self.controllerIdentity = Bond.identity(of: controllerIdentity)
        self.logger = logger
        fileURL = nil
        writer = nil
    }

    /// Where stores live when no directory is given: `$CB_BOND_DIR`, else
    /// `$XDG_STATE_HOME/corebluetooth-linux`, else `~/.local/state/corebluetooth-linux`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        if let path = environment["CB_BOND_DIR"], !path.isEmpty { return URL(fileURLWithPath: path) }
        if let state = environment["XDG_STATE_HOME"], !state.isEmpty {
            return URL(fileURLWithPath: state).appendingPathComponent("corebluetooth-linux")
        }
        if let home = environment["HOME"], !home.isEmpty {
            return URL(fileURLWithPath: home).appendingPathComponent(".local/state/corebluetooth-linux")
        }
        return nil
    }

    /// `bonds-AABBCCDDEEFF.json`, or `bonds-AABBCCDDEEFF-random.json` for a static random
    /// identity (the same 48 bits may be both).
    static func fileName(for identity: LEAddress) -> String {
        let hex = identity.address.description.replacingOccurrences(of: ":", with: "")
        return "bonds-\(hex)\(identity.isRandom ? "-random" : "").json"
    }

    // MARK: Queries and changes

    /// This device's identity resolving key (16 octets, least significant first, as SMP
    /// distributes it): made at random on first use, never all zero, kept in the store.
    public var localIRK: [UInt8] {
        state.withLock { state in
            if let irk = state.localIRK { return irk }
            var rng = SystemRandomNumberGenerator()
            var irk = [UInt8](repeating: 0, count: 16)
            while irk.allSatisfy({ $0 == 0 }) { irk = (0..<16).map { _ in rng.next() } }
            state.localIRK = irk
            scheduleWrite(&state)
            return irk
        }
    }

    /// Every bond, ordered by peer identity address.
    public var bonds: [Bond] {
        Self.ordered(state.withLock { $0.bonds.values })
    }

    /// By identity address, a public one before a random one with the same bits: a stable
    /// order for callers and for the file (which then changes only where the bonds do).
    private static func ordered(_ bonds: some Sequence<Bond>) -> [Bond] {
        func key(_ bond: Bond) -> (BluetoothAddress, Int) { (bond.peerIdentity.address, bond.peerIdentity.isRandom ? 1 : 0) }
        return bonds.sorted { key($0) < key($1) }
    }

    /// The bond with the device seen at `peer`: by identity address, or by a resolvable
    /// private address that a bond's peer IRK resolves. Never creates a bond.
    public func bond(for peer: LEAddress) -> Bond? {
        state.withLock { Self.find(peer, in: $0.bonds).map { $0.bond } }
    }

    /// Stores `bond` under its peer identity, replacing the bond there (whose `createdAt` it
    /// keeps).
    ///
    /// - Throws: ``BondStoreError/weakerKey`` when the bond there has a central or peripheral
    ///   LTK stronger than `bond`'s (``SMPLongTermKey/isWeaker(than:)``): the store is
    ///   unchanged. ``BondStoreError/malformedBond`` for a key of the wrong length.
    public func store(_ bond: Bond) throws {
        var bond = bond
        bond.peerIdentity = Bond.identity(of: bond.peerIdentity)
        guard bond.isWellFormed else { throw BondStoreError.malformedBond }
        try state.withLock { state in
            if let old = state.bonds[bond.peerIdentity] {
                try Self.checkNotWeaker(bond, than: old)
                bond.createdAt = old.createdAt
                guard bond != old else { return }
            }
            state.bonds[bond.peerIdentity] = bond
            scheduleWrite(&state)
        }
    }

    /// Stores what a finished pairing with the device at `peer` produced: merged into the
    /// bond with that peer (found as ``bond(for:)`` finds it, or under the identity address
    /// the pairing distributed), else a new bond. Nothing is stored when the pairing did not
    /// bond.
    ///
    /// - Returns: The bond as stored; nil when `outcome.bonded` is false.
    /// - Throws: ``BondStoreError/weakerKey`` when the pairing's LTK is weaker than the one the
    ///   bond has: the bond keeps all its keys. ``BondStoreError/malformedBond`` for a key of
    ///   the wrong length.
    @discardableResult
    public func save(_ outcome: PairingOutcome, peer: LEAddress) throws -> Bond? {
        guard outcome.bonded else { return nil }
        let now = Date()
        return try state.withLock { state in
            // The bond under the identity the pairing distributed, else the one `peer` finds.
            let old = outcome.peerIdentityAddress.flatMap { state.bonds[Bond.identity(of: $0)] }
                ?? Self.find(peer, in: state.bonds)?.bond
            let identity = Bond.identity(of: outcome.peerIdentityAddress ?? old?.peerIdentity ?? peer)
            var bond = old ?? Bond(peerIdentity: identity, createdAt: now)
            bond.merge(outcome, date: now)
            bond.peerIdentity = identity
            guard bond.isWellFormed else { throw BondStoreError.malformedBond }
            if let old {
                try Self.checkNotWeaker(bond, than: old)
                // A peer that now distributes another identity moves its bond.
                state.bonds[old.peerIdentity] = nil
            }
            state.bonds[identity] = bond
            scheduleWrite(&state)
            return bond
        }
    }

    /// Changes the bond with the device at `peer` (found as ``bond(for:)`` finds it), for
    /// what the host learns between pairings: CCCD values, Service Changed, sign counters, the
    /// peer's Database Hash; also to drop a key the peer no longer has. The bond's identity and
    /// `createdAt` stay; `updatedAt` is set when anything changed. A change that leaves a key
    /// of the wrong length is dropped (and logged). Nothing happens without a bond.
    ///
    /// - Returns: Whether there was a bond. `body` runs under the store's lock: keep it short
    ///   and do not call the store from it.
    @discardableResult
    public func update(peer: LEAddress, _ body: (inout Bond) -> Void) -> Bool {
        let (found, malformed) = state.withLock { state -> (LEAddress?, Bool) in
            guard let (identity, old) = Self.find(peer, in: state.bonds) else { return (nil, false) }
            var bond = old
            body(&bond)
            bond.peerIdentity = identity
            bond.createdAt = old.createdAt
            guard bond != old else { return (identity, false) }
            guard bond.isWellFormed else { return (identity, true) }
            bond.updatedAt = max(Date(), old.updatedAt)
            state.bonds[identity] = bond
            scheduleWrite(&state)
            return (identity, false)
        }
        // Outside the lock: the log may do anything, even ask the store something.
        if let found, malformed {
            logger.warning("bond store: dropped a change to the bond with \(found): a key of the wrong length")
        }
        return found != nil
    }

    /// Forgets the bond with the device at `peer` (found as ``bond(for:)`` finds it).
    ///
    /// - Returns: Whether there was one.
    @discardableResult
    public func removeBond(for peer: LEAddress) -> Bool {
        state.withLock { state in
            guard let (identity, _) = Self.find(peer, in: state.bonds) else { return false }
            state.bonds[identity] = nil
            scheduleWrite(&state)
            return true
        }
    }

    /// Forgets every bond. The local IRK stays: peers bonded elsewhere still resolve us.
    public func removeAll() {
        state.withLock { state in
            guard !state.bonds.isEmpty else { return }
            state.bonds = [:]
            scheduleWrite(&state)
        }
    }

    /// Waits until every change made before the call is on disk (or its write failed, which
    /// is logged). For tests and shutdown.
    public func flush() {
        writer?.sync {}
    }

    /// Files written so far (tests of coalescing).
    var writeCount: Int { state.withLock { $0.writes } }

    private static func find(_ peer: LEAddress, in bonds: [LEAddress: Bond]) -> (identity: LEAddress, bond: Bond)? {
        if let bond = bonds[Bond.identity(of: peer)] { return (bond.peerIdentity, bond) }
        guard peer.isRandom, peer.address.randomSubtype == .resolvablePrivate else { return nil }
        return bonds.first { $0.value.matches(peer) }.map { ($0.key, $0.value) }
    }

    private static func checkNotWeaker(_ new: Bond, than old: Bond) throws {
        for (newKey, oldKey) in [(new.centralLTK, old.centralLTK), (new.peripheralLTK, old.peripheralLTK)] {
            if let newKey, let oldKey, newKey.isWeaker(than: oldKey) { throw BondStoreError.weakerKey }
        }
    }

    // MARK: Persistence

    /// The store's file as written. A format change bumps `version`; a file of a later
    /// version is moved aside rather than misread.
    private struct StoreFile: Codable {
        static let currentVersion = 1
        var version: Int
        var controllerIdentity: CodedAddress
        var localIRK: String?
        var bonds: [Bond]

        struct Version: Decodable { var version: Int }
    }

    /// Under the lock: queues a write unless one is queued that has not yet taken its
    /// snapshot (it will see this change too).
    private func scheduleWrite(_ state: inout State) {
        guard let writer, !state.writeQueued else { return }
        state.writeQueued = true
        writer.async { self.write() }
    }

    /// On `writer`: the newest state, encoded and written.
    private func write() {
        let (bonds, localIRK) = state.withLock { state in
            state.writeQueued = false
            state.writes += 1
            return (state.bonds.values, state.localIRK)
        }
        let file = StoreFile(version: StoreFile.currentVersion, controllerIdentity: CodedAddress(controllerIdentity),
                             localIRK: localIRK.map(Hex.encode),
                             bonds: Self.ordered(bonds))
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            guard let fileURL else { return }
            try AtomicFile.write(try encoder.encode(file), to: fileURL)
        } catch {
            logger.error("bond store: could not save \(fileURL?.path ?? "?"): \(error)")
        }
    }

    private func load() {
        guard let fileURL else { return }
        let path = fileURL.path
        guard FileManager.default.fileExists(atPath: path) else { return }
        let file: StoreFile
        do {
            let data = try Data(contentsOf: fileURL)
            // The version first: a later format may not decode as this one.
            let version = try JSONDecoder().decode(StoreFile.Version.self, from: data).version
            guard version == StoreFile.currentVersion else {
                return moveAside(reason: "format version \(version), this build reads \(StoreFile.currentVersion)")
            }
            file = try JSONDecoder().decode(StoreFile.self, from: data)
            guard try file.controllerIdentity.decoded(codingPath: []) == controllerIdentity else {
                return moveAside(reason: "it is another controller's")
            }
        } catch let error as DecodingError {
            // Only where decoding stopped: a DecodingError's own text may quote a value.
            return moveAside(reason: "not a bond store (at \(Self.describe(error)))")
        } catch {
            return moveAside(reason: "unreadable (\(error.localizedDescription))")
        }
        let irk = file.localIRK.flatMap { try? Hex.decode($0, codingPath: []) }
        state.withLock { state in
            for bond in file.bonds { state.bonds[Bond.identity(of: bond.peerIdentity)] = bond }
            // A local IRK that is not 16 octets, or all zero, is replaced on first use.
            if let irk, irk.count == 16, !irk.allSatisfy({ $0 == 0 }) { state.localIRK = irk }
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        let context: DecodingError.Context? =
            switch error {
            case .dataCorrupted(let c), .keyNotFound(_, let c), .typeMismatch(_, let c), .valueNotFound(_, let c): c
            @unknown default: nil
            }
        let path = context?.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        return path.map { $0.isEmpty ? "the top" : $0 } ?? "an unknown place"
    }

    /// Renames the unreadable store to `<name>.corrupt-<UTC time>` (kept for a person to look
    /// at); the store starts empty.
    private func moveAside(reason: String) {
        guard let fileURL else { return }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withYear, .withMonth, .withDay, .withTime, .withTimeZone]
        let base = "\(fileURL.path).corrupt-\(formatter.string(from: Date()))"
        var target = base
        var n = 1
        while FileManager.default.fileExists(atPath: target) {
            n += 1
            target = "\(base)-\(n)"
        }
        if rename(fileURL.path, target) == 0 {
            logger.warning("bond store: \(fileURL.path) is \(reason); moved it to \(target) and started with no bonds")
        } else {
            let code = errno
            logger.error("bond store: \(fileURL.path) is \(reason) and could not be moved aside (\(String(cString: strerror(code)))); started with no bonds")
        }
    }

    /// Temporary files of writers that were killed before their rename. A live process's
    /// (another store open on the same file, against the advice above) is left alone.
    private func removeStaleTemporaryFiles() {
        guard let fileURL else { return }
        AtomicFile.removeStaleTemporaryFiles(for: fileURL)
    }

    /// Makes `directory` (mode 0700) and any missing parents. An existing directory is
    /// tightened to 0700 only when it is the default one, which is ours; a directory the
    /// caller chose is left as it is.
    private static func makeDirectory(_ directory: URL, tighten: Bool) throws {
        let path = directory.path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw BondStoreError.directory(path: path, errno: ENOTDIR) }
            if tighten, chmod(path, 0o700) != 0 { throw BondStoreError.directory(path: path, errno: errno) }
            return
        }
        do {
            try FileManager.default.createDirectory(at: directory.deletingLastPathComponent(),
                                                    withIntermediateDirectories: true)
        } catch {
            throw BondStoreError.directory(path: directory.deletingLastPathComponent().path, errno: EACCES)
        }
        // mkdir's mode is masked by the umask; chmod makes it exactly 0700.
        guard mkdir(path, 0o700) == 0 || errno == EEXIST, chmod(path, 0o700) == 0 else {
            throw BondStoreError.directory(path: path, errno: errno)
        }
    }
}

extension Bond {
    /// Lengths the spec fixes, checked before a bond is stored.
    var isWellFormed: Bool {
        let keys = [peerIRK, peerCSRK, localCSRK, peerDatabaseHash, centralLTK?.key, peripheralLTK?.key]
        return keys.allSatisfy { $0 == nil || $0?.count == 16 }
            && [centralLTK, peripheralLTK].allSatisfy { $0 == nil || (7...16).contains($0!.keySize) }
    }
}
