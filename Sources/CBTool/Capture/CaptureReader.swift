import ATT
import AssignedNumbers
import CoreBluetooth
import Foundation
import GAP
import HCI
import HCITransport
import L2CAP

/// What a btsnoop capture shows of one device's session, rebuilt with the stack's own decoders:
/// its advertising reports (by address), and on its connection (followed by handle) the ATT
/// PDUs of L2CAP reassembled from the ACL fragments, requests paired with their responses, so
/// that discovery responses give the services, characteristics and descriptors, read responses
/// the values of the handles asked for, and notifications and indications their timing.
///
/// Total: any byte string gives a capture or a ``CaptureError`` naming the record, never a trap.
public struct CaptureSession: Sendable {
    public struct Service: Sendable, Equatable {
        public var handle: UInt16
        public var endHandle: UInt16
        public var uuid: BluetoothUUID
        public var isPrimary: Bool
    }

    public struct Characteristic: Sendable, Equatable {
        public var declarationHandle: UInt16
        public var valueHandle: UInt16
        public var properties: UInt8
        public var uuid: BluetoothUUID
    }

    public struct Timed: Sendable, Equatable {
        /// Microseconds since the Unix epoch, as recorded.
        public var time: Int64
        public var value: [UInt8]
        public var record: Int
    }

    /// The device's address (the connection's peer).
    public var address: BluetoothAddress?
    public var advertisingData: [UInt8]?
    public var scanResponseData: [UInt8]?
    public var services: [Service] = []
    public var characteristics: [Characteristic] = []
    /// Descriptor handles and types, as Find Information answered.
    public var descriptors: [UInt16: BluetoothUUID] = [:]
    /// Every value read, by handle, in order (long reads put together).
    public var reads: [UInt16: [Timed]] = [:]
    /// Handles whose read was refused for want of encryption or authentication.
    public var refusedForSecurity: Set<UInt16> = []
    /// Handles read while the link was encrypted.
    public var readEncrypted: Set<UInt16> = []
    /// Writes the device acknowledged (Write Request then Write Response), in order.
    public var writes: [(handle: UInt16, value: [UInt8], time: Int64)] = []
    /// Notifications and indications, by handle.
    public var notifications: [UInt16: [Timed]] = [:]
    /// When each value handle was subscribed to (the CCCD write), by value handle.
    public var subscribed: [UInt16: Int64] = [:]
    /// When the device confirmed the end of that subscription (its answer to the CCCD write).
    public var unsubscribed: [UInt16: Int64] = [:]
    /// The time of the last record of the device's connection.
    public var end: Int64 = 0
    /// What the capture showed but the spec cannot use.
    public var notes: [String] = []
}

/// A capture that cannot be read: what is wrong, and in which record (1-based, as Wireshark
/// numbers frames).
public struct CaptureError: Error, CustomStringConvertible, Equatable {
    public var record: Int?
    public var message: String
    public var description: String { record.map { "record \($0): \(message)" } ?? message }
}

public enum CaptureReader {
    /// Reads `bytes` (a btsnoop file, H4 or un-encapsulated HCI) for the device at `device`
    /// (an address; default: the only device the capture connected to).
    public static func read(_ bytes: [UInt8], device: String? = nil) throws(CaptureError) -> CaptureSession {
        let file: BtsnoopReader
        do {
            file = try BtsnoopReader(bytes: bytes)
        } catch {
            throw CaptureError(record: nil, message: "not a btsnoop capture (\(error))")
        }
        guard file.datalink == Btsnoop.datalinkH4 || file.datalink == 1001 else {
            throw CaptureError(record: nil, message: "datalink \(file.datalink) is not HCI (1001 or 1002)")
        }
        if file.truncatedTailLength > 0 {
            throw CaptureError(record: file.records.count + 1,
                               message: "cut short: \(file.truncatedTailLength) bytes where a whole record should be")
        }
        var wanted: BluetoothAddress?
        if let device {
            guard let address = BluetoothAddress(device) else {
                throw CaptureError(record: nil, message: "\"\(device)\" is not a Bluetooth address (AA:BB:CC:DD:EE:FF)")
            }
            wanted = address
        }
        var packets: [(Int, HCIPacket, BtsnoopRecord)] = []
        for (index, record) in file.records.enumerated() {
            let number = index + 1
            guard record.originalLength == record.data.count else {
                throw CaptureError(record: number, message: "holds \(record.data.count) of its \(record.originalLength) bytes (a snapshot length cut it)")
            }
            do {
                let packet: HCIPacket
                if file.datalink == Btsnoop.datalinkH4 {
                    packet = try record.packet()
                } else {
                    let type: HCIPacketType = record.isCommandOrEvent ? (record.direction == .sent ? .command : .event) : .acl
                    packet = try HCIPacket(type: type.rawValue, body: record.data[...])
                }
                packets.append((number, packet, record))
            } catch {
                throw CaptureError(record: number, message: "malformed HCI packet (\(error))")
            }
        }
        var state = State(wanted: wanted)
        for (number, packet, record) in packets {
            try state.take(packet, record: record, number: number)
        }
        return try state.finish()
    }

