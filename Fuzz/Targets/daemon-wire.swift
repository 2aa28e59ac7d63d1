// corebluetoothd's wire protocol (docs/daemon.md) and the daemon's side of a client session.
// The first byte picks how the rest is read:
// - even: raw bytes from a client socket, cut in chunks of the size that byte gives, through
//   `DaemonFrameReader` (framing, lengths, every message's decoder); each message must encode
//   back to itself, and the client's messages go on to a `DaemonClient`, as the server hands
//   them over, until one breaks the protocol;
// - odd: a script of client messages built from the input (sessions, peers, requests, and the
//   services and characteristics the daemon's own replies named), with virtual time passing
//   between them, so that scans, connections, discovery, reads, writes, subscriptions and
//   connection-event registrations run against a real peripheral on the virtual radio and are
//   cut short when the client goes, or kept for restoration (identifier "r") and handed to a
//   later input's session with the same identifier.
// One daemon device and one peripheral serve every input (a fresh device per input would make
// the target 100 times slower); each input is a new client, closed at the end, and the loop runs
// until its sessions have left the device. LeakSanitizer is off for this target
// (daemon-wire.flags): the bench outlives every input and Swift keeps some of its references
// where LeakSanitizer cannot see them (weak side tables, enum payloads with tag bits), so it
// reports the bench's own memory; the RSS limit still bounds what inputs leave behind.
import ATT
import AssignedNumbers
import CoreBluetoothDaemon
import DaemonProtocol
import GATT
import HCI
import HostDevice
import HostStack
import RoleServices
import Scheduling
import VirtualController

/// The peripheral: one service (0xAA00) with a readable, writable, notifying characteristic
/// (0xAA01) and a long value (0xAA02).
final class BenchPeripheral: HostDeviceClient, @unchecked Sendable {
    // Safe: the fuzzer calls one input at a time on one thread; the loop is manual and runs there.
    func device(_ device: HostDevice, read request: GATTReadRequest, on connection: DeviceConnection,
                respond: @escaping (Result<[UInt8], ATTErrorCode>) -> Void) {
        respond(.success(Array(repeating: 0x2A, count: 300)))
    }
    func device(_ device: HostDevice, write requests: [GATTWriteRequest], on connection: DeviceConnection,
                respond: @escaping (ATTErrorCode?) -> Void) { respond(nil) }
}

/// Built once: a daemon device and the peripheral on one virtual radio, on a manual loop.
final class Bench: @unchecked Sendable {
    // Safe: see BenchPeripheral.
    let loop = EventLoop(name: "fuzz", pacing: .manual)
    let daemon: HostDevice
    let peripheralDevice: HostDevice
    let peripheral = BenchPeripheral()
    /// Sessions kept for restoration (the script opens them with the identifier "r") and the
    /// connection-event registry, shared by every input as by every client of a daemon.
    let restoration = DaemonRestoration(parkedLimit: 16)
    let connectionEvents = ConnectionEvents()

    init() {
        let radio = VirtualRadio(loop: loop, seed: 17)
        let loop = self.loop
        func make(_ address: String, x: Double) -> HostDevice {
            let controller = VirtualController(radio: radio, address: BluetoothAddress(address)!, position: RadioPosition(x: x))
            return HostDevice(transport: controller.makeHostTransport(), loop: loop, deviceName: address)
        }
        daemon = make("C0:00:00:00:17:01", x: 0)
        peripheralDevice = make("C0:00:00:00:17:02", x: 2)
        for device in [daemon, peripheralDevice] {
            var started = false
            device.start { _ in started = true }
            _ = loop.run(until: { started }, timeout: .seconds(30))
        }
        peripheralDevice.addClient(peripheral, roles: .peripheral)
        _ = try? peripheralDevice.addService(GATTService(uuid: BluetoothUUID(uuid16: 0xAA00), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0xAA01), properties: [.read, .write, .notify, .indicate],
                               permissions: [.readable, .writeable], value: .dynamic),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0xAA02), properties: [.read],
                               permissions: [.readable], value: .dynamic),
        ]), for: peripheral)
        peripheralDevice.startAdvertising(
            AdvertisingParameters(data: [0x02, 0x01, 0x06, 0x03, 0x03, 0x00, 0xAA], ownRandomAddress: false),
            for: peripheral) { _ in }
        loop.run(for: .seconds(1))
    }

    var peer: LEAddress { peripheralDevice.address ?? LEAddress(.publicDevice, BluetoothAddress("C0:00:00:00:17:02")!) }
}

let bench = Bench()

/// The bench is built before the first input, so LeakSanitizer, which checks each input's
/// allocations, does not take the bench's for that input's.
@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    _ = bench
    return 0
}

/// What the daemon said to this input's client, kept to pick the next script steps from.
final class Heard: @unchecked Sendable {
    // Safe: see BenchPeripheral.
    var services: [DiscoveredService] = []
    var characteristics: [DiscoveredCharacteristic] = []
    var count = 0
    private var reader = DaemonFrameReader()

