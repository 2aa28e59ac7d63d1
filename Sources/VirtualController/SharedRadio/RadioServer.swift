#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import HCI
import Logging
import Scheduling
import StackLogging

/// Hosts a `VirtualRadio` for other processes over a Unix-domain socket: each process's
/// `RadioProxy` attaches its controllers here, and the radio routes their PDUs (RSSI from
/// positions, range, air time, links) exactly as it does for controllers in one process.
///
/// Every remote controller is a stand-in `RadioDevice` on the radio that forwards what it hears
/// to its process. When a process goes away its devices leave the radio; peers connected to
/// them time out as they would on the air.
public final class RadioServer: @unchecked Sendable {
    public let path: String
    public let radio: VirtualRadio
    /// `corebluetooth.controller`: clients coming (info) and going (info, or warning when
    /// dropped for an error). Set before clients come.
    public var logger = StackLogging.standard.logger(.controller)

    private let listenFD: Int32
    private let lock = NSLock()
    private var closed = false
    // Loop-confined.
    private var nextClient: UInt16 = 1
    private var sessions: [UInt16: Session] = [:]
    private var stubs: [UInt32: Stub] = [:]
    private var globalByRadioID: [RadioDeviceID: UInt32] = [:]

    /// Listens at `path` (replacing a stale socket file) for `radio`.
    public init(path: String, radio: VirtualRadio) throws {
        self.path = path
        self.radio = radio
        listenFD = try RadioSocketConnection.listen(path: path)
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "radio server accept"
        thread.start()
    }

    /// How many processes are connected. Call on the radio's loop.
    public var clientCount: Int { sessions.count }
    /// How many remote devices are on the radio. Call on the radio's loop.
    public var deviceCount: Int { stubs.count }