    /// The connections and advertisers a capture holds, while it is read.
    private struct State {
        let wanted: BluetoothAddress?
        var session = CaptureSession()
        /// Peer address of each open connection, by handle.
        var peers: [UInt16: BluetoothAddress] = [:]
        /// Whether the local side was central, by handle.
        var localIsCentral: [UInt16: Bool] = [:]
        var encrypted: Set<UInt16> = []
        var connectedPeers: [BluetoothAddress] = []
        var advertising: [BluetoothAddress: (data: [UInt8]?, response: [UInt8]?)] = [:]
        /// L2CAP PDUs being reassembled, by handle and direction.
        var fragments: [Key: (bytes: [UInt8], record: Int)] = [:]
        /// The client's request waiting for the device's response, by handle.
        var pending: [UInt16: ATTPDU] = [:]
        /// A long read being put together: handle and the bytes so far.
        var longRead: [UInt16: (handle: UInt16, bytes: [UInt8])] = [:]
        var sessions: [BluetoothAddress: CaptureSession] = [:]

        struct Key: Hashable {
            var handle: UInt16
            var received: Bool
        }

        init(wanted: BluetoothAddress?) { self.wanted = wanted }

        mutating func take(_ packet: HCIPacket, record: BtsnoopRecord, number: Int) throws(CaptureError) {
            switch packet {
            case .event(let event): try take(event, number: number, time: record.unixMicroseconds)
            case .acl(let acl): try take(acl, received: record.direction == .received, number: number, time: record.unixMicroseconds)
            case .command, .other: break
            }
        }

        // MARK: Events

        mutating func take(_ packet: HCIEventPacket, number: Int, time: Int64) throws(CaptureError) {
            let interesting: Set<UInt8> = [0x01, 0x02, 0x0A, 0x0D, 0x29]
            switch packet.code {
            case DisconnectionComplete.eventCode:
                guard let event = try decode(packet, number) else { return }
                guard case .disconnectionComplete(let done) = event, done.status == .success else { return }
                finishConnection(done.connectionHandle, time: time)
            case EncryptionChange.eventCode:
                guard let event = try decode(packet, number), case .encryptionChange(let change) = event else { return }
                if change.status == .success && change.encryptionEnabled != 0 { encrypted.insert(change.connectionHandle) } else {
                    encrypted.remove(change.connectionHandle)
                }
            case HCIEventCode.leMeta:
                guard let subevent = packet.parameters.first, interesting.contains(subevent),
                      let event = try decode(packet, number), case .le(let le) = event else { return }
                switch le {
                case .connectionComplete(let c) where c.status == .success:
                    connected(c.connectionHandle, peer: c.peerAddress, central: c.role == .central)
                case .enhancedConnectionComplete(let c) where c.status == .success:
                    connected(c.connectionHandle, peer: c.peerAddress, central: c.role == .central)
                case .enhancedConnectionCompleteV2(let c) where c.status == .success:
                    connected(c.connectionHandle, peer: c.peerAddress, central: c.role == .central)
                case .advertisingReport(let report):
                    for r in report.reports {
                        var entry = advertising[r.address] ?? (nil, nil)
                        if r.eventType == .scanRsp { entry.response = r.data } else { entry.data = r.data }
                        advertising[r.address] = entry
                    }
                case .extendedAdvertisingReport(let report):
                    for r in report.reports where r.eventType.dataStatus == .complete {
                        var entry = advertising[r.address] ?? (nil, nil)
                        if r.eventType.contains(.scanResponse) { entry.response = r.data } else { entry.data = r.data }
                        advertising[r.address] = entry
                    }
                default: break
                }
            default: break
            }
        }

