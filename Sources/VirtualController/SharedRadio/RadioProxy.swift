import Foundation
import HCI
import Scheduling

/// A radio another process hosts (`RadioServer`, `cbtool radio --listen PATH`), as the
/// controllers of this process see it: they attach, transmit and open links here exactly as on
/// an in-process `VirtualRadio`, and the proxy carries it all over the socket. What the other
/// devices send arrives on this proxy's loop, with the RSSI the server's radio computed.
///
/// Time is the wall clock (the loop is real-time): the radio is shared by processes.
///
/// Joining never waits: `init` connects (a Unix socket connects or fails at once) and the
/// handshake runs on the socket's reader thread; `whenJoined` (on the loop) or
/// `waitUntilJoined()` (elsewhere) hear how it went. Attach devices once joined.
public final class RadioProxy: RadioMedium, @unchecked Sendable {
    public let path: String
    public let loop: EventLoop
    /// Whether the server times the air (loop-confined; known once joined).
    public private(set) var airTime: AirTimeMode = .instant
    /// The number the server gave this process: the high 16 bits of its devices' ids
    /// (loop-confined; known once joined).
    public private(set) var client: UInt16 = 0
    /// Called (on the loop) if the server goes away; the devices then hear nothing more.
    public var onDisconnect: (@Sendable (String) -> Void)?

    private enum Joining {
        case waiting([(RadioSocketError?) -> Void])
        case joined
        case failed(RadioSocketError)
    }

    private let connection: RadioSocketConnection
    // Loop-confined.
    private var joining = Joining.waiting([])
    private var devices: [RadioDeviceID: (device: Weak, position: RadioPosition)] = [:]
    private var nextIndex: UInt32 = 1
    /// Links of this process's devices, by access address: whether the ends hear each other.
    private var links: [UInt32: Bool] = [:]
    private var random: SeededGenerator
    private var connected = true

    private struct Weak { @WeakHeldExistential var device: RadioDevice? }

    /// How long the server has to answer the hello.
    static let handshakeTimeoutSeconds = 5

    /// Connects to the radio at `path` and says hello in the background; throws at once if
    /// nobody listens there.
    public init(path: String, loop: EventLoop? = nil) throws {
        self.path = path
        let (fd, isConnected) = try RadioSocketConnection.startConnecting(path: path)
        let connection = RadioSocketConnection(fd: fd, label: path)
        self.connection = connection
        self.loop = loop ?? EventLoop(name: "radio proxy \(path)", pacing: .realTime)
        random = SeededGenerator(seed: UInt64.random(in: 1...UInt64.max))
        let proxyLoop = self.loop
        let handshake: @Sendable () throws -> Void = { [weakSelf = WeakHandle(self)] in
            let `self` = weakSelf.object
            let welcome: RadioWireMessage?
            do {
                if !isConnected { try RadioSocketConnection.finishConnecting(fd, path: path) }
                connection.setReceiveTimeout(seconds: Self.handshakeTimeoutSeconds)
                try connection.sendNow(.hello(version: RadioWireMessage.version))
                welcome = try connection.readMessage()
            } catch {
                throw RadioSocketError("the radio at \(path) did not answer: \(error)")
            }
            guard case .welcome(let version, let client, let timed)? = welcome, version == RadioWireMessage.version else {
                throw RadioSocketError("\(path) is not a compatible radio")
            }
            connection.setReceiveTimeout(seconds: 0)
            let proxy = self
            proxyLoop.execute { proxy?.didJoin(client: client, timed: timed) }
        }
        connection.startReading(handshake: handshake, onMessage: { [weakSelf = WeakHandle(self)] message in
            let `self` = weakSelf.object
            let proxy = self
            proxyLoop.execute { proxy?.handle(message) }
        }, onClose: { [weakSelf = WeakHandle(self)] problem in
            let `self` = weakSelf.object
            let proxy = self
            proxyLoop.execute { proxy?.serverGone(problem) }
        })
    }

    /// Calls `body` on the loop once the handshake is over: nil when joined, or why not. Call
    /// on the loop.
    public func whenJoined(_ body: @escaping (RadioSocketError?) -> Void) {
        switch joining {
        case .waiting(var waiters):
            waiters.append(body)
            joining = .waiting(waiters)
        case .joined: body(nil)
        case .failed(let error): body(error)
        }
    }

    /// Whether the handshake is over and succeeded. Call on the loop.
    public var isJoined: Bool {
        if case .joined = joining { true } else { false }
    }

