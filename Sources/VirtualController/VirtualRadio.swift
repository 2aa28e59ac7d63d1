import HCI
import Scheduling

/// Identifies a device on a virtual radio.
public typealias RadioDeviceID = UInt32

/// What the radio needs from a device attached to it. Called on the radio's loop.
public protocol RadioDevice: AnyObject, Sendable {
    /// An advertising-channel PDU was heard.
    func radioDidReceive(_ pdu: AdvertisingPDU, rssi: Int8, from sender: RadioDeviceID)
    /// A data-channel PDU for a connection (by access address) this device takes part in.
    func radioDidReceive(_ pdu: DataPDU, accessAddress: UInt32, rssi: Int8)
    /// The other end of a connection went out of reach (powered off, out of range) or came back.
    func radioLink(_ accessAddress: UInt32, reachable: Bool)
    /// An extended advertising PDU was heard on `phy` (ADV_EXT_IND on the primary channels,
    /// the AUX_* PDUs on the secondary ones).
    func radioDidReceive(_ pdu: ExtendedAdvertisingPDU, phy: LEPHY, rssi: Int8, from sender: RadioDeviceID)
    /// Whether broadcast advertising PDUs can matter to the device now (it scans or initiates).
    /// The radio hands them to listening devices only: with a thousand advertisers, delivering
    /// each PDU to every device (a loop job and an RSSI each) was most of the work. The radio
    /// asks when the device attaches and again when the device calls `listeningChanged(_:)`
    /// on it, so a device whose answer changes must say so (it keeps a list of listeners, not
    /// visiting every device per PDU).
    var listensForAdvertising: Bool { get }
    /// While listening, the one advertiser address whose legacy advertising PDUs can matter to
    /// the device (an initiator for one peer that does not scan), or nil for every advertiser.
    /// The radio asks it together with `listensForAdvertising`: with ten thousand initiators
    /// among ten thousand advertisers, handing each of them every PDU made connection set-up
    /// quadratic. Extended advertising PDUs still reach every listener (their primary PDU
    /// carries no address to sort by).
    var advertiserOfInterest: BluetoothAddress? { get }
}

extension RadioDevice {
    /// Devices that do not say hear every broadcast.
    public var listensForAdvertising: Bool { true }

    /// Devices that do not say hear every advertiser.
    public var advertiserOfInterest: BluetoothAddress? { nil }

    /// Devices without extended advertising hear nothing of it.
    public func radioDidReceive(_ pdu: ExtendedAdvertisingPDU, phy: LEPHY, rssi: Int8, from sender: RadioDeviceID) {}
}

/// The air between virtual controllers: positions, path loss, range, air time and routing.
///
/// Everything on one radio runs on the radio's event loop, so a run with a given seed is
/// deterministic. What crosses between devices is link-layer PDUs with real encodings.
public final class VirtualRadio: RadioMedium, @unchecked Sendable {
    public let loop: EventLoop
    @exclusivity(unchecked) public var airTime: AirTimeMode  // exclusivity checks: 0.8 % of notify
    @exclusivity(unchecked) public var pathLoss: PathLossModel {  // exclusivity checks: 0.28 % of notify
        didSet { geometry &+= 1 }
    }
    @exclusivity(unchecked) var random: SeededGenerator  // exclusivity checks: 0.05 % of adv

    /// The weak reference to a device, boxed: an `Entry` is copied out of `devices` on every
    /// transmission (twice for the RSSI), and copying a weak reference costs side-table work
    /// that copying a strong one does not.
    final class WeakDevice {
        @WeakHeldExistential var device: RadioDevice?
        init(_ device: RadioDevice) { self.device = device }
        /// Whether the device is still there, without retaining it.
        var isAlive: Bool { _device.isAlive }
    }

    struct Entry {
        let ref: WeakDevice
        var device: RadioDevice? { ref.device }
        var position: RadioPosition
        /// Added to the path-loss model's power (dB), e.g. a stronger or weaker transmitter.
        var txPowerOffset: Double
        var poweredOn: Bool
        /// The advertiser address the device listens for, as the radio last heard it (the key
        /// of its entry in `listenersByAdvertiser`), or nil.
        var advertiserOfInterest: UInt64?
    }