        private func decode(_ packet: HCIEventPacket, _ number: Int) throws(CaptureError) -> HCIEvent? {
            do {
                return try HCIEvent(decoding: packet)
            } catch {
                throw CaptureError(record: number, message: "malformed HCI event 0x\(String(packet.code, radix: 16)) (\(error))")
            }
        }

        mutating func connected(_ handle: UInt16, peer: BluetoothAddress, central: Bool) {
            peers[handle] = peer
            localIsCentral[handle] = central
            encrypted.remove(handle)
            if !connectedPeers.contains(peer) { connectedPeers.append(peer) }
            // Each connection to the device adds to what is known of it.
            var session = sessions[peer] ?? CaptureSession()
            session.address = peer
            sessions[peer] = session
        }

        mutating func extendEnd(of peer: BluetoothAddress, to time: Int64) {
            guard var session = sessions[peer] else { return }
            session.end = max(session.end, time)
            sessions[peer] = session
        }

        mutating func finishConnection(_ handle: UInt16, time: Int64) {
            if let peer = peers[handle] { extendEnd(of: peer, to: time) }
            peers[handle] = nil
            pending[handle] = nil
            longRead[handle] = nil
            fragments = fragments.filter { $0.key.handle != handle }
        }

        // MARK: ACL, L2CAP

        mutating func take(_ acl: ACLDataPacket, received: Bool, number: Int, time: Int64) throws(CaptureError) {
            guard let peer = peers[acl.handle] else { return }
            if let wanted, peer != wanted { return }
            let key = Key(handle: acl.handle, received: received)
            var bytes: [UInt8]
            switch acl.boundary {
            case .continuing:
                guard let started = fragments[key] else {
                    sessions[peer]?.notes.append("record \(number): a continuing ACL fragment with no start (the capture began mid-PDU): skipped")
                    return
                }
                bytes = started.bytes + acl.data
            case .firstFlushable, .firstNonFlushable, .complete:
                if fragments[key] != nil {
                    throw CaptureError(record: number, message: "an L2CAP PDU starts before the one of record \(fragments[key]!.record) ended")
                }
                bytes = acl.data
            }
            guard bytes.count >= 4 else {
                fragments[key] = (bytes, fragments[key]?.record ?? number)
                return
            }
            let length = Int(bytes[0]) | Int(bytes[1]) << 8
            if bytes.count < length + 4 {
                fragments[key] = (bytes, fragments[key]?.record ?? number)
                return
            }
            guard bytes.count == length + 4 else {
                throw CaptureError(record: number, message: "ACL fragments of \(bytes.count - 4) bytes for an L2CAP PDU of \(length)")
            }
            fragments[key] = nil
            let frame: BasicFrame
            do {
                frame = try BasicFrame(decoding: bytes)
            } catch {
                throw CaptureError(record: number, message: "malformed L2CAP frame (\(error))")
            }
            guard frame.channelID == L2CAPChannelID.att else { return }
            let pdu: ATTPDU
            do {
                pdu = try ATTPDU(decoding: frame.payload)
            } catch {
                throw CaptureError(record: number, message: "malformed ATT PDU (\(error))")
            }
            // The device is the GATT server: what comes from it is a response or a value.
            let fromDevice = received == (localIsCentral[acl.handle] ?? true)
            extendEnd(of: peer, to: time)
            if fromDevice {
                take(server: pdu, handle: acl.handle, peer: peer, number: number, time: time)
            } else {
                take(client: pdu, handle: acl.handle, peer: peer, time: time)
            }
        }

        // MARK: ATT

