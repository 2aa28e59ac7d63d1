import HCITransport
import Testing

struct TransportSpecTests {
    @Test(arguments: [
        ("virtual", TransportSpec.virtual(path: nil)),
        ("virtual:/tmp/radio.sock", .virtual(path: "/tmp/radio.sock")),
        ("tcp:127.0.0.1:9000", .tcp(host: "127.0.0.1", port: 9000)),
        ("tcp:localhost:1", .tcp(host: "localhost", port: 1)),
        ("tcp:[::1]:65535", .tcp(host: "::1", port: 65535)),
        ("tcp:[fe80::1%eth0]:9000", .tcp(host: "fe80::1%eth0", port: 9000)),
        ("unix:/run/controller.sock", .unix(path: "/run/controller.sock")),
        ("serial:/dev/ttyACM0", .serial(device: "/dev/ttyACM0", baudRate: 1_000_000, flowControl: true)),
        ("serial:/dev/ttyUSB1:115200", .serial(device: "/dev/ttyUSB1", baudRate: 115_200, flowControl: true)),
        ("serial:/dev/ttyUSB1:4000000:noflow", .serial(device: "/dev/ttyUSB1", baudRate: 4_000_000, flowControl: false)),
        ("serial:/dev/ttyS0:noflow", .serial(device: "/dev/ttyS0", baudRate: 1_000_000, flowControl: false)),
        ("hci:0", .hci(index: 0)),
        ("hci:12", .hci(index: 12)),
        ("hci1", .hci(index: 1)),
    ])
    func parses(text: String, spec: TransportSpec) throws {
        #expect(try TransportSpec(parsing: text) == spec)
        // The description parses back to the same spec.
        #expect(try TransportSpec(parsing: spec.description) == spec)
    }

    @Test(arguments: [
        "", "bluetooth", "virtual:", "tcp", "tcp:", "tcp:host", "tcp::9000", "tcp:host:0", "tcp:host:70000",
        "tcp:host:port", "tcp:::1:9000", "unix", "unix:", "serial", "serial:", "serial:/dev/ttyS0:123456",
        "hci", "hci:", "hci:x", "hcix", "hci-1", "HCI0",
    ])
    func rejects(text: String) {
        let error = #expect(throws: HCITransportError.self) { try TransportSpec(parsing: text) }
        #expect(error?.message.contains("accepted forms: virtual, virtual:PATH, tcp:HOST:PORT") == true)
        #expect(error?.message.contains("\"\(text)\"") == true)
    }

    @Test func environmentDefaultsToInProcessVirtualController() throws {
        #expect(try TransportSpec.fromEnvironment([:]) == .virtual(path: nil))
        #expect(try TransportSpec.fromEnvironment(["CB_TRANSPORT": ""]) == .virtual(path: nil))
        #expect(try TransportSpec.fromEnvironment(["CB_TRANSPORT": "hci0"]) == .hci(index: 0))
        let error = #expect(throws: HCITransportError.self) {
            try TransportSpec.fromEnvironment(["CB_TRANSPORT": "nope"])
        }
        #expect(error?.message.hasPrefix("CB_TRANSPORT: bad transport \"nope\"") == true)
    }

    @Test func makesExternalTransports() throws {
        #expect(try TransportSpec(parsing: "tcp:[::1]:9").makeExternalTransport() is TCPTransport)
        #expect(try TransportSpec(parsing: "unix:/x").makeExternalTransport() is UnixSocketTransport)
        #expect(try TransportSpec(parsing: "serial:/dev/null:9600").makeExternalTransport() is SerialTransport)
        #expect(try TransportSpec(parsing: "hci:3").makeExternalTransport() is HCIUserChannelTransport)
        #expect(throws: HCITransportError.self) { try TransportSpec.virtual(path: nil).makeExternalTransport() }
    }
}