    @exclusivity(unchecked) private var devices = IntegerKeyMap<RadioDeviceID, Entry>()  // exclusivity checks: 0.55 % of notify
    /// Device identifiers in attachment order. Dictionaries iterate in an order that differs
    /// between instances, so everything that visits several devices or links goes in this
    /// order (or sorted) to keep a seeded run the same every time.
    private var deviceOrder: [RadioDeviceID] = []
    /// The devices that listen for broadcast advertising PDUs (`RadioDevice.listensForAdvertising`
    /// when they attached or last called `listeningChanged`), in attachment order: identifiers
    /// grow with attachment, so this is `deviceOrder`'s listening subset, kept sorted. A
    /// broadcast visits these only (a scanner among a thousand advertisers: one, not a thousand).
    private var listeners: [RadioDeviceID] = []
    /// The listeners without an advertiser of interest (`RadioDevice.advertiserOfInterest`):
    /// those that hear every legacy advertising PDU. Sorted like `listeners`.
    @exclusivity(unchecked) private var allAdvertiserListeners: [RadioDeviceID] = []  // exclusivity checks: 0.06 % of conn
    /// The other listeners, by the address (`BluetoothAddress.value`) they listen for, sorted.
    @exclusivity(unchecked) private var listenersByAdvertiser: [UInt64: [RadioDeviceID]] = [:]  // exclusivity checks: 0.06 % of conn
    private var nextID: RadioDeviceID = 1
    /// Connections by access address: the two devices in them and whether they can hear each other.
    @exclusivity(unchecked) private var links = IntegerKeyMap<UInt32, Link>()  // exclusivity checks: 0.55 % of notify
    /// The access addresses of each device's links (`links` by end), so that powering one
    /// device, moving it or detaching it looks at its own links only: a walk over all of them
    /// (sorted, a logarithm each) per device powered on made 10,000 connections quadratic.
    private var linksByDevice = IntegerKeyMap<RadioDeviceID, [UInt32]>()

    struct Link {
        var a: RadioDeviceID
        var b: RadioDeviceID
        var reachable: Bool
        /// The mean RSSI each way, as of `geometry` (the radio's count of changes to positions,
        /// transmit powers and the path-loss model): a data PDU reuses it rather than taking
        /// a logarithm of the distance and looking both devices up again (~300 instructions).
        var meanFromA = 0.0
        var meanFromB = 0.0
        var geometry: UInt64 = 0

        init(a: RadioDeviceID, b: RadioDeviceID, reachable: Bool) {
            self.a = a
            self.b = b
            self.reachable = reachable
        }
    }

    /// Counts changes to what a mean RSSI depends on (starts at 1: a new link's cache is stale).
    private var geometry: UInt64 = 1
    /// Statistics, for tests and benchmarks.
    @exclusivity(unchecked) public private(set) var advertisingPDUsSent = 0  // exclusivity checks: 0.11 % of adv
    @exclusivity(unchecked) public private(set) var dataPDUsSent = 0  // exclusivity checks: 0.28 % of notify
    /// Tests (fault injection): hears every data-channel PDU the radio carries, on the loop, as
    /// it goes on the air (before it is delivered), with its access address and sender. Nil in
    /// normal use: one load and test per data PDU.
    @exclusivity(unchecked) public var dataPDUObserver: ((DataPDU, UInt32, RadioDeviceID) -> Void)?  // exclusivity checks: 0.28 % of notify

    public init(loop: EventLoop = EventLoop(name: "radio"), airTime: AirTimeMode = .instant,
                pathLoss: PathLossModel = PathLossModel(), seed: UInt64 = 1) {
        self.loop = loop
        self.airTime = airTime
        self.pathLoss = pathLoss
        self.random = SeededGenerator(seed: seed)
    }

    // MARK: Devices