        mutating func take(client pdu: ATTPDU, handle: UInt16, peer: BluetoothAddress, time: Int64) {
            switch pdu {
            case .writeRequest(let w):
                pending[handle] = pdu
                noteSubscription(w.attributeHandle.rawValue, w.attributeValue, peer: peer, time: time)
            case .writeCommand(let w):
                noteSubscription(w.attributeHandle.rawValue, w.attributeValue, peer: peer, time: time)
            case .handleValueConfirmation, .unknown, .signedWriteCommand:
                break
            case .readBlobRequest(let r):
                pending[handle] = pdu
                if r.valueOffset == 0 { longRead[handle] = (r.attributeHandle.rawValue, []) }
            default:
                pending[handle] = pdu
            }
        }

        mutating func noteSubscription(_ attribute: UInt16, _ value: [UInt8], peer: BluetoothAddress, time: Int64) {
            guard value.first.map({ $0 & 0x03 != 0 }) == true, let valueHandle = configuredCharacteristic(attribute, peer) else { return }
            if sessions[peer]?.subscribed[valueHandle] == nil { sessions[peer]?.subscribed[valueHandle] = time }
        }

        /// For a CCCD, the value handle of its characteristic (the last one before it).
        func configuredCharacteristic(_ attribute: UInt16, _ peer: BluetoothAddress) -> UInt16? {
            guard sessions[peer]?.descriptors[attribute] == BluetoothUUID(uuid16: 0x2902) else { return nil }
            return sessions[peer]?.characteristics.last(where: { $0.valueHandle < attribute })?.valueHandle
        }

        mutating func take(server pdu: ATTPDU, handle: UInt16, peer: BluetoothAddress, number: Int, time: Int64) {
            switch pdu {
            case .handleValueNotification(let n):
                sessions[peer]?.notifications[n.attributeHandle.rawValue, default: []].append(.init(time: time, value: n.attributeValue, record: number))
                return
            case .handleValueIndication(let n):
                sessions[peer]?.notifications[n.attributeHandle.rawValue, default: []].append(.init(time: time, value: n.attributeValue, record: number))
                return
            case .multipleHandleValueNotification(let m):
                for n in m.handleLengthValueTupleList {
                    sessions[peer]?.notifications[n.attributeHandle.rawValue, default: []].append(.init(time: time, value: n.attributeValue, record: number))
                }
                return
            default: break
            }
            guard let request = pending.removeValue(forKey: handle) else { return }
            let secure = encrypted.contains(handle)
            switch (request, pdu) {
            case (.readByGroupTypeRequest(let r), .readByGroupTypeResponse(let response)):
                let primary = r.attributeGroupType == BluetoothUUID(uuid16: 0x2800)
                guard primary || r.attributeGroupType == BluetoothUUID(uuid16: 0x2801) else { return }
                for entry in response.attributeData {
                    guard let uuid = BluetoothUUID(littleEndian: entry.value) else { continue }
                    addService(.init(handle: entry.handle.rawValue, endHandle: entry.endGroupHandle.rawValue, uuid: uuid, isPrimary: primary), peer)
                }
            case (.findByTypeValueRequest(let r), .findByTypeValueResponse(let response)):
                guard r.attributeType == BluetoothUUID(uuid16: 0x2800), let uuid = BluetoothUUID(littleEndian: r.attributeValue) else { return }
                for entry in response.handlesInformation {
                    addService(.init(handle: entry.foundAttributeHandle.rawValue, endHandle: entry.groupEndHandle.rawValue, uuid: uuid, isPrimary: true), peer)
                }
            case (.readByTypeRequest(let r), .readByTypeResponse(let response)):
                if r.attributeType == BluetoothUUID(uuid16: 0x2803) {
                    for entry in response.attributeData {
                        let v = entry.value
                        guard v.count == 5 || v.count == 19, let uuid = BluetoothUUID(littleEndian: v[3...]) else { continue }
                        let c = CaptureSession.Characteristic(declarationHandle: entry.handle.rawValue,
                                                              valueHandle: UInt16(v[1]) | UInt16(v[2]) << 8, properties: v[0], uuid: uuid)
                        guard sessions[peer]?.characteristics.contains(where: { $0.declarationHandle == c.declarationHandle }) == false else { continue }
                        sessions[peer]?.characteristics.append(c)
                        sessions[peer]?.characteristics.sort { $0.declarationHandle < $1.declarationHandle }
                    }
                } else if r.attributeType != BluetoothUUID(uuid16: 0x2802) {
                    // Read by UUID: values with their handles.
                    for entry in response.attributeData { addRead(entry.handle.rawValue, entry.value, peer, number, time, secure) }
                }
            case (.findInformationRequest, .findInformationResponse(let response)):
                for entry in response.entries where !(0x2800...0x2803).contains(entry.type.uuid16 ?? 0) {
                    sessions[peer]?.descriptors[entry.handle.rawValue] = entry.type
                }
            case (.readRequest(let r), .readResponse(let response)):
                longRead[handle] = (r.attributeHandle.rawValue, response.attributeValue)
                addRead(r.attributeHandle.rawValue, response.attributeValue, peer, number, time, secure)
            case (.readBlobRequest(let r), .readBlobResponse(let response)):
                // A long read continues the Read Response (or blob) before it.
                guard var long = longRead[handle], long.handle == r.attributeHandle.rawValue, Int(r.valueOffset) <= long.bytes.count else {
                    sessions[peer]?.notes.append("record \(number): a Read Blob Response without the read it continues: skipped")
                    return
                }
                long.bytes = Array(long.bytes.prefix(Int(r.valueOffset))) + response.partAttributeValue
                longRead[handle] = long
                replaceLastRead(long.handle, long.bytes, peer, number, time, secure)
            case (.writeRequest(let w), .writeResponse):
                if let valueHandle = configuredCharacteristic(w.attributeHandle.rawValue, peer) {
                    if w.attributeValue.first.map({ $0 & 0x03 == 0 }) == true, sessions[peer]?.unsubscribed[valueHandle] == nil {
                        sessions[peer]?.unsubscribed[valueHandle] = time
                    }
                } else {
                    sessions[peer]?.writes.append((w.attributeHandle.rawValue, w.attributeValue, time))
                }
            case (_, .errorResponse(let e)):
                if e.errorCode == .insufficientEncryption || e.errorCode == .insufficientAuthentication {
                    sessions[peer]?.refusedForSecurity.insert(e.attributeHandle.rawValue)
                }
            default:
                break
            }
        }

