import ATT
import AssignedNumbers
import ByteCoding
import GATT
import HCI

// The field encodings of docs/daemon.md ("Field encodings"), shared by every message's encoder
// and decoder. Readers throw `DecodeError` (turned into `DaemonProtocolError.malformed` by the
// message decoder); nothing here allocates more than the bytes it was given can fill.

extension ByteWriter {
    mutating func bool(_ value: Bool) { u8(value ? 1 : 0) }

    mutating func blob(_ value: [UInt8]) {
        u32(UInt32(value.count))
        bytes(value)
    }

    mutating func string(_ value: String) { blob(Array(value.utf8)) }

    mutating func optional<T>(_ value: T?, _ write: (inout ByteWriter, T) -> Void) {
        guard let value else { return u8(0) }
        u8(1)
        write(&self, value)
    }

    /// At most 65535 elements: the callers' arrays are bounded far below (services of one
    /// database, UUIDs of a scan), and the frame limit bounds them anyway.
    mutating func array<T>(_ values: [T], _ write: (inout ByteWriter, T) -> Void) {
        precondition(values.count <= Int(UInt16.max), "an array of more than 65535 elements does not fit a message")
        u16(UInt16(values.count))
        for value in values { write(&self, value) }
    }

    mutating func leAddress(_ value: LEAddress) {
        u8(value.type.rawValue)
        bytes(value.address.wire)
    }

    /// Shortest form: 2 bytes for a 16-bit alias, else 16, after its length.
    mutating func uuid(_ value: BluetoothUUID) {
        let bytes = value.littleEndianBytes
        u8(UInt8(bytes.count))
        self.bytes(bytes)
    }

    mutating func handle(_ value: ATTHandle) { u16(value.rawValue) }

    mutating func handles(_ value: ClosedRange<ATTHandle>) {
        handle(value.lowerBound)
        handle(value.upperBound)
    }

    mutating func service(_ value: DiscoveredService) {
        uuid(value.uuid)
        handles(value.handles)
        bool(value.isPrimary)
    }

    mutating func includedService(_ value: DiscoveredIncludedService) {
        handle(value.declarationHandle)
        uuid(value.uuid)
        handles(value.handles)
    }

    mutating func characteristic(_ value: DiscoveredCharacteristic) {
        uuid(value.uuid)
        handle(value.declarationHandle)
        handle(value.valueHandle)
        u8(value.properties.rawValue)
        handle(value.endHandle)
    }

    mutating func descriptor(_ value: DiscoveredDescriptor) {
        uuid(value.uuid)
        handle(value.handle)
    }

    /// u8 case, then its fields.
    mutating func gattError(_ value: GATTClientError) {
        switch value {
        case .attributeError(let code, let handle): u8(0); u8(code.rawValue); self.handle(handle)
        case .timeout: u8(1)
        case .disconnected: u8(2)
        case .protocolViolation(let what): u8(3); string(what)
        case .invalidArgument(let what): u8(4); string(what)
        case .writeVerificationFailed(let handle, let offset): u8(5); self.handle(handle); u16(offset)
        case .notSubscribable(let handle): u8(6); self.handle(handle)
        case .queueFull: u8(7)
        case .cannotSend: u8(8)
        case .securityFailed(.peerRemovedPairingInformation): u8(9); u8(0)
        case .securityFailed(.encryptionTimedOut): u8(9); u8(1)
        }
    }

    /// u8 0 then the value, or u8 1 then the error.
    mutating func result<T>(_ value: Result<T, GATTClientError>, _ write: (inout ByteWriter, T) -> Void) {
        switch value {
        case .success(let success): u8(0); write(&self, success)
        case .failure(let error): u8(1); gattError(error)
        }
    }
}

extension ByteReader {
    mutating func bool() throws -> Bool {
        switch try u8() {
        case 0: false
        case 1: true
        case let other: throw DecodeError("\(context): \(other) is not a Bool (0 or 1)")
        }
    }