    /// Attaches a device at a position; returns its radio identifier. Call on the loop.
    public func attach(_ device: RadioDevice, at position: RadioPosition = RadioPosition()) -> RadioDeviceID {
        let id = nextID
        nextID += 1
        devices[id] = Entry(ref: WeakDevice(device), position: position, txPowerOffset: 0, poweredOn: true)
        deviceOrder.append(id)
        if device.listensForAdvertising { addListener(id, interest: device.advertiserOfInterest) }
        return id
    }

    public func detach(_ id: RadioDeviceID) {
        removeListener(id)
        devices[id] = nil
        deviceOrder.removeAll { $0 == id }
        for aa in links(of: id) { linkLost(aa, notifyingExcept: id) }
    }

    /// A device's `listensForAdvertising` may have changed: the radio asks it again.
    public func listeningChanged(_ id: RadioDeviceID) {
        guard let device = devices[id]?.device else { return removeListener(id) }
        if device.listensForAdvertising {
            addListener(id, interest: device.advertiserOfInterest)
        } else {
            removeListener(id)
        }
    }

    /// Adds `id` to the listeners (again, if its advertiser of interest changed), in order.
    private func addListener(_ id: RadioDeviceID, interest: BluetoothAddress?) {
        let key = interest?.value
        if Self.insert(id, into: &listeners) {
            devices[id]?.advertiserOfInterest = nil
        } else if devices[id]?.advertiserOfInterest == key {
            return
        } else {
            removeFromInterest(id)
        }
        devices[id]?.advertiserOfInterest = key
        if let key {
            Self.insert(id, into: &listenersByAdvertiser[key, default: []])
        } else {
            Self.insert(id, into: &allAdvertiserListeners)
        }
    }

    private func removeListener(_ id: RadioDeviceID) {
        guard let index = Self.index(of: id, in: listeners) else { return }
        listeners.remove(at: index)
        removeFromInterest(id)
    }

    /// Takes `id` out of `allAdvertiserListeners` or `listenersByAdvertiser`.
    private func removeFromInterest(_ id: RadioDeviceID) {
        if let key = devices[id]?.advertiserOfInterest {
            devices[id]?.advertiserOfInterest = nil
            guard var ids = listenersByAdvertiser[key] else { return }
            if let index = Self.index(of: id, in: ids) { ids.remove(at: index) }
            listenersByAdvertiser[key] = ids.isEmpty ? nil : ids
        } else if let index = Self.index(of: id, in: allAdvertiserListeners) {
            allAdvertiserListeners.remove(at: index)
        }
    }