        mutating func addService(_ service: CaptureSession.Service, _ peer: BluetoothAddress) {
            guard sessions[peer]?.services.contains(where: { $0.handle == service.handle }) == false else { return }
            sessions[peer]?.services.append(service)
            sessions[peer]?.services.sort { $0.handle < $1.handle }
        }

        mutating func addRead(_ attribute: UInt16, _ value: [UInt8], _ peer: BluetoothAddress, _ number: Int, _ time: Int64, _ secure: Bool) {
            sessions[peer]?.reads[attribute, default: []].append(.init(time: time, value: value, record: number))
            if secure { sessions[peer]?.readEncrypted.insert(attribute) }
        }

        mutating func replaceLastRead(_ attribute: UInt16, _ value: [UInt8], _ peer: BluetoothAddress, _ number: Int, _ time: Int64, _ secure: Bool) {
            if sessions[peer]?.reads[attribute]?.isEmpty == false { sessions[peer]?.reads[attribute]?.removeLast() }
            addRead(attribute, value, peer, number, time, secure)
        }

        // MARK: The device

        func finish() throws(CaptureError) -> CaptureSession {
            let address: BluetoothAddress
            if let wanted {
                guard sessions[wanted] != nil else {
                    let seen = connectedPeers.map(\.description).joined(separator: ", ")
                    throw CaptureError(record: nil, message: "no connection to \(wanted) in the capture" + (seen.isEmpty ? "" : " (connections to \(seen))"))
                }
                address = wanted
            } else {
                guard let only = connectedPeers.first else { throw CaptureError(record: nil, message: "no LE connection in the capture") }
                guard connectedPeers.count == 1 else {
                    throw CaptureError(record: nil, message: "connections to several devices (\(connectedPeers.map(\.description).joined(separator: ", "))): choose one with --device")
                }
                address = only
            }
            var session = sessions[address]!
            for (key, started) in fragments where peers[key.handle] == address {
                session.notes.append("record \(started.record): an L2CAP PDU the capture ends inside of: skipped")
            }
            if let seen = advertising[address] {
                session.advertisingData = seen.data
                session.scanResponseData = seen.response
            }
            return session
        }
    }
}

