import Dispatch
import Foundation
import Glibc
import TestSupport
import Testing
@testable import CoreBluetooth

/// Joining another process's radio (`virtual:PATH`) never waits in the manager's initializer:
/// the handshake runs in the background and a radio that does not answer makes the manager
/// `.unsupported`, with the reason.
@Suite(.timeLimit(.minutes(1)))
struct RadioJoinTests {
    /// A Unix socket listener that is no radio: it takes the connection and answers nothing.
    private static func listen(at path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8))
            raw[path.utf8.count] = 0
        }
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
        try #require(ok && Glibc.listen(fd, 4) == 0)
        return fd
    }

    @Test func aRadioThatNeverAnswersLeavesTheInitializerAtOnce() throws {
        let path = temporaryPath("silent-radio.sock")
        let listener = try Self.listen(at: path)
        defer {
            close(listener)
            unlink(path)
        }
        let queue = DispatchQueue(label: "radio join delegate")
        // Returns although the radio has not answered (before, it waited up to 5 s for it).
        let central = CBCentralManager(delegate: nil, queue: queue, options: [CBManagerOptionLinuxTransportKey: "virtual:\(path)"])
        let connection = accept(listener, nil, nil)
        try #require(connection >= 0)
        // The hello arrived; no answer yet, so no state yet.
        var hello = [UInt8](repeating: 0, count: 64)
        #expect(read(connection, &hello, hello.count) > 0)
        #expect(central.state == .unknown)

        // The "radio" hangs up: the handshake fails, and the manager says why.
        close(connection)
        #expect(waitUntil(timeout: .seconds(10)) { central.state == .unsupported })
        let reason = try #require(central.linuxUnavailableReason)
        #expect(reason.contains("virtual:\(path)"), "\(reason)")
        #expect(reason.contains("is not a compatible radio"), "\(reason)")
    }
}