    func take(_ message: DaemonMessage) {
        // Whatever the daemon sends, its client must be able to read.
        reader.append(DaemonFrame.encode(message))
        do {
            while let decoded = try reader.next() { precondition(decoded == message, "the daemon's \(message.kind) does not decode to itself") }
        } catch {
            preconditionFailure("the daemon sent a frame its client cannot read: \(error)")
        }
        count += 1
        switch message {
        case .services(_, _, .success(let found)): services += found.prefix(8)
        case .characteristics(_, _, .success(let found)): characteristics += found.prefix(8)
        default: break
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let mode = input.u8()
    let heard = Heard()
    let client = DaemonClient(device: bench.daemon, name: "fuzz", uid: UInt32(mode >> 7), restoration: bench.restoration,
                              connectionEvents: bench.connectionEvents) { heard.take($0) }
    if mode & 1 == 0 {
        raw(&input, chunk: Int(mode >> 1) + 1, client: client)
    } else {
        script(&input, client: client, heard: heard)
    }
    client.close()
    bench.loop.run(for: .seconds(2))
    return 0
}

/// Bytes as a socket delivers them: frames cut anywhere.
func raw(_ input: inout FuzzInput, chunk: Int, client: DaemonClient) {
    var reader = DaemonFrameReader()
    var saidHello = false
    while !input.isEmpty {
        reader.append(input.take(chunk))
        while true {
            let message: DaemonMessage
            do {
                guard let next = try reader.next() else { break }
                message = next
            } catch {
                return
            }
            // One encoder and one decoder: they agree.
            var again = DaemonFrameReader()
            again.append(DaemonFrame.encode(message))
            precondition((try? again.next()) == message, "\(message.kind) does not survive encoding and decoding")
            if !saidHello, case .hello = message { saidHello = true }
            do {
                try client.receive(message)
            } catch {
                return
            }
            bench.loop.run(for: .milliseconds(50))
        }
    }
}

/// Client messages built from choices, with time passing between them.
func script(_ input: inout FuzzInput, client: DaemonClient, heard: Heard) {
    do {
        try client.receive(.hello(version: input.u16() % 4, minimumVersion: 1, name: "fuzz"))
        var request: UInt32 = 0
        while !input.isEmpty {
            let op = input.u8()
            let session = UInt32(op >> 6)
            let peer: LEAddress = input.bool()
                ? bench.peer : LEAddress(input.bool() ? .publicDevice : .randomDevice, BluetoothAddress(wire: Array((input.take(6) + [0, 0, 0, 0, 0, 0]).prefix(6)))!)
            let handle = ATTHandle(rawValue: input.u16())
            request &+= 1
            let service = heard.services.isEmpty ? DiscoveredService(uuid: BluetoothUUID(uuid16: 0xAA00), handles: ATTHandle(rawValue: 1)...ATTHandle(rawValue: 0xFFFF))
                : heard.services[Int(input.u8()) % heard.services.count]
            let characteristic = heard.characteristics.isEmpty ? nil : heard.characteristics[Int(input.u8()) % heard.characteristics.count]
            switch op & 0x1F {
            case 0: try client.receive(.openCentral(session: session, restoreIdentifier: input.bool() ? "r" : nil))
            case 1: try client.receive(.openPeripheral(session: session, restoreIdentifier: input.bool() ? "r" : nil))
            case 2: try client.receive(.close(session: session))
            case 3: try client.receive(.startScan(session: session, services: input.bool() ? [BluetoothUUID(uuid16: 0xAA00)] : nil,
                                                  solicited: [], allowDuplicates: input.bool()))
            case 4: try client.receive(.stopScan(session: session))
            case 5: try client.receive(.connect(session: session, peer: peer, autoReconnect: input.bool()))
            case 6: try client.receive(.cancel(session: session, peer: peer, notify: input.bool()))
            case 7: try client.receive(.discoverServices(session: session, peer: peer, request: request,
                                                         uuid: input.bool() ? BluetoothUUID(uuid16: 0xAA00) : nil))
            case 8: try client.receive(.discoverIncludedServices(session: session, peer: peer, request: request, service: service))
            case 9: try client.receive(.discoverCharacteristics(session: session, peer: peer, request: request, service: service))
            case 10:
                if let characteristic {
                    try client.receive(.discoverDescriptors(session: session, peer: peer, request: request, characteristic: characteristic))
                }
            case 11: try client.receive(.read(session: session, peer: peer, request: request, handle: characteristic?.valueHandle ?? handle))
            case 12: try client.receive(.write(session: session, peer: peer, request: request, handle: characteristic?.valueHandle ?? handle,
                                               value: input.take(Int(input.u16() % 700))))
            case 13: try client.receive(.writeWithoutResponse(session: session, peer: peer, handle: characteristic?.valueHandle ?? handle,
                                                              value: input.record()))
            case 14:
                if let characteristic {
                    try client.receive(.setNotify(session: session, peer: peer, request: request, characteristic: characteristic,
                                                  clientConfiguration: input.bool() ? nil : ATTHandle(rawValue: characteristic.valueHandle.rawValue &+ 1),
                                                  enabled: input.bool()))
                }
            case 15: try client.receive(.readRSSI(session: session, peer: peer, request: request))
            case 16: try client.receive(.hello(version: 1, minimumVersion: 1, name: ""))
            case 17:
                try client.receive(.registerConnectionEvents(session: session, services: input.bool() ? [BluetoothUUID(uuid16: 0xAA00)] : nil,
                                                             peripherals: input.bool() ? [peer] : nil))
            // Any parameters, valid or not: the controller refuses what the link layer cannot do.
            case 18: try client.receive(.setConnectionParameters(session: session, peer: peer, intervalMin: input.u16(),
                                                                 intervalMax: input.u16(), latency: input.u16(), timeout: input.u16()))
            case 19: try client.receive(.setPHY(session: session, peer: peer, phy: input.u8() % 3 + 1))
            default:
                // Time passes: connections complete, procedures answer, timeouts fire.
                bench.loop.run(for: .milliseconds(Int64(op >> 5) * 400 + 10))
            }
            bench.loop.run(for: .milliseconds(5))
        }
    } catch {
        // The client broke the protocol; the daemon closed it.
    }
}