extension CaptureSession {
    /// The spec `cbtool simulate` replays (it passes `PeripheralSpec.validate()` whenever it
    /// has a service), and what the capture did not show (or the spec cannot hold), for stderr.
    public func spec() -> (spec: PeripheralSpec, notes: [String]) {
        var notes = self.notes
        let advertised = (advertisingData ?? []) + (scanResponseData ?? [])
        let deviceName = characteristics.first { $0.uuid == BluetoothUUID(uuid16: 0x2A00) }
            .flatMap { reads[$0.valueHandle]?.first }.map { String(decoding: $0.value, as: UTF8.self) }
        let names = [AdvertisingData(bytes: advertised).localName, deviceName].compactMap { $0 }.filter { !$0.isEmpty }
        let name = names.first ?? "Captured"
        if names.isEmpty {
            notes.append("neither an advertised name nor a Device Name read: named \"Captured\"")
        }
        var spec = PeripheralSpec(name: name, services: [])
        if let advertisingData, advertisingData.count <= 31 {
            spec.advertisingData = SpecText.hex(Data(advertisingData))
            if let scanResponseData, scanResponseData.count <= 31 { spec.scanResponseData = SpecText.hex(Data(scanResponseData)) }
        } else if advertisingData == nil {
            notes.append("no advertising report from \(address.map(\.description) ?? "the device"): advertising made from the name and services")
        } else {
            notes.append("the advertising data is longer than 31 bytes (extended advertising): advertising made from the name and services")
        }
        if services.isEmpty { notes.append("no service discovery in the capture") }
        var known: Set<UInt16> = []
        for (index, service) in services.enumerated() {
            let uuid = service.uuid.description
            if SpecText.stackOwnedServices.contains(uuid) {
                notes.append("service \(uuid) is the simulating stack's own: not recorded")
                continue
            }
            let end = min(service.endHandle, index + 1 < services.count ? services[index + 1].handle - 1 : service.endHandle)
            let inService = characteristics.filter { $0.declarationHandle > service.handle && $0.declarationHandle <= end }
            var serviceSpec = PeripheralSpec.Service(uuid: uuid, primary: service.isPrimary ? nil : false, characteristics: [])
            if inService.isEmpty { notes.append("service \(uuid): no characteristic discovery in the capture") }
            for (i, c) in inService.enumerated() {
                known.insert(c.valueHandle)
                let last = i + 1 < inService.count ? inService[i + 1].declarationHandle - 1 : end
                serviceSpec.characteristics!.append(characteristic(c, lastHandle: last, notes: &notes))
            }
            spec.services.append(serviceSpec)
        }
        // Write effects on characteristics the spec holds.
        let held = Set(spec.services.flatMap { $0.characteristics ?? [] }.map(\.uuid))
        for s in spec.services.indices {
            for c in spec.services[s].characteristics!.indices {
                guard let writes = spec.services[s].characteristics![c].writes else { continue }
                let kept = writes.map { PeripheralSpec.WriteEffect(value: $0.value, effects: $0.effects.filter { held.contains($0.uuid) }) }
                    .filter { !$0.effects.isEmpty }
                spec.services[s].characteristics![c].writes = kept.isEmpty ? nil : kept
            }
        }
        for handle in notifications.keys.sorted() where !known.contains(handle) {
            notes.append(String(format: "values notified on handle 0x%04X, which discovery did not show: left out", handle))
        }
        return (spec, notes)
    }

    /// A read or a subscription the device refused for want of encryption, then allowed once
    /// the link was encrypted (the central paired in between): the permission it enforces, kept
    /// as `readEncryptionRequired` and the `…EncryptionRequired` properties.
    func keepSecurity(of c: Characteristic, in spec: inout PeripheralSpec.Characteristic) {
        if refusedForSecurity.contains(c.valueHandle) && readEncrypted.contains(c.valueHandle) {
            var permissions = ["readEncryptionRequired"]
            if spec.properties.contains("write") || spec.properties.contains("writeWithoutResponse") { permissions.append("writeable") }
            spec.permissions = permissions
        }
        let next = characteristics.first { $0.declarationHandle > c.valueHandle }?.declarationHandle ?? UInt16.max
        let configuration = descriptors.filter { $0.key > c.valueHandle && $0.key < next && $0.value == BluetoothUUID(uuid16: 0x2902) }.keys
        if configuration.contains(where: refusedForSecurity.contains), subscribed[c.valueHandle] != nil {
            spec.properties = spec.properties.map { ["notify": "notifyEncryptionRequired", "indicate": "indicateEncryptionRequired"][$0] ?? $0 }
        }
    }

