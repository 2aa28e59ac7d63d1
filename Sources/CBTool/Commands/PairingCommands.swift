import ArgumentParser
import CoreBluetooth
import Foundation
import HCITransport

/// `cbtool pair`: pairs with a device up front (iOS pairs only when a request needs it).
struct PairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Find a device, connect and pair with it (and bond, when both sides allow it).",
        discussion: """
            Prints the pairing method the devices chose, then what it needs: a passkey to type on the \
            device, the passkey the device shows (from --passkey, else read from stdin), or a number to \
            compare (y/n on stdin, or --yes). Check the method: a device that should ask for a passkey \
            but pairs with Just Works is not protected against a man in the middle.
            The bond belongs to the controller (see `cbtool bonds`); a virtual controller is a new device \
            in every run, so its bonds end with the run.
            Example: cbtool pair SecureSensor --io keyboard
            """)

    @OptionGroup var target: TargetOptions
    @Option(name: .long, help: "What this side can show and type.")
    var io: PairingIO = .displayKeyboard
    @Option(name: .long, help: ArgumentHelp("The passkey to type when one is asked for (0–999999; default: read it from stdin).",
                                            valueName: "n"))
    var passkey: UInt32?
    @Flag(name: .long, help: "Accept a numeric comparison without asking.")
    var yes = false
    @OptionGroup var central: CentralOptions

    func validate() throws {
        if let passkey {
            guard passkey <= 999_999 else { throw ValidationError("--passkey must be 0–999999") }
            guard io.canType else { throw ValidationError("--passkey needs --io keyboard or display-keyboard") }
        }
    }

    func run() throws {
        let session = try central.makeSession()
        let context = ToolContext.current
        let agent = TerminalPairingAgent(io: io, passkey: passkey, confirmNumbers: yes, context: context)
        session.manager.linuxPairingAgent = agent
        let sighting = try session.find(target.device, seconds: target.timeout)
        let peripheral = sighting.peripheral
        try session.connect(peripheral)
        defer { session.disconnect(peripheral) }
        let name = sighting.name ?? peripheral.identifier.uuidString
        progress("pairing with \(name) (this side: \(io.rawValue))…")
        do {
            try session.pair(peripheral)
        } catch let error as ToolError {
            let method = agent.methods.last.map { " (\(PairingText.method($0)))" } ?? ""
            throw ToolError("pairing with \(name) failed\(method): \(error.description)")
        }
        let method = agent.methods.last.map(PairingText.method) ?? "no question asked"
        guard let bond = session.manager.linuxBonds.first(where: { $0.identifier == peripheral.identifier }) else {
            emit("paired with \(name) (\(method)); not bonded: the keys last for this connection only")
            return
        }
        emit("paired with \(name) (\(method)), bonded:")
        emit(BondsCommand.line(bond))
    }
}

/// `cbtool bonds`: the controller's bonds.
struct BondsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bonds",
        abstract: "List the devices the controller is bonded with (never their keys).",
        discussion: """
            One line per bond: identifier, identity address (public or random), whether the key is \
            authenticated (made with protection against a man in the middle) and from LE Secure \
            Connections, its size, and whether the device gave its identity resolving key. \
            --json prints one JSON object per bond.
            """)

    @Flag(name: .long, help: "One JSON object per bond.")
    var json = false
    @OptionGroup var central: CentralOptions

    func run() throws {
        let session = try central.makeSession()
        let bonds = session.manager.linuxBonds
        for bond in bonds { emit(json ? Self.json(bond) : Self.line(bond)) }
        progress("\(bonds.count) bond\(bonds.count == 1 ? "" : "s")\(bonds.isEmpty ? central.memoryNote : "")")
    }

    static func line(_ bond: CBLinuxBond) -> String {
        "\(bond.identifier.uuidString)  \(bond.address) (\(bond.isPublicAddress ? "public" : "random"))"
            + "  authenticated \(bond.isAuthenticated ? "yes" : "no")"
            + "  secure-connections \(bond.isSecureConnections ? "yes" : "no")"
            + "  key-size \(bond.keySize)"
            + "  irk \(bond.hasIdentityResolvingKey ? "yes" : "no")"
    }

    static func json(_ bond: CBLinuxBond) -> String {
        let object: [String: Any] = [
            "identifier": bond.identifier.uuidString,
            "address": bond.address,
            "addressType": bond.isPublicAddress ? "public" : "random",
            "authenticated": bond.isAuthenticated,
            "secureConnections": bond.isSecureConnections,
            "keySize": bond.keySize,
            "identityResolvingKey": bond.hasIdentityResolvingKey,
            "created": ISO8601DateFormatter().string(from: bond.created),
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

/// `cbtool unpair`: forgets a bond.
struct UnpairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpair",
        abstract: "Forget a bonded device: its keys and what was kept for it.",
        discussion: "The device is named by its identifier or its identity address, as `cbtool bonds` lists them.")

    @Argument(help: ArgumentHelp("The bonded device: its identifier or its identity address (AA:BB:CC:DD:EE:FF).",
                                 valueName: "id|address"))
    var device: String
    @OptionGroup var central: CentralOptions

    func run() throws {
        let session = try central.makeSession()
        let manager = session.manager!
        let bonds = manager.linuxBonds
        let bond = bonds.first { bond in
            UUID(uuidString: device).map { $0 == bond.identifier } ?? (bond.address.caseInsensitiveCompare(device) == .orderedSame)
        }
        guard let bond, manager.linuxRemoveBond(bond.identifier) else {
            throw ToolError("no bond with \(device)\(bonds.isEmpty ? central.memoryNote : "")")
        }
        emit("removed the bond with \(bond.identifier.uuidString) (\(bond.address))")
    }
}

extension CentralOptions {
    /// Why a virtual controller shows no bonds from an earlier run: each run's is a new device.
    var memoryNote: String {
        let spec: TransportSpec? = ToolContext.current.radio != nil
            ? .virtual(path: nil) : try? transport.map(TransportSpec.init(parsing:)) ?? TransportSpec.fromEnvironment()
        guard case .virtual? = spec else { return "" }
        return " (a virtual controller is a new device in every run, so its bonds end with the run; "
            + "`cbtool controller` serves one that lasts)"
    }
}
