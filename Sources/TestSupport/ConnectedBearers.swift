import ATT
import Foundation
import HCI
import HCITransport
import HostStack
import Scheduling
import VirtualController

/// Thrown when a test fixture's awaited value never came.
public struct FixtureError: Error, CustomStringConvertible {
    public var description: String
}

func requireValue<T>(_ value: T?, _ what: String = "value") throws -> T {
    guard let value else { throw FixtureError(description: "no \(what) arrived in time") }
    return value
}

/// Two LE hosts on one virtual radio, connected, with an ATT bearer on each end of the link:
/// the central's is the client, the peripheral's the server. Runs on virtual time.
public final class ConnectedBearers: LEHostDelegate, @unchecked Sendable {
    public let loop = EventLoop(name: "radio", pacing: .manual)
    public let central: LEHost
    public let peripheral: LEHost
    private var connected: [LERole: LEConnection] = [:]
    public private(set) var disconnected = 0
    public static let peripheralAddress = LEAddress(.publicDevice, BluetoothAddress("C0:00:00:00:02:01")!)

    /// `snoop`: a capture of the central's HCI traffic.
    public init(snoop: BtsnoopWriter? = nil) throws {
        let radio = VirtualRadio(loop: loop, seed: 23)
        var centralTransport = VirtualController(radio: radio, address: BluetoothAddress("C0:00:00:00:02:02")!).makeHostTransport()
        if let snoop { centralTransport = SnoopingTransport(wrapping: centralTransport, writer: snoop) }
        central = LEHost(transport: centralTransport, loop: loop)
        peripheral = LEHost(transport: VirtualController(radio: radio, address: Self.peripheralAddress.address,
                                                         position: RadioPosition(x: 2)).makeHostTransport(), loop: loop)
        central.delegate = self
        peripheral.delegate = self
        for host in [central, peripheral] { _ = try run { host.start(completion: $0) } }
    }

    public func host(_ host: LEHost, didConnect connection: LEConnection) { connected[connection.role] = connection }
    public func host(_ host: LEHost, didDisconnect connection: LEConnection, reason: HCIStatus) { disconnected += 1 }

    /// Runs the loop until `body` completes and returns its result.
    @discardableResult
    public func run<T, E: Error>(_ body: (@escaping (Result<T, E>) -> Void) -> Void) throws -> T {
        var result: Result<T, E>?
        body { result = $0 }
        loop.run(until: { result != nil }, timeout: .seconds(35))
        return try requireValue(result).get()
    }

    /// Advertises, connects, and puts a bearer on each side's ATT channel.
    public func connect() throws -> (client: ATTBearer, server: ATTBearer, link: LEConnection) {
        try run { peripheral.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06]), completion: $0) }
        try run { central.connect(to: Self.peripheralAddress, completion: $0) }
        loop.run(until: { self.connected.count == 2 }, timeout: .seconds(5))
        let c = try requireValue(connected[.central])
        let p = try requireValue(connected[.peripheral])
        // Let the data length update settle so long PDUs go in 251-octet link-layer packets.
        loop.run(for: .milliseconds(100))
        return (ATTBearer(channel: c.l2cap.att, loop: loop), ATTBearer(channel: p.l2cap.att, loop: loop), c)
    }
}