    mutating func blob() throws -> [UInt8] {
        let count = try u32()
        guard Int(count) <= remaining else { throw DecodeError.truncated(context, needed: Int(count), available: remaining) }
        return try bytes(Int(count))
    }

    mutating func string() throws -> String {
        let bytes = try blob()
        guard let string = String(validating: bytes, as: UTF8.self) else { throw DecodeError("\(context): a string is not UTF-8") }
        return string
    }

    mutating func optional<T>(_ read: (inout ByteReader) throws -> T) throws -> T? {
        try bool() ? try read(&self) : nil
    }

    /// Elements are appended as they are read: a count larger than the bytes can hold fails on
    /// the first missing element, never reserving room for the count.
    mutating func array<T>(_ read: (inout ByteReader) throws -> T) throws -> [T] {
        let count = try u16()
        var values: [T] = []
        for _ in 0..<count { values.append(try read(&self)) }
        return values
    }

    mutating func leAddress() throws -> LEAddress {
        let rawType = try u8()
        guard let type = LEAddressType(rawValue: rawType) else { throw DecodeError("\(context): address type \(rawType)") }
        return LEAddress(type, try address())
    }

    mutating func uuid() throws -> BluetoothUUID {
        let length = try u8()
        guard [2, 4, 16].contains(length) else { throw DecodeError("\(context): a UUID of \(length) bytes") }
        guard let uuid = BluetoothUUID(littleEndian: try bytes(Int(length))) else { throw DecodeError("\(context): UUID") }
        return uuid
    }

    mutating func handle() throws -> ATTHandle { ATTHandle(try u16()) }

    mutating func handles() throws -> ClosedRange<ATTHandle> {
        let start = try handle(), end = try handle()
        guard start <= end else { throw DecodeError("\(context): handle range \(start) > \(end)") }
        return start...end
    }

    mutating func service() throws -> DiscoveredService {
        let uuid = try uuid(), handles = try handles(), isPrimary = try bool()
        return DiscoveredService(uuid: uuid, handles: handles, isPrimary: isPrimary)
    }

    mutating func includedService() throws -> DiscoveredIncludedService {
        let declaration = try handle(), uuid = try uuid(), handles = try handles()
        return DiscoveredIncludedService(declarationHandle: declaration, uuid: uuid, handles: handles)
    }

    mutating func characteristic() throws -> DiscoveredCharacteristic {
        let uuid = try uuid(), declaration = try handle(), value = try handle(), properties = try u8(), end = try handle()
        return DiscoveredCharacteristic(uuid: uuid, declarationHandle: declaration, valueHandle: value,
                                        properties: GATTCharacteristicProperties(rawValue: properties), endHandle: end)
    }

    mutating func descriptor() throws -> DiscoveredDescriptor {
        let uuid = try uuid(), handle = try handle()
        return DiscoveredDescriptor(uuid: uuid, handle: handle)
    }

    mutating func gattError() throws -> GATTClientError {
        switch try u8() {
        case 0:
            let code = try u8(), handle = try handle()
            return .attributeError(ATTErrorCode(code), handle: handle)
        case 1: return .timeout
        case 2: return .disconnected
        case 3: return .protocolViolation(try string())
        case 4: return .invalidArgument(try string())
        case 5:
            let handle = try handle(), offset = try u16()
            return .writeVerificationFailed(handle: handle, offset: offset)
        case 6: return .notSubscribable(try handle())
        case 7: return .queueFull
        case 8: return .cannotSend
        case 9:
            switch try u8() {
            case 0: return .securityFailed(.peerRemovedPairingInformation)
            case 1: return .securityFailed(.encryptionTimedOut)
            case let other: throw DecodeError("\(context): security failure \(other)")
            }
        case let other: throw DecodeError("\(context): GATT error \(other)")
        }
    }

    mutating func result<T>(_ read: (inout ByteReader) throws -> T) throws -> Result<T, GATTClientError> {
        switch try u8() {
        case 0: return .success(try read(&self))
        case 1: return .failure(try gattError())
        case let other: throw DecodeError("\(context): result \(other)")
        }
    }
}