    /// Where `id` is or would go in the sorted `ids`.
    private static func insertionPoint(of id: RadioDeviceID, in ids: [RadioDeviceID]) -> Int {
        var low = 0, high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private static func index(of id: RadioDeviceID, in ids: [RadioDeviceID]) -> Int? {
        let point = insertionPoint(of: id, in: ids)
        return point < ids.count && ids[point] == id ? point : nil
    }

    /// Inserts `id` into the sorted `ids`; false if it was there already.
    @discardableResult
    private static func insert(_ id: RadioDeviceID, into ids: inout [RadioDeviceID]) -> Bool {
        let point = insertionPoint(of: id, in: ids)
        if point < ids.count && ids[point] == id { return false }
        ids.insert(id, at: point)
        return true
    }

    public func position(of id: RadioDeviceID) -> RadioPosition? { devices[id]?.position }

    /// Moves a device. Connections that go out of (or back into) range are told.
    public func move(_ id: RadioDeviceID, to position: RadioPosition) {
        devices[id]?.position = position
        geometry &+= 1
        reevaluateLinks(of: id)
    }

    public func setTxPowerOffset(_ id: RadioDeviceID, _ offset: Double) {
        devices[id]?.txPowerOffset = offset
        geometry &+= 1
    }

    /// Powers a device's radio off or on. While off it neither sends nor hears anything.
    public func setPowered(_ id: RadioDeviceID, _ on: Bool) {
        devices[id]?.poweredOn = on
        reevaluateLinks(of: id)
    }

    public func isPowered(_ id: RadioDeviceID) -> Bool { devices[id]?.poweredOn ?? false }

    /// The RSSI `receiver` measures for `sender`'s transmission, or nil if it can't hear it.
    public func rssi(from sender: RadioDeviceID, to receiver: RadioDeviceID) -> Int8? {
        guard let s = devices[sender], let r = devices[receiver], s.poweredOn, r.poweredOn else { return nil }
        return sample(mean: pathLoss.meanRSSI(distance: s.position.distance(to: r.position), txPowerOffset: s.txPowerOffset))
    }

    /// One RSSI sample around `mean` (noise added), or nil below the sensitivity.
    private func sample(mean: Double) -> Int8? {
        var value = mean
        if pathLoss.noiseSigma > 0 { value += pathLoss.noiseSigma * random.gaussian() }
        guard value >= pathLoss.sensitivity else { return nil }
        return Int8(max(-127, min(20, value.rounded())))
    }

    private func inRange(_ a: RadioDeviceID, _ b: RadioDeviceID) -> Bool {
        guard let s = devices[a], let r = devices[b], s.poweredOn, r.poweredOn else { return false }
        return pathLoss.meanRSSI(distance: s.position.distance(to: r.position), txPowerOffset: s.txPowerOffset) >= pathLoss.sensitivity
    }

    // MARK: Transmission

    private func deliver(after airNs: Int64, _ work: @escaping @Sendable () -> Void) {
        if airTime == .instant || airNs == 0 { loop.execute(work) } else { loop.schedule(afterNanoseconds: airNs, work) }
    }

    /// Broadcasts an advertising-channel PDU (on the 1M PHY) to every device that can hear it.
    /// Returns the air time in nanoseconds (0 in instant mode).
    @discardableResult
    public func transmit(_ pdu: AdvertisingPDU, from sender: RadioDeviceID) -> Int64 {
        guard devices[sender]?.poweredOn == true else { return 0 }
        advertisingPDUsSent += 1
        let air = airTime == .timed ? LEPHY.le1M.airTimeNanoseconds(pduOctets: pdu.airOctets) : 0
        // The listeners for every advertiser and those for this one, merged in attachment order.
        let all = allAdvertiserListeners
        let some = listenersByAdvertiser[pdu.advA.address.value] ?? []
        var i = 0, j = 0
        while i < all.count || j < some.count {
            let id: RadioDeviceID
            if j == some.count || (i < all.count && all[i] < some[j]) {
                id = all[i]
                i += 1
            } else {
                id = some[j]
                j += 1
            }
            guard id != sender, let device = devices[id]?.device, device.listensForAdvertising,
                  let rssi = rssi(from: sender, to: id) else { continue }
            deliver(after: air) { device.radioDidReceive(pdu, rssi: rssi, from: sender) }
        }
        return air
    }

    /// Sends a PDU unicast to one device (SCAN_REQ, SCAN_RSP and CONNECT_IND go to the device
    /// whose address they carry; the controller that knows the address knows the device).
    @discardableResult
    public func transmit(_ pdu: AdvertisingPDU, from sender: RadioDeviceID, to receiver: RadioDeviceID) -> Int64 {
        guard devices[sender]?.poweredOn == true, let device = devices[receiver]?.device,
              let rssi = rssi(from: sender, to: receiver) else { return 0 }
        advertisingPDUsSent += 1
        let air = airTime == .timed ? LEPHY.le1M.airTimeNanoseconds(pduOctets: pdu.airOctets) : 0
        deliver(after: air) { device.radioDidReceive(pdu, rssi: rssi, from: sender) }
        return air
    }

    /// Sends an extended advertising PDU on `phy`: to one device (AUX_SCAN_REQ/RSP,
    /// AUX_CONNECT_REQ/RSP) or, with no receiver, to every device that can hear it. Returns the
    /// air time in nanoseconds (0 in instant mode).
    @discardableResult
    public func transmit(_ pdu: ExtendedAdvertisingPDU, phy: LEPHY, from sender: RadioDeviceID,
                         to receiver: RadioDeviceID? = nil) -> Int64 {
        guard devices[sender]?.poweredOn == true else { return 0 }
        advertisingPDUsSent += 1
        let air = airTime == .timed ? phy.airTimeNanoseconds(pduOctets: pdu.airOctets) : 0
        if let receiver {
            // Unicast: the one device, not a walk over all of them.
            guard receiver != sender, let device = devices[receiver]?.device,
                  let rssi = rssi(from: sender, to: receiver) else { return air }
            deliver(after: air) { device.radioDidReceive(pdu, phy: phy, rssi: rssi, from: sender) }
            return air
        }
        for id in listeners where id != sender {
            guard let device = devices[id]?.device, device.listensForAdvertising,
                  let rssi = rssi(from: sender, to: id) else { continue }
            deliver(after: air) { device.radioDidReceive(pdu, phy: phy, rssi: rssi, from: sender) }
        }
        return air
    }

    /// Registers a connection between two devices under its access address.
    public func openLink(_ accessAddress: UInt32, between a: RadioDeviceID, and b: RadioDeviceID) {
        removeLink(accessAddress)
        links[accessAddress] = Link(a: a, b: b, reachable: inRange(a, b))
        linksByDevice[a, default: []].append(accessAddress)
        if b != a { linksByDevice[b, default: []].append(accessAddress) }
    }

    public func closeLink(_ accessAddress: UInt32) { removeLink(accessAddress) }

    /// Forgets a link and its entries in `linksByDevice`.
    private func removeLink(_ accessAddress: UInt32) {
        guard let link = links.removeValue(forKey: accessAddress) else { return }
        for id in link.a == link.b ? [link.a] : [link.a, link.b] {
            guard var list = linksByDevice.removeValue(forKey: id) else { continue }
            list.removeAll { $0 == accessAddress }
            if !list.isEmpty { linksByDevice[id] = list }
        }
    }

    /// A device's links, by access address (the order every walk over links keeps, so that a
    /// seeded run is the same every time).
    private func links(of id: RadioDeviceID) -> [UInt32] { (linksByDevice[id] ?? []).sorted() }

    /// One end of a connection vanished without a word (reset, power off): the other end
    /// stops hearing it and will time out.
    public func abandonLink(_ accessAddress: UInt32, by gone: RadioDeviceID) {
        linkLost(accessAddress, notifyingExcept: gone)
        removeLink(accessAddress)
    }

    /// Sends a data-channel PDU to the other device of a connection, if it can hear it.
    /// Returns the air time in nanoseconds (0 in instant mode), or nil if nobody received it.
    @discardableResult
    public func transmit(_ pdu: consuming DataPDU, accessAddress: UInt32, from sender: RadioDeviceID, phy: LEPHY) -> Int64? {
        guard var link = links[accessAddress], link.reachable else { return nil }
        let fromA = link.a == sender
        let receiver = fromA ? link.b : link.a
        // The receiver's box, not its device: the instant path queues the box (a device read
        // costs a tryRetain, a retain of the existential, and their releases).
        guard let entry = devices[receiver], entry.poweredOn, entry.ref.isAlive else { return nil }
        let heard: Int8?
        if fromA || link.b == sender {
            // Both ends are powered on while the link is reachable (`setPowered` re-evaluates it).
            if link.geometry != geometry {
                guard let other = devices[sender] else { return nil }
                let (a, b) = fromA ? (other, entry) : (entry, other)
                let distance = a.position.distance(to: b.position)
                link.meanFromA = pathLoss.meanRSSI(distance: distance, txPowerOffset: a.txPowerOffset)
                link.meanFromB = pathLoss.meanRSSI(distance: distance, txPowerOffset: b.txPowerOffset)
                link.geometry = geometry
                links[accessAddress] = link
            }
            heard = sample(mean: fromA ? link.meanFromA : link.meanFromB)
        } else {
            heard = rssi(from: sender, to: receiver)
        }
        guard let rssi = heard else { return nil }
        dataPDUsSent += 1
        if let dataPDUObserver { dataPDUObserver(pdu, accessAddress, sender) }
        let air = airTime == .timed ? phy.airTimeNanoseconds(pduOctets: pdu.airOctets) : 0
        if air == 0 && loop.inLoop {
            // Instant air: the PDU waits in a queue, not in a closure allocated for it, and one
            // loop job delivers every PDU sent before it ran.
            instantData.append(InstantData(receiver: entry.ref, pdu: pdu, accessAddress: accessAddress, rssi: rssi))
            if !instantDeliveryPosted {
                instantDeliveryPosted = true
                loop.execute { self.deliverInstantData() }
            }
        } else {
            guard let device = entry.device else { return nil }
            let pdu = pdu  // a consuming parameter cannot be captured
            deliver(after: air) { device.radioDidReceive(pdu, accessAddress: accessAddress, rssi: rssi) }
        }
        return air
    }

    /// The receiver is the device's weak-reference box, looked at when the PDU is delivered: a
    /// device (a controller, also weakly referenced) copied in and out of the queue cost four
    /// side-table retains and releases per PDU; the box's are plain ones.
    struct InstantData {
        let receiver: WeakDevice
        let pdu: DataPDU
        let accessAddress: UInt32
        let rssi: Int8
    }

    /// Data PDUs sent with no air time, oldest first, waiting for the delivery job (loop-confined).
    @exclusivity(unchecked) private var instantData = RingBuffer<InstantData>()  // exclusivity checks: 0.6 % of notify
    /// The delivery job's buffer, swapped with `instantData` so that both keep their storage.
    @exclusivity(unchecked) private var instantDelivering = RingBuffer<InstantData>()
    /// Whether a delivery job is posted and has not yet taken `instantData`.
    private var instantDeliveryPosted = false

    /// Delivers the PDUs sent before this job ran, oldest first; those their receivers send
    /// meanwhile go in the next job.
    private func deliverInstantData() {
        instantDeliveryPosted = false
        var batch = RingBuffer<InstantData>()
        swap(&batch, &instantDelivering)
        swap(&batch, &instantData)
        while let next = batch.popFirst() {
            next.receiver.device?.radioDidReceive(next.pdu, accessAddress: next.accessAddress, rssi: next.rssi)
        }
        instantDelivering = batch
    }

    /// Whether the two devices of a connection can currently hear each other.
    public func isLinkReachable(_ accessAddress: UInt32) -> Bool { links[accessAddress]?.reachable ?? false }

    /// A fresh random access address for a new connection.
    public func newAccessAddress() -> UInt32 {
        while true {
            let aa = UInt32(truncatingIfNeeded: random.next())
            if aa != 0x8E89_BED6 && links[aa] == nil && aa.nonzeroBitCount > 4 { return aa }
        }
    }

    public func randomUInt64() -> UInt64 { random.next() }
    public func randomInt(in range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }

    /// The links of `id`, whose power or position changed (only theirs can change).
    private func reevaluateLinks(of id: RadioDeviceID) {
        for aa in links(of: id) {
            guard let link = links[aa] else { continue }
            let now = inRange(link.a, link.b)
            guard now != link.reachable else { continue }
            links[aa]?.reachable = now
            // Both ends hear of it, a powered-off one too: its link layer runs on and must time out.
            for id in [link.a, link.b] {
                if let device = devices[id]?.device {
                    loop.execute { device.radioLink(aa, reachable: now) }
                }
            }
        }
    }

    private func linkLost(_ aa: UInt32, notifyingExcept gone: RadioDeviceID) {
        guard let link = links[aa], link.reachable else { return }
        links[aa]?.reachable = false
        let other = link.a == gone ? link.b : link.a
        if let device = devices[other]?.device { loop.execute { device.radioLink(aa, reachable: false) } }
    }
}

extension AdvertisingPDU {
    /// Header + payload octets.
    var airOctets: Int {
        switch self {
        case .advInd(_, let d), .advNonconnInd(_, let d), .advScanInd(_, let d), .scanRsp(_, let d): 2 + 6 + d.count
        case .advDirectInd, .scanReq: 2 + 12
        case .connectInd: 2 + 34
        }
    }
}