    /// Stops accepting, drops every client and removes the socket file.
    public func close() {
        let first = lock.withLock { () -> Bool in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        shutdown(listenFD, Int32(SHUT_RDWR))
        _ = Foundation.close(listenFD)
        unlink(path)
        radio.loop.execute { [self] in
            for session in sessions.values { session.connection.close() }
        }
    }

    deinit { close() }

    private var isClosed: Bool { lock.withLock { closed } }

    private func acceptLoop() {
        while !isClosed {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            let connection = RadioSocketConnection(fd: fd, label: "client")
            connection.setReceiveTimeout(seconds: 5)
            // The first message is the hello; anything else ends the connection.
            guard case .hello(let version)? = try? connection.readMessage(), version == RadioWireMessage.version else {
                connection.close()
                continue
            }
            connection.setReceiveTimeout(seconds: 0)
            radio.loop.execute { [self] in admit(connection) }
        }
    }

    private func admit(_ connection: RadioSocketConnection) {
        let client = nextClient
        nextClient = nextClient == UInt16.max ? 1 : nextClient + 1
        let session = Session(client: client, connection: connection)
        sessions[client] = session
        try? connection.sendNow(.welcome(version: RadioWireMessage.version, client: client,
                                         timedAirTime: radio.airTime == .timed))
        logger.info("process \(client) joined")
        let loop = radio.loop
        connection.startReading(onMessage: { [weakSelf = WeakHandle(self)] message in
            let `self` = weakSelf.object
            let server = self
            loop.execute { server?.handle(message, from: session) }
        }, onClose: { [weakSelf = WeakHandle(self)] problem in
            let `self` = weakSelf.object
            let server = self
            loop.execute { server?.drop(session, problem: problem) }
        })
    }

    private func drop(_ session: Session, problem: String?) {
        guard sessions.removeValue(forKey: session.client) != nil else { return }
        for id in session.devices.sorted() { detach(id) }
        logger.info("process \(session.client) left\(problem.map { " (\($0))" } ?? "")")
    }

    private func detach(_ global: UInt32) {
        guard let stub = stubs.removeValue(forKey: global) else { return }
        globalByRadioID[stub.radioID] = nil
        radio.detach(stub.radioID)
    }

    /// The radio id of a device a client names, if it is on the radio.
    private func radioID(_ global: UInt32) -> RadioDeviceID? { stubs[global]?.radioID }

    // MARK: From the clients (on the loop)

    private func handle(_ message: RadioWireMessage, from session: Session) {
        do {
            try apply(message, from: session)
        } catch {
            logger.warning("process \(session.client): \(error); disconnecting it")
            session.connection.close()
        }
    }

    private func apply(_ message: RadioWireMessage, from session: Session) throws {
        switch message {
        case .attach(let global, let position):
            guard global >> 16 == UInt32(session.client), stubs[global] == nil else {
                throw RadioSocketError("device id 0x\(String(global, radix: 16)) is not this process's to attach")
            }
            let stub = Stub(global: global, server: self, session: session)
            stub.radioID = radio.attach(stub, at: position)
            stubs[global] = stub
            globalByRadioID[stub.radioID] = global
            session.devices.insert(global)
        case .detach(let global):
            guard session.devices.remove(global) != nil else { return }
            detach(global)
        case .move(let global, let position):
            if let id = radioID(global) { radio.move(id, to: position) }
        case .txPower(let global, let offset):
            if let id = radioID(global) { radio.setTxPowerOffset(id, offset) }
        case .power(let global, let on):
            if let id = radioID(global) { radio.setPowered(id, on) }
        case .sendAdvertising(let from, let to, let bytes):
            guard let sender = radioID(from) else { return }
            let pdu = try AdvertisingPDU(decoding: bytes)
            if to == 0 {
                radio.transmit(pdu, from: sender)
            } else if let receiver = radioID(to) {
                radio.transmit(pdu, from: sender, to: receiver)
            }
        case .sendExtended(let from, let to, let phyValue, let kind, let bytes):
            guard let sender = radioID(from), let phy = LEPHY(rawValue: phyValue) else { return }
            let pdu = try ExtendedAdvertisingPDU(decoding: bytes, as: try ExtendedAdvertisingPDU.kind(wire: kind))
            if to == 0 {
                radio.transmit(pdu, phy: phy, from: sender, to: nil)
            } else if let receiver = radioID(to) {
                radio.transmit(pdu, phy: phy, from: sender, to: receiver)
            }
        case .sendData(let from, let accessAddress, let phyValue, let hasMIC, let bytes):
            guard let sender = radioID(from), let phy = LEPHY(rawValue: phyValue) else { return }
            radio.transmit(try DataPDU(decoding: bytes, encrypted: hasMIC), accessAddress: accessAddress, from: sender, phy: phy)
        case .openLink(let accessAddress, let a, let b):
            if let a = radioID(a), let b = radioID(b) { radio.openLink(accessAddress, between: a, and: b) }
        case .closeLink(let accessAddress):
            radio.closeLink(accessAddress)
        case .abandonLink(let accessAddress, let by):
            if let by = radioID(by) { radio.abandonLink(accessAddress, by: by) }
        case .hello, .welcome, .heardAdvertising, .heardExtended, .heardData, .link:
            throw RadioSocketError("unexpected message \(message)")
        }
    }

    fileprivate func global(_ radioID: RadioDeviceID) -> UInt32 { globalByRadioID[radioID] ?? 0 }

    // MARK: Pieces

    private final class Session: @unchecked Sendable {
        let client: UInt16
        let connection: RadioSocketConnection
        var devices: Set<UInt32> = []
        init(client: UInt16, connection: RadioSocketConnection) {
            self.client = client
            self.connection = connection
        }
    }

    /// A remote controller as the radio sees it: what it hears goes to its process.
    private final class Stub: RadioDevice, @unchecked Sendable {
        let global: UInt32
        unowned let server: RadioServer
        let session: Session
        var radioID: RadioDeviceID = 0

        init(global: UInt32, server: RadioServer, session: Session) {
            self.global = global
            self.server = server
            self.session = session
        }

        func radioDidReceive(_ pdu: AdvertisingPDU, rssi: Int8, from sender: RadioDeviceID) {
            session.connection.send(.heardAdvertising(to: global, from: server.global(sender), rssi: rssi, pdu: pdu.encode()))
        }

        func radioDidReceive(_ pdu: DataPDU, accessAddress: UInt32, rssi: Int8) {
            session.connection.send(.heardData(to: global, accessAddress: accessAddress, rssi: rssi,
                                               hasMIC: pdu.mic != nil, pdu: pdu.encode()))
        }

        func radioLink(_ accessAddress: UInt32, reachable: Bool) {
            session.connection.send(.link(to: global, accessAddress: accessAddress, reachable: reachable))
        }

        func radioDidReceive(_ pdu: ExtendedAdvertisingPDU, phy: LEPHY, rssi: Int8, from sender: RadioDeviceID) {
            session.connection.send(.heardExtended(to: global, from: server.global(sender), phy: phy.rawValue,
                                                   kind: pdu.wireKind, rssi: rssi, pdu: pdu.encode()))
        }
    }
}
