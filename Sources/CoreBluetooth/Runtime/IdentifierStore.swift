import Foundation
import HCI
import Scheduling

/// The `identifier` UUIDs of remote devices, one per device address, kept across runs in a JSON
/// file so that a peripheral keeps its identifier (as on iOS, where the system remembers it).
///
/// The file is `$CB_IDENTIFIER_STORE`, else `$XDG_STATE_HOME/corebluetooth-linux/identifiers.json`,
/// else `~/.local/state/corebluetooth-linux/identifiers.json`. A store without a file (test
/// radios) keeps its map in memory.
final class IdentifierStore: @unchecked Sendable {
    private let fileURL: URL?
    private let state: Locked<(byAddress: [String: UUID], loaded: Bool)>

    init(fileURL: URL?) {
        self.fileURL = fileURL
        state = Locked((byAddress: [:], loaded: fileURL == nil))
    }

    /// The store shared by devices on real and external controllers and the default radio.
    static let persistent = IdentifierStore(fileURL: defaultFileURL())

    static func defaultFileURL(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
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

    private static func key(_ address: LEAddress) -> String {
        let kind = address.type == .publicDevice || address.type == .publicIdentity ? "public" : "random"
        return "\(address.address)/\(kind)"
    }

    /// The identifier of the device at `address`, made (and saved) the first time it is asked.
    func identifier(for address: LEAddress) -> UUID {
        let key = Self.key(address)
        var snapshot: [String: UUID]?
        let id = state.withLock { state -> UUID in
            loadIfNeeded(&state)
            if let id = state.byAddress[key] { return id }
            let id = UUID()
            state.byAddress[key] = id
            snapshot = state.byAddress
            return id
        }
        if let snapshot { save(snapshot) }
        return id
    }

    /// The address of the device with `identifier`, if this store has seen it.
    func address(for identifier: UUID) -> LEAddress? {
        let key = state.withLock { state -> String? in
            loadIfNeeded(&state)
            return state.byAddress.first { $0.value == identifier }?.key
        }
        guard let key else { return nil }
        let parts = key.split(separator: "/")
        guard parts.count == 2, let address = BluetoothAddress(String(parts[0])) else { return nil }
        return LEAddress(parts[1] == "public" ? .publicDevice : .randomDevice, address)
    }

    private func loadIfNeeded(_ state: inout (byAddress: [String: UUID], loaded: Bool)) {
        guard !state.loaded else { return }
        state.loaded = true
        guard let fileURL, let data = try? Data(contentsOf: fileURL),
              let map = try? JSONDecoder().decode([String: UUID].self, from: data) else { return }
        state.byAddress.merge(map) { current, _ in current }
    }

    private func save(_ map: [String: UUID]) {
        guard let fileURL else { return }
        do {
            try FileManager.default.createDirectory(at: fileURL.deletingLastPathComponent(),
                                                    withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            try encoder.encode(map).write(to: fileURL, options: .atomic)
        } catch {
            StackLog.log("could not save peripheral identifiers to \(fileURL.path): \(error)")
        }
    }
}
