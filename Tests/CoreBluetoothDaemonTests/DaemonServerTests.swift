import CoreBluetoothDaemon
import DaemonProtocol
import Foundation
import Glibc
import HCI
import HCIDriver
import HostDevice
import Scheduling
import Testing
import VirtualController

/// A client process's end of the daemon's socket, blocking with a timeout (a test thread).
final class SocketClient {
    let fd: Int32
    private var reader = DaemonFrameReader()

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(connected == 0, "connect: \(String(cString: strerror(errno)))")
        // Wall-clock seconds: the daemon answers in microseconds; this only bounds a failure.
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    func send(_ message: DaemonMessage) { send(DaemonFrame.encode(message)) }

    /// The next message, or nil when the daemon closed the socket (or said nothing in time).
    func next() throws -> DaemonMessage? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if let message = try reader.next() { return message }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return nil }
            reader.append(buffer[0..<count])
        }
    }
}

@Suite("corebluetoothd: the socket")
struct DaemonServerTests {
    /// A daemon on a virtual controller of its own (a real-time loop: sockets are real).
    static func startDevice() throws -> (HostDevice, VirtualController) {
        let loop = EventLoop(name: "daemon test", pacing: .realTime)
        let controller = VirtualController(radio: VirtualRadio(loop: loop, seed: 16), address: BluetoothAddress("C0:00:00:00:16:10")!)
        let device = HostDevice(transport: controller.makeHostTransport(), loop: loop, deviceName: "daemon")
        let started = Locked<Result<LEAddress, HCIError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            device.start { result in
                started.withLock { $0 = result }
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        _ = try #require(started.current).get()
        return (device, controller)
    }

    static func socketPath() -> String {
        NSTemporaryDirectory() + "corebluetoothd-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
    }

    @Test func clientsAreServedByCredentialAndAGarbageClientIsDroppedAlone() throws {
        let (device, controller) = try Self.startDevice()
        defer { withExtendedLifetime(controller) { device.loop.execute { device.stop() } } }
        let path = Self.socketPath()
        let server = try DaemonServer(path: path, device: device)
        defer { server.close() }

        let good = try SocketClient(path: path)
        good.send(.hello(version: 1, minimumVersion: 1, name: "good"))
        #expect(try good.next() == .welcome(version: 1, deviceAddress: device.address))
        // The kernel's word for who connected: this process.
        #expect(server.clientCredentials.contains(PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid())))

        let bad = try SocketClient(path: path)
        bad.send(.hello(version: 1, minimumVersion: 1, name: "bad"))
        #expect(try bad.next() != nil)
        // A frame of an unknown type: the daemon hangs up on this client.
        bad.send([0x02, 0x00, 0x00, 0x00, 0x99, 0x99])
        #expect(try bad.next() == nil)

        // The other is served as before.
        good.send(.openCentral(session: 1, restoreIdentifier: nil))
        #expect(try good.next() == .state(session: 1, state: 5, reason: nil))
        good.send(.close(session: 1))

        // A client that breaks the protocol with a well-formed message goes the same way.
        let rude = try SocketClient(path: path)
        rude.send(.openCentral(session: 1, restoreIdentifier: nil))
        #expect(try rude.next() == nil)
        good.send(.openCentral(session: 2, restoreIdentifier: nil))
        #expect(try good.next() == .state(session: 2, state: 5, reason: nil))
    }

    @Test func theSocketGoesWithTheServerAndAnotherDaemonIsNotDisplaced() throws {
        let (device, controller) = try Self.startDevice()
        defer { withExtendedLifetime(controller) { device.loop.execute { device.stop() } } }
        let path = Self.socketPath()
        let server = try DaemonServer(path: path, device: device)
        #expect(throws: DaemonServerError.self) { try DaemonServer(path: path, device: device) }
        server.close()
        #expect(!FileManager.default.fileExists(atPath: path))
        // A stale socket file (no daemon behind it) is replaced.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8))
            raw[path.utf8.count] = 0
        }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        close(stale)
        #expect(FileManager.default.fileExists(atPath: path))
        let again = try DaemonServer(path: path, device: device)
        again.close()
    }

    @Test func theDefaultSocketPathFollowsTheUser() {
        #expect(DaemonSocketPath.defaultPath(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], uid: 1000)
            == "/run/user/1000/corebluetoothd.sock")
        #expect(DaemonSocketPath.defaultPath(environment: [:], uid: 1000) == nil)
        #expect(DaemonSocketPath.defaultPath(environment: ["XDG_RUNTIME_DIR": "/run/user/0"], uid: 0) == "/run/corebluetoothd.sock")
        let parsed = DaemonCommand.Options.parse(["--transport", "hci:0", "--listen", "/tmp/d.sock"], environment: [:], uid: 1000)
        #expect(parsed == .success(.init(transport: "hci:0", listen: "/tmp/d.sock")))
        if case .success = DaemonCommand.Options.parse([], environment: [:], uid: 1000) { Issue.record("no path should be an error") }
        if case .success = DaemonCommand.Options.parse(["--listen"], environment: [:], uid: 0) { Issue.record("a missing value is an error") }
        #expect(DaemonCommand.Options.parse([], environment: ["CB_TRANSPORT": "tcp:localhost:9000"], uid: 0)
            == .success(.init(transport: "tcp:localhost:9000", listen: "/run/corebluetoothd.sock")))
        #expect(DaemonCommand.Options.parse(["--listen", "/tmp/d.sock", "--on-event", "relaunch.sh"], environment: [:], uid: 0)
            == .success(.init(transport: "virtual", listen: "/tmp/d.sock", onEvent: "relaunch.sh")))
        if case .success = DaemonCommand.Options.parse(["--listen", "/tmp/d.sock", "--on-event", " "], environment: [:], uid: 0) {
            Issue.record("an empty command is an error")
        }
        let key = DaemonRestoration.Key(uid: 1000, role: .peripheral, identifier: "com.example.app")
        let environment = DaemonEventCommand.environment(for: key, event: .subscribed, base: ["PATH": "/bin"])
        #expect(environment == ["PATH": "/bin", "CB_RESTORE_IDENTIFIER": "com.example.app", "CB_RESTORE_ROLE": "peripheral",
                                "CB_RESTORE_EVENT": "subscribed", "CB_RESTORE_UID": "1000"])
    }
}
