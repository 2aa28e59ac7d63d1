import ArgumentParser
import CoreBluetooth
import Foundation
import HCITransport

/// The options every central command shares: which controller, and how long to look.
struct CentralOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The controller, as CB_TRANSPORT takes it (default: CB_TRANSPORT, else the in-process virtual radio).",
                                            valueName: "spec"))
    var transport: String?

    @Option(name: .long, help: ArgumentHelp("Where the controller's bonds are kept (default: CB_BOND_DIR, else ~/.local/state/corebluetooth-linux; a virtual controller keeps them in memory unless one is named).",
                                            valueName: "path"))
    var bondDir: String?

    @Option(name: .long, help: ArgumentHelp("Write a btsnoop capture of this command's HCI traffic there (as CB_SNOOP does).",
                                            valueName: "path"))
    var snoop: String?

    /// A session on the chosen controller, powered on; the transport is checked first so that a
    /// typo or an absent radio is one clear line.
    func makeSession(options: [String: Any] = [:]) throws -> CentralSession {
        try Self.checkTransport(transport)
        let session = CentralSession(context: ToolContext.current, transport: transport, bondDirectory: bondDir, snoopPath: snoop,
                                     options: options)
        try session.waitPoweredOn()
        return session
    }

    static func checkTransport(_ text: String?) throws {
        guard ToolContext.current.radio == nil else { return }
        // `corebluetoothd`'s socket: the managers report an unreachable daemon themselves.
        let chosen = (text ?? ProcessInfo.processInfo.environment[TransportSpec.environmentVariable])?
            .trimmingCharacters(in: .whitespaces)
        if let chosen, chosen == "daemon" || chosen.hasPrefix("daemon:") { return }
        let spec: TransportSpec
        do {
            spec = try text.map(TransportSpec.init(parsing:)) ?? TransportSpec.fromEnvironment()
        } catch {
            throw ToolError("\(error)")
        }
        if case .virtual(let path?) = spec, !FileManager.default.fileExists(atPath: path) {
            throw ToolError("virtual:\(path): no radio there (start one with `cbtool radio --listen \(path)`)")
        }
    }
}

/// Finds a device by identifier or name, connects and discovers its database.
struct TargetOptions: ParsableArguments {
    @Argument(help: ArgumentHelp("The device: its identifier (a UUID, as `cbtool scan` shows) or its advertised or GAP name.",
                                 valueName: "id|name"))
    var device: String

    @Option(name: .long, help: "Seconds to scan for the device before giving up.")
    var timeout: Double = 5

    func validate() throws {
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    /// Scans for the device, connects and discovers everything.
    func connect(_ session: CentralSession) throws -> Sighting {
        let sighting = try session.find(device, seconds: timeout)
        try session.connect(sighting.peripheral)
        try session.discoverAll(sighting.peripheral)
        return sighting
    }
}

extension CentralSession {
    /// Waits for the next value update of `characteristic` after `count` updates; returns it.
    func nextValue(of characteristic: CBCharacteristic, after count: Int, seconds: Double) throws -> Data {
        let arrived = context.wait(seconds: seconds) { [self] in updateCount(characteristic) > count }
        guard arrived else { throw ToolError("no value from \(characteristic.uuid.uuidString) in \(Self.format(seconds)) s") }
        return characteristic.value ?? Data()
    }

    /// Prints the GATT tree: services, characteristics with properties and values (read where
    /// readable, decoded where the type is known), descriptors with values.
    func printTree(of peripheral: CBPeripheral, indent: String = "", to print: (String) -> Void) {
        for service in peripheral.services ?? [] {
            print("\(indent)service \(GATTDescription.label(service.uuid, GATTDescription.serviceNames))\(service.isPrimary ? "" : " (secondary)")")
            for characteristic in service.characteristics ?? [] {
                var line = "\(indent)  characteristic \(GATTDescription.label(characteristic.uuid, GATTDescription.characteristicNames))"
                line += " [\(GATTDescription.properties(characteristic.properties).joined(separator: ", "))]"
                if characteristic.properties.contains(.read) {
                    do {
                        let value = try read(characteristic)
                        line += " = \(GATTDescription.value(value, of: characteristic.uuid))"
                    } catch {
                        line += " (read failed: \(error))"
                    }
                }
                print(line)
                for descriptor in characteristic.descriptors ?? [] {
                    var text = "\(indent)    descriptor \(GATTDescription.label(descriptor.uuid, GATTDescription.descriptorNames))"
                    do {
                        text += " = \(GATTDescription.descriptorValue(try read(descriptor), of: descriptor.uuid))"
                    } catch {
                        text += " (read failed: \(error))"
                    }
                    print(text)
                }
            }
        }
    }
}