    /// Waits (off the loop: a tool's main thread) until joined; throws why not.
    public func waitUntilJoined() throws {
        let outcome = Locked<RadioSocketError??>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            whenJoined { error in
                outcome.withLock { $0 = .some(error) }
                done.signal()
            }
        }
        done.wait()
        if case .some(let error?) = outcome.current { throw error }
    }

    private func didJoin(client: UInt16, timed: Bool) {
        guard case .waiting(let waiters) = joining else { return }
        self.client = client
        airTime = timed ? .timed : .instant
        joining = .joined
        for waiter in waiters { waiter(nil) }
    }

    deinit { connection.close() }

    /// Leaves the radio (every device of this process vanishes from it).
    public func close() { connection.close() }

    // MARK: From the server (on the loop)

    private func handle(_ message: RadioWireMessage) {
        do {
            switch message {
            case .heardAdvertising(let to, let from, let rssi, let bytes):
                guard let device = devices[to]?.device.device else { return }
                device.radioDidReceive(try AdvertisingPDU(decoding: bytes), rssi: rssi, from: from)
            case .heardExtended(let to, let from, let phyValue, let kind, let rssi, let bytes):
                guard let device = devices[to]?.device.device, let phy = LEPHY(rawValue: phyValue) else { return }
                let pdu = try ExtendedAdvertisingPDU(decoding: bytes, as: try ExtendedAdvertisingPDU.kind(wire: kind))
                device.radioDidReceive(pdu, phy: phy, rssi: rssi, from: from)
            case .heardData(let to, let accessAddress, let rssi, let hasMIC, let bytes):
                guard let device = devices[to]?.device.device else { return }
                device.radioDidReceive(try DataPDU(decoding: bytes, encrypted: hasMIC), accessAddress: accessAddress, rssi: rssi)
            case .link(let to, let accessAddress, let reachable):
                links[accessAddress] = reachable
                devices[to]?.device.device?.radioLink(accessAddress, reachable: reachable)
            default:
                break
            }
        } catch {
            // A PDU that does not decode is noise on the air: nobody hears it.
        }
    }

    private func serverGone(_ problem: String?) {
        if case .waiting(let waiters) = joining {
            let error = RadioSocketError(problem ?? "the radio at \(path) closed before it answered")
            joining = .failed(error)
            connected = false
            for waiter in waiters { waiter(error) }
            return
        }
        guard connected else { return }
        connected = false
        // Every connection of this process's devices loses its peer.
        for (accessAddress, reachable) in links.sorted(by: { $0.key < $1.key }) where reachable {
            links[accessAddress] = false
            for entry in devices.values { entry.device.device?.radioLink(accessAddress, reachable: false) }
        }
        onDisconnect?(problem ?? "the radio at \(path) closed")
    }

    // MARK: RadioMedium

    public func attach(_ device: RadioDevice, at position: RadioPosition) -> RadioDeviceID {
        let id = UInt32(client) << 16 | (nextIndex & 0xFFFF)
        nextIndex += 1
        devices[id] = (Weak(device: device), position)
        connection.send(.attach(device: id, position: position))
        return id
    }

    public func detach(_ id: RadioDeviceID) {
        devices[id] = nil
        connection.send(.detach(device: id))
    }

    public func position(of id: RadioDeviceID) -> RadioPosition? { devices[id]?.position }

    public func move(_ id: RadioDeviceID, to position: RadioPosition) {
        devices[id]?.position = position
        connection.send(.move(device: id, position: position))
    }

    public func setTxPowerOffset(_ id: RadioDeviceID, _ offset: Double) {
        connection.send(.txPower(device: id, offset: offset))
    }

    public func setPowered(_ id: RadioDeviceID, _ on: Bool) {
        connection.send(.power(device: id, on: on))
    }

    /// Not known here (the server computes RSSI per packet): callers use the last one heard.
    public func rssi(from sender: RadioDeviceID, to receiver: RadioDeviceID) -> Int8? { nil }

    @discardableResult
    public func transmit(_ pdu: AdvertisingPDU, from sender: RadioDeviceID) -> Int64 {
        connection.send(.sendAdvertising(from: sender, to: 0, pdu: pdu.encode()))
        return airTime == .timed ? LEPHY.le1M.airTimeNanoseconds(pduOctets: pdu.airOctets) : 0
    }

    @discardableResult
    public func transmit(_ pdu: AdvertisingPDU, from sender: RadioDeviceID, to receiver: RadioDeviceID) -> Int64 {
        connection.send(.sendAdvertising(from: sender, to: receiver, pdu: pdu.encode()))
        return airTime == .timed ? LEPHY.le1M.airTimeNanoseconds(pduOctets: pdu.airOctets) : 0
    }

    @discardableResult
    public func transmit(_ pdu: ExtendedAdvertisingPDU, phy: LEPHY, from sender: RadioDeviceID,
                         to receiver: RadioDeviceID?) -> Int64 {
        connection.send(.sendExtended(from: sender, to: receiver ?? 0, phy: phy.rawValue, kind: pdu.wireKind, pdu: pdu.encode()))
        return airTime == .timed ? phy.airTimeNanoseconds(pduOctets: pdu.airOctets) : 0
    }

    @discardableResult
    public func transmit(_ pdu: consuming DataPDU, accessAddress: UInt32, from sender: RadioDeviceID, phy: LEPHY) -> Int64? {
        guard isLinkReachable(accessAddress) else { return nil }
        connection.send(.sendData(from: sender, accessAddress: accessAddress, phy: phy.rawValue,
                                  hasMIC: pdu.mic != nil, pdu: pdu.encode()))
        return airTime == .timed ? phy.airTimeNanoseconds(pduOctets: pdu.airOctets) : 0
    }

    public func openLink(_ accessAddress: UInt32, between a: RadioDeviceID, and b: RadioDeviceID) {
        links[accessAddress] = true
        connection.send(.openLink(accessAddress: accessAddress, a: a, b: b))
    }

    public func closeLink(_ accessAddress: UInt32) {
        links[accessAddress] = nil
        connection.send(.closeLink(accessAddress: accessAddress))
    }

    public func abandonLink(_ accessAddress: UInt32, by gone: RadioDeviceID) {
        links[accessAddress] = nil
        connection.send(.abandonLink(accessAddress: accessAddress, by: gone))
    }

    /// A link this process has not heard about yet was just opened by the peer that heard us
    /// (its CONNECT_IND came first): reachable until the server says otherwise.
    public func isLinkReachable(_ accessAddress: UInt32) -> Bool { connected && links[accessAddress] ?? true }

    public func newAccessAddress() -> UInt32 {
        while true {
            let aa = UInt32(truncatingIfNeeded: random.next())
            if aa != 0x8E89_BED6 && links[aa] == nil && aa.nonzeroBitCount > 4 { return aa }
        }
    }

    public func randomUInt64() -> UInt64 { random.next() }
    public func randomInt(in range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }
}