    private func characteristic(_ c: Characteristic, lastHandle: UInt16, notes: inout [String]) -> PeripheralSpec.Characteristic {
        let uuid = c.uuid.description
        let cbProperties = CBCharacteristicProperties(rawValue: UInt(c.properties))
        var (properties, dropped) = SpecText.properties(cbProperties)
        if !dropped.isEmpty { notes.append("characteristic \(uuid): properties \(dropped.joined(separator: ", ")) cannot be simulated") }
        if properties.isEmpty { properties = ["read"] }
        var spec = PeripheralSpec.Characteristic(uuid: uuid, properties: properties)
        if let first = reads[c.valueHandle]?.first {
            spec.value = SpecText.hex(Data(first.value))
        } else if c.properties & 0x02 != 0 {
            notes.append("characteristic \(uuid): not read in the capture; left without a value")
        }
        keepSecurity(of: c, in: &spec)
        if c.valueHandle < lastHandle {
            for handle in (c.valueHandle + 1)...lastHandle {
                guard let type = descriptors[handle] else { continue }
                let value: Any? = reads[handle]?.first.map { Data($0.value) }
                if type == BluetoothUUID(uuid16: 0x2901), value == nil {
                    notes.append("characteristic \(uuid): user description not read in the capture: left out")
                    continue
                }
                if let recorded = SpecText.descriptor(CBUUID(string: type.description), value: value, of: uuid, notes: &notes) {
                    spec.descriptors = (spec.descriptors ?? []) + [recorded]
                }
            }
        }
        // What came while subscribed (to the device's answer to the unsubscription).
        let stop = unsubscribed[c.valueHandle] ?? Int64.max
        let sends = !cbProperties.isDisjoint(with: [.notify, .indicate])
        if !sends, notifications[c.valueHandle] != nil {
            notes.append("characteristic \(uuid): values notified, but its properties say it neither notifies nor indicates: left out")
        }
        if sends, let values = notifications[c.valueHandle]?.filter({ $0.time <= stop }), let first = values.first {
            let start = subscribed[c.valueHandle] ?? first.time
            if subscribed[c.valueHandle] == nil {
                notes.append("characteristic \(uuid): no subscription in the capture; notifications timed from the first")
            }
            // In record order; a clock that stepped back counts as no time.
            var at = 0.0
            let sequence = values.map { value -> PeripheralSpec.Timed in
                at = max(at, SpecText.rounded(Double(value.time &- start) / 1e6))
                return PeripheralSpec.Timed(at: at, value: SpecText.hex(Data(value.value)))
            }
            let length = max(at, Double(min(stop, end) &- start) / 1e6)
            spec.notify = PeripheralSpec.Notify(sequence: sequence, loop: true, period: SpecText.rounded(max(length, 0.001)))
        }
        // A write followed by a read showing a new value: the write's effect.
        var effects: [PeripheralSpec.WriteEffect] = []
        for write in writes where write.handle == c.valueHandle {
            let changed = reads.compactMap { handle, values -> PeripheralSpec.Effect? in
                guard let target = characteristics.first(where: { $0.valueHandle == handle }),
                      let before = values.last(where: { $0.time < write.time }), let after = values.first(where: { $0.time > write.time }),
                      before.value != after.value else { return nil }
                return .init(uuid: target.uuid.description, value: SpecText.hex(Data(after.value)))
            }
            if !changed.isEmpty { effects.append(.init(value: SpecText.hex(Data(write.value)), effects: changed.sorted { $0.uuid < $1.uuid })) }
        }
        if !effects.isEmpty { spec.writes = effects }
        return spec
    }
}
